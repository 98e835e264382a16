fn main() {
    std::process::exit(kubeunit::cli::run());
}
