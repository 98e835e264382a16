//! After the components are healthy, `start` waits until the environment is usable: what a user
//! does next (`kubectl create deployment`, a pod resolving a Service) works at once. Healthy
//! components are not that yet: the controller-manager makes the namespace's default
//! ServiceAccount (without it, ServiceAccount admission refuses every pod) and lifts the node's
//! not-ready taint a moment after it leads, and CoreDNS answers once its readiness probe passed.
//!
//! Checked through the API with the admin identity, as the addons are applied: each of this
//! host's nodes Ready without the taints of a node on its way up, `default/default`, and with the
//! CoreDNS addon a ready endpoint in kube-dns's EndpointSlice.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::env::Env;
use crate::error::Error;
use crate::spec::profile::HostRole;
use crate::spec::Plan;

/// What was waited for, and when each held (seconds from the start of `start`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usable {
    pub what: String,
    pub seconds: f64,
}

/// The conditions to wait for; none without a node or the admin identity here.
pub fn conditions(env: &Env) -> Vec<Condition> {
    let plan = &env.plan;
    if !plan.here_has(HostRole::ControlPlane) {
        return vec![];
    }
    let mut nodes: Vec<String> = env
        .units
        .iter()
        .filter(|(i, _)| i.component.name == "kubelet")
        .map(|(i, _)| i.plan.node().name.clone())
        .collect();
    nodes.dedup();
    if nodes.is_empty() {
        return vec![];
    }
    let mut all: Vec<Condition> = nodes.into_iter().map(Condition::NodeSchedulable).collect();
    all.push(Condition::DefaultServiceAccount);
    // Across hosts CoreDNS may be scheduled on a host that is not up yet.
    if plan.profile.addons.coredns && plan.hosts.is_empty() {
        all.push(Condition::DnsReady);
    }
    all
}

/// The taints of a node on its way up, which its controllers lift (a cordon's
/// `node.kubernetes.io/unschedulable`, or a role's taint, is the user's choice: not waited out).
const ON_THE_WAY_UP: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/network-unavailable",
    "node.cloudprovider.kubernetes.io/uninitialized",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The Node is Ready and no taint of a node on its way up keeps pods off it.
    NodeSchedulable(String),
    /// `default/default` exists: pods of the default namespace are admitted.
    DefaultServiceAccount,
    /// kube-dns's EndpointSlice lists a ready CoreDNS.
    DnsReady,
}

impl Condition {
    pub fn describe(&self) -> String {
        match self {
            Condition::NodeSchedulable(n) => format!("node {n} Ready and schedulable"),
            Condition::DefaultServiceAccount => "the default ServiceAccount".into(),
            Condition::DnsReady => "CoreDNS ready behind kube-dns".into(),
        }
    }

    fn path(&self) -> String {
        match self {
            Condition::NodeSchedulable(n) => format!("/api/v1/nodes/{n}"),
            Condition::DefaultServiceAccount => {
                "/api/v1/namespaces/default/serviceaccounts/default".into()
            }
            Condition::DnsReady => "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkube-dns".into(),
        }
    }

    /// Whether the object at `path()` shows the condition holds.
    pub fn holds(&self, object: &Value) -> bool {
        match self {
            Condition::NodeSchedulable(_) => {
                let ready = object["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
                let kept_off = object["spec"]["taints"].as_array().is_some_and(|ts| {
                    ts.iter().any(|t| {
                        t["key"]
                            .as_str()
                            .is_some_and(|k| ON_THE_WAY_UP.contains(&k))
                    })
                });
                ready && !kept_off
            }
            Condition::DefaultServiceAccount => object["metadata"]["name"] == "default",
            Condition::DnsReady => object["items"].as_array().is_some_and(|slices| {
                slices.iter().any(|s| {
                    s["endpoints"]
                        .as_array()
                        .is_some_and(|es| es.iter().any(|e| e["conditions"]["ready"] == true))
                })
            }),
        }
    }
}

/// Wait (blocking) until every condition holds or `deadline` passes, calling `done` as each
/// holds. `Err` names those that did not.
pub fn wait(
    plan: &Plan,
    conditions: Vec<Condition>,
    t0: Instant,
    deadline: Instant,
    done: &mut dyn FnMut(&Usable),
) -> Result<Vec<Usable>, Error> {
    let agent = super::probe::https_agent(plan, Some("ca"), Some("admin"), Duration::from_secs(5))?;
    let base = crate::components::apiserver_url(plan);
    let mut pending = conditions;
    let mut reached = Vec::new();
    loop {
        pending.retain(|c| {
            let object = agent
                .get(format!("{base}{}", c.path()))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_to_string().ok())
                .and_then(|text| serde_json::from_str::<Value>(&text).ok());
            if object.is_some_and(|o| c.holds(&o)) {
                let u = Usable {
                    what: c.describe(),
                    seconds: t0.elapsed().as_secs_f64(),
                };
                done(&u);
                reached.push(u);
                false
            } else {
                true
            }
        });
        if pending.is_empty() {
            return Ok(reached);
        }
        if Instant::now() >= deadline {
            return Err(Error::NotUsable {
                missing: pending.iter().map(Condition::describe).collect(),
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_node_is_schedulable_once_ready_without_a_not_ready_taint() {
        let c = Condition::NodeSchedulable("dev".into());
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert!(c.holds(&ready));
        let mut tainted = ready.clone();
        tainted["spec"] =
            json!({"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]});
        assert!(!c.holds(&tainted));
        // A role taint is the profile's choice, not a node on its way up.
        let mut role = ready.clone();
        role["spec"] = json!({"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]});
        assert!(c.holds(&role));
        let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert!(!c.holds(&not_ready));
        // A cordon is the user's: not waited out.
        let mut cordoned = ready;
        cordoned["spec"] = json!({"unschedulable": true, "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]});
        assert!(c.holds(&cordoned));
    }

    #[test]
    fn dns_is_ready_with_a_ready_endpoint() {
        let c = Condition::DnsReady;
        assert!(!c.holds(&json!({"items": []})));
        assert!(!c.holds(&json!({"items": [{"endpoints": [{"conditions": {"ready": false}}]}]})));
        assert!(c.holds(&json!({"items": [{"endpoints": [{"conditions": {"ready": true}}]}]})));
    }
}
