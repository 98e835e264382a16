//! `kubeunit restart COMPONENT`: stop one component and start it again from its unit file, with
//! `--binary` another binary for it first (recorded in the state dir's profile).

use std::path::PathBuf;
use std::time::Duration;

use super::common::{lock_wait, say, Target};
use crate::error::Error;
use crate::ops;
use crate::pipeline;

pub const AFTER_HELP: &str = "Examples:
  kubeunit restart kube-apiserver                  # picks up an edited unit file or a swapped binary
  kubeunit restart kube-controller-manager --binary ~/k8s/_output/bin/kube-controller-manager
  kubeunit restart kube-controller-manager --reset-binary

--binary records the binary in the state dir's profile (components.COMPONENT.binary) and regenerates
the unit (keys and certificates stay): `status` shows the override, `gen --check` finds the state dir
consistent, and later starts use it until --reset-binary. Under a debugger, restart returns the
component to its normal unit.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// The component as `kubeunit status` names it: `kubelet`, or `kubelet@NODE` on a further node.
    pub component: String,
    /// Run this binary for the component from now on (absolute path).
    #[arg(long, value_name = "PATH", conflicts_with = "reset_binary")]
    pub binary: Option<PathBuf>,
    /// Go back to the component's default binary (binDir).
    #[arg(long)]
    pub reset_binary: bool,
    /// Seconds to wait until it is healthy again.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    if args.binary.is_some() || args.reset_binary {
        set_binary(&args)?;
    }
    let (env, _lock) = args.target.env_locked()?;
    // A name the environment does not have is bad input, whether systemd is there or not.
    env.unit(&args.component)?;
    let sd = args.target.systemd(&env).await?;
    let timeout = Duration::from_secs(args.timeout);
    let t = ops::restart(&env, &sd, &args.component, timeout).await?;
    println!(
        "{} restarted: running after {:.2}s, healthy after {:.2}s",
        t.component, t.job_done, t.healthy
    );
    Ok(0)
}

/// Regenerate the state dir from its own profile with the component's binary set (or cleared). A
/// binary that is not there changes nothing.
fn set_binary(args: &Args) -> Result<(), Error> {
    let dir = crate::spec::host::local_state_dir(&args.target.state_dir())?;
    let env = args.target.env()?;
    let (c, _) = env.unit(&args.component)?;
    let value = match &args.binary {
        Some(path) => {
            let path = crate::spec::host::absolute(path)?;
            if crate::spec::host::executable(&path).is_err() {
                return Err(Error::Preflight {
                    message: format!(
                        "{}: --binary {} is not an executable file",
                        c.name,
                        path.display()
                    ),
                    fix: "give the path of the binary you built".into(),
                });
            }
            path.to_string_lossy().into_owned()
        }
        None => String::new(),
    };
    let mut profile = pipeline::resolved_profile(&dir)?;
    profile
        .components
        // The profile's binary is the component's, on every node.
        .entry(c.component.name.to_string())
        .or_default()
        .binary = value;
    pipeline::regen(profile, &dir, lock_wait()?, &mut say)?;
    Ok(())
}
