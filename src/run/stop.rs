//! `stop`: the slice (and with it every unit), then failed units cleared, unloaded units waited for,
//! and ports released.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::cleanup;
use super::env::Env;
use super::own_connections::{Outcome, Watches};
use super::probe;
use crate::error::Error;
use crate::systemd::Systemd;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StopReport {
    pub stopped: Vec<String>,
    /// What the after-stop cleanup could not remove.
    pub cleanup_problems: Vec<String>,
    pub busy_ports: Vec<u16>,
    /// By component: the connections it served that `stop` ended once it closed its listener (the
    /// JSON key predates its clients' connections being ended too), so that its exit
    /// did not wait on them (see `run::own_connections`).
    pub own_connections: BTreeMap<String, Outcome>,
    pub seconds: f64,
}

/// How the processes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// SIGTERM, in reverse start order, each given its graceful shutdown.
    Graceful,
    /// SIGKILL at once (`destroy`: the data goes anyway).
    Kill,
}

/// Stop the slice (and with it every unit), clear failed units, wait for the ports to be released.
pub async fn stop(env: &Env, sd: &Systemd) -> Result<StopReport, Error> {
    stop_with(env, sd, Ending::Graceful).await
}

/// `stop`, ending the processes as `ending` says.
pub async fn stop_with(env: &Env, sd: &Systemd, ending: Ending) -> Result<StopReport, Error> {
    let t0 = Instant::now();
    let mut stopped = Vec::new();
    // A node a later `gen` removed goes too (its units are in the slice, but its cleanup is its own).
    let departed = super::departed::departed(env, sd).await?;
    let departed_problems = super::departed::take_down(env, sd, &departed).await?;
    stopped.extend(departed.iter().map(|n| format!("node {n}")));
    // Debug units (`kubeunit debug`) are in the slice too; they go with it and are cleared below.
    let debug_units: Vec<String> = env.units.iter().map(|(i, _)| i.debug_unit()).collect();
    let timers: Vec<&str> = env.timers.iter().map(|(_, u)| u.name.as_str()).collect();
    for name in unit_names(env) {
        if sd.state(&name).await?.is_some() {
            stopped.push(name);
        }
    }
    // Graceful: a component that is its own client is helped out of its shutdown once it drained.
    let watches = match ending {
        Ending::Graceful => Watches::start(sd, env.units.iter().map(|(i, u)| (i, u))).await?,
        Ending::Kill => Watches::default(),
    };
    let installed = stop_units(env, sd, ending, &timers, &debug_units).await?;
    let own_connections = watches.finish().await;
    let problems = clean_up(env).await?;
    sd.reset_failed(&env.slice.name).await?;
    // Installed units stay loaded (from their files): nothing to wait for until `uninstall` removed
    // the files and reloaded, which waits for it itself.
    if !installed {
        unloaded(env, sd).await?;
    }
    let busy = ports_released(env).await;
    Ok(StopReport {
        stopped,
        cleanup_problems: departed_problems.into_iter().chain(problems).collect(),
        busy_ports: busy,
        own_connections,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Every unit of the environment `stop` stops, by name: the components', their debug units and the
/// timers, in that order.
fn unit_names(env: &Env) -> Vec<String> {
    let units = env.units.iter().map(|(_, u)| u.name.clone());
    let debug_units = env.units.iter().map(|(i, _)| i.debug_unit());
    let timers = env.timers.iter().map(|(_, u)| u.name.clone());
    units.chain(debug_units).chain(timers).collect()
}

/// Wait (10 s at most) until systemd unloaded the environment's stopped units and then its slice.
/// systemd unloads inactive units without a file on its next garbage-collection pass; a caller then
/// sees no unit left, and a following start can reuse the names. The slice goes last, after what is
/// below it (the kubelets' pod slices).
pub async fn unloaded(env: &Env, sd: &Systemd) -> Result<(), Error> {
    reset_failed_below(env, sd).await?;
    let names = unit_names(env);
    let all: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .chain([env.slice.name.as_str()])
        .collect();
    sd.collect(&all, Duration::from_secs(10)).await?;
    Ok(())
}

/// A failed unit below the environment's slice keeps it loaded, and the next `start` then finds
/// the slice's name taken ("Unit ... was already loaded"; seen once after `destroy` of a node
/// whose pods were starting): the kubelet's pod slices and runc's container scopes below it are
/// no unit of the table, so their failed state is cleared here. Only units in a slice of this
/// environment (named after its slice) are touched.
async fn reset_failed_below(env: &Env, sd: &Systemd) -> Result<(), Error> {
    let below = format!("{}-", env.slice.name.trim_end_matches(".slice"));
    for pattern in ["*.scope", "*.slice"] {
        for (name, slice) in sd.failed_units(pattern).await? {
            if name.starts_with(&below) || slice.starts_with(&below) || slice == env.slice.name {
                sd.reset_failed(&name).await?;
            }
        }
    }
    Ok(())
}

/// Stop every unit: timers, the node, the target (installed), the slice, the debug units, then each
/// unit by itself (one outside the slice). Returns whether the environment is installed.
async fn stop_units(
    env: &Env,
    sd: &Systemd,
    ending: Ending,
    timers: &[&str],
    debug_units: &[String],
) -> Result<bool, Error> {
    // Timers first: they are in no slice, and would start their service again.
    for name in timers {
        sd.stop(name).await?;
        sd.reset_failed(name).await?;
    }
    stop_node(env, sd, ending).await?;
    // An installed environment's target goes too, so that starting it again starts everything.
    let installed = super::env::installed(&env.plan, sd).await?;
    if installed {
        sd.stop(&env.plan.target_name()).await?;
    }
    match ending {
        Ending::Graceful => sd.stop(&env.slice.name).await?,
        Ending::Kill => {
            // Each unit that runs something is killed (its stop job queued first: no restart; the
            // node's went above), then the slice stops normally. A SIGKILL to the whole slice would
            // also kill what a set-up unit runs when it stops (node-network's ExecStopPost=, which
            // removes the node's link): a start after `destroy` then found the link still there.
            for (_, unit) in env
                .units
                .iter()
                .rev()
                .filter(|(i, _)| !i.component.oneshot && !i.component.netns)
            {
                sd.stop_killing(&unit.name).await?;
            }
            sd.stop(&env.slice.name).await?
        }
    };
    for name in debug_units {
        sd.stop(name).await?;
        sd.reset_failed(name).await?;
    }
    for (i, unit) in env.units.iter().rev() {
        // Units outside the slice (a user edited Slice=) are stopped one by one.
        sd.stop(&unit.name).await?;
        sd.wait_gone(&unit.name, Duration::from_secs(60)).await?;
        if i.component.kill_mode == Some("process") {
            // What it leaves running by design (containerd's shims) goes now.
            sd.kill_all(&unit.name).await?;
        }
        sd.reset_failed(&unit.name).await?;
    }
    Ok(installed)
}

/// A node first: the kubelet (which would restart what dies), containerd and kube-proxy stop, then
/// the pods are killed (a pod's PID 1 may ignore SIGTERM, which would hold the slice's stop for
/// systemd's 90 s). Their cgroups are below the environment's slice, in the kubelet's kubepods
/// slice (each node's).
async fn stop_node(env: &Env, sd: &Systemd, ending: Ending) -> Result<(), Error> {
    let node: Vec<_> = env
        .units
        .iter()
        .filter(|(i, _)| i.component.netns)
        .collect();
    if node.is_empty() {
        return Ok(());
    }
    for (_, unit) in &node {
        match ending {
            Ending::Graceful => sd.stop(&unit.name).await?,
            Ending::Kill => sd.stop_killing(&unit.name).await?,
        };
    }
    for n in &env.plan.nodes {
        cleanup::kill_pods(sd, n).await?;
    }
    Ok(())
}

/// Each instance cleans up after itself with its node's plan (its node's directories); what could
/// not be done.
async fn clean_up(env: &Env) -> Result<Vec<String>, Error> {
    let instances: Vec<_> = env.units.iter().rev().map(|(i, _)| i.clone()).collect();
    tokio::task::spawn_blocking(move || {
        instances
            .iter()
            .flat_map(|i| cleanup::after_stop(&i.plan, i.component))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| Error::Internal(format!("the cleanup after stop panicked: {e}")))
}

/// Wait up to 10 s until no process listens on the environment's ports; those still busy.
async fn ports_released(env: &Env) -> Vec<u16> {
    let ports = env.ports();
    let port_deadline = Instant::now() + Duration::from_secs(10);
    let mut busy: Vec<u16> = probe::listeners(&ports).iter().map(|l| l.port).collect();
    while !busy.is_empty() && Instant::now() < port_deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        busy = probe::listeners(&ports).iter().map(|l| l.port).collect();
    }
    busy
}
