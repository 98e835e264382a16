//! The LoadBalancer segment as node-network.sh makes it (`addons.loadBalancer`): the rendered scripts
//! of two nodes run for real in a network namespace of their own, with an uplink holding the default
//! route. The nodes share one bridge; the pool is routed onto it, so an address no Service holds
//! sends nothing by the default route; the last node down removes the bridge and the route; a
//! bridge left half made (a killed `up`) is made again. Services on it: node.rs and multi.rs.

use std::path::Path;

use crate::common::*;

/// The sandbox: an uplink `up0` (a veth, which counts what it sends) with the default route, and
/// what the scripts below report with. Their arguments: the two nodes' scripts, the bridge, the
/// pool, an address of it that no Service holds.
const PRELUDE: &str = r#"set -u
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
report_up() {
  echo "ports: $(ip -o link show master "$bridge" | wc -l)"
  echo "route: $(ip -o route get "$address" | grep -o "dev $bridge src [0-9.]*")"
  echo "lb0 of each node: $(for ns in $(ip netns list | cut -d' ' -f1); do ip -n "$ns" -o link show lb0 >/dev/null && ip -n "$ns" -o route get 169.254.107.117 | grep -o 'dev lb0'; done | wc -l)"
  echo "while up, by the default route: $(by_default_route)"
}
report_down() {
  echo "after the last down: bridge $(ip link show dev "$bridge" >/dev/null 2>&1 && echo yes || echo no), routes $(ip route show "$pool" | wc -l)"
  echo "after down, by the default route: $(by_default_route)"
  host_state >/run/after
  if cmp -s /run/before /run/after; then
    echo "after down: as before"
  else
    echo "after down: changed"; diff /run/before /run/after
  fi
}
"#;

/// A half-made bridge of the environment's name; both nodes up, then down one by one.
const SEQUENTIAL: &str = r#"
# What a kill -9 during the first node's `up` can leave: the bridge, down, without its address (the
# `down` that each `up` begins with takes it away, as the unit's ExecStopPost= would have).
ip link add "$bridge" type bridge
for s in "$first" "$second"; do
  sh "$s" up >/run/up.log 2>&1 || { echo "up: failed"; cat /run/up.log; }
done
report_up
sh "$first" down >/run/down.log 2>&1 || { echo "down: failed"; cat /run/down.log; }
echo "after the first down: ports $(ip -o link show master "$bridge" | wc -l), routes $(ip route show "$pool" | wc -l)"
sh "$second" down >/run/down.log 2>&1 || { echo "down: failed"; cat /run/down.log; }
report_down
"#;

/// The lines of `SANDBOX` + `body` run in a mount and network namespace of their own, for the
/// multi environment `dir`: `key: value`, and all it printed.
fn sandbox(dir: &Path, body: &str) -> (Vec<(String, String)>, String) {
    let (bridge, pool) = load_balancer_of(dir);
    let net: ipnet::Ipv4Net = pool.parse().unwrap();
    // An address of the pool that no Service holds.
    let address = net.hosts().nth(4).unwrap().to_string();
    let first = dir.join("config/node-network.sh");
    let second = dir.join("nodes/worker-1/config/node-network.sh");
    assert!(Path::new(&second).exists());
    let out = in_net_sandbox(
        &format!("{PRELUDE}{body}"),
        &[
            first.as_os_str(),
            second.as_os_str(),
            bridge.as_ref(),
            pool.as_ref(),
            address.as_ref(),
        ],
    );
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (lines, text(&out))
}

/// What both sandboxes must see: the segment up with both nodes on it and nothing by the default
/// route, then gone, and the host as before.
fn assert_up_then_gone(lines: &[(String, String)], all: &str, bridge: &str) {
    let got = |key: &str| -> &str {
        lines
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
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
    assert_eq!(got("after the last down"), "bridge no, routes 0", "{all}");
    // Without the route the same address goes by the default route: the count above can see it.
    assert_ne!(got("after down, by the default route"), "0", "{all}");
    assert_eq!(got("after down"), "as before", "{all}");
}

#[test]
fn two_nodes_share_the_segment_and_the_last_one_down_removes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = multi_state(tmp.path(), &[]);
    let (bridge, _) = load_balancer_of(&dir);
    let (lines, all) = sandbox(&dir, SEQUENTIAL);
    let after_first = lines.iter().find(|(k, _)| k == "after the first down");
    assert_eq!(
        after_first.map(|(_, v)| v.as_str()),
        Some("ports 1, routes 1"),
        "{all}"
    );
    assert_up_then_gone(&lines, &all, &bridge);
}

/// kill -9 of `up` at any instant leaves nothing the next `up` trips on, and two nodes coming up
/// (or going down) at once share the bridge: the uplinks' lock orders them.
#[test]
fn a_killed_up_and_nodes_at_once_leave_one_segment_then_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = multi_state(tmp.path(), &[]);
    let (bridge, _) = load_balancer_of(&dir);
    let body = format!("{KILLED_THEN_UP_AT_ONCE}report_up\n{DOWN_AT_ONCE}report_down\n");
    let (lines, all) = sandbox(&dir, &body);
    assert_up_then_gone(&lines, &all, &bridge);
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
