//! What the commands share: naming an environment and a systemd (`Target`), output formats, the
//! async runtime and JSON printing.

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use crate::error::Error;
use crate::run::Env;
pub use crate::spec::host::default_state_dir;
use crate::spec::{paths, HostFacts};
use crate::state::{self, Access, Found, Lock};
use crate::systemd::{Bus, Systemd};

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
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
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| default_state_dir(&self.env))
    }

    /// The manager `--bus`/`--user` name, else the one the environment was generated for (a
    /// rootless profile's: the user's).
    pub fn bus(&self, env: &Env) -> Bus {
        match (&self.bus, self.user || env.plan.profile.rootless) {
            (Some(a), _) => Bus::Address(a.clone()),
            (None, true) => Bus::User,
            (None, false) => Bus::System,
        }
    }

    /// The environment's state dir, loaded for running (read-only commands: status, logs).
    pub fn env(&self) -> Result<Env, Error> {
        let dir = crate::spec::host::local_state_dir(&self.state_dir())?;
        Env::load(&dir, &HostFacts::gather())
    }

    /// The environment's resolved plan alone, its unit files not read: for what needs no unit
    /// (`hosts sync`, every 10 s on every host, parsed every unit file for nothing).
    pub fn plan(&self) -> Result<crate::spec::Plan, Error> {
        let dir = crate::spec::host::local_state_dir(&self.state_dir())?;
        crate::pipeline::plan_of(&dir, &HostFacts::gather())
    }

    /// The environment's state dir, locked against other writers (gen, start, stop, restart,
    /// destroy) for as long as the returned lock lives, then loaded.
    pub fn env_locked(&self) -> Result<(Env, Lock), Error> {
        let dir = crate::spec::host::local_state_dir(&self.state_dir())?;
        if state::dir::inspect(&dir)? != Found::Ours {
            return Err(Error::state(
                &dir,
                format!("no {}: not a generated state dir", paths::MANIFEST),
                format!("run `kubeunit gen --state-dir {}` first", dir.display()),
            ));
        }
        let (_, lock) =
            state::lock::acquire(&dir, Access::Exclusive, true, lock_wait()?, &mut say)?
                .ok_or_else(|| Error::Internal("no lock file after creating it".into()))?;
        Ok((Env::load(&dir, &HostFacts::gather())?, lock))
    }

    /// The systemd that runs `env`: a rootless environment's units are the user's, a root one's
    /// the system's (the other is refused: its unit files are not written for it).
    pub async fn systemd(&self, env: &Env) -> Result<Systemd, Error> {
        let rootless = env.plan.profile.rootless;
        if self.user && !rootless {
            return Err(Error::Usage {
                message: format!(
                    "environment '{}' was generated for the system manager, not a user's (--user)",
                    env.plan.name()
                ),
                fix: "drop --user, or generate it rootless: kubeunit gen --user --profile control-plane".into(),
            });
        }
        Ok(Systemd::connect(&self.bus(env)).await?)
    }
}

/// How long to wait for another command's lock on a state dir: `$KUBEUNIT_LOCK_TIMEOUT` seconds,
/// default 30.
pub fn lock_wait() -> Result<Duration, Error> {
    match std::env::var("KUBEUNIT_LOCK_TIMEOUT") {
        Err(_) => Ok(Duration::from_secs(30)),
        Ok(v) => v
            .trim()
            .parse()
            .map(Duration::from_secs)
            .map_err(|_| Error::Usage {
                message: format!("KUBEUNIT_LOCK_TIMEOUT={v:?} is not a number of seconds"),
                fix: "set it to whole seconds, e.g. KUBEUNIT_LOCK_TIMEOUT=120, or unset it (30)"
                    .into(),
            }),
    }
}

/// What `$KUBEUNIT_OFFLINE` says: `1` (or `true`) offline, whatever the profile says; `0` (or
/// `false`) as the profile says, and an environment made offline before may go online; unset or
/// empty: nothing (an offline state dir stays offline).
pub fn offline() -> Result<Option<bool>, Error> {
    let Some(v) = std::env::var_os("KUBEUNIT_OFFLINE") else {
        return Ok(None);
    };
    match v.to_string_lossy().trim() {
        "1" | "true" => Ok(Some(true)),
        "0" | "false" => Ok(Some(false)),
        "" => Ok(None),
        other => Err(Error::Usage {
            message: format!("KUBEUNIT_OFFLINE={other:?} is neither 1 nor 0"),
            fix: "set KUBEUNIT_OFFLINE=1 for an environment that reaches nothing beyond this machine, or unset it".into(),
        }),
    }
}

/// A line for the user on stderr (progress that is not the command's output).
pub fn say(message: &str) {
    eprintln!("kubeunit: {message}");
}

/// Run an async command to completion on a single-threaded runtime.
pub fn block_on<F: std::future::Future<Output = Result<i32, Error>>>(f: F) -> Result<i32, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the async runtime: {e}")))?
        .block_on(f)
}

/// Pretty JSON on stdout (scripts read it).
pub fn print_json(v: &impl serde::Serialize) {
    match serde_json::to_string_pretty(v) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("error: cannot format JSON: {e}"),
    }
}
