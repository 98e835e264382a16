//! `network.ipFamily: dual` on a real node: pods get an IPv4 and an IPv6 address, a
//! RequireDualStack Service a ClusterIP of each family, and both answer from this host and from a
//! pod (CoreDNS gives the Service's AAAA record too); `stop` takes every IPv6 route and address
//! with it. On `multi` the nodes reach each other over IPv6 through the environment's router.
//! Upstream's dual-stack specs: scripts/e2e-addons.sh dualstack.

use std::time::Duration;

use crate::common::container::{dev_args, gen_in, Container, Env};
use crate::common::ports::Ports;
use crate::common::*;

/// A dual-stack environment of `profile` generated in `c`, with networks of its own: pods and
/// Services of IPv4, then of IPv6.
fn dual_stack_env<'c>(c: &'c Container, profile: &str, nets: [&str; 4]) -> Env<'c> {
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let ports = Ports::allocate();
    let mut args = dev_args(&version);
    args[1] = profile.into();
    for set in [
        "network.ipFamily=dual".to_string(),
        format!("network.podCIDR={}", nets[0]),
        format!("network.serviceCIDR={}", nets[1]),
        format!("network.podCIDRv6={}", nets[2]),
        format!("network.serviceCIDRv6={}", nets[3]),
    ] {
        args.extend(["--set".into(), set]);
    }
    Env {
        c,
        state: gen_in(c, profile, &ports, &args),
        kubectl: cache_dir()
            .join("bin")
            .join(format!("kubernetes-{version}"))
            .join("kubectl"),
    }
}

#[test]
fn a_dual_stack_node_gives_pods_and_services_both_families() {
    let _turn = node_lock();
    let c = Container::boot_node("dual-stack");
    // Networks of its own: it runs beside the other areas' environments.
    let n = dual_stack_env(
        &c,
        "dev",
        [
            "10.93.0.0/16",
            "10.0.5.0/24",
            "fd00:10:93::/56",
            "fd00:10:95::/112",
        ],
    );
    let out = n.ku(&["start", "--timeout", "180"]);
    assert!(out.status.success(), "start:\n{}", text(&out));

    // The node registers an address of each family.
    let addresses = n.kubectl_ok(&[
        "get",
        "node",
        "dev",
        "-o",
        "jsonpath={.status.addresses[?(@.type=='InternalIP')].address} {.spec.podCIDRs}",
    ]);
    assert!(
        addresses.contains("fd6b:75::") && addresses.contains("fd00:10:93::/64"),
        "{addresses}"
    );

    n.create_web(2);
    let manifest = n.state.parent().unwrap().join("web-svc.yaml");
    std::fs::write(
        &manifest,
        r#"apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ipFamilyPolicy: RequireDualStack
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
"#,
    )
    .unwrap();
    n.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);
    n.kubectl_ok(&[
        "wait",
        "--for=condition=available",
        "deploy/web",
        "--timeout=120s",
    ]);

    // Each pod: an address of each family, the IPv6 one of the node's /64.
    let pod_ips = n.kubectl_ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.podIPs[*].ip}{\"\\n\"}{end}",
    ]);
    let pods: Vec<(String, String, String)> = pod_ips
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "a name and two addresses: {pod_ips}");
            (f[0].into(), f[1].into(), f[2].into())
        })
        .collect();
    assert_eq!(pods.len(), 2, "{pod_ips}");
    for (name, v4, v6) in &pods {
        assert!(v4.starts_with("10.93.0."), "{name}: {v4}");
        assert!(v6.starts_with("fd00:10:93::"), "{name}: {v6}");
    }

    // The Service: a ClusterIP of each family, both answering from this host and from a pod.
    let ips = n.kubectl_ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIPs[*]}"]);
    let ips: Vec<&str> = ips.split_whitespace().collect();
    assert_eq!(ips.len(), 2, "{ips:?}");
    assert!(ips[1].starts_with("fd00:10:95::"), "{ips:?}");
    for ip in &ips {
        let url = if ip.contains(':') {
            format!("http://[{ip}]/index.html")
        } else {
            format!("http://{ip}/index.html")
        };
        wait_for_saying(&format!("host -> {ip}"), Duration::from_secs(60), || {
            let (_, answer) = http_get_from(&c, ip, "/index.html");
            (answer.contains("hello"), answer)
        });
        let out = n.kubectl(&["exec", &pods[0].0, "--", "wget", "-qO-", "-T", "3", &url]);
        assert!(text(&out).contains("hello"), "pod -> {url}: {}", text(&out));
    }
    // Pod to pod over IPv6, and the Service's AAAA record from CoreDNS.
    let other = format!("http://[{}]:8080/index.html", pods[1].2);
    let out = n.kubectl(&["exec", &pods[0].0, "--", "wget", "-qO-", "-T", "3", &other]);
    assert!(
        text(&out).contains("hello"),
        "pod -> {other}: {}",
        text(&out)
    );
    let lookup = n.kubectl(&[
        "exec",
        &pods[0].0,
        "--",
        "nslookup",
        "-type=AAAA",
        "web.default.svc.cluster.local",
    ]);
    assert!(text(&lookup).contains(ips[1]), "{}", text(&lookup));

    // stop: no IPv6 route or address of the environment stays on this host.
    let out = n.ku(&["stop"]);
    assert!(out.status.success(), "stop: {}", text(&out));
    // (The reject routes of the lowest priority are the test run's safety net, scripts/lib.sh's.)
    let left = c.sh("ip -6 route show | grep -v ' metric 4294967295'; ip -6 addr show");
    let left = text(&left);
    for net in ["fd00:10:93:", "fd00:10:95:", "fd6b:75:"] {
        assert!(!left.contains(net), "{net} left after stop:\n{left}");
    }
}

/// On `multi` the nodes reach each other's pods over IPv6 through the environment's router (a
/// namespace of its own, not this host, which forwards no IPv6): each node has an IPv6 /64 and
/// address of its own, a pod reaches a pod on another node and a Service whose endpoints are on
/// other nodes than the one this host sends it to; `stop` takes the router with it.
#[test]
fn dual_stack_nodes_reach_each_others_pods_through_the_router() {
    let _turn = node_lock();
    let c = Container::boot_node("dual-stack-multi");
    let n = dual_stack_env(
        &c,
        "multi",
        [
            "10.94.0.0/16",
            "10.0.6.0/24",
            "fd00:10:94::/56",
            "fd00:10:97::/112",
        ],
    );
    let out = n.ku(&["start", "--timeout", "240"]);
    assert!(out.status.success(), "start:\n{}", text(&out));

    // Each node: an IPv6 address and /64 of its own.
    let nodes = n.kubectl_ok(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.addresses[?(@.type=='InternalIP')].address} {.spec.podCIDRs[1]}{\"\\n\"}{end}",
    ]);
    let mut v6_addresses: Vec<&str> = Vec::new();
    let mut v6_pods: Vec<&str> = Vec::new();
    for line in nodes.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            f.len(),
            4,
            "a name, two addresses and the IPv6 /64: {nodes}"
        );
        assert!(f[2].starts_with("fd6b:75::"), "{nodes}");
        assert!(
            f[3].starts_with("fd00:10:94:") && f[3].ends_with("/64"),
            "{nodes}"
        );
        v6_addresses.push(f[2]);
        v6_pods.push(f[3]);
    }
    assert_eq!(v6_addresses.len(), 3, "{nodes}");
    for list in [&mut v6_addresses, &mut v6_pods] {
        list.sort();
        list.dedup();
        assert_eq!(list.len(), 3, "each node its own: {nodes}");
    }

    // Two pods on two workers (required anti-affinity), and a dual-stack Service of them.
    let image = pinned("TEST_IMAGE")[0].clone();
    let manifest = n.state.parent().unwrap().join("web.yaml");
    std::fs::write(
        &manifest,
        format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {{matchLabels: {{app: web}}}}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: web
        image: {image}
        command: [sh, -c, "echo hello > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  ipFamilyPolicy: RequireDualStack
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080}}]
"#
        ),
    )
    .unwrap();
    n.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);
    n.kubectl_ok(&[
        "wait",
        "--for=condition=available",
        "deploy/web",
        "--timeout=120s",
    ]);
    let pod_ips = n.kubectl_ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIPs[1].ip}{\"\\n\"}{end}",
    ]);
    let pods: Vec<Vec<&str>> = pod_ips
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        pods.len() == 2 && pods.iter().all(|p| p.len() == 3) && pods[0][1] != pods[1][1],
        "two pods on two nodes: {pod_ips}"
    );

    // Pod to pod across nodes over IPv6, both ways.
    for (from, to) in [(0, 1), (1, 0)] {
        let url = format!("http://[{}]:8080/index.html", pods[to][2]);
        let out = n.kubectl(&["exec", pods[from][0], "--", "wget", "-qO-", "-T", "3", &url]);
        assert!(
            text(&out).contains("hello"),
            "{} ({}) -> {url} ({}): {}",
            pods[from][0],
            pods[from][1],
            pods[to][1],
            text(&out)
        );
    }
    // This host sends the IPv6 Services to the first node (the tainted control plane: no
    // endpoint there), which sends them on to a worker through the router.
    let ip = n.kubectl_ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIPs[1]}"]);
    assert!(ip.starts_with("fd00:10:97::"), "{ip}");
    for _ in 0..4 {
        wait_for_saying(&format!("host -> {ip}"), Duration::from_secs(60), || {
            let (_, answer) = http_get_from(&c, &ip, "/index.html");
            (answer.contains("hello"), answer)
        });
    }

    // stop: the router and every IPv6 route of the environment are gone.
    let out = n.ku(&["stop"]);
    assert!(out.status.success(), "stop: {}", text(&out));
    let left =
        c.sh("ip netns list; ip -6 route show | grep -v ' metric 4294967295'; ip -6 addr show");
    let left = text(&left);
    for what in ["+ipv6", "fd00:10:94:", "fd00:10:97:", "fd6b:75:"] {
        assert!(!left.contains(what), "{what} left after stop:\n{left}");
    }
}

/// The router as node-network.sh makes it, in a mount and network namespace of their own (no
/// systemd): the first node's `up` killed (SIGKILL) at instants from 5 ms to 0.6 s in, then two
/// nodes up at once. One router with a port to each, and each node reaches the other's IPv6
/// address through it (a connection refused: the other node's answer); both down at once, and nothing is left.
#[test]
fn a_killed_up_and_nodes_at_once_leave_one_router_then_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = multi_state(
        tmp.path(),
        &[
            "network.ipFamily=dual",
            "addons.gateway=false",
            "addons.loadBalancer=false",
        ],
    );
    let body = [
        r#"set -u
first=$1 second=$2
mount -t tmpfs kubeunit-it /run
ip link set lo up
state() {
  ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p' | sort
  ip route show table all | grep -v -e 'table local' -e '^local ' -e '^broadcast '
  ip -6 route show table all | grep -v -e 'table local' -e '^local ' -e '^multicast '
  ip netns list
  awk '$5 ~ "^/run/kubeunit" { print $5 }' /proc/self/mountinfo
}
state >/run/before
of() { (eval "$(grep -E '^(ns|node6|router6|uts)=' "$1")"; eval "echo \$$2"); }
router=$(of "$first" router6)
"#,
        KILLED_THEN_UP_AT_ONCE,
        r#"echo "routers: $(ip netns list | grep -c -F -- "+ipv6")"
echo "ports: $(ip -n "$router" -o link show type veth | wc -l)"
echo "forwarding: $(ip netns exec "$router" cat /proc/sys/net/ipv6/conf/all/forwarding)"
# A port nothing listens on: "refused" is the other node's answer (a reset), through the router both ways.
reaches() {
  ip netns exec "$(of "$1" ns)" timeout 3 bash -c "exec 3<>/dev/tcp/$(of "$2" node6)/9" 2>&1 | grep -q refused &&
    echo yes || echo no
}
echo "hostname of the second: $(nsenter --uts="$(of "$second" uts)" cat /proc/sys/kernel/hostname)"
echo "first -> second: $(reaches "$first" "$second")"
echo "second -> first: $(reaches "$second" "$first")"
"#,
        DOWN_AT_ONCE,
        r#"state >/run/after
if cmp -s /run/before /run/after; then echo "after down: as before"; else echo "after down: changed"; diff /run/before /run/after; fi
"#,
    ]
    .concat();
    let first = dir.join("config/node-network.sh");
    let second = dir.join("nodes/worker-1/config/node-network.sh");
    let out = in_net_sandbox(&body, &[first.as_os_str(), second.as_os_str()]);
    let all = text(&out);
    for line in [
        "routers: 1",
        "ports: 2",
        "forwarding: 1",
        "hostname of the second: worker-1",
        "first -> second: yes",
        "second -> first: yes",
        "after down: as before",
    ] {
        assert!(all.lines().any(|l| l == line), "{line}:\n{all}");
    }
    assert!(!all.contains("failed"), "{all}");
}
