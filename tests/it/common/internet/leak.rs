//! The leak counter: iptables rules that count (and drop) packets of the test ranges leaving through
//! the host's default-route interface.

use std::net::Ipv6Addr;
use std::process::{Command, Output};

use super::{ip_output, KEPT_LOCAL, KEPT_LOCAL_V6};
use crate::common::text;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn tool(self) -> &'static str {
        match self {
            Family::V4 => "iptables",
            Family::V6 => "ip6tables",
        }
    }
}

/// Counting rules (iptables, mangle table, POSTROUTING: before NAT, so a pod's packet still has the
/// pod's source) for packets leaving through given interfaces with a source or destination in
/// `KEPT_LOCAL`, or (IPv6) a unique local source other than the interface's own. Its own chain
/// `KU-INET-LEAK-<name>` per family, each rule returning (a packet is counted once, by the first rule it
/// matches; it only counts, and the packet goes on). The count is host-wide: a packet of any process or
/// environment on this host counts. Removed on drop.
pub struct LeakCounter {
    chain: String,
    /// Per family, whether each rule of the chain (in order) counts a leak.
    rules: Vec<(Family, Vec<(String, bool)>)>,
}

impl LeakCounter {
    /// On the interfaces of this host's default routes (IPv4 and IPv6), chain `KU-INET-LEAK-<slot>`.
    pub fn new(slot: u8) -> LeakCounter {
        LeakCounter::on_interfaces(
            &slot.to_string(),
            &default_interfaces(Family::V4),
            &default_interfaces(Family::V6),
        )
    }

    /// On the given interfaces, chain `KU-INET-LEAK-<name>`: the counter's own test counts on a test
    /// internet's veth, where a counted packet stays on this host.
    pub fn on_interfaces(name: &str, v4: &[String], v6: &[String]) -> LeakCounter {
        let chain = format!("KU-INET-LEAK-{name}");
        assert!(
            chain.len() <= 28,
            "{chain}: iptables chain names are 28 characters at most"
        );
        remove_chain(&chain);
        let mut counter = LeakCounter {
            chain,
            rules: Vec::new(),
        };
        if !v4.is_empty() {
            let mut rules: Vec<(String, bool)> = Vec::new();
            for dir in ["-s", "-d"] {
                rules.extend(KEPT_LOCAL.iter().map(|n| (format!("{dir} {n}"), true)));
            }
            counter.install(Family::V4, v4, rules);
        }
        if !v6.is_empty() {
            // The interface's own addresses first, uncounted: the host's own traffic.
            let mut rules: Vec<(String, bool)> = v6
                .iter()
                .flat_map(|i| own_ula(i))
                .map(|a| (format!("-s {a}/128"), false))
                .collect();
            rules.push((format!("-s {KEPT_LOCAL_V6}"), true));
            counter.install(Family::V6, v6, rules);
        }
        counter
    }

    fn install(&mut self, family: Family, ifaces: &[String], rules: Vec<(String, bool)>) {
        let chain = self.chain.clone();
        // Recorded first: a failure below leaves the chain for drop to remove.
        self.rules.push((family, Vec::new()));
        iptables(family, &["-N", &chain]);
        for (rule, counts) in rules {
            let mut args = vec!["-A", &chain];
            args.extend(rule.split(' '));
            args.extend(["-j", "RETURN"]);
            iptables(family, &args);
            self.rules.last_mut().unwrap().1.push((rule, counts));
        }
        for i in ifaces {
            iptables(family, &["-I", "POSTROUTING", "-o", i, "-j", &chain]);
        }
    }

    /// Each counting rule ("iptables -s 198.18.0.0/15") and its packets.
    pub fn counts(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for (family, rules) in &self.rules {
            let o = iptables_output(*family, &["-S", &self.chain, "-v"]);
            assert!(o.status.success(), "{}: {}", family.tool(), text(&o));
            let listed: Vec<u64> = String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.starts_with("-A "))
                .map(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    let c = w.iter().position(|x| *x == "-c").expect("-S -v shows -c");
                    w[c + 1].parse().unwrap()
                })
                .collect();
            assert_eq!(
                listed.len(),
                rules.len(),
                "{} -S {}",
                family.tool(),
                self.chain
            );
            for ((rule, counts), n) in rules.iter().zip(listed) {
                if *counts {
                    out.push((format!("{} {rule}", family.tool()), n));
                }
            }
        }
        out
    }

    /// Packets counted since it was installed.
    pub fn packets_out(&self) -> u64 {
        self.counts().iter().map(|(_, n)| n).sum()
    }

    /// Fail unless nothing was counted; the message names the rules that counted and this host's TCP
    /// connections to the test ranges, with their processes (a leak may be another program's: the
    /// count is host-wide).
    pub fn assert_none(&self) {
        let counted: Vec<(String, u64)> =
            self.counts().into_iter().filter(|(_, n)| *n > 0).collect();
        if counted.is_empty() {
            return;
        }
        let mut sockets = String::new();
        for net in KEPT_LOCAL {
            let o = Command::new("ss")
                .args(["-tanpH", "dst", net])
                .output()
                .map(|o| text(&o))
                .unwrap_or_else(|e| format!("ss: {e}"));
            sockets.push_str(&o);
        }
        panic!(
            "{} packets of the test ranges left through the default route's interface (counted by \
             {}): {counted:?}\nTCP connections to the test ranges now:\n{sockets}",
            counted.iter().map(|(_, n)| n).sum::<u64>(),
            self.chain
        );
    }

    pub fn chain(&self) -> &str {
        &self.chain
    }
}

impl Drop for LeakCounter {
    fn drop(&mut self) {
        remove_chain(&self.chain);
    }
}

/// Remove `chain` and the POSTROUTING rules that jump to it, of both families (what is there).
fn remove_chain(chain: &str) {
    for family in [Family::V4, Family::V6] {
        let o = iptables_output(family, &["-S", "POSTROUTING"]);
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.first() == Some(&"-A") && w.windows(2).any(|p| p == ["-j", chain]) {
                let mut args = vec!["-D"];
                args.extend(&w[1..]);
                iptables_output(family, &args);
            }
        }
        iptables_output(family, &["-F", chain]);
        iptables_output(family, &["-X", chain]);
    }
}

fn iptables_output(family: Family, args: &[&str]) -> Output {
    Command::new(family.tool())
        .args(["-w", "-t", "mangle"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} (Debian's iptables): {e}", family.tool()))
}

fn iptables(family: Family, args: &[&str]) {
    let o = iptables_output(family, args);
    assert!(
        o.status.success(),
        "{} -t mangle {args:?}: {}",
        family.tool(),
        text(&o)
    );
}

/// The interfaces of this host's default IPv4 routes: where a leaked packet would leave.
pub fn default_route_interfaces() -> Vec<String> {
    default_interfaces(Family::V4)
}

/// The interfaces of this host's default routes.
fn default_interfaces(family: Family) -> Vec<String> {
    let flag = match family {
        Family::V4 => "-4",
        Family::V6 => "-6",
    };
    let o = ip_output(&[flag, "route", "show", "default"]);
    let mut out: Vec<String> = Vec::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if let Some(i) = w.iter().position(|x| *x == "dev") {
            if let Some(dev) = w.get(i + 1).filter(|d| !out.iter().any(|o| o == *d)) {
                out.push(dev.to_string());
            }
        }
    }
    out
}

/// The unique local addresses of interface `iface`.
fn own_ula(iface: &str) -> Vec<Ipv6Addr> {
    let ula: ipnet::Ipv6Net = KEPT_LOCAL_V6.parse().unwrap();
    let o = ip_output(&["-6", "-o", "addr", "show", "dev", iface, "scope", "global"]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let i = w.iter().position(|x| *x == "inet6")?;
            w.get(i + 1)?.split('/').next()?.parse::<Ipv6Addr>().ok()
        })
        .filter(|a| ula.contains(a))
        .collect()
}

/// Where chain `chain` is listed ("iptables chain NAME"): nowhere once its counter dropped.
pub(super) fn chain_listed(chain: &str) -> Vec<String> {
    let mut out = Vec::new();
    for family in [Family::V4, Family::V6] {
        let o = iptables_output(family, &["-S"]);
        let listed = String::from_utf8_lossy(&o.stdout).into_owned();
        if listed.split_whitespace().any(|w| w == chain) {
            out.push(format!("{} chain {chain}", family.tool()));
        }
    }
    out
}
