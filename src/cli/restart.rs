//! `kubeunit restart COMPONENT`: stop one component and start it again from its unit file.

use std::time::Duration;

use super::common::Target;
use crate::error::Error;
use crate::run;

pub const AFTER_HELP: &str = "Example:
  cp _output/bin/kube-apiserver /usr/local/bin/ && kubeunit restart kube-apiserver";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    pub component: String,
    /// Seconds to wait until it is healthy again.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let (env, _lock) = args.target.env_locked()?;
    let sd = args.target.systemd().await?;
    let timeout = Duration::from_secs(args.timeout);
    let t = run::restart(&env, &sd, &args.component, timeout).await?;
    println!(
        "{} restarted: running after {:.2}s, healthy after {:.2}s",
        t.component, t.job_done, t.healthy
    );
    Ok(0)
}
