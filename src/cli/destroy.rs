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
    let sd = args.target.systemd(&env).await?;
    // No graceful shutdown for what is deleted next.
    run::stop_with(&env, &sd, run::Ending::Kill).await?;
    let doomed = if args.all {
        // What `start` merged into the profile's kubeconfig goes with the state dir (as kind's delete).
        let kubeconfig = &env.plan.profile.kubeconfig.write;
        if !kubeconfig.as_os_str().is_empty()
            && crate::run::kubeconfig::remove(kubeconfig, env.plan.name())?
        {
            println!(
                "removed context '{}' from {}",
                env.plan.name(),
                kubeconfig.display()
            );
        }
        delete(&env.plan.state_dir)?;
        env.plan.state_dir.clone()
    } else {
        delete_runtime_data(&env)?;
        env.plan.data_dir.clone()
    };
    println!(
        "environment '{}' stopped; deleted {}",
        env.plan.name(),
        doomed.display()
    );
    Ok(0)
}

fn delete(dir: &std::path::Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir, "delete")(e)),
    }
}

/// The data dir's runtime data: the directories the environment's components own (the component
/// table says which), and then the data dir itself if nothing else is in it. Nothing else is
/// deleted, whatever `dataDir` a (tampered) profile.yaml names.
fn delete_runtime_data(env: &crate::run::Env) -> Result<(), Error> {
    let data = &env.plan.data_dir;
    let state = &env.plan.state_dir;
    if data.parent().is_none_or(|p| p.parent().is_none())
        || state.starts_with(data) && data != state
    {
        return Err(Error::state(
            state,
            format!(
                "its dataDir {} is the root, a top-level directory or holds the state dir: not deleting it",
                data.display()
            ),
            "check dataDir in profile.yaml (regenerate with `kubeunit gen`), or delete the runtime data yourself",
        ));
    }
    // A per-node component's directories are in its node's data dir (below this one).
    for (i, _) in &env.units {
        for dir in i.component.data_dirs {
            delete(&i.plan.node().data_dir.join(dir))?;
        }
    }
    // Only when empty: a data dir may hold what the user put there. Nodes' dirs first.
    for node in env.plan.nodes.iter().filter(|n| &n.data_dir != data) {
        let _ = std::fs::remove_dir(&node.data_dir);
        if let Some(nodes) = node.data_dir.parent().filter(|p| p != data) {
            let _ = std::fs::remove_dir(nodes);
        }
    }
    let _ = std::fs::remove_dir(data);
    Ok(())
}
