//! `kubeunit install` / `kubeunit uninstall`: the environment as persistent, enabled unit files that
//! bring it up at boot without kubeunit running (`ops::install` says what is written).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::ops::install;
use crate::run;

pub const AFTER_HELP: &str = "Examples:
  kubeunit install                                   # /var/lib/kubeunit/dev: enabled, starts at boot
  kubeunit install --now                             # ... and start it now
  kubeunit install --runtime --now                   # into /run/systemd/system: until reboot (NixOS)
  systemctl start kubeunit-dev.target                # what boot does; `kubeunit status` shows it
  kubeunit install --state-dir /img/var/lib/kubeunit/dev --root /img --kubeunit /usr/local/bin/kubeunit
                                                     # into an image or VM root being built

Writes <root>/etc/systemd/system/kubeunit-NAME.target (wanted by multi-user.target), the state dir's
unit files, a drop-in per unit (PartOf= the target; a `kubeunit wait` health gate for components without
sd_notify) and a oneshot per start hook (`kubeunit hook`). Run it again after `kubeunit gen`.
`kubeunit uninstall` removes exactly that.";

pub const UNINSTALL_HELP: &str = "Examples:
  kubeunit uninstall                        # stop it, remove its unit files, daemon-reload
  kubeunit uninstall --root /img --state-dir /img/var/lib/kubeunit/dev";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Root of the system to install into (an image or VM root being built): nothing is started or
    /// reloaded, and unit paths stay as the state dir names them.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// The kubeunit binary the boot-time units run (its path on the installed system)
    /// [default: this one].
    #[arg(long, value_name = "PATH")]
    pub kubeunit: Option<PathBuf>,
    /// Into /run/systemd/system instead, gone at reboot (as `systemctl enable --runtime`): for a
    /// read-only /etc/systemd/system (NixOS's module runs this at every boot).
    #[arg(long, conflicts_with = "root")]
    pub runtime: bool,
    /// Start the environment right away (`kubeunit start`).
    #[arg(long, conflicts_with = "root")]
    pub now: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub target: Target,
    /// Root of the system it was installed into.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// It was installed with --runtime (into /run/systemd/system).
    #[arg(long, conflicts_with = "root")]
    pub runtime: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

fn check_root(root: &Path) -> Result<bool, Error> {
    if !root.is_absolute() || !root.is_dir() {
        return Err(Error::Usage {
            message: format!(
                "--root {}: not an absolute path to a directory",
                root.display()
            ),
            fix: "name the root directory of the system being built, e.g. --root /mnt/image".into(),
        });
    }
    let canonical = std::fs::canonicalize(root).map_err(Error::io(root, "resolve"))?;
    Ok(canonical == Path::new("/"))
}

fn kubeunit_binary(arg: Option<PathBuf>, live: bool) -> Result<PathBuf, Error> {
    let path = match arg {
        Some(p) => p,
        None => std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .map_err(|e| Error::Usage {
                message: format!("cannot tell where this kubeunit binary is: {e}"),
                fix: "name it with --kubeunit PATH".into(),
            })?,
    };
    let text = path.to_string_lossy();
    if !path.is_absolute() || text.chars().any(|c| c.is_control() || "\"'\\".contains(c)) {
        return Err(Error::Usage {
            message: format!("--kubeunit {text:?}: not an absolute path without quotes or control characters"),
            fix: "give the absolute path of kubeunit on the installed system, e.g. /usr/local/bin/kubeunit".into(),
        });
    }
    if live && crate::spec::host::executable(&path).is_err() {
        return Err(Error::Usage {
            message: format!("--kubeunit {}: no executable file there", path.display()),
            fix: "install kubeunit there first (the units run it at boot), or name where it is"
                .into(),
        });
    }
    Ok(path)
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let live = check_root(&args.root)?;
    let kubeunit = kubeunit_binary(args.kubeunit, live)?;
    let (env, _lock) = args.target.env_locked()?;
    if env.plan.profile.rootless {
        return Err(Error::Usage {
            message: format!(
                "environment '{}' is rootless: install writes system units (/etc/systemd/system)",
                env.plan.name()
            ),
            fix: "start it with `kubeunit start` (lingering keeps it running after logout), or generate it without --user as root".into(),
        });
    }
    let sd = if live {
        Some(args.target.systemd(&env).await?)
    } else {
        None
    };
    if let Some(sd) = &sd {
        if !run::installed(&env.plan, sd).await? && run::running_units(&env, sd).await? > 0 {
            return Err(Error::Usage {
                message: format!(
                    "environment '{}' runs (started by `kubeunit start`, as transient units)",
                    env.plan.name()
                ),
                fix: "stop it first (kubeunit stop), then install; `--now` starts it again".into(),
            });
        }
    }
    let place = install::Place {
        root: args.root.clone(),
        runtime: args.runtime,
    };
    let entries = install::entries(&env, &place, &kubeunit)?;
    let report = install::write(&env, &place, &entries)?;
    if let Some(sd) = &sd {
        sd.reload().await?;
    }
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => {
            for p in &report.removed {
                println!("removed {}", p.display());
            }
            println!(
                "installed environment '{}': {} files in {}, enabled by {}",
                env.plan.name(),
                report.written.len(),
                report.unit_dir.display(),
                report.target
            );
            if live && !args.now {
                let when = if args.runtime {
                    "it is installed until reboot"
                } else {
                    "it starts at every boot"
                };
                println!(
                    "{when}; now: systemctl start {} (or kubeunit start)",
                    report.target
                );
            }
        }
    }
    if let (Some(sd), true) = (&sd, args.now) {
        let report = run::start(
            &env,
            sd,
            std::time::Duration::from_secs(300),
            run::Until::Healthy,
            &mut |_| {},
        )
        .await?;
        if args.output == Output::Text {
            println!(
                "environment '{}' is up in {:.1}s",
                env.plan.name(),
                report.total_seconds
            );
        }
    }
    Ok(0)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UninstallReport {
    target: String,
    installed: bool,
    removed: Vec<PathBuf>,
}

pub async fn exec_uninstall(args: UninstallArgs) -> Result<i32, Error> {
    let live = check_root(&args.root)?;
    let (env, _lock) = args.target.env_locked()?;
    let target = env.plan.target_name();
    let place = install::Place {
        root: args.root.clone(),
        runtime: args.runtime,
    };
    let Some(paths) = install::installed(&env, &place)? else {
        match args.output {
            Output::Json => print_json(&UninstallReport {
                target,
                installed: false,
                removed: vec![],
            }),
            Output::Text => println!(
                "environment '{}' is not installed in {}",
                env.plan.name(),
                place.unit_dir().display()
            ),
        }
        return Ok(0);
    };
    let sd = if live {
        Some(args.target.systemd(&env).await?)
    } else {
        None
    };
    if let Some(sd) = &sd {
        // Its target too (`run::stop` stops an installed environment's).
        run::stop(&env, sd).await?;
    }
    let removed = install::remove(&paths)?;
    if let Some(sd) = &sd {
        sd.reload().await?;
        // Without their files the stopped units (and the pods' slices below the environment's) are
        // unloaded on systemd's next garbage-collection pass: uninstall returns once they are.
        run::stop::unloaded(&env, sd).await?;
    }
    match args.output {
        Output::Json => print_json(&UninstallReport {
            target,
            installed: true,
            removed,
        }),
        Output::Text => println!(
            "uninstalled environment '{}': removed {} files (the state dir stays; `kubeunit destroy` deletes it)",
            env.plan.name(),
            removed.len()
        ),
    }
    Ok(0)
}
