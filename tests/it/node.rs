//! The dev profile runs a real node: containerd, runc, CNI, kubelet, kube-proxy, CoreDNS and offline
//! images, on real systemd (PID 1 in a node container) and the pinned binaries of both Kubernetes
//! minors. Pods run, talk to Services and DNS, survive crashes of the node's components, and `stop`
//! leaves nothing of them behind.

use std::path::Path;
use std::time::Duration;

use crate::common::container::{
    dev_args, gen_in, offline_image_refs, with_every_addon, Container, Env,
};
use crate::common::ports::Ports;
use crate::common::*;

/// An environment with a node: `Env`'s commands, and the environment's name.
struct Node<'c> {
    env: Env<'c>,
    /// The environment's name.
    name: String,
}

impl<'c> std::ops::Deref for Node<'c> {
    type Target = Env<'c>;
    fn deref(&self) -> &Env<'c> {
        &self.env
    }
}

impl Node<'_> {
    /// Restart counts of the default namespace's containers, by pod.
    fn restarts(&self) -> String {
        self.kubectl_ok(&[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}",
        ])
    }

    /// The host's end of the node link: `ku-` and the environment's host name (`NAME_INSTANCE`),
    /// or a hash of it when that is longer than an interface name may be (kubeunit's rule).
    fn interface(&self) -> String {
        use sha2::Digest;
        let prefix = unit_prefix(&self.state);
        let host_name = prefix.trim_start_matches("kubeunit-");
        let short = format!("ku-{host_name}");
        if short.len() <= 15 {
            return short;
        }
        let digest = sha2::Sha256::digest(host_name.as_bytes());
        format!("ku-{}", &hex::encode(digest)[..12])
    }

    fn load_balancer(&self) -> (String, String) {
        load_balancer_of(&self.state)
    }

    /// What this environment's node could leave on the host: processes, mounts, links, network
    /// namespaces, iptables rules, cgroups. One line each.
    fn leftovers(&self) -> Vec<String> {
        let data = self.state.join("data");
        let script = format!(
            "echo procs: $(grep -l 'kubeunit-{name}' /proc/[0-9]*/cgroup 2>/dev/null | wc -l); \
             echo mounts: $(grep -E ' ({data}|/run/kubeunit/{name}|/run/netns/kubeunit-{name})' /proc/self/mountinfo | wc -l); \
             echo links: $(ip -br link | grep -E '^({interface}|cni0)' | wc -l); \
             echo routes: $( (ip route show table all | grep -E 'dev {interface}( |$)'; ip rule | grep -E 'iif {interface}( |$)') | wc -l); \
             echo netns: $( (ip netns list | grep kubeunit-{name}; find /run/kubeunit/{name} -type f -path '*netns*') 2>/dev/null | wc -l); \
             echo rules: $( (iptables-save -t nat; iptables-save -t filter) | grep -E '{prefix}|KUBE-|CNI-' | wc -l); \
             echo cgroups: $(find /sys/fs/cgroup -path '*{prefix}*' -type d 2>/dev/null | wc -l); \
             echo host dirs: $(ls -d /var/run/nri /opt/containerd /var/log/pods 2>/dev/null | wc -l); \
             echo log links: $(find /var/log/containers -lname '{data}/*' 2>/dev/null | wc -l); \
             echo load balancer: $( (ip -br link show dev '{bridge}' 2>/dev/null; ip route show '{pool}' 2>/dev/null) | wc -l)",
            bridge = self.load_balancer().0,
            pool = self.load_balancer().1,
            data = data.display(),
            name = self.name,
            // The environment's own (with its instance): cgroup v1 shows this container every
            // other one's cgroups too, and the host's network every other node link's rule, such
            // as those of scripts/up.sh's `kubeunit-dev` container and its environment.
            prefix = unit_prefix(&self.state),
            interface = self.interface(),
        );
        let out = self.c.sh(&script);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    }
}

fn node_end_to_end(version: &str) {
    let _turn = node_lock();
    let c = Container::boot_node(&format!("node-{}", version.replace('.', "")));
    let ports = Ports::allocate();
    // Every addon: this test checks LoadBalancer Services, Gateways and HPAs on the node.
    let state = gen_in(&c, "dev", &ports, &with_every_addon(dev_args(version)));
    let kubectl = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    let n = Node {
        env: Env {
            c: &c,
            state,
            kubectl,
        },
        name: "dev".into(),
    };

    // Start: per-component progress, the image import among it.
    let out = n.ku(&["start", "--timeout", "180"]);
    let t = text(&out);
    assert!(out.status.success(), "start:\n{t}");
    let refs = offline_image_refs().len();
    assert!(
        t.contains("containerd") && t.contains(&format!("import images ({refs})")),
        "progress shows the image import:\n{t}"
    );
    assert!(t.contains(&format!("imported {refs} images")), "{t}");
    // Every running unit's memory, containerd's and the kubelet's with their children.
    let rows: serde_json::Value =
        serde_json::from_slice(&n.ku(&["status", "-o", "json"]).stdout).unwrap_or_default();
    for r in rows.as_array().expect("status rows") {
        if r["subState"] == "running" {
            assert!(r["memoryBytes"].as_u64() > Some(1 << 20), "{r}");
        }
    }

    // start returned once the environment was usable: the node Ready without its not-ready
    // taint, the default ServiceAccount there, CoreDNS ready. Nothing is waited for here.
    for what in [
        "node dev Ready and schedulable",
        "the default ServiceAccount",
        "CoreDNS ready behind kube-dns",
    ] {
        assert!(t.contains(what), "start waited for {what}:\n{t}");
    }
    assert!(t.contains("is up and usable in"), "{t}");
    assert_eq!(
        n.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type=='Ready')].status} {.items[0].spec.taints}",
        ])
        .trim(),
        "True"
    );
    n.kubectl_ok(&["get", "serviceaccount", "default"]);
    assert_eq!(
        n.kubectl_ok(&[
            "-n",
            "kube-system",
            "get",
            "deploy/coredns",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ]),
        "1"
    );

    // Pods of the offline test image, a Service in front of them.
    let image = pinned("TEST_IMAGE")[0].clone();
    n.create_web(2);
    n.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--port=80",
        "--target-port=8080",
    ]);
    n.kubectl_ok(&[
        "wait",
        "--for=condition=available",
        "deploy/web",
        "--timeout=120s",
    ]);
    let running = n.kubectl_ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].status.phase}",
    ]);
    assert_eq!(running, "Running Running");
    let pod = n.kubectl_ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);

    // The kubelet runs with no disk resource management (its own view of its config), as kind's: no
    // image GC by disk usage (a disk that reports more size than it has free crossed the default 85%
    // here with nothing of ours on it) and no disk eviction (another build filling the host's disk
    // tainted the node and stopped all scheduling).
    let configz: serde_json::Value = serde_json::from_str(&n.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{}/proxy/configz", n.name),
    ]))
    .unwrap();
    assert_eq!(
        configz["kubeletconfig"]["imageGCHighThresholdPercent"], 100,
        "{configz}"
    );
    for signal in ["nodefs.available", "nodefs.inodesFree", "imagefs.available"] {
        assert_eq!(
            configz["kubeletconfig"]["evictionHard"][signal], "0%",
            "{signal}: {configz}"
        );
    }

    // The API server reaches the kubelet: logs and exec.
    assert!(n.kubectl_ok(&["logs", &pod]).contains("started web-"));
    assert_eq!(
        n.kubectl_ok(&["exec", &pod, "--", "echo", "exec-ok"])
            .trim(),
        "exec-ok"
    );

    // The Service through kube-proxy, from the node (its network namespace) and from a pod; DNS
    // from a pod.
    let ip = n.kubectl_ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let get = "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n'";
    // kube-proxy programs a new Service a moment after it exists (until then the packet follows
    // the node's default route). Each attempt gets 3 s: a connect sent before the rules were there
    // keeps its un-NATed conntrack entry and retries SYNs into the void for two minutes.
    let mut from_node = String::new();
    wait_for("node -> ClusterIP", Duration::from_secs(60), || {
        let out = n.c.run(&[
            "nsenter",
            &format!("--net=/run/netns/{}", unit_prefix(&n.state)),
            "timeout",
            "3",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{ip}/80; {get} >&3; cat <&3"),
        ]);
        from_node = text(&out);
        String::from_utf8_lossy(&out.stdout).contains("hello")
    });
    assert!(
        from_node.contains("hello"),
        "node -> ClusterIP: {from_node}"
    );
    let from_pod = n.kubectl_ok(&[
        "exec",
        &pod,
        "--",
        "sh",
        "-c",
        &format!("{get} | nc web.default.svc.cluster.local 80"),
    ]);
    assert!(
        from_pod.contains("hello"),
        "pod -> Service by name: {from_pod}"
    );
    // This host (where kube-apiserver runs) reaches pods and Services through the node link, never
    // by its default route: the API server's proxy subresources reach the pod, and a ClusterIP
    // answers from the host's network namespace (webhooks and aggregated APIs dial those).
    let pod_ip = n.kubectl_ok(&["get", "pod", &pod, "-o", "jsonpath={.status.podIP}"]);
    for addr in [pod_ip.as_str(), ip.as_str()] {
        let route = text(&n.c.run(&["ip", "route", "get", addr]));
        assert!(
            route.contains(&format!("dev {} ", n.interface())),
            "{addr} is not routed through the node link: {route}"
        );
    }
    for path in [
        format!("/api/v1/namespaces/default/pods/{pod}:8080/proxy/index.html"),
        "/api/v1/namespaces/default/services/web:80/proxy/index.html".into(),
    ] {
        assert_eq!(
            n.kubectl_ok(&["get", "--raw", &path]).trim(),
            "hello",
            "{path}"
        );
    }
    let mut from_host = String::new();
    wait_for("host -> ClusterIP", Duration::from_secs(30), || {
        let out = n.c.run(&[
            "timeout",
            "3",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{ip}/80; {get} >&3; cat <&3"),
        ]);
        from_host = text(&out);
        String::from_utf8_lossy(&out.stdout).contains("hello")
    });
    assert!(
        from_host.contains("hello"),
        "host -> ClusterIP: {from_host}"
    );
    load_balancer_serves(&n);
    gateway_routes_http(&n);
    // kube-proxy's and the CNI's chains are the node namespace's own: the host has none of them.
    let host_rules =
        n.c.sh("(iptables-save -t nat; iptables-save -t filter) | grep -E 'KUBE-|CNI-' | wc -l");
    assert_eq!(
        String::from_utf8_lossy(&host_rules.stdout).trim(),
        "0",
        "{}",
        text(&host_rules)
    );
    let lookup = n.kubectl_ok(&[
        "exec",
        &pod,
        "--",
        "nslookup",
        "kubernetes.default.svc.cluster.local",
    ]);
    assert!(
        nslookup_answers(&lookup) == ["10.0.0.1"],
        "the first IP of the service CIDR:\n{lookup}"
    );
    // The test image's other applets work (wget was seen to segfault in it, exit 139): wget and nc
    // get the API server's plain-HTTP answer, 400.
    let wget = n.kubectl(&["exec", &pod, "--", "wget", "-qO-", "http://10.0.0.1:443/"]);
    assert_eq!(wget.status.code(), Some(1), "wget: {}", text(&wget));
    assert!(
        text(&wget).contains("400 Bad Request"),
        "wget: {}",
        text(&wget)
    );
    let nc = n.kubectl(&[
        "exec",
        &pod,
        "--",
        "sh",
        "-c",
        "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 10.0.0.1 443",
    ]);
    assert!(
        text(&nc).contains("HTTP/1.0 400 Bad Request"),
        "nc: {}",
        text(&nc)
    );
    // wget by name (the resolver of a static busybox), its timeout against a server that never
    // answers (Debian's busybox 1.35 segfaulted there, exit 139), and nc -z.
    let by_name = n.kubectl(&[
        "exec",
        &pod,
        "--",
        "wget",
        "-qO-",
        "http://kubernetes.default.svc.cluster.local:443/",
    ]);
    assert!(
        by_name.status.code() == Some(1) && text(&by_name).contains("400 Bad Request"),
        "wget by name: {}",
        text(&by_name)
    );
    let applets = n.kubectl_ok(&[
        "exec",
        &pod,
        "--",
        "sh",
        "-c",
        "(nc -l -p 9 >/dev/null &) ; sleep 1; wget -T 2 -qO- http://127.0.0.1:9/ >/dev/null 2>&1; \
         echo wget-exit=$?; nc -z 10.0.0.1 443; echo nc-z-exit=$?",
    ]);
    assert!(
        applets.contains("wget-exit=1") && applets.contains("nc-z-exit=0"),
        "{applets}"
    );

    // The default StorageClass provisions: a claim binds and a pod writes to it.
    let manifest = n.state.parent().unwrap().join("pvc.yaml");
    std::fs::write(
        &manifest,
        format!(
            r#"apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data}}
spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: writer}}
spec:
  containers:
  - name: w
    image: {image}
    command: [sh, -c, "echo kept > /data/f && exec sleep 3600"]
    volumeMounts: [{{name: d, mountPath: /data}}]
  volumes: [{{name: d, persistentVolumeClaim: {{claimName: data}}}}]
"#
        ),
    )
    .unwrap();
    n.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);
    n.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod/writer",
        "--timeout=120s",
    ]);
    assert_eq!(
        n.kubectl_ok(&["get", "pvc", "data", "-o", "jsonpath={.status.phase}"]),
        "Bound"
    );
    // local-path-provisioner made it: a directory in the node's data dir, the PV bound to the node.
    let pv = n.kubectl_ok(&["get", "pvc", "data", "-o", "jsonpath={.spec.volumeName}"]);
    let path = n.kubectl_ok(&["get", "pv", &pv, "-o", "jsonpath={.spec.hostPath.path}"]);
    assert!(
        Path::new(&path).starts_with(n.state.join("data/local-path")),
        "{pv}: {path}"
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&path).join("f")).unwrap_or_default(),
        "kept\n",
        "{path}/f"
    );
    assert_eq!(
        n.kubectl_ok(&[
            "get",
            "pv",
            &pv,
            "-o",
            "jsonpath={.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[*]}",
        ]),
        n.name,
        "{pv}: node affinity"
    );

    // metrics-server: `kubectl top` shows numbers (it verifies the kubelet with the cluster CA).
    let top_wait = std::time::Instant::now();
    let mut top = String::new();
    wait_for(
        "kubectl top nodes and pods",
        Duration::from_secs(180),
        || {
            let nodes = n.kubectl(&["top", "nodes", "--no-headers"]);
            let pods = n.kubectl(&["top", "pods", "-A", "--no-headers"]);
            top = format!("{}\n{}", text(&nodes), text(&pods));
            nodes.status.success()
                && pods.status.success()
                && text(&nodes).contains("m ")
                && text(&pods).contains("coredns")
        },
    );
    eprintln!(
        "kubectl top answered {:.1}s after start returned:\n{top}",
        top_wait.elapsed().as_secs_f64()
    );
    if version == pinned("KUBERNETES_VERSIONS")[0] {
        hpa_scales_up_and_down(&n, &image);
    }

    // kill -9 of containerd, the kubelet and kube-proxy: systemd restarts each, pods keep running.
    let before = n.restarts();
    for component in ["containerd", "kubelet", "kube-proxy"] {
        let unit = unit(&n.state, component);
        let out = n.c.run(&[
            "systemctl",
            "kill",
            "--kill-whom=main",
            "--signal=KILL",
            &unit,
        ]);
        assert!(out.status.success(), "{}", text(&out));
    }
    wait_for("restarted and healthy", Duration::from_secs(90), || {
        let out = n.ku(&["status", "-o", "json"]);
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        rows.as_array().is_some_and(|rows| {
            rows.iter().all(|r| r["healthy"] == true)
                && rows
                    .iter()
                    .filter(|r| {
                        ["containerd", "kubelet", "kube-proxy"]
                            .contains(&r["component"].as_str().unwrap_or(""))
                    })
                    .all(|r| r["restarts"].as_u64() >= Some(1))
        })
    });
    wait_for("node Ready again", Duration::from_secs(60), || {
        n.kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type=='Ready')].status}",
        ])
        .stdout
            == b"True"
    });
    assert_eq!(n.restarts(), before, "no container restarted");

    // An environment of the same name under another systemd on this host's network (a second
    // container) is refused before it touches this one's link.
    if version == pinned("KUBERNETES_VERSIONS")[0] {
        let other = Container::boot("node-same-name");
        let mut args = dev_args(version);
        // The same instance too: the same link (another state dir would get its own).
        let instance = unit_prefix(&n.state)
            .trim_start_matches("kubeunit-dev")
            .trim_start_matches('_')
            .to_string();
        args.extend([
            "--set".into(),
            "images=[]".into(),
            "--set".into(),
            format!("instance={instance}"),
        ]);
        let state = gen_in(&other, "dev", &Ports::allocate(), &args);
        let out = other.kubeunit(&["start", "--state-dir", &state.to_string_lossy()]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains(&format!(
                "the node link's interface {} exists already",
                n.interface()
            )),
            "{}",
            text(&out)
        );
        assert_eq!(
            other.list_units("kubeunit-dev*"),
            "",
            "nothing of it started"
        );
    }

    // stop leaves nothing behind; destroy removes the data dir.
    let present = n.leftovers();
    assert!(
        present
            .iter()
            .any(|l| l != &format!("{}: 0", l.split(':').next().unwrap())),
        "the running node shows up in the listing: {present:?}"
    );
    // A pod's container left frozen, as a runc killed while it set the container's devices (or
    // its failed freeze) leaves it on cgroup v1: stop thaws it, or its processes outlive the kill.
    // Its freezer cgroup is below PID 1's, as runc puts it; in this container the freezer is
    // mounted from the container's own cgroup down.
    let frozen = n.c.sh(&format!(
        "root=$(awk '$5 == \"/sys/fs/cgroup/freezer\" {{print $4}}' /proc/self/mountinfo); \
         init=$(awk -F: '$2 == \"freezer\" {{print $3}}' /proc/1/cgroup); \
         base=/sys/fs/cgroup/freezer/${{init#\"$root\"}}; \
         scope=$(find \"$base\" -path '*{prefix}*' -name 'cri-containerd-*.scope' -type d | head -1); \
         [ -n \"$scope\" ] && echo FROZEN >\"$scope/freezer.state\" && cat \"$scope/freezer.state\" && \
         wc -l <\"$scope/cgroup.procs\"",
        prefix = unit_prefix(&n.state)
    ));
    let said = String::from_utf8_lossy(&frozen.stdout).to_string();
    let lines: Vec<&str> = said.lines().collect();
    assert!(
        frozen.status.success()
            && matches!(lines.as_slice(), ["FROZEN" | "FREEZING", procs] if *procs != "0"),
        "a pod's container frozen, with its processes: {}",
        text(&frozen)
    );
    let out = n.ku(&["stop"]);
    assert!(out.status.success(), "stop: {}", text(&out));
    assert!(!text(&out).contains("left behind"), "{}", text(&out));
    let after = n.leftovers();
    for line in &after {
        assert!(
            line.ends_with(": 0"),
            "left behind after stop: {after:?} (before: {present:?})"
        );
    }
    // No pod, shim or container process anywhere (not only in the environment's cgroups).
    let procs = n
        .c
        .sh("pgrep -x 'containerd-shim|containerd-shim-runc-v2|pause|httpd|coredns|sleep' | wc -l");
    assert_eq!(
        String::from_utf8_lossy(&procs.stdout).trim(),
        "0",
        "{}",
        text(&procs)
    );
    let out = n.ku(&["destroy"]);
    assert!(out.status.success(), "destroy: {}", text(&out));
    assert!(!Path::new(&n.state.join("data")).exists());
    // destroy of a running node (every process killed at once) leaves nothing behind either: the
    // node's link too, so that the next start finds the host clean.
    // --wait healthy: back once the components are healthy, no usable conditions waited for.
    let out = n.ku(&["start", "--wait", "healthy", "-o", "json"]);
    assert!(out.status.success(), "start after destroy: {}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["usable"], serde_json::json!([]), "{report}");
    let out = n.ku(&["destroy"]);
    assert!(out.status.success(), "destroy: {}", text(&out));
    let after = n.leftovers();
    for line in &after {
        assert!(
            line.ends_with(": 0"),
            "left behind after destroy: {after:?}"
        );
    }
    let out = n.ku(&["start"]);
    assert!(
        out.status.success(),
        "start after a running destroy: {}\nunits still loaded (what keeps the slice):\n{}",
        text(&out),
        text(&n.c.sh("systemctl list-units --all --no-legend --no-pager \
             'kubeunit-*' '*.scope' | grep -v 'session-\\|init.scope'"))
    );
    let out = n.ku(&["destroy"]);
    assert!(out.status.success(), "destroy: {}", text(&out));
}

/// An HPA on CPU scales a Deployment up under load and back down once the load is gone. Each pod
/// burns CPU (at most its limit, 2x its request) until /tmp/idle exists.
/// A LoadBalancer Service in front of deployment `web` (httpd answering "hello" on 8080): an
/// address of the environment's pool at once, routed from this host onto the environment's segment
/// (never by the default route), answering from this host with either traffic policy.
fn load_balancer_serves(n: &Node) {
    let (bridge, pool) = n.load_balancer();
    assert!(
        bridge.starts_with("kb-") && pool.ends_with("/28"),
        "{bridge} {pool}"
    );
    // MetalLB's controller and speaker run (start does not wait for addons).
    for what in ["deploy/controller", "ds/speaker"] {
        n.kubectl_ok(&[
            "-n",
            "metallb-system",
            "rollout",
            "status",
            what,
            "--timeout=120s",
        ]);
    }
    n.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--name=web-lb",
        "--type=LoadBalancer",
        "--port=80",
        "--target-port=8080",
    ]);
    let asked = std::time::Instant::now();
    let address = external_ip_of(
        |a| n.kubectl_ok(a),
        "web-lb",
        &pool,
        Duration::from_secs(30),
    );
    let took = asked.elapsed();
    eprintln!("LoadBalancer address {address} after {took:?}");
    assert!(
        took < Duration::from_secs(5),
        "the address came after {took:?}"
    );
    let net: ipnet::Ipv4Net = pool.parse().unwrap();
    // Every address of the pool, given out or not, goes onto the segment from its host address.
    for addr in [address.clone(), net.broadcast().to_string()] {
        let route = text(&n.c.run(&["ip", "route", "get", &addr]));
        assert!(
            route.contains(&format!("dev {bridge} ")) && route.contains("src 169.254.107.117"),
            "{addr}: {route}"
        );
    }
    for policy in ["Cluster", "Local"] {
        n.kubectl_ok(&[
            "patch",
            "svc",
            "web-lb",
            "-p",
            &format!("{{\"spec\":{{\"externalTrafficPolicy\":\"{policy}\"}}}}"),
        ]);
        wait_for_saying(
            &format!("host -> LoadBalancer ({policy})"),
            Duration::from_secs(60),
            || {
                let (_, answer) = http_get_from(n.c, &address, "/index.html");
                (answer.contains("hello"), answer)
            },
        );
    }
}

/// The Gateway API addon: a Gateway of class `traefik` gets the address of Traefik's LoadBalancer
/// Service, and its HTTPRoute's rule takes a request from this host to the `web` Service; a path no
/// rule matches gets Traefik's 404.
fn gateway_routes_http(n: &Node) {
    n.kubectl_ok(&[
        "-n",
        "traefik",
        "rollout",
        "status",
        "deploy/traefik",
        "--timeout=120s",
    ]);
    let condition = |kind: &str, name: &str, cond: &str| {
        n.kubectl_ok(&[
            "get",
            kind,
            name,
            "-o",
            &format!("jsonpath={{.status.conditions[?(@.type==\"{cond}\")].status}}"),
        ])
    };
    wait_for_saying(
        "GatewayClass traefik Accepted",
        Duration::from_secs(60),
        || {
            let s = condition("gatewayclass", "traefik", "Accepted");
            (s == "True", s)
        },
    );
    let manifest = n.state.parent().unwrap().join("gateway.yaml");
    std::fs::write(
        &manifest,
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: web-gw
spec:
  gatewayClassName: traefik
  listeners:
    - name: http
      protocol: HTTP
      port: 80
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
spec:
  parentRefs:
    - name: web-gw
  rules:
    - matches:
        - path: {type: PathPrefix, value: /index.html}
      backendRefs:
        - name: web
          port: 80
"#,
    )
    .unwrap();
    n.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);
    wait_for_saying("Gateway web-gw Programmed", Duration::from_secs(60), || {
        let s = condition("gateway", "web-gw", "Programmed");
        (s == "True", s)
    });
    let lb = n.kubectl_ok(&[
        "-n",
        "traefik",
        "get",
        "svc",
        "traefik",
        "-o",
        "jsonpath={.status.loadBalancer.ingress[0].ip}",
    ]);
    let address = n.kubectl_ok(&[
        "get",
        "gateway",
        "web-gw",
        "-o",
        "jsonpath={.status.addresses[0].value}",
    ]);
    assert!(
        !lb.is_empty() && address == lb,
        "Gateway at {address:?}, Traefik's Service at {lb:?}"
    );
    wait_for_saying("host -> Gateway -> web", Duration::from_secs(60), || {
        let (_, answer) = http_get_from(n.c, &address, "/index.html");
        (answer.contains("hello"), answer)
    });
    let (_, unrouted) = http_get_from(n.c, &address, "/elsewhere");
    assert!(
        unrouted.lines().next().is_some_and(|l| l.contains(" 404 ")),
        "{unrouted}"
    );
    n.kubectl_ok(&["delete", "-f", &manifest.to_string_lossy()]);
}

fn hpa_scales_up_and_down(n: &Node, image: &str) {
    let burn = "while [ ! -e /tmp/idle ]; do :; done; exec sleep 36000";
    let manifest = n.state.parent().unwrap().join("hpa.yaml");
    std::fs::write(
        &manifest,
        format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: burn}}
spec:
  selector: {{matchLabels: {{app: burn}}}}
  template:
    metadata: {{labels: {{app: burn}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: {image}
        command: [sh, -c, {burn:?}]
        resources: {{requests: {{cpu: 100m}}, limits: {{cpu: 200m}}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: burn}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: burn}}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 50}}}}
  behavior:
    scaleDown: {{stabilizationWindowSeconds: 0}}
"#
        ),
    )
    .unwrap();
    n.kubectl_ok(&["apply", "-f", &manifest.to_string_lossy()]);
    let hpa = |field: &str| {
        n.kubectl(&["get", "hpa", "burn", "-o", &format!("jsonpath={field}")])
            .stdout
    };
    let t0 = std::time::Instant::now();
    wait_for(
        "the HPA scaled burn up to 3",
        Duration::from_secs(300),
        || hpa("{.status.desiredReplicas}") == b"3",
    );
    eprintln!("HPA: 3 replicas after {:.0}s", t0.elapsed().as_secs_f64());
    // The load goes (every pod, the new ones too, until the HPA wants one).
    let t1 = std::time::Instant::now();
    wait_for(
        "the HPA scaled burn down to 1",
        Duration::from_secs(300),
        || {
            let pods = n.kubectl_ok(&[
                "get",
                "pods",
                "-l",
                "app=burn",
                "--field-selector=status.phase=Running",
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ]);
            for pod in pods.split_whitespace() {
                n.kubectl(&["exec", pod, "--", "touch", "/tmp/idle"]);
            }
            hpa("{.status.desiredReplicas}") == b"1" && hpa("{.status.currentReplicas}") == b"1"
        },
    );
    eprintln!(
        "HPA: back to 1 replica after {:.0}s",
        t1.elapsed().as_secs_f64()
    );
    n.kubectl_ok(&["delete", "-f", &manifest.to_string_lossy()]);
}

#[test]
fn dev_node_newest_minor() {
    node_end_to_end(&pinned("KUBERNETES_VERSIONS")[0]);
}

#[test]
fn dev_node_previous_minor() {
    node_end_to_end(&pinned("KUBERNETES_VERSIONS")[1]);
}

/// Two environments with a node each run side by side on one host, started at the same time: each
/// node in its own network namespace with its own link, chains and bridge, both Ready and running
/// pods; stopping one leaves the other working, and stopping both leaves nothing.
#[test]
fn two_node_environments_run_side_by_side() {
    let _turn = node_lock();
    let c = Container::boot_node("node-two");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let kubectl = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    // Each environment its own block of ports, held while the test runs.
    let ports = [Ports::allocate(), Ports::allocate()];
    // A reject route around the networks (scripts/test.sh's safety net, a VPN's kill switch) keeps
    // them local and carries nothing: it is no clash, and the nodes' own routes go before it.
    let out = c.sh("ip route replace unreachable 10.88.0.0/13 metric 4294967295");
    assert!(out.status.success(), "{}", text(&out));
    // Each its own pod and Service networks: this host routes them into each node's namespace.
    let networks = [
        ("10.88.0.0/16", "10.0.0.0/24"),
        ("10.89.0.0/16", "10.0.1.0/24"),
    ];
    let nodes: Vec<Node> = ["first", "second"]
        .into_iter()
        .zip(&ports)
        .zip(networks)
        .map(|((name, ports), (pods, services))| {
            let mut args = dev_args(&version);
            args.extend(["--set".into(), format!("name={name}")]);
            // Each one's LoadBalancer Services on its own segment (below).
            args.extend(["--set".into(), "addons.loadBalancer=true".into()]);
            args.extend(["--set".into(), format!("network.podCIDR={pods}")]);
            args.extend(["--set".into(), format!("network.serviceCIDR={services}")]);
            Node {
                env: Env {
                    c: &c,
                    state: gen_in(&c, name, ports, &args),
                    kubectl: kubectl.clone(),
                },
                name: name.into(),
            }
        })
        .collect();
    std::thread::scope(|s| {
        for n in &nodes {
            s.spawn(|| {
                let out = n.ku(&["start", "--timeout", "180"]);
                assert!(out.status.success(), "start {}:\n{}", n.name, text(&out));
            });
        }
    });
    let image = pinned("TEST_IMAGE")[0].clone();
    let mut addresses = Vec::new();
    for n in &nodes {
        wait_for("node Ready", Duration::from_secs(120), || {
            n.kubectl(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[0].status.conditions[?(@.type=='Ready')].status}",
            ])
            .stdout
                == b"True"
        });
        // The default ServiceAccount comes a moment after the API server: retry until it is there.
        wait_for("a pod created", Duration::from_secs(60), || {
            n.kubectl(&[
                "run",
                "hello",
                &format!("--image={image}"),
                "--restart=Never",
                "--",
                "sh",
                "-c",
                &format!("echo hello from {}; exec sleep 3600", n.name),
            ])
            .status
            .success()
        });
        addresses.push(n.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.addresses[?(@.type=='InternalIP')].address}",
        ]));
    }
    assert_ne!(addresses[0], addresses[1], "each node has its own address");
    // Each environment's LoadBalancer Services get addresses of its own pool, onto its own segment.
    let mut given = Vec::new();
    for n in &nodes {
        let (bridge, pool) = n.load_balancer();
        n.kubectl_ok(&["create", "service", "loadbalancer", "lb", "--tcp=80:8080"]);
        let address = external_ip_of(|a| n.kubectl_ok(a), "lb", &pool, Duration::from_secs(120));
        let route = text(&n.c.run(&["ip", "route", "get", &address]));
        assert!(
            route.contains(&format!("dev {bridge} ")),
            "{address}: {route}"
        );
        given.push((pool, address));
    }
    assert_ne!(
        given[0], given[1],
        "two environments, two pools and addresses"
    );
    // This host routes each environment's networks to its own node.
    for (n, (pods, services)) in nodes.iter().zip(networks) {
        for net in [pods, services] {
            let addr = net.replace(".0/", ".5/");
            let addr = addr.split('/').next().unwrap();
            let route = text(&n.c.run(&["ip", "route", "get", addr]));
            assert!(
                route.contains(&format!("dev {} ", n.interface())),
                "{addr} of {} goes elsewhere: {route}",
                n.name
            );
        }
    }
    // A third with the first's networks is refused before anything starts, naming both.
    let third_ports = Ports::allocate();
    let mut args = dev_args(&version);
    args.extend(["--set".into(), "name=third".into()]);
    let third = gen_in(&c, "third", &third_ports, &args);
    let out = c.kubeunit(&["start", "--state-dir", &third.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    for needle in [
        // The first node's share of its pod network (the rest of it is a reject route).
        format!(
            "network.podCIDR 10.88.0.0/16 and 10.88.0.0/24 dev {}",
            nodes[0].interface()
        ),
        format!(
            "network.serviceCIDR 10.0.0.0/24 and 10.0.0.0/24 dev {}",
            nodes[0].interface()
        ),
        "--set network.podCIDR=".into(),
    ] {
        assert!(
            text(&out).contains(&needle),
            "{needle:?} missing:\n{}",
            text(&out)
        );
    }
    assert_eq!(c.list_units("kubeunit-third*"), "", "nothing of it started");
    for n in &nodes {
        n.kubectl_ok(&[
            "wait",
            "--for=condition=Ready",
            "pod/hello",
            "--timeout=120s",
        ]);
        // Logs come from this environment's kubelet, across its own link.
        let logs = n.kubectl_ok(&["logs", "hello"]);
        assert_eq!(logs.trim(), format!("hello from {}", n.name));
        let netns = n.c.run(&["ip", "netns", "list"]);
        assert!(
            String::from_utf8_lossy(&netns.stdout).contains(&format!("kubeunit-{}", n.name)),
            "{}",
            text(&netns)
        );
    }

    // Stopping the first leaves the second running.
    let out = nodes[0].ku(&["stop"]);
    assert!(out.status.success(), "stop first: {}", text(&out));
    let after = nodes[0].leftovers();
    assert!(
        after.iter().all(|l| l.ends_with(": 0")),
        "first left behind: {after:?}"
    );
    let second = &nodes[1];
    assert_eq!(
        second
            .kubectl_ok(&["exec", "hello", "--", "echo", "still-here"])
            .trim(),
        "still-here"
    );
    let out = second.ku(&["stop"]);
    assert!(out.status.success(), "stop second: {}", text(&out));
    for n in &nodes {
        let after = n.leftovers();
        for line in &after {
            assert!(line.ends_with(": 0"), "{} left behind: {after:?}", n.name);
        }
    }
}

/// What a host lacks for a node is named, each with its fix, before anything starts: here a plain
/// container (read-only cgroups and /proc/sys, no /dev/kmsg) and a wrong CNI dir.
#[test]
fn a_host_without_what_a_node_needs_is_named_before_anything_starts() {
    let c = Container::boot("node-lacking");
    let ports = Ports::allocate();
    let mut args = dev_args(&pinned("KUBERNETES_VERSIONS")[0]);
    // A node link on a network this host already has (its first global address's /30).
    let addr = c.sh("ip -4 -o addr show scope global | awk '{print $4}' | head -1");
    let addr = String::from_utf8_lossy(&addr.stdout).trim().to_string();
    let ip: std::net::Ipv4Addr = addr
        .split('/')
        .next()
        .unwrap()
        .parse()
        .expect("a global address");
    let link = format!("{}/30", std::net::Ipv4Addr::from(u32::from(ip) & !3));
    // No images: they are not bound into a plain container, and gen would refuse them first.
    for set in [
        "containerd.cniBinDir=/nonexistent/cni".to_string(),
        "images=[]".into(),
        format!("node.link={link}"),
    ] {
        args.extend(["--set".into(), set]);
    }
    let state = gen_in(&c, "dev", &ports, &args);
    let out = c.kubeunit(&["start", "--state-dir", &state.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    for needle in [
        "this host lacks",
        "containerd: CNI plugins missing in /nonexistent/cni: bridge, host-local, loopback, portmap",
        "kubelet: cgroup hierarchies are read-only",
        "kubelet: /proc/sys is read-only",
        "kubelet: /dev/kmsg is missing",
        &format!("node-network: the node link {link} is in use on this host: {ip} on "),
        "--set node.link=",
        "fix:",
        "remount,rw /sys/fs/cgroup",
    ] {
        assert!(t.contains(needle), "{needle:?} missing:\n{t}");
    }
    assert_eq!(c.list_units("kubeunit-dev*"), "", "nothing started");
}
