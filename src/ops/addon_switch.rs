//! `kubeunit addons enable|disable NAME`: one addon's key set in the state dir, and, when the
//! environment runs, its objects applied or deleted and (the load balancer) its segment made or
//! taken down on each node, as a `start` or `stop` of the new state dir would leave them. Checks
//! come first: a refused switch changes nothing.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::artifacts::Options;
use crate::error::Error;
use crate::pipeline;
use crate::pki::Entropy;
use crate::run::addons;
use crate::run::{units_up, Env};
use crate::spec::addons::{find, Addon, ADDONS};
use crate::spec::{HostFacts, Plan};
use crate::systemd::Systemd;

/// What a switch did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Switched {
    pub addon: &'static str,
    pub enabled: bool,
    /// Whether the state dir said so already.
    pub unchanged: bool,
    /// Whether the environment ran (its objects and networks were changed too).
    pub running: bool,
    /// API paths applied (enable) or deleted (disable).
    pub objects: Vec<String>,
    /// The nodes whose LoadBalancer segment was made or taken down.
    pub nodes: Vec<String>,
}

/// Turn `addon` on or off. The profile's key is set and the state dir rendered in memory first; a
/// need not met (gateway without loadbalancer, loadbalancer under gateway) or a value the profile
/// refuses is an error before anything is written.
pub async fn switch(
    env: &Env,
    sd: &Systemd,
    addon: &'static Addon,
    on: bool,
    lock_wait: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<Switched, Error> {
    let dir = &env.plan.state_dir;
    refuse_unmet_needs(&env.plan, addon, on)?;
    let sets = vec![format!("{}={on}", addon.key)];
    let profile = pipeline::resolved_profile_with(dir, &sets)?;
    let plan = Plan::new(profile, dir, &HostFacts::gather())?;
    let opts = Options {
        entropy: Entropy::Os,
        force: false,
    };
    let (_, rendered) = pipeline::render(&plan, dir, &opts)?;
    let wanted = addons::documents_of(&plan, &rendered.tree)?;
    let before = addons::documents(dir)?;
    let (up, _) = units_up(env, sd).await?;
    let mut done = Switched {
        addon: addon.name,
        enabled: on,
        unchanged: (addon.on)(&env.plan.profile.addons) == on,
        running: up > 0,
        objects: Vec::new(),
        nodes: Vec::new(),
    };
    let segment = addon.name == "loadbalancer";
    if done.running && !on {
        // Gone from the cluster before the state dir says so: a failure here leaves it saying the
        // addon is on, and `disable` again finishes.
        let paths: Vec<String> = wanted
            .iter()
            .filter_map(|(_, d)| addons::object_url(d).ok())
            .collect();
        let going: Vec<(String, Value)> = before
            .into_iter()
            .filter(|(_, d)| addons::object_url(d).is_ok_and(|p| !paths.contains(&p)))
            .collect();
        done.objects = addons::delete(&env.plan, &going)?;
        if segment {
            done.nodes = node_networks(env, sd, "lb-off", true).await?;
        }
    }
    pipeline::gen(&plan, &opts, None, lock_wait, say)?;
    if done.running && segment {
        // The node's copy of its script becomes the new one, whose `down` the unit runs at stop.
        let env = Env::load(dir, &HostFacts::gather())?;
        let made = node_networks(&env, sd, "lb", false).await?;
        if on {
            done.nodes = made;
        }
    }
    if done.running && on {
        done.objects = addons::apply(&plan)?;
    }
    Ok(done)
}

/// An addon needs its needs on; one that others need stays on while they are.
pub fn refuse_unmet_needs(plan: &Plan, addon: &Addon, on: bool) -> Result<(), Error> {
    let is_on = |name: &str| find(name).is_some_and(|a| (a.on)(&plan.profile.addons));
    let blocking: Vec<&str> = if on {
        addon.needs.iter().copied().filter(|n| !is_on(n)).collect()
    } else {
        ADDONS
            .iter()
            .filter(|a| a.needs.contains(&addon.name) && is_on(a.name))
            .map(|a| a.name)
            .collect()
    };
    let Some(first) = blocking.first() else {
        return Ok(());
    };
    let (message, fix) = if on {
        (
            format!(
                "addon {} needs {}, which is off",
                addon.name,
                blocking.join(", ")
            ),
            format!("kubeunit addons enable {first} first"),
        )
    } else {
        (
            format!(
                "addon {} is needed by {}, which is on",
                addon.name,
                blocking.join(", ")
            ),
            format!("kubeunit addons disable {first} first"),
        )
    };
    Err(Error::Usage { message, fix })
}

/// Run node-network's script with `arg` on each node of this host whose network is up: the state
/// dir's script, or (`copy`) the copy its `up` left, which is the script the node runs now.
async fn node_networks(
    env: &Env,
    sd: &Systemd,
    arg: &str,
    copy: bool,
) -> Result<Vec<String>, Error> {
    let mut nodes = Vec::new();
    for (i, unit) in env
        .units
        .iter()
        .filter(|(i, _)| i.component.name == "node-network")
    {
        let up = sd
            .state(&unit.name)
            .await?
            .is_some_and(|s| s.active_state.is_running());
        if !up {
            continue;
        }
        let script = if copy {
            crate::components::node_network_copy(&i.plan)
        } else {
            i.plan
                .node_file(crate::components::NODE_NETWORK_SCRIPT)
                .into()
        };
        let out = std::process::Command::new("/bin/sh")
            .arg(&script)
            .arg(arg)
            .output()
            .map_err(Error::io(&script, "run"))?;
        if !out.status.success() {
            return Err(Error::Addon(format!(
                "{} {arg}: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        nodes.push(i.plan.node().name.clone());
    }
    Ok(nodes)
}
