//! `kubeunit stop`: stop the environment's slice and wait until its units and ports are gone.

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::run;

pub const AFTER_HELP: &str = "Examples:
  kubeunit stop                              # /var/lib/kubeunit/dev (or $KUBEUNIT_STATE_DIR)
  kubeunit stop --state-dir /srv/ci -o json  # {\"stopped\": [...], \"busyPorts\": [], \"seconds\": 1.2, ...}

Graceful: systemd sends SIGTERM in reverse start order (kube-apiserver before etcd). Exit 1 when a port
is still in use afterwards. `kubeunit destroy` kills at once instead, and deletes the runtime data.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let (env, _lock) = args.target.env_locked()?;
    let sd = args.target.systemd(&env).await?;
    let report = run::stop(&env, &sd).await?;
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => {
            println!(
                "environment '{}' stopped ({} units) in {:.1}s",
                env.plan.name(),
                report.stopped.len(),
                report.seconds
            );
            for p in &report.cleanup_problems {
                eprintln!("warning: left behind: {p}");
            }
            if !report.busy_ports.is_empty() {
                eprintln!(
                    "warning: ports still in use after stop: {:?}",
                    report.busy_ports
                );
            }
        }
    }
    Ok(if report.busy_ports.is_empty() { 0 } else { 1 })
}
