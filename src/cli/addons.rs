//! `kubeunit addons`: list the addons and whether they are on; enable or disable one, on a running
//! environment too (`ops::addon_switch`), as `minikube addons` does.

use super::common::{lock_wait, print_json, say, Output, Target};
use crate::error::Error;
use crate::ops::addon_switch;
use crate::spec::addons::{self, ADDONS};

pub const AFTER_HELP: &str = "Examples:
  kubeunit addons list
  kubeunit addons enable loadbalancer        # LoadBalancer Services reachable from this host
  kubeunit addons enable gateway             # the Gateway API (needs loadbalancer)
  kubeunit addons disable metrics-server
  kubeunit addons enable loadbalancer --env apps -o json

enable and disable set the addon's profile key (addons list shows it) and render the state dir
again; on a running environment they also apply or delete the addon's objects, and the load
balancer's segment and routes are made or removed on each node. The same as
`kubeunit gen --set KEY=true` before a start. Offline, the addon's images must be on the node
already: `kubeunit images load ARCHIVE...` puts them there (scripts/up.sh builds only the addons
its profile turns on; `scripts/build-test-binaries.sh --node --addons loadBalancer` builds one,
`--print-images --addons loadBalancer` names the dir of its archives).

Exit codes: 0 done, 1 the cluster refused a change, 2 an unknown addon or an unmet need (nothing
changed).";

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Every addon, its profile key and whether the environment has it on.
    List(ListArgs),
    /// Turn an addon on (its objects applied when the environment runs).
    Enable(SwitchArgs),
    /// Turn an addon off (its objects deleted when the environment runs).
    Disable(SwitchArgs),
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Debug)]
pub struct SwitchArgs {
    /// The addon: coredns, storage, metrics-server, loadbalancer or gateway.
    pub addon: String,
    #[command(flatten)]
    pub target: Target,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::List(args) => list(args),
        Command::Enable(args) => switch(args, true).await,
        Command::Disable(args) => switch(args, false).await,
    }
}

fn list(args: ListArgs) -> Result<i32, Error> {
    let env = args.target.env()?;
    let rows: Vec<serde_json::Value> = ADDONS
        .iter()
        .map(|a| {
            serde_json::json!({
                "name": a.name,
                "key": a.key,
                "enabled": (a.on)(&env.plan.profile.addons),
                "what": a.what,
            })
        })
        .collect();
    match args.output {
        Output::Json => print_json(&rows),
        Output::Text => {
            println!("{:<16} {:<9} {:<28} WHAT", "NAME", "STATE", "KEY");
            for a in ADDONS {
                let state = if (a.on)(&env.plan.profile.addons) {
                    "enabled"
                } else {
                    "disabled"
                };
                println!("{:<16} {:<9} {:<28} {}", a.name, state, a.key, a.what);
            }
        }
    }
    Ok(0)
}

async fn switch(args: SwitchArgs, on: bool) -> Result<i32, Error> {
    let addon = addons::find(&args.addon).ok_or_else(|| Error::Usage {
        message: format!("no addon {:?}", args.addon),
        fix: format!("name one of: {} (kubeunit addons list)", addons::names()),
    })?;
    let env = args.target.env()?;
    // Bad input is refused before systemd is asked anything.
    addon_switch::refuse_unmet_needs(&env.plan, addon, on)?;
    let sd = args.target.systemd(&env).await?;
    let done = addon_switch::switch(&env, &sd, addon, on, lock_wait()?, &mut say).await?;
    match args.output {
        Output::Json => print_json(&done),
        Output::Text => {
            let verb = if on { "enabled" } else { "disabled" };
            let already = if done.unchanged {
                " (it was already)"
            } else {
                ""
            };
            println!(
                "addon {} {verb} in {}{already}",
                addon.name,
                env.plan.state_dir.display()
            );
            if done.running {
                let what = if on { "applied" } else { "deleted" };
                println!("  {} objects {what}", done.objects.len());
                if !done.nodes.is_empty() {
                    let segment = if on {
                        "made"
                    } else {
                        "removed, with its routes"
                    };
                    println!(
                        "  LoadBalancer segment {segment} on node {}",
                        done.nodes.join(", ")
                    );
                }
            } else {
                println!("  the environment is not running: the next `kubeunit start` has it");
            }
        }
    }
    Ok(0)
}
