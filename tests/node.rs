//! The dev profile runs a real node: containerd, runc, CNI, kubelet, kube-proxy, CoreDNS and offline
//! images, on real systemd (PID 1 in a node container) and the pinned binaries of both Kubernetes
//! minors. Pods run, talk to Services and DNS, survive crashes of the node's components, and `stop`
//! leaves nothing of them behind.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::container::{dev_args, gen_in, Container};
use common::ports::Ports;
use common::*;

/// One node per host network: the node tests of this binary and of any other test process take
/// turns.
fn node_lock() -> std::fs::File {
    std::fs::create_dir_all("/tmp/kubeunit-it").unwrap();
    let f = std::fs::File::create("/tmp/kubeunit-it/node.lock").unwrap();
    // SAFETY: flock on a descriptor we own; released when the file is dropped.
    let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX) };
    assert_eq!(rc, 0);
    f
}

struct Node {
    c: Container,
    state: PathBuf,
    kubectl: PathBuf,
}

impl Node {
    fn ku(&self, args: &[&str]) -> Output {
        let mut argv = args.to_vec();
        let dir = self.state.to_string_lossy().into_owned();
        argv.extend(["--state-dir", &dir]);
        self.c.kubeunit(&argv)
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        run(Command::new(&self.kubectl)
            .env("KUBECONFIG", self.state.join("kubeconfig/admin.kubeconfig"))
            .args(args))
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Restart counts of the default namespace's containers, by pod.
    fn restarts(&self) -> String {
        self.kubectl_ok(&[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.containerStatuses[0].restartCount} {end}",
        ])
    }

    /// What this environment's node could leave on the host: processes, mounts, links, iptables
    /// rules, cgroups. One line each.
    fn leftovers(&self) -> Vec<String> {
        let data = self.state.join("data");
        let script = format!(
            "echo procs: $(pgrep -x 'containerd-shim|pause|httpd|coredns|sleep' | wc -l); \
             echo mounts: $(grep -E ' ({data}|/run/kubeunit/dev)/' /proc/self/mountinfo | wc -l); \
             echo links: $(ip -br link | grep -E '^(veth|ku-dev)' | wc -l); \
             echo netns: $(find /run/kubeunit/dev -type f -path '*netns*' 2>/dev/null | wc -l); \
             echo rules: $( (iptables-save -t nat; iptables-save -t filter) | grep -E 'kubeunit-dev|KUBE-' | wc -l); \
             echo cgroups: $(find /sys/fs/cgroup -path '*kubeunit-dev*' -type d 2>/dev/null | wc -l)",
            data = data.display()
        );
        let out = self.c.sh(&script);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(String::from)
            .collect()
    }
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn node_end_to_end(version: &str) {
    let _turn = node_lock();
    let c = Container::boot_node(&format!("node-{}", version.replace('.', "")));
    let ports = Ports::allocate();
    let state = gen_in(&c, "dev", &ports, &dev_args(version));
    let kubectl = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    let n = Node { c, state, kubectl };

    // Start: per-component progress, the image import among it.
    let out = n.ku(&["start", "--timeout", "180"]);
    let t = text(&out);
    assert!(out.status.success(), "start:\n{t}");
    assert!(
        t.contains("containerd") && t.contains("import images (3)"),
        "progress shows the image import:\n{t}"
    );
    assert!(t.contains("imported 3 images"), "{t}");

    wait_for("node Ready", Duration::from_secs(120), || {
        n.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type=='Ready')].status}",
        ]) == "True"
    });
    n.kubectl_ok(&[
        "-n",
        "kube-system",
        "wait",
        "--for=condition=available",
        "deploy/coredns",
        "--timeout=120s",
    ]);

    // Pods of the offline test image, a Service in front of them.
    let image = pinned("TEST_IMAGE")[0].clone();
    n.kubectl_ok(&[
        "create",
        "deployment",
        "web",
        &format!("--image={image}"),
        "--replicas=2",
        "--",
        "sh",
        "-c",
        "echo started $(hostname); echo hello > /tmp/index.html; exec httpd -f -p 8080 -h /tmp",
    ]);
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

    // The API server reaches the kubelet: logs and exec.
    assert!(n.kubectl_ok(&["logs", &pod]).contains("started web-"));
    assert_eq!(
        n.kubectl_ok(&["exec", &pod, "--", "echo", "exec-ok"])
            .trim(),
        "exec-ok"
    );

    // The Service through kube-proxy, from the node and from a pod; DNS from a pod.
    let ip = n.kubectl_ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let get = "printf 'GET /index.html HTTP/1.0\\r\\n\\r\\n'";
    let from_node = n.c.run(&[
        "bash",
        "-c",
        &format!("exec 3<>/dev/tcp/{ip}/80; {get} >&3; cat <&3"),
    ]);
    assert!(
        String::from_utf8_lossy(&from_node.stdout).contains("hello"),
        "node -> ClusterIP: {}",
        text(&from_node)
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
    let lookup = n.kubectl_ok(&[
        "exec",
        &pod,
        "--",
        "nslookup",
        "kubernetes.default.svc.cluster.local",
    ]);
    assert!(
        lookup.contains("Address: 10.0.0.1"),
        "the first IP of the service CIDR:\n{lookup}"
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

    // kill -9 of containerd, the kubelet and kube-proxy: systemd restarts each, pods keep running.
    let before = n.restarts();
    for component in ["containerd", "kubelet", "kube-proxy"] {
        let unit = format!("kubeunit-dev-{component}.service");
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

    // stop leaves nothing behind; destroy removes the data dir.
    let present = n.leftovers();
    assert!(
        present
            .iter()
            .any(|l| l != &format!("{}: 0", l.split(':').next().unwrap())),
        "the running node shows up in the listing: {present:?}"
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
    let out = n.ku(&["destroy"]);
    assert!(out.status.success(), "destroy: {}", text(&out));
    assert!(!Path::new(&n.state.join("data")).exists());
}

#[test]
fn dev_node_newest_minor() {
    node_end_to_end(&pinned("KUBERNETES_VERSIONS")[0]);
}

#[test]
fn dev_node_previous_minor() {
    node_end_to_end(&pinned("KUBERNETES_VERSIONS")[1]);
}

/// A second environment with a node on one host is refused before anything of it starts.
#[test]
fn second_node_environment_is_refused() {
    let _turn = node_lock();
    let c = Container::boot_node("node-two");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let (p1, p2) = (Ports::allocate(), Ports::allocate());
    let first = gen_in(&c, "first", &p1, &dev_args(&version));
    let mut args = dev_args(&version);
    args.extend(["--set".into(), "name=second".into()]);
    let second = gen_in(&c, "second", &p2, &args);
    let ku = |cmd: &str, dir: &Path| c.kubeunit(&[cmd, "--state-dir", &dir.to_string_lossy()]);
    let out = ku("start", &first);
    assert!(out.status.success(), "{}", text(&out));
    let out = ku("start", &second);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("kubeunit-dev-kubelet.service runs") && t.contains("fix:"),
        "{t}"
    );
    assert_eq!(
        c.list_units("kubeunit-second*"),
        "",
        "nothing of it started"
    );
    assert!(ku("stop", &first).status.success());
}

/// What a host lacks for a node is named, each with its fix, before anything starts: here a plain
/// container (read-only cgroups and /proc/sys, no /dev/kmsg) and a wrong CNI dir.
#[test]
fn a_host_without_what_a_node_needs_is_named_before_anything_starts() {
    let c = Container::boot("node-lacking");
    let ports = Ports::allocate();
    let mut args = dev_args(&pinned("KUBERNETES_VERSIONS")[0]);
    // No images: they are not bound into a plain container, and gen would refuse them first.
    for set in ["containerd.cniBinDir=/nonexistent/cni", "images=[]"] {
        args.extend(["--set".into(), set.into()]);
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
        "fix:",
        "remount,rw /sys/fs/cgroup",
    ] {
        assert!(t.contains(needle), "{needle:?} missing:\n{t}");
    }
    assert_eq!(c.list_units("kubeunit-dev*"), "", "nothing started");
}
