//! Command line: one file per command (its clap arguments and one `exec`), the shared way to name an
//! environment and a systemd (`Target`), output formats and exit codes (0 ok, 1 failed check,
//! operation or I/O, 2 bad input; `status` 3 when something is unhealthy).

mod addons;
mod certs;
mod cmdline;
mod common;
mod completion;
mod debug;
mod destroy;
mod fetch;
mod gen;
mod hook;
mod hosts;
mod images;
mod import;
mod install;
mod kube_bench;
mod kubeconfig;
mod list;
mod logs;
mod man;
mod profile;
mod restart;
mod snapshot;
mod start;
mod status;
mod stop;
mod token;
mod upgrade;
mod wait;

use clap::{CommandFactory, Parser, Subcommand};

use common::block_on;
pub use common::{default_state_dir, Output, Target};

#[derive(Parser, Debug)]
#[command(
    name = "kubeunit",
    version,
    about = "A real Kubernetes environment on one Linux host, run by systemd",
    long_about = "kubeunit renders a Kubernetes environment (PKI, kubeconfigs, component configs, systemd units) \
into a state directory, then runs each component as a transient systemd unit.",
    after_help = "Examples:\n  kubeunit gen --profile dev\n  kubeunit gen --profile ci --set ports.apiserver=7443 --state-dir /tmp/ci\n  kubeunit gen --check\n  kubeunit profile show control-plane"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Download the official release binaries a profile needs into the cache, checked against their
    /// published checksums (gen uses them when binDir is empty).
    #[command(after_help = fetch::AFTER_HELP)]
    Fetch(fetch::Args),
    /// Render an environment into a state directory (PKI, kubeconfigs, configs, units).
    #[command(after_help = gen::AFTER_HELP)]
    Gen(gen::Args),
    /// Put a state dir generated elsewhere (`gen --out`, a Nix build) in place, with its modes.
    #[command(after_help = import::AFTER_HELP)]
    Import(import::Args),
    /// Start every component of a state dir as transient systemd units and wait until all are healthy.
    #[command(after_help = start::AFTER_HELP)]
    Start(start::Args),
    /// Stop every unit of the environment (its slice) and wait until they and their ports are gone.
    #[command(after_help = stop::AFTER_HELP)]
    Stop(stop::Args),
    /// Per component: unit state, PID, memory, restarts, uptime and health.
    #[command(after_help = status::AFTER_HELP)]
    Status(status::Args),
    /// The environments on this host: running or not, version, nodes, API address and state dir.
    #[command(after_help = list::AFTER_HELP)]
    List(list::Args),
    /// Show component logs from journald (all components when none is named).
    #[command(after_help = logs::AFTER_HELP)]
    Logs(logs::Args),
    /// Stop one component and start it again from its unit file (picks up edits and swapped binaries).
    #[command(after_help = restart::AFTER_HELP)]
    Restart(restart::Args),
    /// Bring the running environment onto newer binaries in version-skew order (etcd snapshot first),
    /// rendering the state dir for them first with --profile, --set or --bin-dir.
    #[command(after_help = upgrade::AFTER_HELP)]
    Upgrade(upgrade::Args),
    /// Run one component under dlv in place (same arguments, environment and logs), or go back (--stop).
    #[command(after_help = debug::AFTER_HELP)]
    Debug(debug::Args),
    /// Print a component's exact command line and environment (for IDEs, strace, perf).
    #[command(after_help = cmdline::AFTER_HELP)]
    Cmdline(cmdline::Args),
    /// Print the admin kubeconfig (context named after the environment), or merge it into a kubeconfig.
    #[command(after_help = kubeconfig::AFTER_HELP)]
    Kubeconfig(kubeconfig::Args),
    /// Install the environment as enabled unit files: it comes up at boot without kubeunit.
    #[command(after_help = install::AFTER_HELP)]
    Install(install::Args),
    /// Remove what `install` wrote (stopping the environment first).
    #[command(after_help = install::UNINSTALL_HELP)]
    Uninstall(install::UninstallArgs),
    /// Wait until components answer their health probes.
    #[command(after_help = wait::AFTER_HELP)]
    Wait(wait::Args),
    /// Run a component's start hook (apply addons, import images) once it is healthy.
    #[command(after_help = hook::AFTER_HELP)]
    Hook(hook::Args),
    /// Images of a running node: load docker/OCI archives into its containerd and registry.
    #[command(after_help = images::AFTER_HELP)]
    Images {
        #[command(subcommand)]
        command: images::Command,
    },
    /// Addons: list them, enable or disable one (on a running environment too).
    #[command(after_help = addons::AFTER_HELP)]
    Addons {
        #[command(subcommand)]
        command: addons::Command,
    },
    /// Certificates: when they expire (check-expiration), and renewing leaf certificates (renew).
    #[command(after_help = certs::AFTER_HELP)]
    Certs {
        #[command(subcommand)]
        command: certs::Command,
    },
    /// Kill the environment at once (no graceful shutdown: its data goes) and delete its runtime data
    /// (etcd data, logs); --all deletes the state dir.
    Destroy(destroy::Args),
    /// etcd snapshots: save, list, restore (scheduled ones: etcd.snapshot.schedule).
    #[command(after_help = snapshot::AFTER_HELP)]
    Snapshot {
        #[command(subcommand)]
        command: snapshot::Command,
    },
    /// The state dirs of an environment across hosts: check them together (check), seed their hosts (seed).
    #[command(after_help = hosts::AFTER_HELP)]
    Hosts {
        #[command(subcommand)]
        command: hosts::Command,
    },
    /// Bootstrap tokens, with which a host joins a running environment later (create, list, delete).
    #[command(after_help = token::AFTER_HELP)]
    Token {
        #[command(subcommand)]
        command: token::Command,
    },
    /// The CIS Kubernetes Benchmark (kube-bench) against the running environment, with kubeunit's
    /// paths in its config.
    #[command(after_help = kube_bench::AFTER_HELP)]
    KubeBench(kube_bench::Args),
    /// Inspect built-in profiles.
    Profile {
        #[command(subcommand)]
        command: profile::Command,
    },
    /// Print a shell completion script (bash, zsh, fish, ...).
    #[command(after_help = completion::AFTER_HELP)]
    Completion(completion::Args),
    /// Write man pages (kubeunit.1 and one per command) into a directory.
    #[command(after_help = man::AFTER_HELP)]
    Man(man::Args),
}

/// Run the CLI; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Fetch(args) => fetch::exec(args),
        Command::Gen(args) => gen::exec(args),
        Command::Import(args) => import::exec(args),
        Command::Start(args) => block_on(start::exec(args)),
        Command::Stop(args) => block_on(stop::exec(args)),
        Command::Status(args) => block_on(status::exec(args)),
        Command::List(args) => block_on(list::exec(args)),
        Command::Logs(args) => logs::exec(args),
        Command::Restart(args) => block_on(restart::exec(args)),
        Command::Upgrade(args) => block_on(upgrade::exec(args)),
        Command::Debug(args) => block_on(debug::exec(args)),
        Command::Cmdline(args) => cmdline::exec(args),
        Command::Kubeconfig(args) => kubeconfig::exec(args),
        Command::Install(args) => block_on(install::exec(args)),
        Command::Uninstall(args) => block_on(install::exec_uninstall(args)),
        Command::Wait(args) => wait::exec(args),
        Command::Hook(args) => hook::exec(args),
        Command::Images { command } => block_on(images::exec(command)),
        Command::Addons { command } => block_on(addons::exec(command)),
        Command::Certs { command } => block_on(certs::exec(command)),
        Command::Destroy(args) => block_on(destroy::exec(args)),
        Command::Snapshot { command } => block_on(snapshot::exec(command)),
        Command::Hosts { command } => hosts::exec(command),
        Command::Token { command } => token::exec(command),
        Command::KubeBench(args) => kube_bench::exec(args),
        Command::Profile { command } => profile::exec(command),
        Command::Completion(args) => completion::exec(args, Cli::command()),
        Command::Man(args) => man::exec(args, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}
