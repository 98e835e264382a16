//! `addons.loadBalancer`: LoadBalancer Services, by MetalLB in layer 2 mode. Its controller gives
//! each Service an address of the environment's pool (`addons.loadBalancerPool`); its speakers
//! answer ARP for them on each node's `lb0`, its interface on the environment's segment:
//! - On one host, a segment of the environment's own: a bridge on this host (`kb-…`) with a veth
//!   to each node. This host routes the pool onto the bridge from `SEGMENT_HOST`, and each node
//!   routes that address back out of `lb0`, so replies go the way the requests came. Nothing else
//!   of the host's network is in the segment: an address no Service holds gets no ARP answer, and
//!   nothing for it leaves by the default route.
//! - Across hosts, the hosts' own network: `lb0` is a macvlan of the interface that holds the
//!   host's address, so the hosts' network reaches the pool (addresses of that network, named in
//!   the profile) as MetalLB's layer 2 mode means it. The host reaches it by a macvlan of its own
//!   (`kb-…`; a macvlan's parent cannot reach its children). A node sends the replies of what came
//!   in on `lb0` back out of it (a connection mark and a routing table in the node's namespace), so
//!   they never pass the host's forwarding or its egress rules.

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

/// Across hosts, each host's address on its macvlan: the `hosts:` entry's index + 1 in this /24
/// (link-local too). Not the host's own address: its macvlan asks ARP for the pool's addresses,
/// and a request from the host's address would make the network's machines send to the macvlan
/// what is meant for the host.
const HOSTS_SEGMENT: Ipv4Addr = Ipv4Addr::new(169, 254, 108, 0);

/// At most this many hosts with the addon (HOSTS_SEGMENT's addresses).
const MAX_HOSTS: usize = 254;

/// Host `index`'s address on its macvlan (`index` < MAX_HOSTS).
fn host_segment_address(index: usize) -> Ipv4Addr {
    let [a, b, c, _] = HOSTS_SEGMENT.octets();
    Ipv4Addr::new(a, b, c, u8::try_from(index + 1).unwrap_or(u8::MAX))
}

/// The environment's pool and segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancer {
    pub pool: Ipv4Net,
    /// This host's interface on the segment (at most 15 bytes: a hash of the environment's name on
    /// this host, and across hosts of the host's name): the bridge, or across hosts the host's
    /// macvlan.
    pub segment: String,
    /// Its MAC address, fixed so that each node's neighbour entry for this host's address on the
    /// segment is written once (no ARP from a node, whose source address would be its node link's),
    /// and different on each host of an environment.
    pub segment_mac: String,
    /// Across hosts: this host's address (`hosts[].address`), whose interface the segment's
    /// macvlans are made of. `None`: one host, the bridge.
    pub uplink_address: Option<Ipv4Addr>,
    /// This host's address on the segment: `SEGMENT_HOST` on the bridge, across hosts its own
    /// link-local address on its macvlan (`HOSTS_SEGMENT`).
    pub host_address: Ipv4Addr,
    /// Across hosts: every host's address on its macvlan with the macvlan's MAC address, so that a
    /// node answers a host there without asking ARP. Empty on one host.
    pub host_segments: Vec<(Ipv4Addr, String)>,
}

impl LoadBalancer {
    /// The environment's load balancer, if `addons.loadBalancer` is on. `host_name`: the
    /// environment's name on this host (`Plan::host_name`); `addresses`: each host's address, a
    /// DNS name's resolved (`Plan::hosts`), in host order. The profile was validated.
    pub fn of(
        p: &Profile,
        host_name: &str,
        addresses: &[Ipv4Addr],
    ) -> Result<Option<LoadBalancer>, Error> {
        // Without a node there is no segment (node-network makes it) and nothing to announce on,
        // as CoreDNS without a node has nowhere to run: the addon is off.
        if !p.addons.load_balancer || !p.component("node-network").enabled {
            return Ok(None);
        }
        // Across hosts: the host this state dir is (none in the whole cluster's view, which runs
        // no node).
        let host_digest = |name: &str| hash(&format!("{host_name}/{name}"));
        let host_segments: Vec<(Ipv4Addr, String)> = p
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (host_segment_address(i), mac(&host_digest(&h.name))))
            .collect();
        let (digest, uplink_address, host_address) =
            match p.hosts.iter().position(|h| h.name == p.host) {
                Some(i) => {
                    let h = &p.hosts[i];
                    let address = addresses.get(i).copied().ok_or_else(|| {
                        Error::Internal(format!("no address of host {:?}", h.name))
                    })?;
                    (host_digest(&h.name), Some(address), host_segment_address(i))
                }
                None => (hash(host_name), None, SEGMENT_HOST),
            };
        let pool = match p.addons.load_balancer_pool.as_str() {
            "auto" => auto_pool(host_name),
            other => other
                .parse()
                .map_err(|_| Error::Internal(format!("unvalidated profile field {FIELD}")))?,
        };
        let hex = hex::encode(digest);
        Ok(Some(LoadBalancer {
            pool,
            segment: format!("kb-{}", &hex[..12]),
            segment_mac: mac(&digest),
            uplink_address,
            host_address,
            host_segments,
        }))
    }
}

/// A MAC address from a digest: locally administered, unicast.
fn mac(digest: &[u8; 32]) -> String {
    let bytes: Vec<String> = digest[..5].iter().map(|b| format!("{b:02x}")).collect();
    format!("02:{}", bytes.join(":"))
}

/// The host's end of a node's veth into the segment (the node's end is `lb0`), by its
/// namespace's name; across hosts, the name of the node's macvlan until it is moved into the node.
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
/// networks, and across hosts `auto` or a pool holding a host's address.
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
    if p.hosts.is_empty() {
        return errs;
    }
    // Across hosts the hosts' own network carries the pool: which of its addresses are free only
    // its owner knows.
    if pool == "auto" {
        errs.push(FieldError::new(
            FIELD,
            "\"auto\"",
            "across hosts the pool is addresses of the hosts' own network, which auto cannot pick",
            "name addresses of the hosts' network that nothing else uses (no host, no DHCP lease), \
             e.g. --set addons.loadBalancerPool=192.168.60.240/28, or set addons.loadBalancer: false",
        ));
    } else if p.hosts.len() > MAX_HOSTS {
        errs.push(FieldError::new(
            "hosts",
            format!("{} hosts", p.hosts.len()),
            format!("addons.loadBalancer takes at most {MAX_HOSTS} hosts (each an address of {HOSTS_SEGMENT}/24 on its macvlan)"),
            "set addons.loadBalancer: false, or split the hosts into environments",
        ));
    } else {
        errs.extend(pool_host_errors(p, &super::hosts::written_addresses(p)));
    }
    errs
}

/// Across hosts, a pool that holds a host's address (`addresses`: each host's where known, in
/// host order). Validation checks the addresses written as such, the plan every one once the
/// DNS names are resolved (`hosts::address_errors` is the same for the hosts' own checks).
pub fn pool_host_errors(p: &Profile, addresses: &[Option<Ipv4Addr>]) -> Vec<FieldError> {
    let pool = &p.addons.load_balancer_pool;
    let Ok(IpNet::V4(net)) = pool.parse::<IpNet>() else {
        return vec![];
    };
    if !p.addons.load_balancer {
        return vec![];
    }
    p.hosts
        .iter()
        .zip(addresses)
        .filter_map(|(h, a)| a.filter(|a| net.contains(a)).map(|a| (h, a)))
        .map(|(h, a)| {
            let written = match h.dns_name() {
                None => h.address.clone(),
                Some(name) => format!("{a}, which {name:?} resolved to"),
            };
            FieldError::new(
                FIELD,
                format!("{pool:?}"),
                format!("holds the address of host {:?} ({written})", h.name),
                "name addresses of the hosts' network that no host has",
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn errors_of(sets: &[&str]) -> Vec<String> {
        errors_in("dev", sets)
    }

    fn errors_in(profile: &str, sets: &[&str]) -> Vec<String> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let (_, p) = load::layered(profile, &sets).unwrap();
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
        let (_, p) = load::layered("apps", &[]).unwrap();
        let a = LoadBalancer::of(&p, "dev", &[]).unwrap().unwrap();
        let b = LoadBalancer::of(&p, "dev_1", &[]).unwrap().unwrap();
        assert_ne!((a.pool, &a.segment), (b.pool, &b.segment));
        assert!(a.segment.len() <= 15 && node_port("kubeunit-dev").len() <= 15);
        assert_eq!((a.uplink_address, a.host_address), (None, SEGMENT_HOST));
    }

    #[test]
    fn without_a_node_the_addon_is_off() {
        let (_, p) =
            load::layered("apps", &["components.node-network.enabled=false".into()]).unwrap();
        assert_eq!(LoadBalancer::of(&p, "apps", &[]).unwrap(), None);
        let (_, p) = load::layered("apps", &[]).unwrap();
        assert!(LoadBalancer::of(&p, "apps", &[]).unwrap().is_some());
        // dev leaves it off.
        let (_, p) = load::layered("dev", &[]).unwrap();
        assert_eq!(LoadBalancer::of(&p, "dev", &[]).unwrap(), None);
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
        // Hostile values: a newline, a path, a huge one; each refused by name, none panics.
        let huge = format!("addons.loadBalancerPool={}", "9".repeat(100_000));
        for set in [
            "addons.loadBalancerPool=198.51.100.0/28\nx",
            "addons.loadBalancerPool=../../etc/28",
            huge.as_str(),
        ] {
            let errs = errors_of(&[set]);
            assert!(
                errs.iter()
                    .any(|e| e.contains("not auto or an IPv4 network")),
                "{:.80}: {errs:.200?}",
                set
            );
        }
    }

    #[test]
    fn across_hosts_the_pool_is_named_on_the_hosts_network_and_each_host_has_its_own_segment() {
        let on = "addons.loadBalancer=true";
        let auto = errors_in("ha", &[on, "addons.loadBalancerPool=auto"]);
        assert!(
            auto.iter().any(|e| e.contains("auto cannot pick")),
            "{auto:?}"
        );
        let holds = errors_in("ha", &[on, "addons.loadBalancerPool=198.19.254.16/28"]);
        assert!(
            holds
                .iter()
                .any(|e| e.contains("worker-1") && e.contains("198.19.254.21")),
            "{holds:?}"
        );
        let named = [on, "addons.loadBalancerPool=198.19.254.240/28"];
        assert!(
            errors_in("ha", &named).is_empty(),
            "{:?}",
            errors_in("ha", &named)
        );
        let of = |host: &str| {
            let mut sets: Vec<String> = named.iter().map(|s| s.to_string()).collect();
            sets.push(format!("host={host}"));
            let (_, p) = load::layered("ha", &sets).unwrap();
            let addresses: Vec<Ipv4Addr> = crate::spec::hosts::written_addresses(&p)
                .into_iter()
                .flatten()
                .collect();
            LoadBalancer::of(&p, "ha", &addresses).unwrap().unwrap()
        };
        let (cp1, w2) = (of("cp-1"), of("worker-2"));
        assert_eq!(cp1.uplink_address, Some(Ipv4Addr::new(198, 19, 254, 11)));
        assert_eq!(w2.uplink_address, Some(Ipv4Addr::new(198, 19, 254, 22)));
        // One network: two hosts' macvlans must not share a MAC address.
        assert_ne!(cp1.segment_mac, w2.segment_mac);
        assert_eq!(cp1.pool, w2.pool);
        // Each host's node knows every host's macvlan: the same list on every host, each at a
        // link-local address of its own (not the host's: its ARP would move the host's address).
        assert_eq!(cp1.host_segments, w2.host_segments);
        assert_eq!(cp1.host_segments.len(), 5);
        assert_eq!(cp1.host_address, Ipv4Addr::new(169, 254, 108, 1));
        assert_eq!(w2.host_address, Ipv4Addr::new(169, 254, 108, 5));
        assert!(cp1
            .host_segments
            .contains(&(w2.host_address, w2.segment_mac.clone())));
    }
}
