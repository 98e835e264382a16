//! `nodes:` resolved: each node's name, role, labels, taints and share of the pod network, and
//! every way a profile's nodes can be wrong. `Plan` builds its `NodePlan`s from `resolve`, and
//! `validate` reports `errors`.

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;

use super::profile::{NodeEntry, Profile, Role};
use crate::error::FieldError;

/// At most this many nodes in one environment (each runs a containerd and a kubelet on this host).
pub const MAX_NODES: usize = 64;

/// A node's share of the pod network: a /24 (kube-controller-manager's default
/// `--node-cidr-mask-size` for IPv4), or the whole range when it is smaller.
const NODE_PREFIX_V4: u8 = 24;
const NODE_PREFIX_V6: u8 = 64;

/// A node as the profile resolves it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedNode {
    pub name: String,
    pub role: Role,
    pub labels: BTreeMap<String, String>,
    /// As `kubectl taint` writes them (`key[=value]:Effect`), checked.
    pub taints: Vec<Taint>,
    pub pod_cidr: IpNet,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl Taint {
    fn parse(s: &str) -> Option<Taint> {
        let (kv, effect) = s.rsplit_once(':')?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        let effect_ok = matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute");
        (effect_ok && is_label_key(key) && is_label_value(value)).then(|| Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        })
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.value.as_str() {
            "" => write!(f, "{}:{}", self.key, self.effect),
            v => write!(f, "{}={v}:{}", self.key, self.effect),
        }
    }
}

/// The first node's name when `nodes:` names none: `node.name`, else the environment's.
pub fn first_name(p: &Profile) -> String {
    if p.node.name.is_empty() {
        p.name.clone()
    } else {
        p.node.name.clone()
    }
}

/// Every node, each with its name, role and taints resolved (`Nodes::entries`): the hosts' when
/// the profile has hosts (`hosts::node_entries`), else `nodes:`'s.
pub fn entries(p: &Profile) -> Vec<NodeEntry> {
    match super::hosts::node_entries(p) {
        Some(hosts) => super::profile::Nodes::List(hosts).entries(""),
        None => p.nodes.entries(&first_name(p)),
    }
}

/// Every node of a valid profile (`errors` is empty), in order.
pub fn resolve(p: &Profile) -> Result<Vec<ResolvedNode>, Vec<FieldError>> {
    let errs = errors(p);
    if !errs.is_empty() {
        return Err(errs);
    }
    let cluster: IpNet = p.network.pod_cidr.parse().map_err(|_| {
        vec![FieldError::new(
            "network.podCIDR",
            &p.network.pod_cidr,
            "not a network",
            "write e.g. 10.88.0.0/16",
        )]
    })?;
    let entries = entries(p);
    let given: Vec<Option<IpNet>> = entries.iter().map(|e| e.pod_cidr.parse().ok()).collect();
    let mut taken: Vec<IpNet> = given.iter().flatten().copied().collect();
    let mut slots = shares(&cluster);
    let mut out = Vec::new();
    for (i, (e, given)) in entries.into_iter().zip(given).enumerate() {
        let pod_cidr = match given {
            Some(net) => net,
            None => {
                let free = slots.find(|s| !taken.iter().any(|t| overlaps(t, s)));
                let Some(net) = free else {
                    return Err(vec![FieldError::new(
                        format!("nodes[{i}].podCIDR"),
                        "\"\"",
                        format!(
                            "network.podCIDR {cluster} has no free /{} left for this node",
                            share_prefix(&cluster)
                        ),
                        "give the pod network more room (e.g. network.podCIDR=10.88.0.0/16), or fewer nodes",
                    )]);
                };
                taken.push(net);
                net
            }
        };
        out.push(ResolvedNode {
            name: e.name,
            role: e.role.unwrap_or(Role::Worker),
            labels: e.labels,
            taints: e
                .taints
                .unwrap_or_default()
                .iter()
                .filter_map(|t| Taint::parse(t))
                .collect(),
            pod_cidr,
        });
    }
    Ok(out)
}

/// `nodes:` with each node's pod network written in: what the state dir's `profile.yaml` records,
/// so that a later `gen` keeps them (`keep_recorded`).
pub fn recorded(nodes: &[ResolvedNode]) -> Vec<NodeEntry> {
    nodes
        .iter()
        .map(|n| NodeEntry {
            name: n.name.clone(),
            role: Some(n.role),
            labels: n.labels.clone(),
            taints: Some(n.taints.iter().map(Taint::to_string).collect()),
            pod_cidr: n.pod_cidr.to_string(),
        })
        .collect()
}

/// `entries` with the pod network `recorded` has for a node of the same name, where none is
/// written: a node keeps its range when others come or go.
pub fn keep_recorded_pod_cidrs(entries: &mut [NodeEntry], recorded: &[NodeEntry]) {
    for e in entries.iter_mut().filter(|e| e.pod_cidr.is_empty()) {
        if let Some(r) = recorded.iter().find(|r| r.name == e.name) {
            e.pod_cidr = r.pod_cidr.clone();
        }
    }
}

fn share_prefix(cluster: &IpNet) -> u8 {
    let node = match cluster {
        IpNet::V4(_) => NODE_PREFIX_V4,
        IpNet::V6(_) => NODE_PREFIX_V6,
    };
    node.max(cluster.prefix_len())
}

/// The node-sized shares of the pod network, in order.
fn shares(cluster: &IpNet) -> Box<dyn Iterator<Item = IpNet>> {
    let prefix = share_prefix(cluster);
    match cluster {
        IpNet::V4(n) => Box::new(n.subnets(prefix).into_iter().flatten().map(IpNet::V4)),
        IpNet::V6(n) => Box::new(n.subnets(prefix).into_iter().flatten().map(IpNet::V6)),
    }
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// Every wrong value of `nodes:` (empty: they resolve).
pub fn errors(p: &Profile) -> Vec<FieldError> {
    let count = p.nodes.count();
    // Out of range, the nodes are not checked one by one: one error says it all.
    if count == 0 || count > MAX_NODES {
        return vec![FieldError::new(
            "nodes",
            count,
            format!("an environment has 1 to {MAX_NODES} nodes"),
            "write a number from 1 to 64, or a list of nodes",
        )];
    }
    let written: Vec<NodeEntry> = match &p.nodes {
        super::profile::Nodes::List(l) => l.clone(),
        super::profile::Nodes::Count(n) => vec![NodeEntry::default(); *n as usize],
    };
    let mut errs: Vec<FieldError> = first_name_twice(p, &written).into_iter().collect();
    let cluster: Option<IpNet> = p.network.pod_cidr.parse().ok();
    for (i, e) in written.iter().enumerate() {
        errs.extend(entry_name_error(i, e));
        errs.extend(entry_label_errors(i, e));
        errs.extend(entry_taint_errors(i, e));
        errs.extend(entry_pod_cidr_error(i, e, cluster));
    }
    // Names and roles as resolved (a count's nodes, the hosts'), not as written.
    let entries = entries(p);
    errs.extend(duplicate_name_errors(&entries));
    errs.extend(second_control_plane(p, &entries));
    errs.extend(overlapping_pod_cidr_errors(&written));
    if count > 1 && !p.component("kubelet").enabled {
        errs.push(FieldError::new(
            "nodes",
            count,
            "several nodes, but components.kubelet is not enabled (a node is a kubelet)",
            "enable the node components (extend the dev profile), or write nodes: 1",
        ));
    }
    errs
}

/// `nodes[0].name` and `node.name` both name the first node: they must agree.
fn first_name_twice(p: &Profile, written: &[NodeEntry]) -> Option<FieldError> {
    let first = written.first()?;
    let differs = !first.name.is_empty() && !p.node.name.is_empty() && first.name != p.node.name;
    differs.then(|| {
        FieldError::new(
            "nodes[0].name",
            format!("{:?}", first.name),
            format!(
                "differs from node.name {:?}, which names the first node too",
                p.node.name
            ),
            "name the first node in one place: drop node.name, or nodes[0].name",
        )
    })
}

/// `nodes[i].name`, when written: a further node's name is in its units' and network
/// namespace's names (at most 63).
fn entry_name_error(i: usize, e: &NodeEntry) -> Option<FieldError> {
    let wrong = !e.name.is_empty() && (!super::names::is_subdomain(&e.name) || e.name.len() > 63);
    wrong.then(|| {
        FieldError::new(
            format!("nodes[{i}].name"),
            format!("{:?}", e.name),
            "not a node name of at most 63 characters (an RFC 1123 subdomain)",
            "use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, e.g. worker-1",
        )
    })
}

/// `nodes[i].labels`: Kubernetes labels, but not the role label, which `role` sets.
fn entry_label_errors(i: usize, e: &NodeEntry) -> Vec<FieldError> {
    let field = format!("nodes[{i}].labels");
    let mut errs = Vec::new();
    for (key, value) in &e.labels {
        if !is_label_key(key) || !is_label_value(value) {
            errs.push(FieldError::new(
                field.clone(),
                format!("{key:?}: {value:?}"),
                "not a Kubernetes label (a key of [prefix/]name, a value of at most 63 characters)",
                "write e.g. topology.kubernetes.io/zone: zone-a",
            ));
        } else if key.starts_with("node-role.kubernetes.io/") {
            errs.push(FieldError::new(
                field.clone(),
                format!("{key:?}"),
                "a node role label, which `role` sets",
                format!("set nodes[{i}].role instead (control-plane or worker)"),
            ));
        }
    }
    errs
}

/// `nodes[i].taints`: each as `kubectl taint` writes it.
fn entry_taint_errors(i: usize, e: &NodeEntry) -> Vec<FieldError> {
    e.taints
        .iter()
        .flatten()
        .filter(|t| Taint::parse(t).is_none())
        .map(|t| {
            FieldError::new(
                format!("nodes[{i}].taints"),
                format!("{t:?}"),
                "not a taint as `kubectl taint` writes it",
                "write key[=value]:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute, e.g. dedicated=gpu:NoSchedule",
            )
        })
        .collect()
}

/// `nodes[i].podCIDR`, when written: a network inside the cluster's (`cluster`, `None` when
/// `network.podCIDR` is wrong itself).
fn entry_pod_cidr_error(i: usize, e: &NodeEntry, cluster: Option<IpNet>) -> Option<FieldError> {
    if e.pod_cidr.is_empty() {
        return None;
    }
    let field = format!("nodes[{i}].podCIDR");
    match (e.pod_cidr.parse::<IpNet>(), cluster) {
        (Ok(net), Some(c)) if c.contains(&net) && net == net.trunc() => None,
        (Ok(_), Some(c)) => Some(FieldError::new(
            field,
            &e.pod_cidr,
            format!("not a network inside network.podCIDR {c}"),
            format!("use a part of {c}, e.g. its first /24, or \"\" to let kubeunit pick one"),
        )),
        (Err(_), _) => Some(FieldError::new(
            field,
            &e.pod_cidr,
            "not a network",
            "write e.g. 10.88.1.0/24, or \"\" to let kubeunit pick one",
        )),
        (Ok(_), None) => None, // network.podCIDR's own error says it
    }
}

/// Two nodes of one name: the second (and any after) is named.
fn duplicate_name_errors(entries: &[NodeEntry]) -> Vec<FieldError> {
    let mut seen = BTreeSet::new();
    let mut errs = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if !seen.insert(e.name.as_str()) {
            errs.push(FieldError::new(
                format!("nodes[{i}].name"),
                format!("{:?}", e.name),
                "another node has this name",
                "give every node a name of its own",
            ));
        }
    }
    errs
}

/// On one host the control plane runs once: a second control-plane node is named. Across
/// hosts, each control-plane host has one (`hosts::node_entries`).
fn second_control_plane(p: &Profile, entries: &[NodeEntry]) -> Option<FieldError> {
    if !p.hosts.is_empty() {
        return None;
    }
    let second = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.role == Some(Role::ControlPlane))
        .map(|(i, _)| i)
        .nth(1)?;
    Some(FieldError::new(
        format!("nodes[{second}].role"),
        "control-plane",
        "a second control-plane node: the control plane runs once on this host",
        "make it a worker (role: worker)",
    ))
}

/// Written pod networks that overlap one written before.
fn overlapping_pod_cidr_errors(written: &[NodeEntry]) -> Vec<FieldError> {
    let given: Vec<(usize, IpNet)> = written
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((i, e.pod_cidr.parse::<IpNet>().ok()?)))
        .collect();
    let mut errs = Vec::new();
    for (a, (i, x)) in given.iter().enumerate() {
        if let Some((j, _)) = given[..a].iter().find(|(_, y)| overlaps(x, y)) {
            errs.push(FieldError::new(
                format!("nodes[{i}].podCIDR"),
                x,
                format!("overlaps nodes[{j}].podCIDR"),
                "give each node a range of its own, or \"\" to let kubeunit pick one",
            ));
        }
    }
    errs
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of at most 63 characters of
/// letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    prefix.is_none_or(super::names::is_subdomain) && is_label_name(name)
}

fn is_label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_label_name(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn profile(sets: &[&str]) -> Profile {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load::layered("dev", &sets)
            .unwrap_or_else(|e| panic!("{e}"))
            .1
    }

    fn fields(sets: &[&str]) -> Vec<String> {
        errors(&profile(sets))
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_count_is_a_control_plane_and_workers_each_with_a_24() {
        let nodes = resolve(&profile(&["nodes=3"])).unwrap();
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["dev", "worker-1", "worker-2"]);
        assert_eq!(nodes[0].role, Role::ControlPlane);
        assert_eq!(nodes[1].role, Role::Worker);
        let cidrs: Vec<String> = nodes.iter().map(|n| n.pod_cidr.to_string()).collect();
        assert_eq!(cidrs, ["10.88.0.0/24", "10.88.1.0/24", "10.88.2.0/24"]);
        // With workers the control plane is tainted, as kubeadm and kind do; alone it is not.
        assert_eq!(
            nodes[0]
                .taints
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>(),
            ["node-role.kubernetes.io/control-plane:NoSchedule"]
        );
        assert!(nodes[1].taints.is_empty());
        let one = resolve(&profile(&[])).unwrap();
        assert_eq!(one.len(), 1);
        assert!(one[0].taints.is_empty());
        assert_eq!(one[0].pod_cidr.to_string(), "10.88.0.0/24");
        // A pod network smaller than a /24 is the one node's.
        let small = resolve(&profile(&["network.podCIDR=10.88.0.0/26"])).unwrap();
        assert_eq!(small[0].pod_cidr.to_string(), "10.88.0.0/26");
    }

    #[test]
    fn a_list_names_roles_labels_taints_and_ranges() {
        let p = profile(&[
            "nodes=[{name: cp}, {role: worker, labels: {zone: a}, taints: []}, {name: gpu, podCIDR: 10.88.0.0/24, taints: ['dedicated=gpu:NoSchedule']}]",
        ]);
        let nodes = resolve(&p).unwrap();
        assert_eq!(nodes[0].name, "cp");
        assert_eq!(nodes[1].name, "worker-1");
        assert_eq!(nodes[1].labels.get("zone").map(String::as_str), Some("a"));
        assert_eq!(nodes[2].taints[0].to_string(), "dedicated=gpu:NoSchedule");
        // A given range is taken first; the others take the free ones in order.
        let cidrs: Vec<String> = nodes.iter().map(|n| n.pod_cidr.to_string()).collect();
        assert_eq!(cidrs, ["10.88.1.0/24", "10.88.2.0/24", "10.88.0.0/24"]);
        // Recorded, they stay when a node goes.
        let mut entries = recorded(&nodes);
        entries.remove(1);
        let mut again = profile(&["nodes=[{name: cp}, {name: gpu}]"]);
        if let crate::spec::profile::Nodes::List(l) = &mut again.nodes {
            keep_recorded_pod_cidrs(l, &entries);
        }
        let kept = resolve(&again).unwrap();
        assert_eq!(kept[0].pod_cidr.to_string(), "10.88.1.0/24");
        assert_eq!(kept[1].pod_cidr.to_string(), "10.88.0.0/24");
    }

    #[test]
    fn wrong_nodes_are_named_by_field() {
        assert_eq!(fields(&["nodes=0"]), ["nodes"]);
        assert_eq!(fields(&["nodes=65"]), ["nodes"]);
        assert_eq!(fields(&["nodes=[]"]), ["nodes"]);
        assert_eq!(fields(&["nodes=[{}, {name: Bad_Name}]"]), ["nodes[1].name"]);
        assert_eq!(
            fields(&["nodes=[{}, {name: a}, {name: a}]"]),
            ["nodes[2].name"]
        );
        assert_eq!(fields(&["nodes=[{}, {name: dev}]"]), ["nodes[1].name"]);
        assert_eq!(
            fields(&["nodes=[{}, {role: control-plane}]"]),
            ["nodes[1].role"]
        );
        assert_eq!(
            fields(&["nodes=[{labels: {'bad key': x}}]"]),
            ["nodes[0].labels"]
        );
        assert_eq!(
            fields(&["nodes=[{labels: {node-role.kubernetes.io/worker: ''}}]"]),
            ["nodes[0].labels"]
        );
        assert_eq!(
            fields(&["nodes=[{taints: [x:Sometimes]}]"]),
            ["nodes[0].taints"]
        );
        assert_eq!(
            fields(&["nodes=[{podCIDR: 10.99.0.0/24}]"]),
            ["nodes[0].podCIDR"]
        );
        assert_eq!(
            fields(&["nodes=[{podCIDR: 10.88.0.1/24}]"]),
            ["nodes[0].podCIDR"]
        );
        assert_eq!(
            fields(&["nodes=[{podCIDR: 10.88.0.0/24}, {podCIDR: 10.88.0.0/25}]"]),
            ["nodes[1].podCIDR"]
        );
        assert_eq!(
            fields(&["node.name=a", "nodes=[{name: b}]"]),
            ["nodes[0].name"]
        );
        let cp: Vec<String> = load::layered("control-plane", &["nodes=2".to_string()])
            .map(|(_, p)| errors(&p).into_iter().map(|e| e.field).collect())
            .unwrap();
        assert_eq!(cp, ["nodes"]);
        // No room: named with the fix.
        let e = resolve(&profile(&["network.podCIDR=10.88.0.0/24", "nodes=2"])).unwrap_err();
        assert_eq!(e[0].field, "nodes[1].podCIDR");
        assert!(e[0].fix.contains("network.podCIDR"), "{}", e[0].fix);
        for good in [&["nodes=1"][..], &["nodes=[{}, {}, {}]"], &["nodes=64"]] {
            assert_eq!(fields(good), Vec::<String>::new(), "{good:?}");
        }
    }
}
