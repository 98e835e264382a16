//! The LoadBalancer segment as node-network.sh makes it (`addons.loadBalancer`): the rendered scripts
//! of two nodes run for real in a network namespace of their own, with an uplink holding the default
//! route. The nodes share one bridge; the pool is routed onto it, so an address no Service holds
//! sends nothing by the default route; the last node down removes the bridge and the route; a
//! bridge left half made (a killed `up`) is made again. Services on it: node.rs and multi.rs.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// The sandbox: an uplink `up0` (a veth, which counts what it sends) with the default route; a
/// half-made bridge of the environment's name; both nodes up, then down one by one. Prints
/// `key: value` lines.
const SANDBOX: &str = r#"set -u
first=$1 second=$2 bridge=$3 pool=$4 address=$5
mount -t tmpfs kubeunit-it /run
ip link set lo up
ip link add up0 type veth peer name up1
# IPv4 only: no router solicitations or MLD reports in the count.
echo 1 >/proc/sys/net/ipv6/conf/up0/disable_ipv6
echo 1 >/proc/sys/net/ipv6/conf/up1/disable_ipv6
ip addr add 198.19.255.242/30 dev up0
ip link set up1 up
ip link set up0 up
ip route add default via 198.19.255.241
# /sys is the host's (this mount namespace's sysfs predates the network namespace): ask ip.
sent() { ip -s link show dev up0 | awk '/TX:/ { getline; print $2 }'; }
by_default_route() {
  before=$(sent)
  timeout 2 bash -c "exec 3<>/dev/tcp/$address/80" 2>/dev/null
  echo $(( $(sent) - before ))
}
host_state() {
  ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p' | sort
  ip route show table all | grep -v -e 'table local' -e '^local ' -e '^broadcast '
}
host_state >/run/before
# What a kill -9 during the first node's `up` can leave: the bridge, down, without its address (the
# `down` that each `up` begins with takes it away, as the unit's ExecStopPost= would have).
ip link add "$bridge" type bridge
for s in "$first" "$second"; do
  sh "$s" up >/run/up.log 2>&1 || { echo "up: failed"; cat /run/up.log; }
done
echo "ports: $(ip -o link show master "$bridge" | wc -l)"
echo "route: $(ip -o route get "$address" | grep -o "dev $bridge src [0-9.]*")"
echo "lb0 of each node: $(for ns in $(ip netns list | cut -d' ' -f1); do ip -n "$ns" -o link show lb0 >/dev/null && ip -n "$ns" -o route get 169.254.107.117 | grep -o 'dev lb0'; done | wc -l)"
echo "while up, by the default route: $(by_default_route)"
sh "$first" down >/run/down.log 2>&1 || { echo "down: failed"; cat /run/down.log; }
echo "after the first down: ports $(ip -o link show master "$bridge" | wc -l), routes $(ip route show "$pool" | wc -l)"
sh "$second" down >/run/down.log 2>&1 || { echo "down: failed"; cat /run/down.log; }
echo "after the last down: bridge $(ip link show dev "$bridge" >/dev/null 2>&1 && echo yes || echo no), routes $(ip route show "$pool" | wc -l)"
echo "after down, by the default route: $(by_default_route)"
host_state >/run/after
if cmp -s /run/before /run/after; then
  echo "after down: as before"
else
  echo "after down: changed"; diff /run/before /run/after
fi
"#;

#[test]
fn two_nodes_share_the_segment_and_the_last_one_down_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let bin = executable_bin_dir(tmp.path());
    let out = run(kubeunit()
        .args(["gen", "--profile", "multi", "--seed", "7", "--bin-dir"])
        .arg(&bin)
        .args([
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--state-dir",
        ])
        .arg(&dir));
    assert!(out.status.success(), "gen: {}", text(&out));
    let (bridge, pool) = load_balancer_of(&dir);
    let net: ipnet::Ipv4Net = pool.parse().unwrap();
    // An address of the pool that no Service holds.
    let address = net.hosts().nth(4).unwrap().to_string();
    let first = dir.join("config/node-network.sh");
    let second = dir.join("nodes/worker-1/config/node-network.sh");
    assert!(Path::new(&second).exists());
    let out = run(Command::new("unshare")
        .args([
            "--mount",
            "--net",
            "--propagation",
            "private",
            "sh",
            "-c",
            SANDBOX,
            "sandbox",
        ])
        .arg(&first)
        .arg(&second)
        .args([&bridge, &pool, &address]));
    let all = text(&out);
    let got = |key: &str| -> String {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(!all.contains("failed"), "{all}");
    assert_eq!(got("ports"), "2", "{all}");
    assert_eq!(
        got("route"),
        format!("dev {bridge} src 169.254.107.117"),
        "{all}"
    );
    assert_eq!(got("lb0 of each node"), "2", "{all}");
    assert_eq!(got("while up, by the default route"), "0", "{all}");
    assert_eq!(got("after the first down"), "ports 1, routes 1", "{all}");
    assert_eq!(got("after the last down"), "bridge no, routes 0", "{all}");
    // Without the route the same address goes by the default route: the count above can see it.
    assert_ne!(got("after down, by the default route"), "0", "{all}");
    assert_eq!(got("after down"), "as before", "{all}");
}

/// The pool is the cluster's own in the environment's routing table (node-network.sh's
/// `cluster_nets`: unreachable beyond this host, whatever egress says): a pool named in the
/// profile is listed; an `auto` one is in the node links' range, which is listed already.
#[test]
fn the_pool_never_leaves_whatever_egress_says() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = executable_bin_dir(tmp.path());
    let nets = |name: &str, extra: &[&str]| -> String {
        let dir = tmp.path().join(name);
        let out = run(kubeunit()
            .args(["gen", "--profile", "dev", "--seed", "7", "--bin-dir"])
            .arg(&bin)
            .args([
                "--set",
                "network.advertiseAddress=192.0.2.10",
                "--set",
                "network.egress=on",
            ])
            .args(extra)
            .arg("--state-dir")
            .arg(&dir));
        assert!(out.status.success(), "gen: {}", text(&out));
        let script = std::fs::read_to_string(dir.join("config/node-network.sh")).unwrap();
        script
            .lines()
            .find_map(|l| l.strip_prefix("cluster_nets="))
            .unwrap()
            .trim_matches('\'')
            .to_string()
    };
    let own = nets(
        "own",
        &["--set", "addons.loadBalancerPool=198.51.100.64/28"],
    );
    assert!(
        own.split_whitespace().any(|n| n == "198.51.100.64/28"),
        "{own}"
    );
    let auto = nets("auto", &[]);
    assert!(
        auto.split_whitespace().any(|n| n == "198.18.0.0/16"),
        "{auto}"
    );
    assert_eq!(
        auto.split_whitespace().count(),
        own.split_whitespace().count() - 1,
        "{auto}"
    );
}
