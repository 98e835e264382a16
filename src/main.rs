fn main() {
    // Die quietly on a closed pipe (`kubeunit status | head`), as command-line tools do.
    // SAFETY: setting a signal disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(kubeunit::cli::run());
}
