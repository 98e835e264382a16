//! `kubeunit stop`: stop the environment's slice and wait until its units and ports are gone.

use super::common::Target;
use crate::error::Error;
use crate::run;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let (env, _lock) = args.target.env_locked()?;
    let sd = args.target.systemd(&env).await?;
    let report = run::stop(&env, &sd).await?;
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
        return Ok(1);
    }
    Ok(0)
}
