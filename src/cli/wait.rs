//! `kubeunit wait [COMPONENT...]`: block until components answer their health probes (an installed
//! environment's units run it as their `ExecStartPost=` gate; scripts use it after a restart).

use std::time::{Duration, Instant};

use super::common::Target;
use crate::error::Error;
use crate::run::probe;

pub const AFTER_HELP: &str = "Examples:
  kubeunit wait                                  # every component with a health probe
  kubeunit wait kube-scheduler --timeout 30
  systemctl restart kubeunit-dev-kubelet.service && kubeunit wait kubelet

Exit codes: 0 healthy, 1 not healthy within --timeout, 2 bad input.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Components to wait for, as `kubeunit status` names them (kubelet@NODE on a further node)
    /// [default: all with a health probe].
    pub components: Vec<String>,
    /// Seconds to wait.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let env = args.target.env()?;
    let components: Vec<_> = if args.components.is_empty() {
        env.units
            .iter()
            .map(|(c, _)| c)
            .filter(|c| c.component.probe.is_some())
            .collect()
    } else {
        let mut v = Vec::new();
        for name in &args.components {
            v.push(&env.unit(name)?.0);
        }
        v
    };
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(args.timeout);
    for c in components {
        if let Err(why) = probe::wait_healthy(&c.plan, c.component, deadline) {
            eprintln!(
                "error: {} not healthy after {}s: {why}",
                c.name, args.timeout
            );
            return Ok(1);
        }
        println!(
            "{} healthy after {:.1}s",
            c.name,
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(0)
}
