//! The LoadBalancer segment as node-network.sh makes it (`addons.loadBalancer`): the rendered scripts
//! of two nodes run for real in a network namespace of their own, with an uplink holding the default
//! route. The nodes share one bridge; the pool is routed onto it, so an address no Service holds
//! sends nothing by the default route; the last node down removes the bridge and the route; a
//! bridge left half made (a killed `up`) is made again. Across hosts the segment is the hosts' network
//! (macvlans of the host's interface). Services on it: node.rs, multi.rs and hosts.rs.

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
    (report(&out), text(&out))
}

/// The `key: value` lines a sandbox printed.
fn report(out: &std::process::Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// The value of `key` in a sandbox's report, empty when it printed none.
fn value<'a>(lines: &'a [(String, String)], key: &str) -> &'a str {
    lines
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_default()
}

/// What both sandboxes must see: the segment up with both nodes on it and nothing by the default
/// route, then gone, and the host as before.
fn assert_up_then_gone(lines: &[(String, String)], all: &str, bridge: &str) {
    let got = |key: &str| value(lines, key);
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
    let dir = multi_state(tmp.path(), &["addons.loadBalancer=true"]);
    let (bridge, _) = load_balancer_of(&dir);
    let (lines, all) = sandbox(&dir, SEQUENTIAL);
    assert_eq!(
        value(&lines, "after the first down"),
        "ports 1, routes 1",
        "{all}"
    );
    assert_up_then_gone(&lines, &all, &bridge);
}

/// kill -9 of `up` at any instant leaves nothing the next `up` trips on, and two nodes coming up
/// (or going down) at once share the bridge: the uplinks' lock orders them.
#[test]
fn a_killed_up_and_nodes_at_once_leave_one_segment_then_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = multi_state(tmp.path(), &["addons.loadBalancer=true"]);
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
                "--set",
                "addons.loadBalancer=true",
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

/// Across hosts (`ha`), one host's node-network.sh run for real in a sandbox: the host's `eth0`
/// holds its address on the hosts' network, where a client (a namespace of its own) sits, which
/// routes to another client beyond it; an uplink `up0` has the host's first default route. `up` is killed at instants from 5 ms to 0.6 s in, then runs
/// whole. The node stands in for MetalLB and kube-proxy: a pool address on its loopback (the kernel
/// answers ARP for it on lb0) and an HTTP server there. Its arguments: the host's script, its
/// macvlan, the pool, the address served, an address of the pool that no Service holds.
const ACROSS_HOSTS: &str = r#"set -u
script=$1 segment=$2 pool=$3 served=$4 free=$5
mount -t tmpfs kubeunit-it /run
ip link set lo up
ip link add up0 type veth peer name up1
echo 1 >/proc/sys/net/ipv6/conf/up0/disable_ipv6
echo 1 >/proc/sys/net/ipv6/conf/up1/disable_ipv6
ip addr add 198.19.255.242/30 dev up0
ip link set up1 up
ip link set up0 up
ip route add default via 198.19.255.241
ip netns add client
ip link add eth0 type veth peer name lan netns client
ip addr add 198.19.254.11/24 dev eth0
ip link set eth0 up
ip -n client link set lo up
ip -n client addr add 198.19.254.1/24 dev lan
ip -n client link set lan up
# The client is the hosts' network's router too, to `far` beyond it: the host's second default route (up0's
# goes first) is by it.
ip route add default via 198.19.254.1 dev eth0 metric 100
ip netns add far
ip -n client link add far0 type veth peer name far0 netns far
ip -n client addr add 198.18.254.1/30 dev far0
ip -n far addr add 198.18.254.2/30 dev far0
ip -n client link set far0 up
ip -n far link set far0 up
ip -n far route add default via 198.18.254.1
ip netns exec client sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward'
sent() { ip -s link show dev up0 | awk '/TX:/ { getline; print $2 }'; }
host_state() {
  ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p' | sort
  ip route show table all | grep -v -e 'table local' -e '^local ' -e '^broadcast '
}
host_state >/run/before
# The first line of what the server answers to this host, or with `client` to the client.
get() {
  ${1:+ip netns exec "$1"} timeout 3 bash -c \
    "exec 3<>/dev/tcp/$served/80; printf 'GET / HTTP/1.0\r\n\r\n' >&3; head -1 <&3" 2>/dev/null
}
for delay in 0.005 0.01 0.02 0.04 0.08 0.15 0.3 0.6; do
  timeout -s KILL "$delay" sh "$script" up >/dev/null 2>&1
done
sh "$script" up >/run/up.log 2>&1 || { echo "up: failed"; cat /run/up.log; }
echo "macvlans: $(ip -o link show type macvlan | wc -l), in the node: $(ip -n kubeunit-ha -o link show type macvlan | wc -l)"
echo "route: $(ip -o route get "$served" | grep -o "dev $segment src [0-9.]*")"
# The client knows the host's address (its eth0's MAC) before the host's macvlan asks ARP for the pool,
# and longer than the kernel's locktime (1 s) before: an ARP request from the host's address would move it.
ip netns exec client timeout 1 bash -c 'exec 3<>/dev/tcp/198.19.254.11/1' 2>/dev/null
sleep 1.2
ip -n kubeunit-ha addr add "$served/32" dev lo
ip netns exec kubeunit-ha python3 -m http.server 80 --bind "$served" >/dev/null 2>&1 &
server=$!
for i in $(seq 50); do [ -n "$(get)" ] && break; sleep 0.1; done
echo "from the host: $(get)"
echo "from the hosts' network: $(get client)"
echo "from beyond its router: $(get far)"
mac=$(ip -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
echo "the host's address at the client: $(ip -n client neigh show 198.19.254.11 | grep -c "lladdr $mac") of $(ip -n client neigh show 198.19.254.11 | wc -l)"
echo "(the client's entry: $(ip -n client neigh show 198.19.254.11); eth0 $mac; $segment $(ip -o link show "$segment" | grep -o 'link/ether [0-9a-f:]*'))"
before=$(sent)
timeout 2 bash -c "exec 3<>/dev/tcp/$free/80" 2>/dev/null
echo "a free pool address, by the default route: $(( $(sent) - before ))"
kill "$server"
sh "$script" down >/run/down.log 2>&1 || { echo "down: failed"; cat /run/down.log; }
echo "after the down: macvlans $(ip -o link show type macvlan | wc -l), routes $(ip route show "$pool" | wc -l)"
host_state >/run/after
if cmp -s /run/before /run/after; then echo "after down: as before"; else echo "after down: changed"; diff /run/before /run/after; fi
ip netns del far
ip netns del client
"#;

#[test]
fn across_hosts_a_killed_up_then_the_hosts_network_reaches_the_node_and_down_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = executable_bin_dir(tmp.path());
    let out_dir = tmp.path().join("out");
    let o = run(kubeunit()
        .args(["gen", "--profile", "ha", "--seed", "7", "--bin-dir"])
        .arg(&bin)
        .args(["--state-dir", "/var/lib/kubeunit/ha", "--out"])
        .arg(&out_dir));
    assert!(o.status.success(), "gen: {}", text(&o));
    let dir = out_dir.join("cp-1");
    let (segment, pool) = load_balancer_of(&dir);
    assert_eq!(pool, "198.19.254.240/28");
    let script = dir.join("config/node-network.sh");
    let out = in_net_sandbox(
        ACROSS_HOSTS,
        &[
            script.as_os_str(),
            segment.as_ref(),
            pool.as_ref(),
            "198.19.254.241".as_ref(),
            "198.19.254.245".as_ref(),
        ],
    );
    let (lines, all) = (report(&out), text(&out));
    let got = |key: &str| value(&lines, key);
    assert!(!all.contains("failed"), "{all}");
    assert_eq!(got("macvlans"), "1, in the node: 1", "{all}");
    // From the host's link-local address on its macvlan (the first host's).
    assert_eq!(
        got("route"),
        format!("dev {segment} src 169.254.108.1"),
        "{all}"
    );
    assert_eq!(got("from the host"), "HTTP/1.0 200 OK", "{all}");
    assert_eq!(got("from the hosts' network"), "HTTP/1.0 200 OK", "{all}");
    assert_eq!(got("from beyond its router"), "HTTP/1.0 200 OK", "{all}");
    // Still the host's own interface: neither the macvlan's ARP nor its answers moved it.
    assert_eq!(got("the host's address at the client"), "1 of 1", "{all}");
    assert_eq!(
        got("a free pool address, by the default route"),
        "0",
        "{all}"
    );
    assert_eq!(got("after the down"), "macvlans 0, routes 0", "{all}");
    assert_eq!(got("after down"), "as before", "{all}");
}

/// `kubeunit addons enable loadbalancer` on a running dev (which leaves it off): MetalLB runs, a
/// LoadBalancer Service waiting for an address gets one of the pool, routed from this host onto the
/// segment, and it answers from this host. `disable` deletes MetalLB's objects and removes the
/// segment and its routes while the node runs on; the node's `stop` afterwards leaves nothing.
#[test]
fn addons_enable_loadbalancer_on_a_running_dev_and_disable_removes_it_and_its_routes() {
    use crate::common::container::{dev_args, gen_in, Container, Env};
    use std::time::Duration;
    let _turn = node_lock();
    let c = Container::boot_node("addons-lb");
    let ports = crate::common::ports::Ports::allocate();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let state = gen_in(&c, "dev", &ports, &dev_args(&version));
    let kubectl = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    let n = Env {
        c: &c,
        state,
        kubectl,
    };
    let out = n.ku(&["start", "--timeout", "180"]);
    assert!(out.status.success(), "start: {}", text(&out));
    assert_eq!(
        load_balancer_of(&n.state).0,
        "",
        "dev leaves the load balancer off"
    );
    n.create_web(1);
    n.kubectl_ok(&["rollout", "status", "deploy/web", "--timeout=120s"]);
    n.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--name=web-lb",
        "--type=LoadBalancer",
        "--port=80",
        "--target-port=8080",
    ]);

    // Refused before anything changes: an unknown addon, and the gateway without it.
    let before = std::fs::read(n.state.join("manifest.json")).unwrap();
    for (args, says) in [
        (["addons", "enable", "lb"], "no addon \"lb\""),
        (
            ["addons", "enable", "gateway"],
            "kubeunit addons enable loadbalancer first",
        ),
    ] {
        let out = n.ku(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
    assert_eq!(
        std::fs::read(n.state.join("manifest.json")).unwrap(),
        before
    );

    let out = n.ku(&["addons", "enable", "loadbalancer"]);
    assert!(out.status.success(), "enable: {}", text(&out));
    assert!(
        text(&out).contains("LoadBalancer segment made on node dev"),
        "{}",
        text(&out)
    );
    let (bridge, pool) = load_balancer_of(&n.state);
    assert!(
        bridge.starts_with("kb-") && pool.ends_with("/28"),
        "{bridge} {pool}"
    );
    let listed = n.ku_ok(&["addons", "list", "-o", "json"]);
    assert!(listed.contains("\"enabled\": true"), "{listed}");
    let address = external_ip_of(
        |a| n.kubectl_ok(a),
        "web-lb",
        &pool,
        Duration::from_secs(180),
    );
    let route = text(&c.run(&["ip", "route", "get", &address]));
    assert!(
        route.contains(&format!("dev {bridge} ")),
        "{address}: {route}"
    );
    wait_for_saying("host -> LoadBalancer", Duration::from_secs(60), || {
        let (_, answer) = http_get_from(&c, &address, "/index.html");
        (answer.contains("hello"), answer)
    });
    // Again: nothing changes, nothing fails.
    let out = n.ku(&["addons", "enable", "loadbalancer"]);
    assert!(out.status.success(), "enable again: {}", text(&out));
    assert!(text(&out).contains("(it was already)"), "{}", text(&out));

    let out = n.ku(&["addons", "disable", "loadbalancer"]);
    assert!(out.status.success(), "disable: {}", text(&out));
    assert!(
        text(&out).contains("removed, with its routes"),
        "{}",
        text(&out)
    );
    assert_eq!(load_balancer_of(&n.state).0, "", "the state dir says off");
    let gone = c.sh(&format!(
        "ip -br link show dev {bridge} 2>/dev/null; ip route show table all | grep -F '{pool}'"
    ));
    assert_eq!(
        text(&gone).trim(),
        "",
        "segment and routes left:\n{}",
        text(&gone)
    );
    let route = text(&c.run(&["ip", "route", "get", &address]));
    assert!(!route.contains(&bridge), "{address}: {route}");
    wait_for("MetalLB's namespace gone", Duration::from_secs(120), || {
        !n.kubectl(&["get", "namespace", "metallb-system"])
            .status
            .success()
    });
    // The node runs on: the Service's pods still answer inside the cluster's network.
    n.kubectl_ok(&["rollout", "status", "deploy/web", "--timeout=60s"]);

    let out = n.ku(&["stop"]);
    assert!(out.status.success(), "stop: {}", text(&out));
    let left = c.sh(&format!(
        "ip -br link | grep -E '^(kb-|kl-)'; ip route show table all | grep -F '{pool}'"
    ));
    assert_eq!(text(&left).trim(), "", "after stop:\n{}", text(&left));
    let out = n.ku(&["destroy"]);
    assert!(out.status.success(), "destroy: {}", text(&out));
}
