//! Several nodes on one host: the `multi` profile (a tainted control-plane node and two workers) on
//! real systemd (PID 1 in a node container), the pinned binaries and the offline images. Pods on
//! different nodes reach each other by IP (without NAT) and through a Service, DNS answers on every
//! node, a DaemonSet covers the untainted nodes, a drain moves pods, a node's crash touches no other
//! node, a removed node leaves nothing, a second `multi` runs beside the first, and `stop` leaves
//! nothing of any node.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::common::container::{dev_args, gen_in, with_every_addon, Container, Env};
use crate::common::ports::Ports;
use crate::common::*;

/// A `multi` environment in a test container, with the names kubeunit gives its nodes' things.
struct Multi<'c> {
    env: Env<'c>,
    /// `kubeunit-NAME[_INSTANCE]`.
    prefix: String,
    pods: &'static str,
}

impl<'c> std::ops::Deref for Multi<'c> {
    type Target = Env<'c>;
    fn deref(&self) -> &Env<'c> {
        &self.env
    }
}

const WORKERS: [&str; 2] = ["worker-1", "worker-2"];

impl Multi<'_> {
    fn host_name(&self) -> &str {
        self.prefix.trim_start_matches("kubeunit-")
    }

    /// The service of `component` on `node` (the first node's has no instance).
    fn unit(&self, component: &str, node: Option<&str>) -> String {
        match node {
            None => format!("{}-{component}.service", self.prefix),
            Some(n) => format!("{}-{component}@{n}.service", self.prefix),
        }
    }

    /// The host's end of a further node's link: `ku-` and 12 hex digits of the SHA-256 of
    /// `<host name>@<node>` (kubeunit's rule).
    fn interface(&self, node: &str) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("{}@{node}", self.host_name()).as_bytes());
        format!("ku-{}", &hex::encode(digest)[..12])
    }

    /// The host's end of the first node's link: `ku-<host name>`, or a hash of it when that is
    /// longer than an interface name may be.
    fn first_interface(&self) -> String {
        use sha2::Digest;
        let short = format!("ku-{}", self.host_name());
        if short.len() <= 15 {
            return short;
        }
        let digest = sha2::Sha256::digest(self.host_name().as_bytes());
        format!("ku-{}", &hex::encode(digest)[..12])
    }

    /// The environment's routing table (node-network.sh): 0x4b55 and 16 bits of the SHA-256 of
    /// the host name.
    fn table(&self) -> u32 {
        use sha2::Digest;
        let d = sha2::Sha256::digest(self.host_name().as_bytes());
        0x4b55_0000 | u32::from(u16::from_be_bytes([d[0], d[1]]))
    }

    /// What a node of this environment (`None`: any) could leave on the host: one line each.
    fn leftovers(&self, node: Option<&str>) -> Vec<String> {
        let (unit_glob, netns, run, data, cgroup, routes) = match node {
            None => (
                format!("{}*", self.prefix),
                self.prefix.clone(),
                format!("/run/kubeunit/{}", self.host_name()),
                self.state.join("data").display().to_string(),
                self.prefix.clone(),
                self.pods.trim_end_matches(".0.0/16").to_string() + ".",
            ),
            Some(n) => (
                format!("{}-*@{n}.service", self.prefix),
                format!("{}@{n}", self.prefix),
                format!("/run/kubeunit/{}/nodes/{n}", self.host_name()),
                self.state.join("data/nodes").join(n).display().to_string(),
                format!("{}-node_{}", self.prefix, n.replace('-', "_")),
                format!("{}{}", self.interface(n), " "),
            ),
        };
        let interfaces = match node {
            None => WORKERS
                .iter()
                .map(|w| self.interface(w))
                .chain([self.first_interface()])
                .collect::<Vec<_>>()
                .join("|"),
            Some(n) => self.interface(n),
        };
        let script = format!(
            "echo units: $(systemctl list-units --all --no-legend '{unit_glob}' | wc -l); \
             echo procs: $(grep -l '{cgroup}' /proc/[0-9]*/cgroup 2>/dev/null | wc -l); \
             echo mounts: $(grep -E ' ({data}|{run})' /proc/self/mountinfo | wc -l); \
             echo links: $(ip -br link | grep -E '^({interfaces})' | wc -l); \
             echo netns: $(ip netns list | grep -F '{netns}' | wc -l); \
             echo iptables: $( (iptables-save -t nat; iptables-save -t filter) | grep -F '{netns}' | wc -l); \
             echo routes: $(ip route show table all | grep -F '{routes}' | wc -l); \
             echo rules: $(ip rule | grep -E '({interfaces}) lookup {table}' | wc -l); \
             echo cgroups: $(find /sys/fs/cgroup -path '*{cgroup}*' -type d 2>/dev/null | wc -l); \
             echo run dir: $(ls -d {run} 2>/dev/null | wc -l); \
             echo data dir: $(ls -d {data_dir} 2>/dev/null | wc -l); \
             echo load balancer: $( (ip -br link show dev '{lb}' 2>/dev/null; ip route show '{pool}' 2>/dev/null) | wc -l)",
            table = self.table(),
            // The whole environment's bridge and pool route; a node's own port into it.
            lb = match node {
                None => load_balancer_of(&self.state).0,
                Some(_) => segment_port(&netns),
            },
            pool = match node {
                None => load_balancer_of(&self.state).1,
                Some(_) => "0.0.0.0/32".to_string(),
            },
            data_dir = match node {
                None => "/nonexistent".to_string(),
                Some(_) => data.clone(),
            },
        );
        let out = self.c.sh(&script);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    }

    fn assert_nothing_left(&self, node: Option<&str>, when: &str) {
        let after = self.leftovers(node);
        assert!(
            after.iter().all(|l| l.ends_with(": 0")),
            "{when}: {node:?} left behind: {after:?}"
        );
    }

    /// node name -> pod names on it, of pods with label `app`.
    fn pods_by_node(&self, app: &str) -> BTreeMap<String, Vec<String>> {
        let out = self.kubectl_ok(&[
            "get",
            "pods",
            "-l",
            &format!("app={app}"),
            "--field-selector=status.phase=Running",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName} {.metadata.name}{\"\\n\"}{end}",
        ]);
        let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in out.lines() {
            if let Some((node, pod)) = line.split_once(' ') {
                by_node
                    .entry(node.to_string())
                    .or_default()
                    .push(pod.to_string());
            }
        }
        by_node
    }

    /// Wait until all three nodes are Ready.
    fn wait_ready(&self, what: &str) {
        wait_for(what, Duration::from_secs(180), || {
            self.kubectl(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}",
            ])
            .stdout
                == b"True True True"
        });
    }

    fn main_pid(&self, unit: &str) -> String {
        let out = self.c.run(&["systemctl", "show", "-P", "MainPID", unit]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn apply(&self, name: &str, manifest: &str) {
        let path = self.state.parent().unwrap().join(format!("{name}.yaml"));
        std::fs::write(&path, manifest).unwrap();
        self.kubectl_ok(&["apply", "-f", &path.to_string_lossy()]);
    }
}

/// The host's end of a node's veth into the LoadBalancer segment (kubeunit's
/// `spec::load_balancer::node_port`): `kl-` and a hash of the node's namespace.
fn segment_port(netns: &str) -> String {
    use sha2::Digest;
    format!(
        "kl-{}",
        &hex::encode(sha2::Sha256::digest(netns.as_bytes()))[..12]
    )
}

fn multi_args(version: &str, pods: &str, services: &str, extra: &[&str]) -> Vec<String> {
    // Every addon: LoadBalancer Services across nodes, metrics-server's pod in the drain.
    let mut args = with_every_addon(dev_args(version));
    args[1] = "multi".into();
    for set in [
        format!("network.podCIDR={pods}"),
        format!("network.serviceCIDR={services}"),
    ]
    .into_iter()
    .chain(extra.iter().map(|s| s.to_string()))
    {
        args.push("--set".into());
        args.push(set);
    }
    args
}

#[test]
fn multi_nodes_end_to_end() {
    let _turn = node_lock();
    let c = Container::boot_node("multi");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let kubectl = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    // Reject routes around the networks (scripts/test.sh's safety net) carry nothing.
    let out = c.sh("ip route replace unreachable 10.88.0.0/13 metric 4294967295");
    assert!(out.status.success(), "{}", text(&out));
    let ports = Ports::allocate();
    let args = multi_args(&version, "10.90.0.0/16", "10.0.2.0/24", &[]);
    let state = gen_in(&c, "multi", &ports, &args);
    let m = Multi {
        prefix: unit_prefix(&state),
        env: Env {
            c: &c,
            state,
            kubectl: kubectl.clone(),
        },
        pods: "10.90.0.0/16",
    };
    let out = m.ku(&["start", "--timeout", "240"]);
    assert!(out.status.success(), "start:\n{}", text(&out));
    for w in WORKERS {
        assert!(
            text(&out).contains(&format!("kubelet@{w}")),
            "progress names each node's kubelet:\n{}",
            text(&out)
        );
    }

    // status lists every node's instances, and a per-node component's binary once (the setting is
    // the component's).
    let status = m.ku_ok(&["status"]);
    for w in WORKERS {
        for component in ["node-network", "containerd", "kubelet", "kube-proxy"] {
            assert!(
                status.contains(&format!("\n{component}@{w} ")),
                "{component}@{w}:\n{status}"
            );
        }
    }
    assert_eq!(
        status.matches("(components.containerd.binary)").count(),
        1,
        "{status}"
    );
    assert!(!status.contains("components.containerd@"), "{status}");

    // Commands name a further node's instance as status does.
    let cmdline = m.ku_ok(&["cmdline", "kubelet@worker-1"]);
    assert!(
        cmdline.contains("--hostname-override=worker-1")
            && cmdline.contains("nodes/worker-1/config/kubelet-config.yaml"),
        "{cmdline}"
    );
    let logs = m.ku_ok(&["logs", "containerd@worker-2", "-n", "5"]);
    assert!(
        !logs.trim().is_empty() && logs.contains("containerd@worker-2"),
        "{logs}"
    );
    let proxy = m.unit("kube-proxy", Some("worker-2"));
    let (before, first) = (m.main_pid(&proxy), m.main_pid(&m.unit("kube-proxy", None)));
    m.ku_ok(&["restart", "kube-proxy@worker-2"]);
    assert_ne!(m.main_pid(&proxy), before, "kube-proxy@worker-2 restarted");
    assert_eq!(
        m.main_pid(&m.unit("kube-proxy", None)),
        first,
        "the first node's kube-proxy untouched"
    );
    let out = m.ku(&["restart", "kube-proxy@worker-9"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("kube-proxy@worker-1"),
        "the instances there are are listed: {}",
        text(&out)
    );

    // Three Ready nodes: their names, roles, pod networks and the control plane's taint.
    m.wait_ready("3 Ready nodes");
    let expected = "control-plane 10.90.0.0/24  node-role.kubernetes.io/control-plane\n\
         worker-1 10.90.1.0/24  \n\
         worker-2 10.90.2.0/24  \n";
    let mut nodes = String::new();
    // The node lifecycle controller takes its not-ready taints off a moment after Ready.
    wait_for(
        "the nodes' own taints only",
        Duration::from_secs(60),
        || {
            nodes = m.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDR} {.metadata.labels.node-role\\.kubernetes\\.io/control-plane} {.spec.taints[*].key}{\"\\n\"}{end}",
        ]);
            !nodes.contains("not-ready")
        },
    );
    assert_eq!(
        nodes, expected,
        "names, pod networks, the role label (empty value) and taints"
    );

    // A DaemonSet runs on every untainted node; pods that serve their client's address.
    let image = pinned("TEST_IMAGE")[0].clone();
    // busybox httpd runs /cgi-bin/* as CGI with REMOTE_ADDR set: the address the server saw.
    let serve = "mkdir -p /w/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho from $REMOTE_ADDR on $(hostname)\\n' >/w/cgi-bin/ip && chmod +x /w/cgi-bin/ip && exec httpd -f -p 8080 -h /w";
    m.apply(
        "workload",
        &format!(
            r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: everywhere}}
spec:
  selector: {{matchLabels: {{app: everywhere}}}}
  template:
    metadata: {{labels: {{app: everywhere}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: {image}, command: [sh, -c, {serve:?}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: everywhere}}
spec:
  selector: {{app: everywhere}}
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 4
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: {image}, command: [sleep, "3600"]}}]
"#
        ),
    );
    m.kubectl_ok(&["rollout", "status", "ds/everywhere", "--timeout=180s"]);
    m.kubectl_ok(&["rollout", "status", "deploy/web", "--timeout=180s"]);
    let ds = m.pods_by_node("everywhere");
    assert_eq!(
        ds.keys().map(String::as_str).collect::<Vec<_>>(),
        WORKERS,
        "one on each untainted node, none on the control plane: {ds:?}"
    );
    let pod_on = |node: &str| ds[node][0].clone();
    let ip_of = |pod: &str| m.kubectl_ok(&["get", "pod", pod, "-o", "jsonpath={.status.podIP}"]);
    let (client, server) = (pod_on("worker-2"), pod_on("worker-1"));
    let (client_ip, server_ip) = (ip_of(&client), ip_of(&server));
    assert!(client_ip.starts_with("10.90.2.") && server_ip.starts_with("10.90.1."));

    // worker-2's pod reaches worker-1's by IP, and the server sees the client's own address (no
    // NAT between pods); through the ClusterIP Service by name too.
    let get =
        |target: &str| format!("printf 'GET /cgi-bin/ip HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {target}");
    let by_ip = m.kubectl_ok(&[
        "exec",
        &client,
        "--",
        "sh",
        "-c",
        &get(&format!("{server_ip} 8080")),
    ]);
    // (httpd listens on IPv6 too: the address may be written ::ffff:A.B.C.D.)
    let seen_from = by_ip
        .lines()
        .find_map(|l| l.strip_prefix("from "))
        .unwrap_or_default();
    assert!(
        seen_from
            .trim_start_matches("[::ffff:")
            .starts_with(client_ip.as_str())
            && seen_from.ends_with(&format!(" on {server}")),
        "pod -> pod across nodes, the client's own address seen:\n{by_ip}"
    );
    // By name: CoreDNS first (its pod may still be starting on a loaded machine).
    m.kubectl_ok(&[
        "-n",
        "kube-system",
        "rollout",
        "status",
        "deployment/coredns",
        "--timeout=120s",
    ]);
    let mut seen = std::collections::BTreeSet::new();
    wait_for_saying(
        "both endpoints through the Service",
        Duration::from_secs(90),
        || {
            let out = m.kubectl(&[
                "exec",
                &client,
                "--",
                "sh",
                "-c",
                &get("everywhere.default.svc.cluster.local 80"),
            ]);
            let answer = String::from_utf8_lossy(&out.stdout).into_owned();
            for pod in ds.values().flatten() {
                if answer.contains(&format!("on {pod}")) {
                    seen.insert(pod.clone());
                }
            }
            (
                seen.len() == 2,
                format!("{seen:?} so far; the last answer: {}", text(&out)),
            )
        },
    );
    // DNS answers on every node.
    for pods in ds.values() {
        let lookup = m.kubectl_ok(&[
            "exec",
            &pods[0],
            "--",
            "nslookup",
            "everywhere.default.svc.cluster.local",
        ]);
        assert!(lookup.contains("Address: 10.0.2."), "{lookup}");
    }
    // A pod on worker-1's own network sees worker-1's name as its hostname (its containerd's UTS
    // namespace), not this host's, which every node shares.
    let image = pinned("TEST_IMAGE")[0].clone();
    m.kubectl_ok(&[
        "run",
        "hostname-of-node",
        &format!("--image={image}"),
        "--restart=Never",
        r#"--overrides={"spec":{"hostNetwork":true,"nodeName":"worker-1"}}"#,
        "--",
        "hostname",
    ]);
    m.kubectl_ok(&[
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "pod/hostname-of-node",
        "--timeout=120s",
    ]);
    let hostname = m.kubectl_ok(&["logs", "hostname-of-node"]);
    assert_eq!(hostname.trim(), "worker-1");
    m.kubectl_ok(&["delete", "pod", "hostname-of-node", "--wait=false"]);
    // This host routes each node's pods to its link; the rest of the pod network nowhere, and a
    // node's traffic for off-host addresses is refused (route lookups only: nothing is sent).
    for (node, ip) in [("worker-1", &server_ip), ("worker-2", &client_ip)] {
        let route = text(&c.run(&["ip", "route", "get", ip]));
        assert!(
            route.contains(&format!("dev {} ", m.interface(node))),
            "{ip}: {route}"
        );
    }
    let unused = text(&c.run(&["ip", "route", "get", "10.90.200.1"]));
    assert!(unused.contains("No route to host"), "{unused}");
    let from_node = text(&c.run(&[
        "ip",
        "route",
        "get",
        "192.0.2.77",
        "from",
        &client_ip,
        "iif",
        &m.interface("worker-2"),
    ]));
    assert!(
        from_node.contains("No route to host") || from_node.contains("unreachable"),
        "a node's packet for an off-host address: {from_node}"
    );

    volumes_stay_on_their_nodes(&m, &image);
    load_balancer_follows_its_pod(&m, &image, serve);

    // kill -9 of worker-1's kubelet and containerd: systemd restarts both; worker-2's pods and
    // units are untouched.
    let untouched: Vec<(String, String)> = ["kubelet", "containerd", "kube-proxy"]
        .iter()
        .map(|c| {
            let unit = m.unit(c, Some("worker-2"));
            let pid = m.main_pid(&unit);
            (unit, pid)
        })
        .collect();
    let worker2_pods = m.kubectl_ok(&[
        "get",
        "pods",
        "--field-selector=spec.nodeName=worker-2",
        "-o",
        "jsonpath={range .items[*]}{.metadata.uid}={.status.containerStatuses[0].restartCount} {end}",
    ]);
    for component in ["kubelet", "containerd"] {
        let unit = m.unit(component, Some("worker-1"));
        let out = c.run(&[
            "systemctl",
            "kill",
            "--kill-whom=main",
            "--signal=KILL",
            &unit,
        ]);
        assert!(out.status.success(), "{}", text(&out));
    }
    // Restarted at least once: a kubelet back before containerd's socket exits (it cannot reach
    // its runtime) and is restarted again (NRestarts 2 on a busy CI machine, 2026-12-02).
    wait_for_saying("worker-1 restarted", Duration::from_secs(90), || {
        let states: Vec<(String, String, String)> = ["kubelet", "containerd"]
            .iter()
            .map(|component| {
                let unit = m.unit(component, Some("worker-1"));
                let show = |p: &str| {
                    let out = c.run(&["systemctl", "show", "-P", p, &unit]);
                    String::from_utf8_lossy(&out.stdout).trim().to_string()
                };
                (unit.clone(), show("NRestarts"), show("ActiveState"))
            })
            .collect();
        let done = states.iter().all(|(_, restarts, active)| {
            restarts.parse::<u32>().is_ok_and(|n| n >= 1) && active == "active"
        });
        (done, format!("(unit, NRestarts, ActiveState): {states:?}"))
    });
    wait_for("worker-1 Ready again", Duration::from_secs(90), || {
        m.kubectl(&[
            "get",
            "node",
            "worker-1",
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
        ])
        .stdout
            == b"True"
    });
    for (unit, pid) in &untouched {
        assert_eq!(&m.main_pid(unit), pid, "{unit} untouched");
    }
    assert_eq!(
        m.kubectl_ok(&[
            "get",
            "pods",
            "--field-selector=spec.nodeName=worker-2",
            "-o",
            "jsonpath={range .items[*]}{.metadata.uid}={.status.containerStatuses[0].restartCount} {end}",
        ]),
        worker2_pods,
        "worker-2's pods untouched"
    );

    // A drain of worker-1 moves the Deployment's pods to worker-2 (metrics-server's too, whose
    // emptyDir a drain leaves alone only when told).
    m.kubectl_ok(&[
        "drain",
        "worker-1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=120s",
    ]);
    m.kubectl_ok(&["rollout", "status", "deploy/web", "--timeout=120s"]);
    wait_for("web on worker-2 only", Duration::from_secs(60), || {
        let web = m.pods_by_node("web");
        web.keys().map(String::as_str).collect::<Vec<_>>() == ["worker-2"]
            && web["worker-2"].len() == 4
    });
    m.kubectl_ok(&["uncordon", "worker-1"]);

    // A second multi beside the first: its own units, links, table and networks.
    let other_ports = Ports::allocate();
    let other_args = multi_args(&version, "10.91.0.0/16", "10.0.3.0/24", &["name=multi-b"]);
    let other_state = gen_in(&c, "multi-b", &other_ports, &other_args);
    let other = Multi {
        prefix: unit_prefix(&other_state),
        env: Env {
            c: &c,
            state: other_state,
            kubectl: kubectl.clone(),
        },
        pods: "10.91.0.0/16",
    };
    assert_ne!(other.table(), m.table());
    let out = other.ku(&["start", "--timeout", "240"]);
    assert!(out.status.success(), "start multi-b:\n{}", text(&out));
    other.wait_ready("multi-b: 3 Ready nodes");
    let out = other.ku(&["stop"]);
    assert!(out.status.success(), "stop multi-b: {}", text(&out));
    other.assert_nothing_left(None, "stop of multi-b");
    assert!(
        m.kubectl_ok(&["exec", &client, "--", "echo", "still-here"])
            .contains("still-here"),
        "the first multi runs on"
    );

    // worker-2 removed from the profile, then gen + start: only its units stop, and nothing of it
    // stays (its Node object neither); worker-1 and the control plane run on as they were.
    let kept: Vec<(String, String)> = [
        m.unit("kubelet", Some("worker-1")),
        m.unit("kubelet", None),
        m.unit("kube-apiserver", None),
    ]
    .into_iter()
    .map(|u| {
        let pid = m.main_pid(&u);
        (u, pid)
    })
    .collect();
    let fewer = multi_args(
        &version,
        "10.90.0.0/16",
        "10.0.2.0/24",
        &["nodes=[{name: control-plane, role: control-plane}, {role: worker}]"],
    );
    gen_in(&c, "multi", &ports, &fewer);
    let out = m.ku(&["start"]);
    assert!(
        out.status.success(),
        "start without worker-2: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("removed node worker-2"),
        "{}",
        text(&out)
    );
    m.assert_nothing_left(Some("worker-2"), "removing worker-2");
    assert_eq!(
        m.kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]),
        "control-plane worker-1"
    );
    for (unit, pid) in &kept {
        assert_eq!(&m.main_pid(unit), pid, "{unit} untouched");
    }

    // A node added: worker-2 back in the profile (`nodes:` as multi.yaml has it), then gen + start,
    // as docs/coming-from-kind.md says. It joins anew; the others run on as they were.
    gen_in(&c, "multi", &ports, &args);
    let out = m.ku(&["start", "--timeout", "240"]);
    assert!(
        out.status.success(),
        "start with worker-2 added: {}",
        text(&out)
    );
    m.wait_ready("worker-2 added: 3 Ready nodes");
    assert_eq!(
        m.kubectl_ok(&["get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"]),
        "control-plane worker-1 worker-2"
    );
    for (unit, pid) in &kept {
        assert_eq!(&m.main_pid(unit), pid, "{unit} untouched by the added node");
    }

    // stop leaves nothing of any node but the data (a later start uses it); destroy that too. While
    // it runs, the listing shows each kind of thing (so that its zeros below mean something). Not
    // iptables rules: offline (the tests' environments are), egress is off and a node link puts none
    // on this host; tests/it/egress.rs runs the links' rules of every egress up and down.
    let present = m.leftovers(None);
    for kind in [
        "units", "procs", "mounts", "links", "netns", "routes", "rules", "cgroups", "run dir",
    ] {
        assert!(
            present
                .iter()
                .any(|l| l.starts_with(&format!("{kind}: ")) && !l.ends_with(": 0")),
            "{kind} missing from the running environment's listing: {present:?}"
        );
    }
    let out = m.ku(&["stop"]);
    assert!(out.status.success(), "stop: {}", text(&out));
    m.assert_nothing_left(None, "stop");
    for w in WORKERS {
        let left = m.leftovers(Some(w));
        assert!(
            left.iter()
                .all(|l| l.ends_with(": 0") || l == "data dir: 1"),
            "stop: {w} left behind: {left:?}"
        );
    }
    let out = m.ku(&["destroy"]);
    assert!(out.status.success(), "destroy: {}", text(&out));
    for w in WORKERS {
        m.assert_nothing_left(Some(w), "destroy");
    }
}

/// A LoadBalancer Service across the nodes. With externalTrafficPolicy Local the node of its one pod
/// announces the address (ARP names that node's lb0) and the pod sees the client's own address
/// (this host's on the segment); the address follows the pod to another node. With Cluster any
/// node's speaker may announce it, and the pod sees a node's address.
fn load_balancer_follows_its_pod(m: &Multi, image: &str, serve: &str) {
    let (bridge, pool) = load_balancer_of(&m.state);
    for what in ["deploy/controller", "ds/speaker"] {
        m.kubectl_ok(&[
            "-n",
            "metallb-system",
            "rollout",
            "status",
            what,
            "--timeout=120s",
        ]);
    }
    let mut address = String::new();
    for node in ["worker-2", "worker-1"] {
        m.apply("lb-web", &lb_web_on(node, image, serve));
        m.kubectl_ok(&["rollout", "status", "deploy/lb-web", "--timeout=120s"]);
        address = external_ip_of(
            |a| m.kubectl_ok(a),
            "lb-web",
            &pool,
            Duration::from_secs(30),
        );
        let pod = m.pods_by_node("lb-web");
        let name = &pod
            .get(node)
            .unwrap_or_else(|| panic!("lb-web on {node}: {pod:?}"))[0];
        // The pod's answer names the client it saw and itself; ARP names the node's lb0.
        let netns = format!("{}@{node}", m.prefix);
        let link = text(&m.c.run(&["ip", "-n", &netns, "-br", "link", "show", "lb0"]));
        let mac = brief_link_mac(&link);
        assert_eq!(mac.len(), 17, "lb0 of {node}: {link}");
        wait_for_saying(
            &format!("the address answered by {node}"),
            Duration::from_secs(60),
            || {
                let (_, answer) = http_get_from(m.c, &address, "/cgi-bin/ip");
                let neigh = text(&m.c.run(&["ip", "neigh", "show", &address, "dev", &bridge]));
                // busybox httpd writes an IPv4 client as IPv4-mapped: [::ffff:169.254.107.117].
                let done =
                    answer.contains(&format!("169.254.107.117] on {name}")) && neigh.contains(&mac);
                (
                    done,
                    format!("{answer}\nARP: {neigh} (lb0 of {node}: {mac})"),
                )
            },
        );
    }
    m.kubectl_ok(&[
        "patch",
        "svc",
        "lb-web",
        "-p",
        r#"{"spec":{"externalTrafficPolicy":"Cluster"}}"#,
    ]);
    wait_for_saying("the address by any node", Duration::from_secs(60), || {
        let (_, answer) = http_get_from(m.c, &address, "/cgi-bin/ip");
        let done = answer.contains("from ") && !answer.contains("169.254.107.117");
        (done, answer)
    });
    m.kubectl_ok(&["delete", "deploy/lb-web", "svc/lb-web", "--wait=true"]);
    // Its pods gone too (a terminating one would show up in what later checks list by node).
    wait_for("lb-web's pods gone", Duration::from_secs(60), || {
        m.kubectl_ok(&["get", "pods", "-l", "app=lb-web", "-o", "name"])
            .is_empty()
    });
}

/// A StatefulSet of 3 with a claim each, one pod per node: local-path-provisioner puts each volume
/// in the data dir of its pod's node, the PV has node affinity to that node, the data survives the
/// pod's deletion and the pod comes back to its node. Deleting the claims deletes the directories.
fn volumes_stay_on_their_nodes(m: &Multi, image: &str) {
    m.apply("statefulset", &kept_statefulset(3, image));
    m.kubectl_ok(&["rollout", "status", "sts/kept", "--timeout=240s"]);
    let node_of = |pod: &str| m.kubectl_ok(&["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"]);
    let id_of = |pod: &str| m.kubectl_ok(&["exec", pod, "--", "cat", "/data/id"]);
    let data_dir = |node: &str| match node {
        "control-plane" => m.state.join("data"),
        n => m.state.join("data/nodes").join(n),
    };
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..3 {
        let pod = format!("kept-{i}");
        let node = node_of(&pod);
        // The volume: node affinity to the pod's node, a directory in that node's data dir
        // holding what the pod wrote.
        let pv = m.kubectl_ok(&[
            "get",
            "pvc",
            &format!("data-{pod}"),
            "-o",
            "jsonpath={.spec.volumeName}",
        ]);
        let affinity = m.kubectl_ok(&[
            "get",
            "pv",
            &pv,
            "-o",
            "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[*]}",
        ]);
        assert_eq!(affinity, node, "{pv} of {pod}: node affinity");
        let path = m.kubectl_ok(&["get", "pv", &pv, "-o", "jsonpath={.spec.hostPath.path}"]);
        let dir = data_dir(&node).join("local-path");
        assert!(
            Path::new(&path).starts_with(&dir),
            "{pv} of {pod} on {node}: {path} is not in {}",
            dir.display()
        );
        let on_disk = std::fs::read_to_string(Path::new(&path).join("id")).unwrap_or_default();
        assert_eq!(on_disk.trim(), id_of(&pod).trim(), "{path}/id");
        nodes.push(node);
        dirs.push(path);
    }
    let mut spread = nodes.clone();
    spread.sort();
    assert_eq!(
        spread,
        ["control-plane", "worker-1", "worker-2"],
        "one pod per node"
    );
    // Each pod deleted comes back to its node, with what it wrote (the file is written once).
    for i in [1, 2] {
        let pod = format!("kept-{i}");
        let before = id_of(&pod);
        m.kubectl_ok(&["delete", "pod", &pod, "--wait=true"]);
        m.kubectl_ok(&["rollout", "status", "sts/kept", "--timeout=180s"]);
        m.kubectl_ok(&[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{pod}"),
            "--timeout=120s",
        ]);
        assert_eq!(node_of(&pod), nodes[i], "{pod} back on its node");
        assert_eq!(id_of(&pod), before, "{pod}'s data survived its deletion");
    }
    // The claims' deletion removes the volumes' directories (helper pods on each node).
    m.kubectl_ok(&["delete", "sts", "kept", "--wait=true"]);
    m.kubectl_ok(&[
        "delete",
        "pvc",
        "data-kept-0",
        "data-kept-1",
        "data-kept-2",
        "--ignore-not-found",
        "--wait=true",
    ]);
    wait_for(
        "the volumes' directories gone",
        Duration::from_secs(120),
        || dirs.iter().all(|d| !Path::new(d).exists()),
    );
    // and the provisioner removes its helper pods (a drain would refuse them: no controller).
    wait_for(
        "local-path's helper pods gone",
        Duration::from_secs(60),
        || {
            !m.kubectl_ok(&["get", "pods", "-n", "local-path-storage", "-o", "name"])
                .contains("helper-pod")
        },
    );
}
