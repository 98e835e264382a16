//! Command line: one file per command (its clap arguments and one `exec`), the shared way to name an
//! environment and a systemd (`Target`), output formats and exit codes (0 ok, 1 failed check,
//! operation or I/O, 2 bad input; `status` 3 when something is unhealthy).

mod completion;
mod destroy;
mod gen;
mod logs;
mod profile;
mod restart;
mod start;
mod status;
mod stop;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::error::Error;
use crate::run::Env;
use crate::spec::HostFacts;
use crate::systemd::{Bus, Systemd};

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

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render an environment into a state directory (PKI, kubeconfigs, configs, units).
    #[command(after_help = gen::AFTER_HELP)]
    Gen(gen::Args),
    /// Start every component of a state dir as transient systemd units and wait until all are healthy.
    #[command(after_help = start::AFTER_HELP)]
    Start(start::Args),
    /// Stop every unit of the environment (its slice) and wait until they and their ports are gone.
    Stop(stop::Args),
    /// Per component: unit state, PID, memory, restarts, uptime and health.
    #[command(after_help = status::AFTER_HELP)]
    Status(status::Args),
    /// Show component logs from journald (all components when none is named).
    #[command(after_help = logs::AFTER_HELP)]
    Logs(logs::Args),
    /// Stop one component and start it again from its unit file (picks up edits and swapped binaries).
    #[command(after_help = restart::AFTER_HELP)]
    Restart(restart::Args),
    /// Stop the environment and delete its runtime data (etcd data, logs); --all deletes the state dir.
    Destroy(destroy::Args),
    /// Inspect built-in profiles.
    Profile {
        #[command(subcommand)]
        command: profile::Command,
    },
    /// Print a shell completion script (bash, zsh, fish, ...).
    #[command(after_help = completion::AFTER_HELP)]
    Completion(completion::Args),
}

/// Which environment, and which systemd.
#[derive(clap::Args, Debug)]
pub struct Target {
    /// State directory [default: $KUBEUNIT_STATE_DIR, /var/lib/kubeunit/ENV as root, else $XDG_STATE_HOME/kubeunit/ENV].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Environment name, for the default state dir.
    #[arg(short, long = "env", value_name = "NAME", default_value = "dev")]
    pub env: String,
    /// Use the calling user's systemd instead of the system manager.
    #[arg(long, conflicts_with = "bus")]
    pub user: bool,
    /// D-Bus address of the systemd to use (e.g. a container's system bus socket).
    #[arg(long, env = "KUBEUNIT_BUS_ADDRESS", value_name = "ADDRESS")]
    pub bus: Option<String>,
}

impl Target {
    fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| default_state_dir(&self.env))
    }

    fn bus(&self) -> Bus {
        match (&self.bus, self.user) {
            (Some(a), _) => Bus::Address(a.clone()),
            (None, true) => Bus::User,
            (None, false) => Bus::System,
        }
    }

    /// The environment's state dir, loaded for running.
    fn env(&self) -> Result<Env, Error> {
        let dir = crate::spec::host::absolute(&self.state_dir())?;
        Env::load(&dir, &HostFacts::gather())
    }

    async fn systemd(&self) -> Result<Systemd, Error> {
        Ok(Systemd::connect(&self.bus()).await?)
    }
}

/// Default state dir: `$KUBEUNIT_STATE_DIR`, else `/var/lib/kubeunit/<name>` for root and
/// `$XDG_STATE_HOME/kubeunit/<name>` (default `~/.local/state`) otherwise.
pub fn default_state_dir(name: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("KUBEUNIT_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if is_root() {
        return PathBuf::from("/var/lib/kubeunit").join(name);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("kubeunit").join(name)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Run an async command to completion on a single-threaded runtime.
fn block_on<F: std::future::Future<Output = Result<i32, Error>>>(f: F) -> Result<i32, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the async runtime: {e}")))?
        .block_on(f)
}

/// Pretty JSON on stdout (scripts read it).
fn print_json(v: &impl serde::Serialize) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("error: cannot format JSON: {e}"),
    }
}

/// Run the CLI; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Gen(args) => gen::exec(args),
        Command::Start(args) => block_on(start::exec(args)),
        Command::Stop(args) => block_on(stop::exec(args)),
        Command::Status(args) => block_on(status::exec(args)),
        Command::Logs(args) => logs::exec(args),
        Command::Restart(args) => block_on(restart::exec(args)),
        Command::Destroy(args) => block_on(destroy::exec(args)),
        Command::Profile { command } => profile::exec(command),
        Command::Completion(args) => completion::exec(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}
