//! `hosts:` resolved: an environment across hosts (VMs), each with a name, an address and roles,
//! rendered into one state dir per host. Every host runs one node, named after it (a control-plane
//! host's is tainted as kubeadm taints its nodes); `etcd` and `control-plane` go together (etcd
//! stacked on the control-plane hosts, kubeadm's default HA topology). The plan is each host's view
//! (`Profile::host`); `nodes::entries` makes the nodes of the hosts.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::profile::{HostEntry, HostRole, NodeEntry, Nodes, PortSpec, Profile, Role};
use crate::error::FieldError;

/// At most this many hosts (each runs a node: `nodes::MAX_NODES`, which `nodes` imports this
/// module to enforce, so it is not named here).
pub const MAX_HOSTS: usize = 64;

/// The roles of the host a state dir is (`Profile::host`); `None` when the profile has no hosts
/// or names no host (the whole cluster: every component of the environment).
pub fn roles_here(p: &Profile) -> Option<&[HostRole]> {
    if p.host.is_empty() {
        return None;
    }
    p.hosts
        .iter()
        .find(|h| h.name == p.host)
        .map(|h| h.roles.as_slice())
}

/// Whether the host a state dir is has `role`: always, on one host.
pub fn here_has(p: &Profile, role: HostRole) -> bool {
    roles_here(p).is_none_or(|roles| roles.contains(&role))
}

/// The nodes the hosts run, in host order: a node per host, named after it, a control-plane node
/// on a control-plane host. `None` without hosts.
pub fn node_entries(p: &Profile) -> Option<Vec<NodeEntry>> {
    if p.hosts.is_empty() {
        return None;
    }
    let written: Vec<NodeEntry> = match &p.nodes {
        Nodes::List(l) => l.clone(),
        Nodes::Count(_) => vec![],
    };
    Some(
        p.hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let mut e = written.get(i).cloned().unwrap_or_default();
                e.name = h.name.clone();
                e.role = Some(if h.roles.contains(&HostRole::ControlPlane) {
                    Role::ControlPlane
                } else {
                    Role::Worker
                });
                e
            })
            .collect(),
    )
}

/// Every wrong value of `hosts:` and `host:`, and of what an environment across hosts cannot have.
pub fn errors(p: &Profile) -> Vec<FieldError> {
    if p.hosts.is_empty() {
        return host_without_hosts(p).into_iter().collect();
    }
    // Past the limit the hosts are not checked one by one: one error says it all.
    if p.hosts.len() > MAX_HOSTS {
        return vec![FieldError::new(
            "hosts",
            p.hosts.len(),
            format!("an environment has at most {MAX_HOSTS} hosts"),
            "list fewer hosts",
        )];
    }
    let mut errs = each_host_errors(p);
    errs.extend(control_plane_host_missing(p));
    errs.extend(host_not_listed(p));
    errs.extend(nodes_errors(p));
    errs.extend(across_hosts_errors(p));
    errs
}

/// `host:` without `hosts:` names nothing.
fn host_without_hosts(p: &Profile) -> Option<FieldError> {
    (!p.host.is_empty()).then(|| {
        FieldError::new(
            "host",
            format!("{:?}", p.host),
            "names a host, but the profile has no hosts",
            "drop host:, or list the hosts under hosts:",
        )
    })
}

/// Every host's own errors, host by host (name, address, roles), in host order; then the
/// addresses written as such, checked together (`address_errors`). Names are checked against the
/// hosts before, so the second of two alike is the one named.
fn each_host_errors(p: &Profile) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, h) in p.hosts.iter().enumerate() {
        errs.extend(host_name_error(i, h, &mut names));
        errs.extend(host_address_form_errors(i, h));
        errs.extend(host_roles_errors(i, h));
        errs.extend(host_join_errors(p, i, h));
    }
    errs
}

/// `hosts[i].join`: a worker alone joins later (a control-plane host brings the cluster's keys,
/// which no token gives), listed after every host given its certificates (whose pod networks are
/// taken in order: a host listed before one of them would move its share), with a token file.
fn host_join_errors(p: &Profile, i: usize, h: &HostEntry) -> Vec<FieldError> {
    let Some(join) = &h.join else {
        return vec![];
    };
    let mut errs = Vec::new();
    if h.roles != [HostRole::Worker] {
        errs.push(FieldError::new(
            format!("hosts[{i}].join"),
            format!(
                "{:?}",
                h.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>()
            ),
            "only a worker joins later by token: a control-plane host shares the cluster's keys, which a token does not give",
            "give this host roles: [worker], or drop join: and render every host again with `gen --out`",
        ));
    }
    if let Some(later) = p.hosts[i..].iter().find(|o| o.join.is_none()) {
        errs.push(FieldError::new(
            format!("hosts[{i}].join"),
            format!("{:?}", h.name),
            format!(
                "listed before host {:?}, which does not join later: the pod networks are handed out in host order",
                later.name
            ),
            "list the hosts that join later after all the others",
        ));
    }
    if let Some(why) = super::join::token_file_problem(&join.token_file) {
        errs.push(FieldError::new(
            format!("hosts[{i}].join.tokenFile"),
            join.token_file.display(),
            why,
            "give the absolute path of a file holding a token of `kubeunit token create` (on a control-plane host)",
        ));
    }
    if let Some(why) = super::registries::ca_problem(&join.ca_file) {
        errs.push(FieldError::new(
            format!("hosts[{i}].join.caFile"),
            join.ca_file.display(),
            why,
            "give the absolute path of a copy of a control-plane host's pki/ca.crt (its state dir's)",
        ));
    }
    errs.extend(address_errors(p, &written_addresses(p)));
    errs
}

/// `hosts[i].name`: a DNS label no host before has. `names` holds the names seen so far.
fn host_name_error<'h>(
    i: usize,
    h: &'h HostEntry,
    names: &mut BTreeSet<&'h str>,
) -> Option<FieldError> {
    let field = format!("hosts[{i}].name");
    // Its node's name, its units' instance elsewhere, and an interface's hash: a DNS label.
    if !super::names::is_subdomain(&h.name) || h.name.len() > 63 || h.name.contains('.') {
        Some(FieldError::new(
            field,
            format!("{:?}", h.name),
            "not a host name (a DNS label of at most 63 characters)",
            "use lowercase letters, digits and '-', starting and ending with a letter or digit, e.g. cp-1",
        ))
    } else if !names.insert(h.name.as_str()) {
        Some(FieldError::new(
            field,
            format!("{:?}", h.name),
            "another host has this name",
            "give every host its own name",
        ))
    } else {
        None
    }
}

/// Whether `s` is a DNS name a host's address may be: lowercase labels of letters, digits and
/// '-' (RFC 1123), at most 253 characters, no final dot, and a last label that is not all digits
/// (so that a mistyped address, 192.168.60.256, is no name).
pub fn is_address_name(s: &str) -> bool {
    super::names::is_subdomain(s)
        && s.rsplit('.')
            .next()
            .is_some_and(|tld| !tld.bytes().all(|b| b.is_ascii_digit()))
}

/// Each host's address as written: an IPv4 address's own, `None` for a DNS name (resolved at
/// the edge: `spec::resolve`).
pub fn written_addresses(p: &Profile) -> Vec<Option<Ipv4Addr>> {
    p.hosts.iter().map(|h| h.address.parse().ok()).collect()
}

/// `hosts[i].address`: an IPv4 address or a DNS name; `hosts[i].resolvedAddress`: what a name
/// resolved to, an IPv4 address, and only of a name.
fn host_address_form_errors(i: usize, h: &HostEntry) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = h.dns_name();
    if name.is_some_and(|n| !is_address_name(n)) {
        errs.push(FieldError::new(
            format!("hosts[{i}].address"),
            format!("{:?}", h.address),
            "neither an IPv4 address nor a DNS name (lowercase letters, digits and '-' in labels between dots, at most 253 characters)",
            "write the host's address, e.g. 192.168.60.21, or a name gen resolves to it, e.g. cp-1.example.com",
        ));
    }
    let field = format!("hosts[{i}].resolvedAddress");
    if h.resolved_address.is_empty() {
        return errs;
    }
    if name.is_none() {
        errs.push(FieldError::new(
            field,
            format!("{:?}", h.resolved_address),
            "the address is written as such: only a DNS name's is resolved",
            "drop resolvedAddress",
        ));
    } else if h.resolved_address.parse::<Ipv4Addr>().is_err() {
        errs.push(FieldError::new(
            field,
            format!("{:?}", h.resolved_address),
            "not an IPv4 address",
            "write the address the name resolves to, e.g. 192.168.60.21, or drop resolvedAddress (gen looks the name up)",
        ));
    }
    errs
}

/// The hosts' addresses where known (`addresses`, in host order; `None`: a DNS name not resolved
/// yet), checked together: each one other hosts can reach, no two alike (the second is named),
/// none inside the cluster's own networks. Validation checks the addresses written as such; the
/// plan checks them all again once the names are resolved, whatever resolved them.
pub fn address_errors(p: &Profile, addresses: &[Option<Ipv4Addr>]) -> Vec<FieldError> {
    let cluster_nets: Vec<(&str, Option<ipnet::IpNet>)> = vec![
        ("network.podCIDR", p.network.pod_cidr.parse().ok()),
        ("network.serviceCIDR", p.network.service_cidr.parse().ok()),
    ];
    // Address -> the first host that has it.
    let mut seen: BTreeMap<Ipv4Addr, &HostEntry> = BTreeMap::new();
    let mut errs = Vec::new();
    for (i, (h, a)) in p.hosts.iter().zip(addresses).enumerate() {
        let Some(a) = *a else { continue };
        let field = format!("hosts[{i}].address");
        // A name's fix is where it resolves, or the address written instead.
        let (value, fix_name) = match h.dns_name() {
            None => (h.address.clone(), String::new()),
            Some(name) => (
                format!("{name:?} (resolved to {a})"),
                format!(" (make {name} resolve there, or write the address instead)"),
            ),
        };
        if a.is_loopback() || a.is_unspecified() || a.is_multicast() || a.is_broadcast() {
            errs.push(FieldError::new(
                field,
                value,
                "not an address other hosts can reach",
                format!(
                    "give the host's own IPv4 address on the network the hosts share{fix_name}"
                ),
            ));
            continue;
        }
        if let Some(first) = seen.get(&a) {
            let whose = match first.dns_name() {
                None => String::new(),
                Some(name) => format!(", whose {name:?} resolved to it"),
            };
            errs.push(FieldError::new(
                field.clone(),
                &value,
                format!("another host has this address: {:?}{whose}", first.name),
                format!("give every host its own address{fix_name}"),
            ));
        } else {
            seen.insert(a, h);
        }
        for (net_field, net) in &cluster_nets {
            if net.is_some_and(|n| n.contains(&std::net::IpAddr::V4(a))) {
                errs.push(FieldError::new(
                    field.clone(),
                    &value,
                    format!("inside {net_field}, which the cluster routes itself"),
                    format!("give the host an address outside {net_field}{fix_name}, or move {net_field}"),
                ));
            }
        }
    }
    errs
}

/// `hosts[i].roles`: at least one, each once, etcd and control-plane together.
fn host_roles_errors(i: usize, h: &HostEntry) -> Vec<FieldError> {
    let field = format!("hosts[{i}].roles");
    let listed = || {
        format!(
            "{:?}",
            h.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>()
        )
    };
    let mut errs = Vec::new();
    if h.roles.is_empty() {
        errs.push(FieldError::new(
            field.clone(),
            "[]",
            "a host without a role",
            "give it roles: [etcd, control-plane] or [worker]",
        ));
    }
    let distinct: BTreeSet<&str> = h.roles.iter().map(|r| r.as_str()).collect();
    if distinct.len() != h.roles.len() {
        errs.push(FieldError::new(
            field.clone(),
            listed(),
            "a role is listed twice",
            "list each role once",
        ));
    }
    let etcd = h.roles.contains(&HostRole::Etcd);
    let cp = h.roles.contains(&HostRole::ControlPlane);
    if etcd != cp {
        errs.push(FieldError::new(
            field,
            listed(),
            "etcd and control-plane go together: etcd runs stacked on the control-plane hosts (kubeadm's default HA topology); a host of one alone is not taken yet",
            "give it both etcd and control-plane, or neither",
        ));
    }
    errs
}

/// Without a control-plane host there is no cluster to join.
fn control_plane_host_missing(p: &Profile) -> Option<FieldError> {
    let any = p
        .hosts
        .iter()
        .any(|h| h.roles.contains(&HostRole::ControlPlane));
    (!any).then(|| {
        FieldError::new(
            "hosts",
            p.hosts.len(),
            "no host has the control-plane role",
            "give one host (or three, for a control plane that survives the loss of one) roles: [etcd, control-plane]",
        )
    })
}

/// `host:` names the host a state dir is for: one of `hosts:`.
fn host_not_listed(p: &Profile) -> Option<FieldError> {
    if p.host.is_empty() || p.hosts.iter().any(|h| h.name == p.host) {
        return None;
    }
    Some(FieldError::new(
        "host",
        format!("{:?}", p.host),
        "not the name of one of hosts",
        format!("use one of: {}", names(&p.hosts).join(", ")),
    ))
}

/// The nodes are the hosts': a count says nothing, a list (gen records one) names them in order.
fn nodes_errors(p: &Profile) -> Option<FieldError> {
    match &p.nodes {
        Nodes::Count(1) => None,
        Nodes::Count(n) => Some(FieldError::new(
            "nodes",
            n,
            "with hosts, every host runs one node, named after it",
            "drop nodes: (or list one entry per host, in host order, for labels, taints and podCIDR)",
        )),
        Nodes::List(l) => {
            let named: Vec<&str> = l.iter().map(|e| e.name.as_str()).collect();
            let hosts = names(&p.hosts);
            let fits = named.len() == hosts.len()
                && named.iter().zip(&hosts).all(|(n, h)| n.is_empty() || n == h);
            (!fits).then(|| {
                FieldError::new(
                    "nodes",
                    format!("{named:?}"),
                    format!("with hosts, the nodes are the hosts' ({hosts:?}), one each, in order"),
                    "drop nodes:, or list one entry per host in host order",
                )
            })
        }
    }
}

/// What an environment across hosts cannot have: ports picked on one host, a rootless node, one
/// node name for all, an etcd of its own elsewhere.
fn across_hosts_errors(p: &Profile) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if p.ports == PortSpec::Auto {
        errs.push(FieldError::new(
            "ports",
            "auto",
            "`auto` picks ports free on the host that runs `gen`; the hosts must agree on them",
            "name the ports (profiles/base.yaml has the defaults)",
        ));
    }
    if p.rootless {
        errs.push(FieldError::new(
            "rootless",
            true,
            "every host runs a node, which needs root",
            "drop rootless",
        ));
    }
    if !p.node.name.is_empty() {
        errs.push(FieldError::new(
            "node.name",
            format!("{:?}", p.node.name),
            "with hosts, each host's node is named after the host",
            "drop node.name",
        ));
    }
    if p.datastore.external() {
        errs.push(FieldError::new(
            "datastore.endpoints",
            p.datastore.endpoints.join(","),
            "an environment across hosts runs its own etcd cluster on its control-plane hosts",
            "drop datastore",
        ));
    }
    errs
}

/// The hosts' names, for messages.
pub fn names(hosts: &[HostEntry]) -> Vec<&str> {
    hosts.iter().map(|h| h.name.as_str()).collect()
}

/// Which hosts of an environment across hosts a component runs on, or a certificate is written
/// to. On one host (or in the whole cluster's view) every one is here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnHosts {
    Every,
    With(HostRole),
    Without(HostRole),
    /// The hosts given their certificates by `gen`: all but those that join later by token
    /// (`spec::join`), whose kubelet asks for its own.
    PreIssued,
}

impl OnHosts {
    /// Whether the host the profile is the view of is one of these.
    pub fn here(self, p: &Profile) -> bool {
        let Some(roles) = roles_here(p) else {
            return true;
        };
        match self {
            OnHosts::Every => true,
            OnHosts::PreIssued => !super::join::joins_here(p),
            OnHosts::With(r) => roles.contains(&r),
            OnHosts::Without(r) => !roles.contains(&r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;
    use crate::spec::resolve::ha_hosts_at;

    /// The errors of ha with host cp-1 at `address`, recording `resolved` for it.
    fn errors_with_cp1(address: &str, resolved: &str) -> Vec<String> {
        let (_, mut p) = load::layered("ha", &[]).unwrap();
        p.hosts[0].address = address.into();
        p.hosts[0].resolved_address = resolved.into();
        errors(&p).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_hosts_address_is_an_ipv4_address_or_a_dns_name() {
        for ok in ["cp-1.test", "cp-1", "a.b-c.example.com", "x1.example"] {
            let errs = errors_with_cp1(ok, "");
            assert!(errs.is_empty(), "{ok}: {errs:?}");
        }
        let huge = format!("{}.test", "a".repeat(100_000));
        let long_label = format!("{}.test", "a".repeat(64));
        for bad in [
            "cp-1..test",
            "cp-1\n.test",
            "cp-1.test\n",
            huge.as_str(),
            long_label.as_str(),
            "192.168.60.256",
            "10.1.2",
            "CP-1.test",
            "cp-1.test.",
            ".cp-1.test",
            "-cp.test",
            "cp_1.test",
            "cp-1.test:6443",
            "fd00::1",
            "",
        ] {
            let errs = errors_with_cp1(bad, "");
            assert!(
                errs.iter().any(|e| e.contains("hosts[0].address")
                    && e.contains("neither an IPv4 address nor a DNS name")
                    && e.contains("fix:")),
                "{:.80?}: {errs:.300?}",
                bad
            );
        }
        // What a name resolved to, as gen records it: an IPv4 address, of a name only.
        assert!(errors_with_cp1("cp-1.test", "198.19.254.11").is_empty());
        for (address, resolved, says) in [
            (
                "198.19.254.11",
                "198.19.254.11",
                "only a DNS name's is resolved",
            ),
            ("cp-1.test", "cp-1.example", "not an IPv4 address"),
            ("cp-1.test", "198.19.254.11\n", "not an IPv4 address"),
        ] {
            let errs = errors_with_cp1(address, resolved);
            assert!(
                errs.iter().any(|e| e.contains("hosts[0].resolvedAddress")
                    && e.contains(says)
                    && e.contains("fix:")),
                "{address} {resolved:?}: {errs:?}"
            );
        }
        // The checks of an address written as such wait for a name's resolution (the plan's).
        let (_, p) = load::layered(
            "ha",
            &[ha_hosts_at([
                "cp-1.test",
                "cp-1.test",
                "198.19.254.13",
                "198.19.254.21",
                "198.19.254.22",
            ])],
        )
        .unwrap();
        assert!(errors(&p).is_empty(), "{:?}", errors(&p));
    }
}
