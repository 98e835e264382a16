//! `addons.loadBalancer`: LoadBalancer Services, by MetalLB in layer 2 mode. Its controller gives
//! each Service an address of the environment's pool (`addons.loadBalancerPool`); its speakers
//! answer ARP for them on a segment of the environment's own: a bridge on this host (`kb-…`) with
//! a veth to each node (`lb0` in the node's namespace). This host routes the pool onto the bridge
//! from `SEGMENT_HOST`, and each node routes that address back out of `lb0`, so replies go the
//! way the requests came. Nothing else of the host's network is in the segment: an address no
//! Service holds gets no ARP answer, and nothing for it leaves by the default route.

use std::net::Ipv4Addr;

use ipnet::{IpNet, Ipv4Net};

use super::profile::Profile;
use crate::error::{Error, FieldError};

const FIELD: &str = "addons.loadBalancerPool";

/// Where `auto` picks a pool: RFC 2544's benchmarking range, never routed, where `node.link: auto`
/// picks the nodes' /30s too (`plan::AUTO_LINKS`).
pub const AUTO_POOLS: Ipv4Net = match Ipv4Net::new(Ipv4Addr::new(198, 18, 0, 0), 15) {
    Ok(n) => n,
    Err(_) => panic!("198.18.0.0/15"),
};

/// The prefix of an `auto` pool: 16 addresses, of 8192 pools.
const AUTO_PREFIX: u8 = 28;

/// The last /23 of AUTO_POOLS, which `auto` never picks: the tests' simulated internet
/// (`plan::SIMULATED_INTERNET`, 198.19.255.0/24) and their hosts' network (198.19.254.0/24).
const TESTS_HOLE: Ipv4Net = match Ipv4Net::new(Ipv4Addr::new(198, 19, 254, 0), 23) {
    Ok(n) => n,
    Err(_) => panic!("198.19.254.0/23"),
};

/// This host's address on every environment's segment (link-local: never routed, and the same
/// on each bridge, since each node routes it back out of its own `lb0`).
pub const SEGMENT_HOST: Ipv4Addr = Ipv4Addr::new(169, 254, 107, 117);

/// The environment's pool and segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancer {
    pub pool: Ipv4Net,
    /// The bridge on this host (at most 15 bytes: a hash of the environment's name on this host).
    pub bridge: String,
    /// The bridge's MAC address, fixed so that each node's neighbour entry for `SEGMENT_HOST` is
    /// written once (no ARP from a node, whose source address would be its node link's).
    pub bridge_mac: String,
}

impl LoadBalancer {
    /// The environment's load balancer, if `addons.loadBalancer` is on. `host_name`: the
    /// environment's name on this host (`Plan::host_name`). The profile was validated.
    pub fn of(p: &Profile, host_name: &str) -> Result<Option<LoadBalancer>, Error> {
        // Without a node there is no segment (node-network makes it) and nothing to announce on,
        // as CoreDNS without a node has nowhere to run: the addon is off.
        if !p.addons.load_balancer || !p.component("node-network").enabled {
            return Ok(None);
        }
        let digest = hash(host_name);
        let pool = match p.addons.load_balancer_pool.as_str() {
            "auto" => auto_pool(host_name),
            other => other
                .parse()
                .map_err(|_| Error::Internal(format!("unvalidated profile field {FIELD}")))?,
        };
        let hex = hex::encode(digest);
        let mac = digest[..5]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        Ok(Some(LoadBalancer {
            pool,
            bridge: format!("kb-{}", &hex[..12]),
            // Locally administered, unicast.
            bridge_mac: format!("02:{mac}"),
        }))
    }
}

/// The host's end of a node's veth into the segment (the node's end is `lb0`), by its
/// namespace's name.
pub fn node_port(netns: &str) -> String {
    format!("kl-{}", &hex::encode(hash(netns))[..12])
}

fn hash(s: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).into()
}

/// `auto`: one of AUTO_POOLS' 8192 /28s (but TESTS_HOLE's), by the environment's name on this host.
/// Two environments side by side meet once in thousands; `start` refuses a pool that a route of
/// this host (another environment's pool or link) covers, naming the fix.
pub fn auto_pool(host_name: &str) -> Ipv4Net {
    let d = hash(host_name);
    let count = 1u32 << (AUTO_PREFIX - AUTO_POOLS.prefix_len());
    let mut index = u32::from(u16::from_be_bytes([d[0], d[1]])) % count;
    let size = 1u32 << (32 - AUTO_PREFIX);
    let base = u32::from(AUTO_POOLS.network());
    if TESTS_HOLE.contains(&Ipv4Addr::from(base + index * size)) {
        // Into the first half of the range, as `node.link: auto` moves out of the hole.
        index ^= count / 2;
    }
    Ipv4Net::new((base + index * size).into(), AUTO_PREFIX).unwrap_or(AUTO_POOLS)
}

/// Every wrong value: a pool that is not `auto` or an IPv4 network, one inside the cluster's own
/// networks, and a load balancer across hosts (not yet).
pub fn errors(p: &Profile) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let pool = &p.addons.load_balancer_pool;
    if pool != "auto" {
        match pool.parse::<IpNet>() {
            Ok(IpNet::V4(net)) if net.trunc() != net => errs.push(FieldError::new(
                FIELD,
                format!("{pool:?}"),
                "has host bits set",
                format!("write the network: {}", net.trunc()),
            )),
            Ok(IpNet::V4(net)) if net.prefix_len() < 16 => errs.push(FieldError::new(
                FIELD,
                format!("{pool:?}"),
                "larger than a /16 (MetalLB would track every address)",
                "write a smaller network, e.g. 198.51.100.0/28, or auto",
            )),
            Ok(IpNet::V4(net)) => {
                for (field, value) in [
                    ("network.podCIDR", &p.network.pod_cidr),
                    ("network.serviceCIDR", &p.network.service_cidr),
                ] {
                    let Ok(IpNet::V4(other)) = value.parse::<IpNet>() else {
                        continue;
                    };
                    if net.contains(&other.network()) || other.contains(&net.network()) {
                        errs.push(FieldError::new(
                            FIELD,
                            format!("{pool:?}"),
                            format!("overlaps {field} {other}"),
                            "give the pool addresses of its own, e.g. 198.51.100.0/28, or auto",
                        ));
                    }
                }
            }
            _ => errs.push(FieldError::new(
                FIELD,
                format!("{pool:?}"),
                "not auto or an IPv4 network (CIDR)",
                "write auto (a /28 of 198.18.0.0/15 by the environment's name) or e.g. 198.51.100.0/28",
            )),
        }
    }
    if !p.addons.load_balancer {
        return errs;
    }
    if !p.hosts.is_empty() {
        errs.push(FieldError::new(
            "addons.loadBalancer",
            "true",
            "not across hosts yet: the pool's segment is a bridge on one host",
            "set addons.loadBalancer: false and addons.gateway: false in this profile (or --set them)",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn errors_of(sets: &[&str]) -> Vec<String> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let (_, p) = load::layered("dev", &sets).unwrap();
        errors(&p).iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn auto_pools_are_benchmarking_addresses_apart_from_the_tests() {
        let hole: Ipv4Net = crate::spec::plan::SIMULATED_INTERNET.parse().unwrap();
        assert!(TESTS_HOLE.contains(&hole));
        // 20000 names cover each /28 of the hole about twice.
        let pools: std::collections::BTreeSet<Ipv4Net> = (0..20000)
            .map(|i| {
                let pool = auto_pool(&format!("env-{i}"));
                assert!(AUTO_POOLS.contains(&pool), "{pool}");
                assert!(!TESTS_HOLE.contains(&pool.network()), "{pool}");
                assert_eq!(pool.prefix_len(), 28);
                pool
            })
            .collect();
        assert!(pools.len() > 7000, "{}", pools.len());
        // The names the tests run side by side.
        for (a, b) in [("first", "second"), ("multi", "multi-b")] {
            assert_ne!(auto_pool(a), auto_pool(b), "{a} {b}");
        }
        // Each environment's bridge is its own and fits an interface name.
        let (_, p) = load::layered("dev", &[]).unwrap();
        let a = LoadBalancer::of(&p, "dev").unwrap().unwrap();
        let b = LoadBalancer::of(&p, "dev_1").unwrap().unwrap();
        assert_ne!((a.pool, &a.bridge), (b.pool, &b.bridge));
        assert!(a.bridge.len() <= 15 && node_port("kubeunit-dev").len() <= 15);
    }

    #[test]
    fn without_a_node_the_addon_is_off() {
        let (_, p) =
            load::layered("dev", &["components.node-network.enabled=false".into()]).unwrap();
        assert_eq!(LoadBalancer::of(&p, "dev").unwrap(), None);
        let (_, p) = load::layered("dev", &[]).unwrap();
        assert!(LoadBalancer::of(&p, "dev").unwrap().is_some());
    }

    #[test]
    fn wrong_pools_and_places_are_refused() {
        assert!(errors_of(&[]).is_empty());
        assert!(errors_of(&["addons.loadBalancerPool=198.51.100.32/28"]).is_empty());
        for (set, says) in [
            (
                "addons.loadBalancerPool=bogus",
                "not auto or an IPv4 network",
            ),
            ("addons.loadBalancerPool=198.51.100.1/28", "host bits"),
            ("addons.loadBalancerPool=10.0.0.0/8", "larger than a /16"),
            ("addons.loadBalancerPool=fd00::/120", "not auto or an IPv4"),
            (
                "addons.loadBalancerPool=10.0.0.0/28",
                "overlaps network.serviceCIDR",
            ),
        ] {
            let errs = errors_of(&[set]);
            assert!(errs.iter().any(|e| e.contains(says)), "{set}: {errs:?}");
        }
    }
}
