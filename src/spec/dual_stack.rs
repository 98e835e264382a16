//! `network.ipFamily: dual`: pods and Services get an IPv6 address next to their IPv4 one, from
//! `network.podCIDRv6` and `network.serviceCIDRv6` (IPv4 stays the primary family: the node's
//! address the kubelet registers first, the `kubernetes` and DNS Services, etcd and the API
//! server's addresses). Each node link carries IPv6 too: its addresses are those of its IPv4 /30
//! inside `LINK_V6` (`::198.19.x.y` there), so they need no allocation of their own. A node's
//! share of the IPv6 pod network is the /64 at the index its IPv4 share has in the IPv4 one, so it
//! stays when nodes come or go, as the IPv4 share does.
//!
//! The nodes reach each other over IPv6 through the environment's router: a network namespace of
//! its own (`kubeunit-<host name>+ipv6`) with a veth to each node, forwarding between them. This
//! host does not forward IPv6 for them: IPv6 has no per-interface forwarding switch
//! (`net.ipv6.conf.<if>.forwarding` does not forward; only `all` does, which would forward for
//! every interface of this host and stop it taking router advertisements). The router's
//! `all` is its own namespace's, and it has no route out: what the pods send beyond the cluster
//! over IPv6 goes nowhere.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::profile::{IpFamily, Network, Profile};
use crate::error::{Error, FieldError};

/// The IPv6 /96 the node links' IPv6 addresses are in (a unique local address range): a link's
/// IPv4 /30 written into its last 32 bits.
pub const LINK_V6: Ipv6Net = match Ipv6Net::new(Ipv6Addr::new(0xfd6b, 0x75, 0, 0, 0, 0, 0, 0), 96) {
    Ok(n) => n,
    Err(_) => panic!("fd6b:75::/96"),
};

/// A node's share of the IPv6 pod network: a /64 (kube-controller-manager's default
/// `--node-cidr-mask-size-ipv6`).
const NODE_PREFIX: u8 = 64;

/// The IPv6 half of a dual-stack environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Nets {
    pub pod_cidr: Ipv6Net,
    pub service_cidr: Ipv6Net,
    /// The router's network namespace.
    pub router: String,
}

/// A node's IPv6 addresses and pod network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIpv6 {
    /// Its share of the pod network.
    pub pod_cidr: Ipv6Net,
    /// Its link's IPv6 network, and this host's and the node's addresses on it.
    pub link_net: Ipv6Net,
    pub link_host: Ipv6Addr,
    pub link_node: Ipv6Addr,
}

impl Ipv6Nets {
    /// The environment's IPv6 networks, if `network.ipFamily` is `dual`. `host_name`: the
    /// environment's name on this host (`Plan::host_name`). The profile was validated.
    pub fn of(p: &Profile, host_name: &str) -> Result<Option<Ipv6Nets>, Error> {
        if p.network.ip_family != IpFamily::Dual {
            return Ok(None);
        }
        let parse = |field: &str, value: &str| -> Result<Ipv6Net, Error> {
            value
                .parse()
                .map_err(|_| Error::Internal(format!("unvalidated profile field {field}")))
        };
        Ok(Some(Ipv6Nets {
            pod_cidr: parse("network.podCIDRv6", &p.network.pod_cidr_v6)?,
            service_cidr: parse("network.serviceCIDRv6", &p.network.service_cidr_v6)?,
            // `+`: in no environment's or node's name (node namespaces are `kubeunit-<host
            // name>@<node>`).
            router: format!("kubeunit-{host_name}+ipv6"),
        }))
    }

    /// A node's IPv6 side, by its IPv4 link and pod network (`pod_cidr`, a share of the cluster's
    /// `cluster_pod_cidr`): the /64 at the same index, or an error naming `network.podCIDRv6`
    /// when it has none there.
    pub fn node(
        &self,
        cluster_pod_cidr: IpNet,
        pod_cidr: IpNet,
        link: Ipv4Net,
    ) -> Result<NodeIpv6, Error> {
        let index = share_index(cluster_pod_cidr, pod_cidr);
        let room = NODE_PREFIX.saturating_sub(self.pod_cidr.prefix_len());
        let share = index
            .filter(|i| room >= 64 || *i < (1u64 << room))
            .and_then(|i| {
                let base = u128::from(self.pod_cidr.network()) | (u128::from(i) << 64);
                Ipv6Net::new(
                    Ipv6Addr::from(base),
                    NODE_PREFIX.max(self.pod_cidr.prefix_len()),
                )
                .ok()
            })
            .ok_or_else(|| {
                Error::field(
                    "profile",
                    FieldError::new(
                    "network.podCIDRv6",
                    self.pod_cidr.to_string(),
                    format!(
                        "has no /64 for the node whose IPv4 share is {pod_cidr} (its share of \
                         {cluster_pod_cidr}; each node's IPv6 share is the /64 at the same index)"
                    ),
                    "give the IPv6 pod network room for every node's share, e.g. fd00:10:88::/56",
                ),
                )
            })?;
        let (link_net, link_host, link_node) = link_v6(link);
        Ok(NodeIpv6 {
            pod_cidr: share,
            link_net,
            link_host,
            link_node,
        })
    }
}

/// Which share of `cluster` `share` is, counting shares of its size from the first.
fn share_index(cluster: IpNet, share: IpNet) -> Option<u64> {
    let (cluster_at, share_at, bits) = match (cluster, share) {
        (IpNet::V4(c), IpNet::V4(s)) => (
            u128::from(u32::from(c.network())),
            u128::from(u32::from(s.network())),
            32,
        ),
        (IpNet::V6(c), IpNet::V6(s)) => (u128::from(c.network()), u128::from(s.network()), 128),
        _ => return None,
    };
    if !cluster.contains(&share.network()) {
        return None;
    }
    let shift = bits - u32::from(share.prefix_len());
    u64::try_from(
        share_at
            .checked_sub(cluster_at)?
            .checked_shr(shift)
            .unwrap_or(0),
    )
    .ok()
}

/// A node link's IPv6 network and the host's and node's addresses on it: its IPv4 /30 (host at
/// the first address, node at the second) written into `LINK_V6`.
pub fn link_v6(link: Ipv4Net) -> (Ipv6Net, Ipv6Addr, Ipv6Addr) {
    let at = |a: Ipv4Addr| Ipv6Addr::from(u128::from(LINK_V6.network()) | u128::from(u32::from(a)));
    let first = u32::from(link.network());
    let net = Ipv6Net::new(at(link.network()), 96 + link.prefix_len())
        .unwrap_or(LINK_V6)
        .trunc();
    (net, at((first + 1).into()), at((first + 2).into()))
}

/// Every way `network.ipFamily` and the IPv6 ranges can be wrong.
pub fn errors(p: &Profile) -> Vec<FieldError> {
    let n = &p.network;
    let mut errs = Vec::new();
    match n.ip_family {
        IpFamily::Ipv4 => return errs,
        IpFamily::Ipv6 => {
            errs.push(FieldError::new(
                "network.ipFamily",
                "ipv6",
                "not yet: etcd, the API server and the node link have IPv4 addresses",
                "use dual (IPv4 and IPv6 for pods and Services), or ipv4",
            ));
            return errs;
        }
        IpFamily::Dual => {}
    }
    if !p.hosts.is_empty() {
        errs.push(FieldError::new(
            "network.ipFamily",
            "dual",
            "not across hosts yet",
            "use ipv4 in a profile with hosts",
        ));
    }
    errs.extend(range_errors(n));
    errs
}

/// `network.podCIDRv6` and `network.serviceCIDRv6`: IPv6 networks of the right sizes, apart from
/// each other and from the node links' range.
fn range_errors(n: &Network) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let v6 = |field: &str, value: &str, example: &str, errs: &mut Vec<FieldError>| match value
        .parse::<IpNet>()
    {
        Ok(IpNet::V6(net)) if net.trunc() == net => Some(net),
        Ok(IpNet::V6(net)) => {
            errs.push(FieldError::new(
                field,
                value,
                "has host bits set",
                format!("use the network address: {}", net.trunc()),
            ));
            None
        }
        _ => {
            errs.push(FieldError::new(
                field,
                value,
                "not an IPv6 network",
                format!("write one such as {example}"),
            ));
            None
        }
    };
    let pod = v6(
        "network.podCIDRv6",
        &n.pod_cidr_v6,
        "fd00:10:88::/56",
        &mut errs,
    );
    let service = v6(
        "network.serviceCIDRv6",
        &n.service_cidr_v6,
        "fd00:10:96::/112",
        &mut errs,
    );
    if pod.is_some_and(|pod| pod.prefix_len() > NODE_PREFIX) {
        errs.push(FieldError::new(
            "network.podCIDRv6",
            &n.pod_cidr_v6,
            "smaller than a /64, a node's share",
            "use a /64 or larger, e.g. fd00:10:88::/56",
        ));
    }
    if let Some(service) = service {
        // kube-apiserver's limit: at most 20 host bits, as for IPv4; and room for a few.
        let host_bits = 128 - u32::from(service.prefix_len());
        if !(4..=20).contains(&host_bits) {
            errs.push(FieldError::new(
                "network.serviceCIDRv6",
                &n.service_cidr_v6,
                "kube-apiserver takes 4 to 20 host bits",
                "use a /108 to /124, e.g. fd00:10:96::/112",
            ));
        }
    }
    let nets = [
        ("network.podCIDRv6", pod),
        ("network.serviceCIDRv6", service),
        ("the node links' range", Some(LINK_V6)),
    ];
    for (i, (field, a)) in nets.iter().enumerate() {
        for (other, b) in &nets[i + 1..] {
            if let (Some(a), Some(b)) = (a, b) {
                if a.contains(&b.network()) || b.contains(&a.network()) {
                    errs.push(FieldError::new(
                        *field,
                        a.to_string(),
                        format!("overlaps {other} {b}"),
                        "pick disjoint IPv6 ranges",
                    ));
                }
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn errors_of(sets: &[&str]) -> Vec<FieldError> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let (_, p) = load::layered("dev", &sets).unwrap();
        errors(&p)
    }

    #[test]
    fn a_link_keeps_its_ipv4_addresses_in_ipv6() {
        let (net, host, node) = link_v6("198.19.188.152/30".parse().unwrap());
        assert_eq!(net.to_string(), "fd6b:75::c613:bc98/126");
        assert_eq!(host.to_string(), "fd6b:75::c613:bc99");
        assert_eq!(node.to_string(), "fd6b:75::c613:bc9a");
    }

    #[test]
    fn dual_on_dev_is_fine_and_wrong_ranges_are_named() {
        assert_eq!(errors_of(&["network.ipFamily=dual"]), vec![]);
        for (set, field) in [
            ("network.podCIDRv6=10.0.0.0/16", "network.podCIDRv6"),
            ("network.podCIDRv6=fd00:10:88::/96", "network.podCIDRv6"),
            ("network.podCIDRv6=fd00:10:88::1/56", "network.podCIDRv6"),
            (
                "network.serviceCIDRv6=fd00:10:96::/64",
                "network.serviceCIDRv6",
            ),
            (
                "network.serviceCIDRv6=fd00:10:88::/112",
                "network.podCIDRv6",
            ),
            ("network.podCIDRv6=fd6b::/16", "network.podCIDRv6"),
        ] {
            let errs = errors_of(&["network.ipFamily=dual", set]);
            assert_eq!(errs.len(), 1, "{set}: {errs:?}");
            assert_eq!(errs[0].field, field, "{set}: {errs:?}");
        }
        let errs = errors_of(&["network.ipFamily=ipv6"]);
        assert_eq!(errs[0].field, "network.ipFamily");
        // The IPv6 ranges are not looked at in an IPv4 environment.
        assert_eq!(errors_of(&["network.podCIDRv6=nope"]), vec![]);
    }

    #[test]
    fn dual_is_one_host_only_yet() {
        let sets = vec!["network.ipFamily=dual".to_string()];
        let (_, p) = load::layered("multi", &sets).unwrap();
        assert_eq!(errors(&p), vec![]);
        let (_, p) = load::layered("ha", &sets).unwrap();
        let errs = errors(&p);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].to_string().contains("across hosts"), "{errs:?}");
    }

    #[test]
    fn a_nodes_ipv6_share_is_at_its_ipv4_shares_index() {
        let nets = Ipv6Nets {
            pod_cidr: "fd00:10:88::/56".parse().unwrap(),
            service_cidr: "fd00:10:96::/112".parse().unwrap(),
            router: "r".into(),
        };
        let cluster: IpNet = "10.88.0.0/16".parse().unwrap();
        let link: Ipv4Net = "198.18.0.4/30".parse().unwrap();
        let share = |v4: &str| {
            nets.node(cluster, v4.parse().unwrap(), link)
                .map(|n| n.pod_cidr.to_string())
        };
        assert_eq!(share("10.88.0.0/24").unwrap(), "fd00:10:88::/64");
        assert_eq!(share("10.88.2.0/24").unwrap(), "fd00:10:88:2::/64");
        assert_eq!(share("10.88.255.0/24").unwrap(), "fd00:10:88:ff::/64");
        // A /64 of IPv6 pods has room for the first share only.
        let one = Ipv6Nets {
            pod_cidr: "fd00:10:88::/64".parse().unwrap(),
            ..nets.clone()
        };
        assert!(one
            .node(cluster, "10.88.0.0/24".parse().unwrap(), link)
            .is_ok());
        let err = one
            .node(cluster, "10.88.1.0/24".parse().unwrap(), link)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("network.podCIDRv6") && err.contains("10.88.1.0/24"),
            "{err}"
        );
        // Outside the cluster's network: no index.
        assert!(share("10.89.0.0/24").is_err());
    }
}
