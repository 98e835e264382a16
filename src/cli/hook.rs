//! `kubeunit hook COMPONENT`: run what `start` does once a component is healthy (apply the addons,
//! import the images), after waiting for it to be healthy. An installed environment's oneshot units
//! run it at boot.

use std::time::{Duration, Instant};

use super::common::Target;
use crate::error::Error;
use crate::run::{hooks, probe};

pub const AFTER_HELP: &str = "Examples:
  kubeunit hook kube-apiserver        # apply STATE/addons again
  kubeunit hook containerd            # import the profile's images into containerd
  kubeunit hook registry              # push those images from containerd to the registry";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    pub component: String,
    /// Seconds to wait for the component to be healthy first.
    #[arg(long, default_value_t = 240)]
    pub timeout: u64,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let env = args.target.env()?;
    let (c, _) = env.unit(&args.component)?;
    let Some(hook) = c.component.after_healthy else {
        return Err(Error::Usage {
            message: format!("{} has no start hook", c.name),
            fix: format!(
                "components with one: {}",
                env.units
                    .iter()
                    .filter(|(c, _)| c.component.after_healthy.is_some())
                    .map(|(c, _)| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    // With its node's plan: a per-node instance is probed, and hooks into, its own node.
    if let Err(why) = probe::wait_healthy(&c.plan, c.component, deadline) {
        eprintln!(
            "error: {} not healthy after {}s: {why}",
            c.name, args.timeout
        );
        return Ok(1);
    }
    let report = hooks::run(&c.plan, c.component, hook)?;
    println!("{} {}: {} done", c.name, hook.as_str(), report.count());
    Ok(0)
}
