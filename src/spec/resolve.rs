//! DNS names of hosts (`hosts[].address`), resolved at the edge. `gen` looks each name up once a
//! run (`lookup`, through a `Resolver`: the system's, or a table in tests) and passes the answers
//! in as host facts (`HostFacts::host_addresses`). The plan takes a name's address from there,
//! else from what the profile records (`hosts[].resolvedAddress`: a state dir's own at run time,
//! or a profile's under `gen --hermetic`, which looks nothing up), checks it as it checks an
//! address written as such (`hosts::address_errors`), and records it in `profile.yaml` again.
//!
//! A name's address is the lowest of its IPv4 addresses (by number): resolvers order their answers
//! as they like (RFC 6724's sorting, round-robin DNS), and the state dir must not follow that.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use super::hosts::is_address_name;
use super::profile::{HostEntry, Profile};
use crate::error::{Error, FieldError};

/// Looks a DNS name up: every address it has, of either family, or why it has none.
pub trait Resolver {
    fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, String>;
}

/// The system's resolver: getaddrinfo (through std), so /etc/hosts and DNS as nsswitch.conf and
/// resolv.conf say.
pub struct System;

impl Resolver for System {
    fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        use std::net::ToSocketAddrs;
        (name, 0)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|a| a.ip()).collect())
            .map_err(|e| e.to_string())
    }
}

/// The DNS names among the hosts' addresses, each once, with the index of the first host that
/// gives it. A value that is neither an address nor a name is validation's to refuse.
fn names(p: &Profile) -> Vec<(usize, &str)> {
    let mut seen = std::collections::BTreeSet::new();
    p.hosts
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.dns_name().map(|n| (i, n)))
        .filter(|(_, n)| is_address_name(n) && seen.insert(*n))
        .collect()
}

/// Look up every DNS name among the hosts' addresses, once each, through `resolver`: name ->
/// the lowest of its IPv4 addresses. A name that does not resolve, or has no IPv4 address, is an
/// error of the first host that gives it; all are reported at once.
pub fn lookup(p: &Profile, resolver: &dyn Resolver) -> Result<BTreeMap<String, Ipv4Addr>, Error> {
    let mut found = BTreeMap::new();
    let mut errors = Vec::new();
    for (i, name) in names(p) {
        let field = format!("hosts[{i}].address");
        match resolver.lookup(name) {
            Err(why) => errors.push(FieldError::new(
                field,
                format!("{name:?}"),
                format!("the DNS name does not resolve: {why}"),
                "make it resolve on the machine that runs gen (DNS, or /etc/hosts), or write the host's IPv4 address",
            )),
            Ok(addrs) => {
                let lowest = addrs
                    .iter()
                    .filter_map(|a| match a {
                        IpAddr::V4(a) => Some(*a),
                        IpAddr::V6(_) => None,
                    })
                    .min();
                match lowest {
                    Some(a) => {
                        found.insert(name.to_string(), a);
                    }
                    None => errors.push(FieldError::new(
                        field,
                        format!("{name:?}"),
                        format!(
                            "the DNS name has no IPv4 address (it resolves to {}): the hosts reach each other over IPv4",
                            list(&addrs)
                        ),
                        "give the name an A record (or an IPv4 line in /etc/hosts), or write the host's IPv4 address",
                    )),
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(found)
    } else {
        Err(Error::fields("profile", errors))
    }
}

/// `gen --hermetic` looks no name up: every DNS name among the hosts' addresses needs the address
/// the profile gives it (`hosts[].resolvedAddress`).
pub fn hermetic_errors(p: &Profile) -> Vec<FieldError> {
    p.hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| address(h, &BTreeMap::new()).is_none())
        .map(|(i, h)| {
            FieldError::new(
                format!("hosts[{i}].address"),
                format!("{:?}", h.address),
                "a DNS name, and --hermetic looks no name up",
                format!(
                    "write the host's IPv4 address, or give what the name resolves to as hosts[{i}].resolvedAddress, or render without --hermetic"
                ),
            )
        })
        .collect()
}

/// A host's address: one written as such, else its name's in `looked_up` (gen's lookups), else
/// the one the profile records for the name. `None`: a name nothing resolved.
pub fn address(h: &HostEntry, looked_up: &BTreeMap<String, Ipv4Addr>) -> Option<Ipv4Addr> {
    h.address
        .parse()
        .ok()
        .or_else(|| looked_up.get(&h.address).copied())
        .or_else(|| h.resolved_address.parse().ok())
}

/// Every host's address (`address`), in host order, checked as validation checks the addresses
/// written as such (`hosts::address_errors`, and the load balancer's pool against them): what a
/// name resolved to must pass the same checks.
pub fn addresses(
    p: &Profile,
    looked_up: &BTreeMap<String, Ipv4Addr>,
) -> Result<Vec<Ipv4Addr>, Error> {
    let known: Vec<Option<Ipv4Addr>> = p.hosts.iter().map(|h| address(h, looked_up)).collect();
    let mut errors: Vec<FieldError> = p
        .hosts
        .iter()
        .zip(&known)
        .enumerate()
        .filter(|(_, (_, a))| a.is_none())
        .map(|(i, (h, _))| {
            FieldError::new(
                format!("hosts[{i}].address"),
                format!("{:?}", h.address),
                "a DNS name that was not resolved",
                "generate the state dir again with `kubeunit gen`, which looks the name up",
            )
        })
        .collect();
    errors.extend(super::hosts::address_errors(p, &known));
    errors.extend(super::load_balancer::pool_host_errors(p, &known));
    if errors.is_empty() {
        Ok(known.into_iter().flatten().collect())
    } else {
        Err(Error::fields("profile", errors))
    }
}

fn list(addrs: &[IpAddr]) -> String {
    if addrs.is_empty() {
        return "nothing".into();
    }
    addrs
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A resolver of a fixed table, for tests: each name's answer, and how often it was asked.
#[cfg(test)]
pub struct Table {
    answers: BTreeMap<String, Vec<IpAddr>>,
    pub asked: std::cell::RefCell<BTreeMap<String, usize>>,
}

#[cfg(test)]
impl Table {
    /// `("cp-1.test", "198.51.100.11,fd00::1")`: a name and its addresses, comma-separated.
    pub fn new(answers: &[(&str, &str)]) -> Table {
        let answers = answers
            .iter()
            .map(|(name, addrs)| {
                let addrs = addrs.split(',').filter(|a| !a.is_empty());
                let addrs = addrs.map(|a| a.parse().unwrap_or_else(|_| panic!("{a}")));
                (name.to_string(), addrs.collect())
            })
            .collect();
        Table {
            answers,
            asked: Default::default(),
        }
    }
}

#[cfg(test)]
impl Resolver for Table {
    fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        *self.asked.borrow_mut().entry(name.to_string()).or_default() += 1;
        self.answers
            .get(name)
            .cloned()
            .ok_or_else(|| "Name or service not known".to_string())
    }
}

/// `--set hosts=...` of `ha`'s five hosts (cp-1, cp-2, cp-3, worker-1, worker-2) at `addresses`,
/// each an address or a DNS name, for tests.
#[cfg(test)]
pub fn ha_hosts_at(addresses: [&str; 5]) -> String {
    let names = ["cp-1", "cp-2", "cp-3", "worker-1", "worker-2"];
    let each: Vec<String> = names
        .iter()
        .zip(addresses)
        .map(|(n, a)| {
            let roles = match n.starts_with("cp-") {
                true => "[etcd, control-plane]",
                false => "[worker]",
            };
            format!("{{name: {n}, address: {a:?}, roles: {roles}}}")
        })
        .collect();
    format!("hosts=[{}]", each.join(", "))
}

/// ha's five hosts by DNS name (cp-1.test, ..., worker-2.test) as a `--set`, and what a `gen`
/// found for them: ha's own addresses, cp-2.test's `cp2` (tests).
#[cfg(test)]
pub fn ha_by_name(cp2: &str) -> (String, BTreeMap<String, Ipv4Addr>) {
    let answers = [
        ("cp-1.test", "198.19.254.11"),
        ("cp-2.test", cp2),
        ("cp-3.test", "198.19.254.13"),
        ("worker-1.test", "198.19.254.21"),
        ("worker-2.test", "198.19.254.22"),
    ];
    let set = ha_hosts_at(answers.map(|(name, _)| name));
    let (_, p) = super::load::layered("ha", std::slice::from_ref(&set)).unwrap();
    let found = lookup(&p, &Table::new(&answers)).unwrap_or_else(|e| panic!("{e}"));
    (set, found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    /// ha with its hosts at `addresses` and `sets` more.
    fn ha(addresses: [&str; 5], sets: &[&str]) -> Profile {
        let sets: Vec<String> = std::iter::once(ha_hosts_at(addresses))
            .chain(sets.iter().map(|s| s.to_string()))
            .collect();
        load::layered("ha", &sets)
            .unwrap_or_else(|e| panic!("{e}"))
            .1
    }

    fn messages(e: &Error) -> Vec<String> {
        match e {
            Error::Profile(f) => f.errors.iter().map(|e| e.to_string()).collect(),
            other => panic!("not a profile's error: {other}"),
        }
    }

    const NAMED: [&str; 5] = [
        "cp-1.test",
        "cp-2.test",
        "198.19.254.13",
        "workers.test",
        "198.19.254.22",
    ];

    #[test]
    fn each_name_is_looked_up_once_and_resolves_to_its_lowest_ipv4_address() {
        let table = Table::new(&[
            ("cp-1.test", "198.19.254.11"),
            // Several answers, in no order, of both families: the lowest IPv4 one, whatever
            // order the resolver gives.
            (
                "cp-2.test",
                "fd00::12,198.19.254.40,198.19.254.12,198.19.254.30",
            ),
            ("workers.test", "198.19.254.21"),
        ]);
        let p = ha(NAMED, &[]);
        let found = lookup(&p, &table).unwrap();
        assert_eq!(
            found,
            BTreeMap::from([
                ("cp-1.test".to_string(), Ipv4Addr::new(198, 19, 254, 11)),
                ("cp-2.test".to_string(), Ipv4Addr::new(198, 19, 254, 12)),
                ("workers.test".to_string(), Ipv4Addr::new(198, 19, 254, 21)),
            ])
        );
        // Addresses written as such are asked of nobody.
        let asked = table.asked.borrow().clone();
        assert_eq!(
            asked,
            BTreeMap::from([
                ("cp-1.test".to_string(), 1),
                ("cp-2.test".to_string(), 1),
                ("workers.test".to_string(), 1),
            ])
        );
        let all = addresses(&p, &found).unwrap();
        let literal = ha(
            [
                "198.19.254.11",
                "198.19.254.12",
                "198.19.254.13",
                "198.19.254.21",
                "198.19.254.22",
            ],
            &[],
        );
        assert_eq!(all, addresses(&literal, &BTreeMap::new()).unwrap());

        // Two hosts of one name: asked once, and the second host is refused as another's address.
        let twice = ha(
            [
                "cp-1.test",
                "cp-1.test",
                "198.19.254.13",
                "198.19.254.21",
                "198.19.254.22",
            ],
            &[],
        );
        let table = Table::new(&[("cp-1.test", "198.19.254.11")]);
        let found = lookup(&twice, &table).unwrap();
        assert_eq!(table.asked.borrow()["cp-1.test"], 1);
        let e = addresses(&twice, &found).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let m = messages(&e);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].contains("hosts[1].address")
                && m[0].contains("\"cp-1.test\" (resolved to 198.19.254.11)")
                && m[0].contains("another host has this address")
                && m[0].contains("fix:"),
            "{m:?}"
        );
    }

    #[test]
    fn a_name_that_does_not_resolve_or_has_no_ipv4_address_is_refused_by_field() {
        let table = Table::new(&[("cp-2.test", "fd00::12"), ("workers.test", "")]);
        let e = lookup(&ha(NAMED, &[]), &table).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let m = messages(&e);
        assert_eq!(m.len(), 3, "every name at once: {m:?}");
        let says = |field: &str, value: &str, what: &str| {
            assert!(
                m.iter().any(|e| e.contains(field)
                    && e.contains(value)
                    && e.contains(what)
                    && e.contains("fix:")
                    && e.contains("write the host's IPv4 address")),
                "{field} {what}: {m:?}"
            )
        };
        says(
            "hosts[0].address",
            "\"cp-1.test\"",
            "does not resolve: Name or service not known",
        );
        says(
            "hosts[1].address",
            "\"cp-2.test\"",
            "no IPv4 address (it resolves to fd00::12)",
        );
        says(
            "hosts[3].address",
            "\"workers.test\"",
            "no IPv4 address (it resolves to nothing)",
        );
    }

    #[test]
    fn what_a_name_resolves_to_is_checked_as_an_address_written_as_such() {
        let p = ha(NAMED, &["addons.loadBalancerPool=198.19.254.240/28"]);
        let at = |cp1: &str| {
            BTreeMap::from([
                ("cp-1.test".to_string(), cp1.parse().unwrap()),
                ("cp-2.test".to_string(), "198.19.254.12".parse().unwrap()),
                ("workers.test".to_string(), "198.19.254.21".parse().unwrap()),
            ])
        };
        assert!(addresses(&p, &at("198.19.254.11")).is_ok());
        for (answer, says) in [
            // What /etc/hosts makes of a host's own name on Debian.
            ("127.0.1.1", "not an address other hosts can reach"),
            ("198.19.254.13", "another host has this address"),
            ("10.88.3.4", "inside network.podCIDR"),
            ("10.0.0.9", "inside network.serviceCIDR"),
            ("198.19.254.241", "holds the address of host \"cp-1\""),
        ] {
            let e = addresses(&p, &at(answer)).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let m = messages(&e);
            assert!(
                m.iter().any(|e| e.contains(says)
                    && e.contains(answer)
                    && e.contains("cp-1.test")
                    && e.contains("fix:")),
                "{answer}: {m:?}"
            );
            // The second host that has it is named, with the first and its name.
            if answer == "198.19.254.13" {
                assert!(
                    m[0].contains("hosts[2].address")
                        && m[0].contains("\"cp-1\", whose \"cp-1.test\" resolved to it"),
                    "{m:?}"
                );
            }
        }
        // A name nothing resolved (the profile records no address for it either).
        let e = addresses(&p, &BTreeMap::new()).unwrap_err();
        let m = messages(&e);
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(
            m[0].contains("hosts[0].address") && m[0].contains("not resolved"),
            "{m:?}"
        );
        // `--hermetic`: each name needs its address in the profile.
        let hermetic = hermetic_errors(&p);
        assert_eq!(hermetic.len(), 3, "{hermetic:?}");
        assert!(
            hermetic[0].to_string().contains("--hermetic"),
            "{hermetic:?}"
        );
        assert!(
            hermetic[0].fix.contains("hosts[0].resolvedAddress"),
            "{hermetic:?}"
        );
        let mut recorded = p.clone();
        for (h, a) in recorded.hosts.iter_mut().zip([
            "198.19.254.11",
            "198.19.254.12",
            "",
            "198.19.254.21",
            "",
        ]) {
            h.resolved_address = a.into();
        }
        assert!(hermetic_errors(&recorded).is_empty());
        assert_eq!(
            addresses(&recorded, &BTreeMap::new()).unwrap(),
            addresses(&p, &at("198.19.254.11")).unwrap()
        );
        // A lookup wins over the record: gen resolves the name again.
        assert_eq!(
            addresses(&recorded, &at("198.19.254.14")).unwrap()[0],
            Ipv4Addr::new(198, 19, 254, 14)
        );
    }
}
