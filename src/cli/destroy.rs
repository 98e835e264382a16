//! `kubeunit destroy`: stop the environment, then delete its runtime data (`--all`: the state dir).

use super::common::Target;
use crate::error::Error;
use crate::run;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Delete the whole state dir, PKI included.
    #[arg(long)]
    pub all: bool,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let (env, _lock) = args.target.env_locked()?;
    let sd = args.target.systemd().await?;
    run::stop(&env, &sd).await?;
    let doomed = if args.all {
        &env.plan.state_dir
    } else {
        &env.plan.data_dir
    };
    match std::fs::remove_dir_all(doomed) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(doomed, "delete")(e)),
    }
    println!(
        "environment '{}' stopped; deleted {}",
        env.plan.name(),
        doomed.display()
    );
    Ok(0)
}
