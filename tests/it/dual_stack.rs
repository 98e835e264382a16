//! `network.ipFamily: dual` on a real node: pods get an IPv4 and an IPv6 address, a
//! RequireDualStack Service a ClusterIP of each family, and both answer from this host and from a
//! pod (CoreDNS gives the Service's AAAA record too); `stop` takes every IPv6 route and address
//! with it. Upstream's dual-stack specs: scripts/e2e-addons.sh dualstack.

use std::time::Duration;

use crate::common::container::{dev_args, gen_in, Container, Env};
use crate::common::ports::Ports;
use crate::common::*;

#[test]
fn a_dual_stack_node_gives_pods_and_services_both_families() {
    let _turn = node_lock();
    let c = Container::boot_node("dual-stack");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let ports = Ports::allocate();
    let mut args = dev_args(&version);
    // Networks of its own: it runs beside the other areas' environments.
    for set in [
        "network.ipFamily=dual",
        "network.podCIDR=10.93.0.0/16",
        "network.serviceCIDR=10.0.5.0/24",
        "network.podCIDRv6=fd00:10:93::/56",
        "network.serviceCIDRv6=fd00:10:95::/112",
    ] {
        args.extend(["--set".into(), set.into()]);
    }
    let n = Env {
        c: &c,
        state: gen_in(&c, "dev", &ports, &args),
        kubectl: cache_dir()
            .join("bin")
            .join(format!("kubernetes-{version}"))
            .join("kubectl"),
    };
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
