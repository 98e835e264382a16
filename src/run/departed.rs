//! Nodes a later `gen` removed from the environment: `start` and `stop` take each down whole, and
//! touch no other node. A departed node shows as units of this environment's per-node components
//! whose node the plan no longer has (still running), or as its data dir (`<dataDir>/nodes/<node>`).
//! Its units stop in reverse table order (its node-network's ExecStopPost= runs from the copy in
//! /run, since `gen` deleted the state dir's), its pods are killed, the after-stop cleanup runs
//! with its names, its data dir goes, and, once the API server answers, its Node object.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::cleanup;
use super::env::Env;
use crate::components::{self, Instance};
use crate::error::Error;
use crate::spec::Plan;
use crate::systemd::Systemd;

/// The names of the nodes this environment had and its plan no longer has: those of its units
/// still loaded, and those with a data dir.
pub async fn departed(env: &Env, sd: &Systemd) -> Result<Vec<String>, Error> {
    let plan = &env.plan;
    let per_node: Vec<&str> = components::COMPONENTS
        .iter()
        .filter(|c| c.per_node)
        .map(|c| c.name)
        .collect();
    let prefix = format!("{}-", plan.unit_prefix());
    let mut names = BTreeSet::new();
    for unit in sd.active_units(&format!("{prefix}*@*.service")).await? {
        // `<prefix><component>[-debug]@<node>.service`: another environment whose name starts
        // with this one's and a dash has a component part that is no component's.
        let Some((what, node)) = unit
            .strip_prefix(&prefix)
            .and_then(|u| u.strip_suffix(".service"))
            .and_then(|u| u.split_once('@'))
        else {
            continue;
        };
        let component = what.strip_suffix("-debug").unwrap_or(what);
        if per_node.contains(&component) {
            names.insert(node.to_string());
        }
    }
    names.extend(data_dirs(plan));
    Ok(names
        .into_iter()
        .filter(|n| plan.departed(n).is_some())
        .collect())
}

/// The names of the directories in `<dataDir>/nodes/` that are no node's of the plan: directories
/// only, never a link, each named as a node can be.
fn data_dirs(plan: &Plan) -> Vec<String> {
    let Ok(dirs) = std::fs::read_dir(plan.further_nodes_data_dir()) else {
        return vec![];
    };
    let mut names: Vec<String> = dirs
        .flatten()
        .filter(|d| d.file_type().is_ok_and(|t| t.is_dir()))
        .map(|d| d.file_name().to_string_lossy().into_owned())
        .filter(|n| plan.departed(n).is_some())
        .collect();
    names.sort();
    names
}

/// Take the departed nodes `names` down: their units, pods, mounts, cgroups and data dirs. Returns
/// what the cleanup could not remove.
pub async fn take_down(env: &Env, sd: &Systemd, names: &[String]) -> Result<Vec<String>, Error> {
    let mut problems = Vec::new();
    for name in names {
        let Some(view) = env.plan.departed(name) else {
            continue;
        };
        let instances = components::node_instances(&view);
        let node = view.node().clone();
        // The kubelet first (it would restart what dies), then the rest, last to first.
        for i in instances.iter().rev() {
            sd.stop(&i.debug_unit()).await?;
            sd.reset_failed(&i.debug_unit()).await?;
            sd.stop(&i.unit).await?;
            sd.wait_gone(&i.unit, Duration::from_secs(60)).await?;
            if i.component.kill_mode == Some("process") {
                sd.kill_all(&i.unit).await?;
            }
            sd.reset_failed(&i.unit).await?;
        }
        cleanup::kill_pods(sd, &node).await?;
        sd.stop(&node.slice).await?;
        sd.reset_failed(&node.slice).await?;
        let data_dir = node.data_dir.clone();
        let found = tokio::task::spawn_blocking(move || cleanup_node(&instances, &data_dir))
            .await
            .map_err(|e| {
                Error::Internal(format!("the cleanup of a departed node panicked: {e}"))
            })?;
        problems.extend(found);
    }
    Ok(problems)
}

fn cleanup_node(instances: &[Instance<'static>], data_dir: &std::path::Path) -> Vec<String> {
    let mut problems: Vec<String> = instances
        .iter()
        .rev()
        .flat_map(|i| cleanup::after_stop(&i.plan, i.component))
        .collect();
    if let Err(e) = cleanup::remove_dir(data_dir) {
        problems.push(e.to_string());
    }
    problems
}

/// Delete the departed nodes' Node objects (blocking; the API server is up): `kubectl get nodes`
/// shows no node the profile does not have. Returns the API paths deleted.
pub fn forget(plan: &Plan, names: &[String]) -> Result<Vec<String>, Error> {
    if names.is_empty() || !plan.enabled("kube-apiserver") {
        return Ok(vec![]);
    }
    let agent =
        super::probe::https_agent(plan, Some("ca"), Some("admin"), Duration::from_secs(10))?;
    let mut deleted = Vec::new();
    for name in names {
        let path = format!("/api/v1/nodes/{name}");
        let url = format!("{}{path}", components::apiserver_url(plan));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = match agent.delete(&url).call() {
                Ok(r) => r.status().as_u16(),
                Err(ureq::Error::StatusCode(s)) => s,
                Err(_) => 0,
            };
            match status {
                200 | 202 => {
                    deleted.push(path);
                    break;
                }
                404 => break,
                _ if Instant::now() >= deadline => {
                    return Err(Error::Addon(format!(
                        "deleting the Node of departed node {name}: HTTP {status}"
                    )))
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a directory named as a node can be, of a node the plan does not have, is a departed
    /// node's: a link (to anywhere), a file, a name no node can have and a node of the plan are not.
    #[test]
    fn departed_data_dirs_are_directories_of_nodes_the_plan_no_longer_has() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let plan = Plan::for_tests("dev", &["nodes=2", &format!("dataDir={}", data.display())]);
        let nodes = plan.further_nodes_data_dir();
        std::fs::create_dir_all(nodes.join("worker-1")).unwrap();
        std::fs::create_dir_all(nodes.join("worker-7")).unwrap();
        std::fs::create_dir_all(nodes.join("Not_A_Node")).unwrap();
        std::fs::create_dir_all(nodes.join("..x")).unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, nodes.join("worker-8")).unwrap();
        std::fs::write(nodes.join("worker-9"), "a file").unwrap();
        assert_eq!(data_dirs(&plan), ["worker-7"]);
        // No nodes dir at all: none.
        let empty = Plan::for_tests("dev", &[&format!("dataDir={}", outside.display())]);
        assert!(data_dirs(&empty).is_empty());
    }
}
