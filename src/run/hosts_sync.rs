//! `kubeunit hosts sync`: what an environment across hosts does for the hosts that joined later
//! (`spec::join`), which no other host's state dir names. Run by the `hosts-sync` timer on every
//! host, every 10 s, as a oneshot:
//!
//! - **Routes.** Each joined node published on its own Node (the kubelet's start hook, with the
//!   node's own credentials) its host's address, pod network and node link. Checked here, each
//!   becomes a remote of this host's node-network (`node-network.sh add`), with exactly the effects
//!   of the remotes `gen` rendered; a node that is gone, or whose claim no longer holds, is
//!   removed (`remove`). Running it again changes nothing.
//! - **Serving certificates** (control-plane hosts). A joined kubelet asks for its serving
//!   certificate (`serverTLSBootstrap`), which kube-controller-manager never approves by itself:
//!   kube-apiserver verifies the kubelets' serving certificates with the cluster CA
//!   (`--kubelet-certificate-authority`), so approving one lets its holder be taken for that node
//!   at those addresses. As kubelet-csr-approver does, a CSR is approved only when its requestor is
//!   `system:node:NAME` of a Node whose claim holds, its subject is that node's, and its names are
//!   exactly that node's: its name and its Node's status addresses (inside its link).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use base64::Engine;
use ipnet::Ipv4Net;
use serde::Serialize;
use serde_json::{json, Value};
use x509_parser::prelude::FromDer;

use crate::error::Error;
use crate::spec::join::{ANNOTATION_ADDRESS, ANNOTATION_LINK_NET, ANNOTATION_POD_CIDR};
use crate::spec::profile::HostRole;
use crate::spec::Plan;

/// A joined node's claim, as its Node's annotations say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Remote {
    pub address: Ipv4Addr,
    pub pod_cidr: Ipv4Net,
    pub link_net: Ipv4Net,
}

/// A Node with a claim: its name, and the claim (or why it does not parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub node: String,
    pub remote: Result<Remote, String>,
}

/// What the network of this host is checked against: the hosts `gen` rendered (their addresses,
/// pod networks and links), the cluster's pod network, the range of the nodes' links, and the
/// network this host's address is on (the hosts share it).
pub struct Known {
    pub hosts: Vec<(String, Remote)>,
    pub pod_cidr: Option<Ipv4Net>,
    pub link_ranges: Vec<Ipv4Net>,
    pub shared: Option<Ipv4Net>,
}

/// The claim of a Node (`None`: it has none, as a host `gen` rendered).
pub fn claim_of(node: &Value) -> Option<Claim> {
    let name = node["metadata"]["name"].as_str()?.to_string();
    let a = &node["metadata"]["annotations"];
    let get = |k: &str| a[k].as_str();
    if [ANNOTATION_ADDRESS, ANNOTATION_POD_CIDR, ANNOTATION_LINK_NET]
        .iter()
        .all(|k| get(k).is_none())
    {
        return None;
    }
    let parse = || -> Result<Remote, String> {
        let field = |k: &str| get(k).ok_or_else(|| format!("no annotation {k}"));
        let bad = |k: &str, v: &str| format!("annotation {k}={v:?} does not parse");
        let (address, pods, links) = (
            field(ANNOTATION_ADDRESS)?,
            field(ANNOTATION_POD_CIDR)?,
            field(ANNOTATION_LINK_NET)?,
        );
        Ok(Remote {
            address: address
                .parse()
                .map_err(|_| bad(ANNOTATION_ADDRESS, address))?,
            pod_cidr: pods.parse().map_err(|_| bad(ANNOTATION_POD_CIDR, pods))?,
            link_net: links.parse().map_err(|_| bad(ANNOTATION_LINK_NET, links))?,
        })
    };
    Some(Claim {
        node: name,
        remote: parse(),
    })
}

/// The claims that hold, in order, and why each other one does not: a pod network inside the
/// cluster's that overlaps no host's nor an earlier claim's; a node link inside the nodes' range
/// that overlaps none either; an address on the hosts' network that is no host's, nor an earlier
/// claim's; and no host of `gen`'s by name.
pub fn check(known: &Known, claims: &[Claim]) -> (Vec<(String, Remote)>, Vec<String>) {
    let mut ok: Vec<(String, Remote)> = Vec::new();
    let mut refused = Vec::new();
    for c in claims {
        let why = match &c.remote {
            Err(e) => Some(e.clone()),
            Ok(r) => problem(known, &ok, &c.node, r),
        };
        match (why, &c.remote) {
            (None, Ok(r)) => ok.push((c.node.clone(), r.clone())),
            (Some(why), _) => refused.push(format!("node {}: {why}", c.node)),
            (None, Err(_)) => {}
        }
    }
    (ok, refused)
}

fn problem(known: &Known, earlier: &[(String, Remote)], node: &str, r: &Remote) -> Option<String> {
    if known.hosts.iter().any(|(name, _)| name == node) {
        return Some("is a host of the profile's, which publishes no claim".into());
    }
    let overlaps = |a: &Ipv4Net, b: &Ipv4Net| a.contains(&b.network()) || b.contains(&a.network());
    let taken = known.hosts.iter().chain(earlier);
    if !known.pod_cidr.is_some_and(|c| c.contains(&r.pod_cidr)) {
        return Some(format!(
            "pod network {} is not inside network.podCIDR",
            r.pod_cidr
        ));
    }
    if !known.link_ranges.iter().any(|l| l.contains(&r.link_net)) {
        return Some(format!(
            "node link {} is not inside the nodes' link range",
            r.link_net
        ));
    }
    if !known.shared.is_some_and(|s| s.contains(&r.address)) {
        return Some(format!(
            "address {} is not on the hosts' network{}",
            r.address,
            known.shared.map(|s| format!(" {s}")).unwrap_or_default()
        ));
    }
    for (name, o) in taken {
        if o.address == r.address {
            return Some(format!("address {} is host {name}'s", r.address));
        }
        if overlaps(&o.pod_cidr, &r.pod_cidr) {
            return Some(format!(
                "pod network {} overlaps {name}'s {}",
                r.pod_cidr, o.pod_cidr
            ));
        }
        if overlaps(&o.link_net, &r.link_net) || o.link_net.contains(&r.address) {
            return Some(format!(
                "node link {} overlaps {name}'s {}",
                r.link_net, o.link_net
            ));
        }
    }
    None
}

/// What node-network must do to have exactly `wanted` as its added remotes: remove (by address)
/// those it has that are not wanted as they are, then add the wanted ones it lacks.
pub fn changes(current: &[Remote], wanted: &[Remote]) -> (Vec<Ipv4Addr>, Vec<Remote>) {
    let remove = current
        .iter()
        .filter(|c| !wanted.contains(c))
        .map(|c| c.address)
        .collect();
    let add = wanted
        .iter()
        .filter(|w| !current.contains(w))
        .cloned()
        .collect();
    (remove, add)
}

/// A pending kubelet-serving CSR, as far as approving it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingCsr {
    pub name: String,
    pub username: String,
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns: Vec<String>,
    pub ips: Vec<IpAddr>,
    pub usages: Vec<String>,
}

/// Why `csr` is not to be approved for the joined nodes `joined` (name, claim, and its Node's
/// status addresses); `None`: approve it.
pub fn csr_problem(csr: &ServingCsr, joined: &[(String, Remote, Vec<String>)]) -> Option<String> {
    let Some(node) = csr.username.strip_prefix("system:node:") else {
        return Some(format!("requested by {}, not a node", csr.username));
    };
    let Some((_, remote, addresses)) = joined.iter().find(|(n, _, _)| n == node) else {
        return Some(format!("node {node} is no joined node of this environment"));
    };
    if csr.common_name != csr.username || csr.organizations != ["system:nodes"] {
        return Some(format!(
            "subject CN={} O={:?} is not {}'s",
            csr.common_name, csr.organizations, csr.username
        ));
    }
    let allowed_usages = ["digital signature", "key encipherment", "server auth"];
    if !csr
        .usages
        .iter()
        .all(|u| allowed_usages.contains(&u.as_str()))
        || !csr.usages.iter().any(|u| u == "server auth")
    {
        return Some(format!("usages {:?} are not a server's", csr.usages));
    }
    if csr.dns.is_empty() && csr.ips.is_empty() {
        return Some("names nothing".into());
    }
    if let Some(d) = csr
        .dns
        .iter()
        .find(|d| *d != node && !addresses.contains(d))
    {
        return Some(format!("DNS name {d} is not node {node}'s"));
    }
    for ip in &csr.ips {
        let its = addresses.contains(&ip.to_string());
        let in_link = matches!(ip, IpAddr::V4(v4) if remote.link_net.contains(v4));
        if !its || !in_link {
            return Some(format!(
                "address {ip} is not one of node {node}'s (its Node's addresses inside its link {})",
                remote.link_net
            ));
        }
    }
    None
}

/// A CSR object's request, read (`None`: not a pending kubelet-serving CSR, or unreadable).
pub fn serving_csr(csr: &Value) -> Option<ServingCsr> {
    if csr["spec"]["signerName"] != "kubernetes.io/kubelet-serving" {
        return None;
    }
    let decided = csr["status"]["conditions"]
        .as_array()
        .is_some_and(|c| !c.is_empty());
    if decided {
        return None;
    }
    let pem = base64::engine::general_purpose::STANDARD
        .decode(csr["spec"]["request"].as_str()?)
        .ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let (_, req) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .ok()?;
    let subject = &req.certification_request_info.subject;
    let common_name: Vec<String> = subject
        .iter_common_name()
        .filter_map(|a| a.as_str().ok().map(String::from))
        .collect();
    let organizations: Vec<String> = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(String::from))
        .collect();
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    for ext in req.requested_extensions().into_iter().flatten() {
        if let x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) = ext {
            for name in &san.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(d) => dns.push(d.to_string()),
                    x509_parser::extensions::GeneralName::IPAddress(b) => match b.len() {
                        4 => ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).ok()?)),
                        16 => ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).ok()?)),
                        _ => return None,
                    },
                    // Anything else (e-mail, URI): no kubelet asks for it.
                    _ => dns.push(format!("{name}")),
                }
            }
        }
    }
    Some(ServingCsr {
        name: csr["metadata"]["name"].as_str()?.to_string(),
        username: csr["spec"]["username"].as_str()?.to_string(),
        common_name: common_name.join(","),
        organizations,
        dns,
        ips,
        usages: csr["spec"]["usages"]
            .as_array()
            .map(|u| {
                u.iter()
                    .filter_map(|u| u.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// What a sync did.
#[derive(Debug, Default, Serialize)]
pub struct Synced {
    pub added: Vec<Remote>,
    pub removed: Vec<Ipv4Addr>,
    pub approved: Vec<String>,
    /// Claims and CSRs left alone, and why.
    pub refused: Vec<String>,
    /// Why nothing was asked yet (a joining node whose kubelet holds no certificate yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// This host's view of the hosts: what it checks claims against.
fn known(plan: &Plan) -> Known {
    let this = plan.this_host().map(|h| h.address);
    Known {
        hosts: plan
            .hosts
            .iter()
            .filter_map(|h| {
                let pod_cidr = match h.node.pod_cidr {
                    ipnet::IpNet::V4(n) => n,
                    ipnet::IpNet::V6(_) => return None,
                };
                Some((
                    h.name.clone(),
                    Remote {
                        address: h.address,
                        pod_cidr,
                        link_net: h.link.net,
                    },
                ))
            })
            .collect(),
        pod_cidr: match plan.pod_cidr {
            ipnet::IpNet::V4(n) => Some(n),
            ipnet::IpNet::V6(_) => None,
        },
        link_ranges: crate::spec::plan::auto_link_ranges(),
        shared: this.and_then(shared_network),
    }
}

/// The network of this host's interface that holds `address` (`ip -o -4 addr show`).
fn shared_network(address: Ipv4Addr) -> Option<Ipv4Net> {
    let out = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.parse::<Ipv4Net>().ok())
        .find(|n| n.addr() == address)
        .map(|n| n.trunc())
}

/// The API answer at `path` from the first API server that answers.
fn call(
    urls: &[String],
    agent: &ureq::Agent,
    what: &str,
    send: impl Fn(&ureq::Agent, &str) -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Value, Error> {
    let mut last = format!("{what}: no API server to ask");
    for base in urls {
        match send(agent, base) {
            Ok(mut r) => {
                let status = r.status().as_u16();
                let text = r.body_mut().read_to_string().unwrap_or_default();
                if (200..300).contains(&status) {
                    return Ok(serde_json::from_str(&text).unwrap_or(Value::Null));
                }
                last = format!("{what} at {base}: HTTP {status}: {text}");
            }
            Err(e) => last = format!("{what} at {base}: {e}"),
        }
    }
    Err(Error::Api(last))
}

/// node-network's script of this host's node, with `args`.
fn node_network(plan: &Plan, args: &[String]) -> Result<String, Error> {
    let script = plan.node_file(crate::components::NODE_NETWORK_SCRIPT);
    let out = std::process::Command::new("/bin/sh")
        .arg(&script)
        .args(args)
        .output()
        .map_err(Error::io(&script, "run"))?;
    if !out.status.success() {
        return Err(Error::Api(format!(
            "{script} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Once: routes to the joined nodes as their claims hold, and (on a control-plane host) their
/// serving certificates approved.
pub fn sync(plan: &Plan) -> Result<Synced, Error> {
    let pem = plan
        .kubelet_cert_dir()
        .join(crate::spec::join::KUBELET_CLIENT_PEM);
    if plan.joins() && !pem.exists() {
        return Ok(Synced {
            waiting: Some(format!(
                "node {}'s kubelet holds no client certificate yet ({})",
                plan.node().name,
                pem.display()
            )),
            ..Synced::default()
        });
    }
    let urls = crate::components::api_urls(plan);
    let agent = super::probe::api_client(plan, Duration::from_secs(8))?;
    let nodes = call(&urls, &agent, "listing the Nodes", |a, base| {
        a.get(&format!("{base}/api/v1/nodes")).call()
    })?;
    let items = nodes["items"].as_array().cloned().unwrap_or_default();
    let own = plan.node().name.clone();
    let claims: Vec<Claim> = items
        .iter()
        .filter_map(claim_of)
        .filter(|c| c.node != own)
        .collect();
    // Most runs find no claim: then nothing is checked, and `known` (which runs `ip`) is not asked.
    let (ok, mut refused) = match claims.is_empty() {
        true => (vec![], vec![]),
        false => check(&known(plan), &claims),
    };
    let wanted: Vec<Remote> = ok.iter().map(|(_, r)| r.clone()).collect();
    let (removed, added) = route(plan, &wanted)?;
    let approved = match plan.here_has(HostRole::ControlPlane) && !plan.joins() {
        true => approve(&urls, &agent, &items, ok, &mut refused)?,
        false => vec![],
    };
    Ok(Synced {
        added,
        removed,
        approved,
        refused,
        waiting: None,
    })
}

/// node-network's added remotes made exactly `wanted`: what it removed and added.
fn route(plan: &Plan, wanted: &[Remote]) -> Result<(Vec<Ipv4Addr>, Vec<Remote>), Error> {
    let current: Vec<Remote> = node_network(plan, &["remotes".into()])?
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some(Remote {
                address: w.next()?.parse().ok()?,
                pod_cidr: w.next()?.parse().ok()?,
                link_net: w.next()?.parse().ok()?,
            })
        })
        .collect();
    let (remove, add) = changes(&current, wanted);
    for address in &remove {
        node_network(plan, &["remove".into(), address.to_string()])?;
    }
    for r in &add {
        let (address, pods, links) = (r.address, r.pod_cidr, r.link_net);
        node_network(
            plan,
            &[
                "add".into(),
                address.to_string(),
                pods.to_string(),
                links.to_string(),
            ],
        )?;
    }
    Ok((remove, add))
}

/// The pending kubelet-serving CSRs of the joined nodes `ok` (of the Nodes `items`) approved where
/// `csr_problem` finds nothing; the others' reasons go to `refused`.
fn approve(
    urls: &[String],
    agent: &ureq::Agent,
    items: &[Value],
    ok: Vec<(String, Remote)>,
    refused: &mut Vec<String>,
) -> Result<Vec<String>, Error> {
    let joined: Vec<(String, Remote, Vec<String>)> = ok
        .into_iter()
        .map(|(name, r)| {
            let addresses = items
                .iter()
                .find(|n| n["metadata"]["name"] == name.as_str())
                .and_then(|n| n["status"]["addresses"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|a| a["address"].as_str().map(String::from))
                .collect();
            (name, r, addresses)
        })
        .collect();
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let csrs = call(urls, agent, "listing the CSRs", |a, base| {
        a.get(&format!("{base}{path}")).call()
    })?;
    let mut approved = Vec::new();
    for item in csrs["items"].as_array().cloned().unwrap_or_default() {
        let Some(csr) = serving_csr(&item) else {
            continue;
        };
        if let Some(why) = csr_problem(&csr, &joined) {
            refused.push(format!("CSR {}: {why}", csr.name));
            continue;
        }
        let mut body = item.clone();
        body["status"]["conditions"] = json!([{
            "type": "Approved",
            "status": "True",
            "reason": "KubeunitHostsSync",
            "message": "the serving certificate of a joined node, naming its name and addresses (kubeunit hosts sync)",
        }]);
        let what = format!("approving CSR {}", csr.name);
        call(urls, agent, &what, |a, base| {
            a.put(&format!("{base}{path}/{}/approval", csr.name))
                .header("Content-Type", "application/json")
                .send(body.to_string().as_bytes())
        })?;
        approved.push(csr.name);
    }
    Ok(approved)
}

/// The kubelet's start hook on a host that joined later: once its kubelet holds its client
/// certificate, publish on its own Node, with that identity, what the other hosts route to it by
/// (`Remote`), and its pod network (spec.podCIDR: a node may set it once, NodeRestriction allows
/// it).
pub fn publish(plan: &Plan) -> Result<Vec<String>, Error> {
    let pem = plan
        .kubelet_cert_dir()
        .join(crate::spec::join::KUBELET_CLIENT_PEM);
    let node = plan.node();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while !pem.exists() {
        if std::time::Instant::now() >= deadline {
            return Err(Error::Addon(format!(
                "node {}: its kubelet was issued no client certificate within 300 s ({} is missing): see its CSR (`kubectl get csr`) and the token (`kubeunit token list` on a control-plane host)",
                node.name,
                pem.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let host = plan
        .this_host()
        .ok_or_else(|| Error::Internal("a joining host's plan has no host".into()))?;
    let patch = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "annotations": {
                ANNOTATION_ADDRESS: host.address.to_string(),
                ANNOTATION_POD_CIDR: node.pod_cidr.to_string(),
                ANNOTATION_LINK_NET: node.link.net.to_string(),
            },
        },
        "spec": {"podCIDR": node.pod_cidr.to_string(), "podCIDRs": plan.node_pod_cidrs()},
    });
    let urls = crate::components::api_urls(plan);
    let agent = super::probe::https_agent_pem(plan, Some("ca"), &pem, Duration::from_secs(10))?;
    let path = format!("/api/v1/nodes/{}", node.name);
    let what = format!("publishing node {}'s routes on its Node", node.name);
    // Its Node registers a moment after the certificate.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let result = call(&urls, &agent, &what, |a, base| {
            a.patch(&format!("{base}{path}?fieldManager=kubeunit&force=true"))
                .header("Content-Type", "application/apply-patch+yaml")
                .send(patch.to_string().as_bytes())
        });
        match result {
            Ok(_) => return Ok(vec![path]),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(address: &str, pods: &str, links: &str) -> Remote {
        Remote {
            address: address.parse().unwrap(),
            pod_cidr: pods.parse().unwrap(),
            link_net: links.parse().unwrap(),
        }
    }

    fn known() -> Known {
        Known {
            hosts: vec![
                (
                    "cp-1".into(),
                    remote("198.19.254.11", "10.88.0.0/24", "198.18.4.0/30"),
                ),
                (
                    "worker-1".into(),
                    remote("198.19.254.21", "10.88.1.0/24", "198.18.8.0/30"),
                ),
            ],
            pod_cidr: Some("10.88.0.0/16".parse().unwrap()),
            link_ranges: vec!["198.18.0.0/15".parse().unwrap()],
            shared: Some("198.19.254.0/24".parse().unwrap()),
        }
    }

    fn claim(node: &str, r: Remote) -> Claim {
        Claim {
            node: node.into(),
            remote: Ok(r),
        }
    }

    #[test]
    fn claims_are_read_from_a_nodes_annotations() {
        let node = json!({"metadata": {"name": "w3", "annotations": {
            ANNOTATION_ADDRESS: "198.19.254.23", ANNOTATION_POD_CIDR: "10.88.2.0/24",
            ANNOTATION_LINK_NET: "198.18.12.0/30"}}});
        let c = claim_of(&node).unwrap();
        assert_eq!(c.node, "w3");
        assert_eq!(
            c.remote,
            Ok(remote("198.19.254.23", "10.88.2.0/24", "198.18.12.0/30"))
        );
        // None at all: a host gen rendered.
        assert_eq!(claim_of(&json!({"metadata": {"name": "cp-1"}})), None);
        // One missing, one wrong: a claim that does not parse.
        let half = json!({"metadata": {"name": "w3", "annotations": {ANNOTATION_ADDRESS: "x"}}});
        assert!(claim_of(&half)
            .unwrap()
            .remote
            .unwrap_err()
            .contains("no annotation"));
        let bad = json!({"metadata": {"name": "w3", "annotations": {
            ANNOTATION_ADDRESS: "nowhere", ANNOTATION_POD_CIDR: "10.88.2.0/24",
            ANNOTATION_LINK_NET: "198.18.12.0/30"}}});
        assert!(claim_of(&bad)
            .unwrap()
            .remote
            .unwrap_err()
            .contains("does not parse"));
    }

    #[test]
    fn a_claim_holds_only_inside_the_cluster_and_clear_of_the_others() {
        let good = remote("198.19.254.23", "10.88.2.0/24", "198.18.12.0/30");
        let (ok, refused) = check(&known(), &[claim("w3", good.clone())]);
        assert_eq!(ok, [("w3".to_string(), good.clone())]);
        assert!(refused.is_empty());
        let cases = [
            ("cp-1", good.clone(), "is a host of the profile's"),
            (
                "w4",
                remote("198.19.254.23", "10.99.2.0/24", "198.18.12.0/30"),
                "not inside network.podCIDR",
            ),
            (
                "w4",
                remote("198.19.254.23", "10.88.1.0/24", "198.18.12.0/30"),
                "overlaps worker-1's",
            ),
            (
                "w4",
                remote("198.19.254.23", "10.88.0.0/16", "198.18.12.0/30"),
                "overlaps cp-1's",
            ),
            (
                "w4",
                remote("198.19.254.23", "10.88.2.0/24", "10.1.0.0/30"),
                "not inside the nodes' link range",
            ),
            (
                "w4",
                remote("198.19.254.23", "10.88.2.0/24", "198.18.8.0/30"),
                "overlaps worker-1's",
            ),
            (
                "w4",
                remote("198.19.254.21", "10.88.2.0/24", "198.18.12.0/30"),
                "is host worker-1's",
            ),
            (
                "w4",
                remote("192.0.2.9", "10.88.2.0/24", "198.18.12.0/30"),
                "not on the hosts' network",
            ),
        ];
        for (node, r, want) in cases {
            let (ok, refused) = check(&known(), &[claim(node, r.clone())]);
            assert!(ok.is_empty(), "{node} {r:?} held");
            assert!(refused[0].contains(want), "{node} {r:?}: {refused:?}");
        }
        // Of two that meet, the first holds.
        let twin = remote("198.19.254.24", "10.88.2.0/24", "198.18.16.0/30");
        let (ok, refused) = check(&known(), &[claim("w3", good), claim("w4", twin)]);
        assert_eq!(ok.len(), 1);
        assert!(refused[0].contains("overlaps w3's"), "{refused:?}");
        // One that does not parse is refused with its reason.
        let (_, refused) = check(
            &known(),
            &[Claim {
                node: "w5".into(),
                remote: Err("no annotation x".into()),
            }],
        );
        assert_eq!(refused, ["node w5: no annotation x"]);
    }

    #[test]
    fn changes_make_the_added_remotes_exactly_the_wanted_ones() {
        let a = remote("198.19.254.23", "10.88.2.0/24", "198.18.12.0/30");
        let b = remote("198.19.254.24", "10.88.3.0/24", "198.18.16.0/30");
        let b2 = remote("198.19.254.24", "10.88.4.0/24", "198.18.16.0/30");
        let (one_a, one_b) = (vec![a.clone()], vec![b.clone()]);
        assert_eq!(changes(&one_a, &one_a), (vec![], vec![]));
        assert_eq!(changes(&[], &one_a), (vec![], one_a.clone()));
        assert_eq!(
            changes(&[a.clone(), b.clone()], &one_a),
            (vec![b.address], vec![])
        );
        // A changed claim: the old routes go, the new come.
        assert_eq!(
            changes(&one_b, std::slice::from_ref(&b2)),
            (vec![b.address], vec![b2.clone()])
        );
    }

    fn csr() -> ServingCsr {
        ServingCsr {
            name: "csr-1".into(),
            username: "system:node:w3".into(),
            common_name: "system:node:w3".into(),
            organizations: vec!["system:nodes".into()],
            dns: vec!["w3".into()],
            ips: vec!["198.18.12.2".parse().unwrap()],
            usages: vec!["digital signature".into(), "server auth".into()],
        }
    }

    #[test]
    fn a_serving_csr_is_approved_only_for_a_joined_nodes_own_names() {
        let joined = vec![(
            "w3".to_string(),
            remote("198.19.254.23", "10.88.2.0/24", "198.18.12.0/30"),
            vec!["198.18.12.2".to_string(), "w3".to_string()],
        )];
        assert_eq!(csr_problem(&csr(), &joined), None);
        let cases: Vec<(ServingCsr, &str)> = vec![
            (
                ServingCsr {
                    username: "system:serviceaccount:x:y".into(),
                    ..csr()
                },
                "not a node",
            ),
            (
                ServingCsr {
                    username: "system:node:cp-1".into(),
                    common_name: "system:node:cp-1".into(),
                    ..csr()
                },
                "no joined node",
            ),
            (
                ServingCsr {
                    common_name: "system:node:w4".into(),
                    ..csr()
                },
                "subject",
            ),
            (
                ServingCsr {
                    organizations: vec!["system:masters".into()],
                    ..csr()
                },
                "subject",
            ),
            (
                ServingCsr {
                    usages: vec!["client auth".into()],
                    ..csr()
                },
                "usages",
            ),
            (
                ServingCsr {
                    dns: vec!["kubernetes".into()],
                    ..csr()
                },
                "DNS name kubernetes",
            ),
            (
                ServingCsr {
                    ips: vec!["198.19.254.11".parse().unwrap()],
                    ..csr()
                },
                "address 198.19.254.11",
            ),
            // Its Node's, but outside its link.
            (
                ServingCsr {
                    ips: vec!["198.18.12.2".parse().unwrap(), "10.0.0.1".parse().unwrap()],
                    ..csr()
                },
                "address 10.0.0.1",
            ),
            (
                ServingCsr {
                    dns: vec![],
                    ips: vec![],
                    ..csr()
                },
                "names nothing",
            ),
        ];
        let joined_wide = vec![(
            joined[0].0.clone(),
            joined[0].1.clone(),
            vec!["198.18.12.2".into(), "10.0.0.1".into()],
        )];
        for (c, want) in cases {
            let why = csr_problem(&c, &joined_wide).unwrap_or_default();
            assert!(why.contains(want), "{c:?}: {why:?}");
        }
    }

    #[test]
    fn a_kubelets_csr_object_is_read() {
        // A CSR as a kubelet makes it (here by `openssl req`): its node's CN and O, its name
        // and address.
        let pem = "-----BEGIN CERTIFICATE REQUEST-----
MIIBETCBuAIBADAwMRUwEwYDVQQKDAxzeXN0ZW06bm9kZXMxFzAVBgNVBAMMDnN5
c3RlbTpub2RlOnczMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEat9acXI/FolO
M3Kvr1RxVmhzMMwRybhnSYa0p0GpPbF/e1G+0eyQRCffHse4pZ2EHHGQGiOfJuA/
g9tZKigOPaAmMCQGCSqGSIb3DQEJDjEXMBUwEwYDVR0RBAwwCoICdzOHBMYSDAIw
CgYIKoZIzj0EAwIDSAAwRQIhAJRmtER+Mk+bNn5lfJ7PtnNoSQlSGQ6ya3xqggYH
CcVLAiBr21ml/Ycxjb0QPyusE9ftQx+dE/uMV4XQr/2sKrVRkw==
-----END CERTIFICATE REQUEST-----
";
        let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
        let mut obj = json!({"metadata": {"name": "csr-1"}, "spec": {
            "signerName": "kubernetes.io/kubelet-serving", "username": "system:node:w3",
            "request": b64, "usages": ["digital signature", "server auth"]}, "status": {}});
        assert_eq!(serving_csr(&obj), Some(csr()));
        obj["status"]["conditions"] = json!([{"type": "Approved"}]);
        assert_eq!(serving_csr(&obj), None, "decided already");
        obj["status"] = json!({});
        obj["spec"]["signerName"] = json!("kubernetes.io/kube-apiserver-client-kubelet");
        assert_eq!(serving_csr(&obj), None, "another signer's");
    }
}
