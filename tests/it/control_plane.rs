//! The `control-plane` profile end to end, against real systemd and the pinned Kubernetes binaries
//! (both pinned minors): what kube-apiserver, the controller-manager and the scheduler do with the
//! flags, certificates and configs kubeunit generates.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::container::{
    control_plane_args, gen_in, show_unit, unit_differences, Container,
};
use crate::common::ports::Ports;
use crate::common::*;

fn k8s_dir(version: &str) -> PathBuf {
    let dir = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"));
    assert!(
        dir.join(".complete").exists(),
        "pinned Kubernetes {version} missing: run scripts/build-test-binaries.sh"
    );
    dir
}

struct Cluster<'a> {
    c: &'a Container,
    state: PathBuf,
    kubectl: PathBuf,
    ports: &'a Ports,
}

impl<'a> Cluster<'a> {
    /// The cluster of `state` on the pinned binaries of Kubernetes `version`, started.
    fn started(c: &'a Container, version: &str, state: PathBuf, ports: &'a Ports) -> Cluster<'a> {
        let cl = Cluster {
            c,
            state,
            kubectl: k8s_dir(version).join("kubectl"),
            ports,
        };
        let out = cl.ku(&["start"]);
        assert!(out.status.success(), "{}", text(&out));
        cl
    }

    fn ku(&self, args: &[&str]) -> Output {
        let mut argv = vec![args[0], "--state-dir", self.state.to_str().unwrap()];
        argv.extend_from_slice(&args[1..]);
        self.c.kubeunit(&argv)
    }

    fn kubectl_as(&self, identity: &str, args: &[&str]) -> Output {
        let kubeconfig = self.state.join(format!("kubeconfig/{identity}.kubeconfig"));
        run(Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args))
    }

    fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_as("admin", args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn etcdctl(&self, args: &[&str]) -> Output {
        let pki = self.state.join("pki");
        run(Command::new(etcd_bin_dir().join("etcdctl"))
            .arg(format!(
                "--endpoints=https://127.0.0.1:{}",
                self.ports.port("etcdClient")
            ))
            .arg(format!("--cacert={}", pki.join("etcd/ca.crt").display()))
            .arg(format!(
                "--cert={}",
                pki.join("apiserver-etcd-client.crt").display()
            ))
            .arg(format!(
                "--key={}",
                pki.join("apiserver-etcd-client.key").display()
            ))
            .args(args))
    }

    fn status(&self) -> serde_json::Value {
        let out = self.ku(&["status", "-o", "json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    }
}

/// The members of the method calls to systemd that `kubeunit ARGS` (on the cluster's state dir)
/// makes, from `busctl monitor` around it.
fn systemd_calls_of(cl: &Cluster, args: &[&str]) -> Vec<String> {
    let log = cl.c.work.join("busctl-monitor.txt");
    let script = format!(
        "busctl monitor --system --match \"type='method_call',destination='org.freedesktop.systemd1'\" \
           >{log} 2>&1 & m=$!; sleep 1; {ku} {args} --state-dir {state} >/dev/null; sleep 0.5; kill $m; wait",
        log = log.display(),
        ku = env!("CARGO_BIN_EXE_kubeunit"),
        args = args.join(" "),
        state = cl.state.display()
    );
    let out = cl.c.sh(&script);
    assert!(out.status.success(), "busctl monitor: {}", text(&out));
    let monitored = std::fs::read_to_string(&log).unwrap();
    monitored
        .lines()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("Member=")))
        .map(String::from)
        .collect()
}

fn gen_control_plane(c: &Container, version: &str, ports: &Ports, extra: &[&str]) -> PathBuf {
    let mut args = control_plane_args(version);
    args.extend(extra.iter().map(|s| s.to_string()));
    gen_in(c, "cp", ports, &args)
}

fn end_to_end(version: &str, service_cidr: &str, first_ip: &str) {
    let ports = Ports::allocate();
    let c = Container::boot(&format!("cp{}", version.replace('.', "")));
    let svc = format!("network.serviceCIDR={service_cidr}");
    let state = gen_control_plane(
        &c,
        version,
        &ports,
        &[
            "--set",
            &svc,
            "--set",
            "network.advertiseAddress=192.0.2.77",
            // A profile's env reaches the process (checked after the kill -9 below).
            "--set",
            "components.kube-apiserver.env.GOGC=200",
            // The node profile's addons: their objects go in even though no node runs their pods.
            "--set",
            "addons.coredns=true",
            "--set",
            "addons.defaultStorageClass=true",
        ],
    );
    let cl = Cluster {
        c: &c,
        state: state.clone(),
        kubectl: k8s_dir(version).join("kubectl"),
        ports: &ports,
    };

    // A manifest dropped into addons/ is applied with kubeunit's own.
    std::fs::write(
        state.join("addons/50-mine.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine, namespace: default}\ndata: {from: addons}\n",
    )
    .unwrap();
    let out = cl.ku(&["start"]);
    assert!(
        text(&out).contains("applying your addons/50-mine.yaml too"),
        "{}",
        text(&out)
    );
    assert!(
        out.status.success(),
        "start: {}\n{}",
        text(&out),
        c.log_text()
    );
    let st = cl.status();
    let names: Vec<&str> = st
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["component"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler"
        ]
    );
    for r in st.as_array().unwrap() {
        assert_eq!(r["healthy"], true, "{r}");
        // Its cgroup's memory, accounted on the legacy cgroup tree too (MemoryAccounting=yes).
        assert!(r["memoryBytes"].as_u64() > Some(1 << 20), "{r}");
    }
    let table = String::from_utf8_lossy(&cl.ku(&["status"]).stdout).into_owned();
    assert!(
        table
            .lines()
            .skip(1)
            .all(|l| l.split_whitespace().nth(3) != Some("-")),
        "MEMORY of every running unit:\n{table}"
    );

    // One D-Bus round trip per unit (GetAll), as `systemctl show` makes: the method calls to
    // systemd that one `status` makes, seen by busctl monitor.
    let calls = systemd_calls_of(&cl, &["status", "-o", "json"]);
    let units = 2 * names.len(); // each component's unit and its debug unit
    let get_all = calls.iter().filter(|m| *m == "GetAll").count();
    assert!(
        (names.len()..=units).contains(&get_all)
            && calls.iter().filter(|m| *m != "GetAll").count() <= 2,
        "status of {units} units made these calls to systemd: {calls:?}"
    );
    eprintln!("status made these calls to systemd: {calls:?}");

    assert_eq!(cl.kubectl(&["get", "--raw", "/readyz"]).trim(), "ok");
    let ns = cl.kubectl(&["get", "namespaces", "-o", "name"]);
    for n in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(ns.contains(&format!("namespace/{n}\n")), "{ns}");
    }
    let ip = cl.kubectl(&[
        "get",
        "service",
        "kubernetes",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    assert_eq!(ip, first_ip);
    let endpoint = format!("192.0.2.77:{}", ports.port("apiserver"));
    wait_for("kubernetes endpoints", Duration::from_secs(30), || {
        let eps = cl.kubectl_as(
            "admin",
            &[
                "get",
                "endpointslices",
                "-n",
                "default",
                "-l",
                "kubernetes.io/service-name=kubernetes",
                "-o",
                "jsonpath={.items[0].endpoints[0].addresses[0]}:{.items[0].ports[0].port}",
            ],
        );
        String::from_utf8_lossy(&eps.stdout) == endpoint
    });

    // Bootstrap objects were applied server-side.
    let crb = cl.kubectl(&[
        "get",
        "clusterrolebinding",
        "kubeunit:apiserver-kubelet-client",
        "-o",
        "jsonpath={.roleRef.name}",
    ]);
    assert_eq!(crb, "system:kubelet-api-admin");
    assert_eq!(
        cl.kubectl(&["get", "configmap", "mine", "-o", "jsonpath={.data.from}"]),
        "addons"
    );
    let dns_ip = || {
        cl.kubectl(&[
            "get",
            "service",
            "kube-dns",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ])
    };
    let expected_dns = first_ip
        .rsplit_once('.')
        .map(|(net, _)| format!("{net}.10"))
        .unwrap();
    assert_eq!(
        dns_ip(),
        expected_dns,
        "CoreDNS Service on the 10th address of the service CIDR"
    );

    // Across hosts every control-plane host applies the addons at start, at once. A Service that
    // another API server created in between is not a failure (its create then answers 422 "IP
    // already allocated", not 409): eight applies at once, after the Service is gone, all succeed.
    // (Before the fix, 5 of 48 applies failed this way in 6 rounds of 8.)
    for _round in 0..6 {
        cl.kubectl(&["delete", "service", "kube-dns", "-n", "kube-system"]);
        let applies: Vec<Output> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| cl.ku(&["hook", "kube-apiserver"])))
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        for out in &applies {
            assert!(out.status.success(), "concurrent hook: {}", text(out));
        }
    }
    assert_eq!(dns_ip(), expected_dns);
    assert!(cl
        .kubectl(&[
            "get",
            "deployment",
            "coredns",
            "-n",
            "kube-system",
            "-o",
            "name"
        ])
        .contains("coredns"));
    let default_sc = cl.kubectl(&[
        "get",
        "storageclass",
        "standard",
        "-o",
        "jsonpath={.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class}",
    ]);
    assert_eq!(default_sc, "true");
    // A class's provisioner cannot be updated: an apply that changes it replaces the class (an
    // environment generated again with another addons.storageProvisioner), both ways.
    let provisioner = || {
        cl.kubectl(&[
            "get",
            "storageclass",
            "standard",
            "-o",
            "jsonpath={.provisioner}",
        ])
    };
    assert_eq!(provisioner(), "rancher.io/local-path");
    let other = state.join("addons/50-other-class.yaml");
    std::fs::write(
        &other,
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: standard}\nprovisioner: kubernetes.io/host-path\n",
    )
    .unwrap();
    let out = cl.ku(&["hook", "kube-apiserver"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(provisioner(), "kubernetes.io/host-path");
    std::fs::remove_file(&other).unwrap();
    let out = cl.ku(&["hook", "kube-apiserver"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(provisioner(), "rancher.io/local-path");

    // The controller-manager works; the scheduler leaves pods Pending with no node to bind.
    cl.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=registry.k8s.io/pause:3.10",
        "--replicas=2",
    ]);
    wait_for("ReplicaSet and Pods", Duration::from_secs(60), || {
        let pods = cl.kubectl(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={range .items[*]}{.status.phase},{.spec.nodeName};{end}",
        ]);
        pods == "Pending,;Pending,;"
    });
    let rs = cl.kubectl(&["get", "replicasets", "-l", "app=web", "-o", "name"]);
    assert!(rs.starts_with("replicaset.apps/web-"), "{rs}");
    wait_for(
        "the scheduler to look at the pods",
        Duration::from_secs(60),
        || {
            cl.kubectl(&[
                "get",
                "events",
                "--field-selector",
                "reason=FailedScheduling",
                "-o",
                "name",
            ])
            .contains("event/")
        },
    );
    let token = cl.kubectl(&["create", "token", "default"]);
    assert!(token.trim().split('.').count() == 3, "a JWT: {token}");

    // Each component used its own identity, and none of them is an admin.
    for (identity, user) in [
        ("controller-manager", "system:kube-controller-manager"),
        ("scheduler", "system:kube-scheduler"),
    ] {
        let out = cl.kubectl_as(
            identity,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), user, "{}", text(&out));
        let out = cl.kubectl_as(identity, &["auth", "can-i", "delete", "namespaces"]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "no",
            "{identity} must not be an admin"
        );
    }
    // The audit log receives entries, including requests made by the controller-manager as itself.
    let audit = state.join("data/audit/audit.log");
    wait_for(
        "audit entries of the controller-manager",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(&audit)
                .unwrap_or_default()
                .contains("\"username\":\"system:kube-controller-manager\"")
        },
    );

    // etcd speaks only mutual TLS.
    let anonymous = run(Command::new(etcd_bin_dir().join("etcdctl"))
        .arg(format!(
            "--endpoints=https://127.0.0.1:{}",
            ports.port("etcdClient")
        ))
        .arg(format!(
            "--cacert={}",
            state.join("pki/etcd/ca.crt").display()
        ))
        .args([
            "--dial-timeout=2s",
            "--command-timeout=3s",
            "get",
            "/registry/namespaces/default",
        ]));
    assert!(!anonymous.status.success());

    // Secrets are encrypted at rest.
    cl.kubectl(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2",
    ]);
    let raw = cl.etcdctl(&["get", "/registry/secrets/default/s1", "--print-value-only"]);
    assert!(raw.status.success(), "{}", text(&raw));
    assert!(
        raw.stdout.starts_with(b"k8s:enc:secretbox:v1:key1:"),
        "{:?}",
        String::from_utf8_lossy(&raw.stdout[..40.min(raw.stdout.len())])
    );
    assert!(!String::from_utf8_lossy(&raw.stdout).contains("hunter2"));

    // kill -9 of the API server: systemd brings it back, with the data.
    let pid = cl.status()[1]["pid"].as_u64().unwrap();
    // (Its environment has the profile's GOGC, through the unit's private EnvironmentFile=.)
    let environ = c.run(&["cat", &format!("/proc/{pid}/environ")]);
    assert!(
        environ
            .stdout
            .split(|b| *b == 0)
            .any(|kv| kv == b"GOGC=200"),
        "{}",
        String::from_utf8_lossy(&environ.stdout)
    );
    assert!(c.run(&["kill", "-9", &pid.to_string()]).status.success());
    wait_for("kube-apiserver restarted", Duration::from_secs(60), || {
        let st = cl.status();
        st[1]["restarts"].as_u64() >= Some(1) && st[1]["healthy"] == true
    });
    assert_eq!(cl.kubectl(&["get", "--raw", "/readyz"]).trim(), "ok");
    assert!(cl
        .kubectl(&["get", "deployment", "web", "-o", "name"])
        .contains("deployment.apps/web"));

    // stop leaves nothing; a second start brings the same cluster back.
    let out = cl.ku(&["stop", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    // stop watched the API server until it closed its listener and then ended its own (loopback)
    // connections (how many: whatever it had open then, often 1, sometimes none), and it still went
    // through its whole graceful termination and exited 0 (systemd: "Deactivated successfully", not
    // a kill or a failure).
    // When its listener closes and it exits between two of stop's looks (its PERIOD), there was
    // nothing left to end: "the process exited" (seen once, 2026-11-27: that stop took 0.49 s).
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stop -o json");
    let own = &report["ownConnections"]["kube-apiserver"];
    assert!(
        own["ended"].is_u64() || own["skipped"] == "the process exited",
        "{report}"
    );
    let journal = c.run(&[
        "journalctl",
        "--no-pager",
        "-o",
        "cat",
        "-u",
        &unit(&state, "kube-apiserver"),
    ]);
    let journal = String::from_utf8_lossy(&journal.stdout).into_owned();
    let stop_at = journal
        .rfind("[graceful-termination] shutdown event\" name=\"ShutdownInitiated\"")
        .expect("the API server's shutdown in its journal");
    let shutdown = &journal[stop_at..];
    for what in [
        "InFlightRequestsDrained",
        "audit backend shutdown completed",
        "[graceful-termination] apiserver is exiting",
        "Deactivated successfully",
    ] {
        assert!(shutdown.contains(what), "no {what:?} in:\n{shutdown}");
    }
    assert!(!shutdown.contains("status=9/KILL"), "{shutdown}");
    let units = c.list_units(&format!("{}*", unit_prefix(&state)));
    if !units.is_empty() {
        let dump = c.run(&["systemd-analyze", "dump", &unit(&state, "etcd")]);
        panic!(
            "units left after stop ({}):\n{}\n{}",
            text(&out),
            units,
            text(&dump)
        );
    }
    for proc_name in [
        "etcd",
        "kube-apiserver",
        "kube-controller",
        "kube-scheduler",
    ] {
        assert!(
            !c.run(&["pgrep", "-f", proc_name]).status.success(),
            "{proc_name} still running"
        );
    }
    let ss = String::from_utf8_lossy(&c.run(&["ss", "-Htln"]).stdout).into_owned();
    for f in [
        "etcdClient",
        "etcdPeer",
        "apiserver",
        "controllerManager",
        "scheduler",
    ] {
        assert!(
            !ss.contains(&format!(":{} ", ports.port(f))),
            "{f} port still bound:\n{ss}"
        );
    }
    let out = cl.ku(&["start"]);
    assert!(out.status.success(), "second start: {}", text(&out));
    assert!(cl
        .kubectl(&["get", "deployment", "web", "-o", "name"])
        .contains("deployment.apps/web"));
    assert!(cl
        .kubectl(&["get", "secret", "s1", "-o", "name"])
        .contains("secret/s1"));

    equivalence_with_installed_unit_files(&cl);
}

/// systemd sees the same unit whether kubeunit starts it as a transient unit from the file or the
/// file is installed under /run/systemd/system: compare `systemctl show` of both.
fn equivalence_with_installed_unit_files(cl: &Cluster) {
    let c = cl.c;
    let units: Vec<String> = std::fs::read_dir(cl.state.join("units"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // Transient (the cluster is running, started by kubeunit).
    let transient: Vec<_> = units.iter().map(|u| show_unit(c, u)).collect();
    assert!(cl.ku(&["stop"]).status.success());
    // Installed: the very same files, started by systemctl.
    let installed_dir = Path::new("/run/systemd/system");
    for u in &units {
        let text = std::fs::read_to_string(cl.state.join("units").join(u)).unwrap();
        let written = c.run(&[
            "sh",
            "-c",
            &format!("cat > {}/{u} <<'EOF'\n{text}EOF", installed_dir.display()),
        ]);
        assert!(written.status.success());
    }
    assert!(c.run(&["systemctl", "daemon-reload"]).status.success());
    let mut order = units.clone();
    order.sort_by_key(|u| {
        (
            !u.ends_with(".slice"),
            !u.contains("etcd"),
            !u.contains("apiserver"),
        )
    });
    for u in &order {
        let out = c.run(&["systemctl", "start", u]);
        assert!(out.status.success(), "systemctl start {u}: {}", text(&out));
    }
    let installed: Vec<_> = units.iter().map(|u| show_unit(c, u)).collect();
    for (i, u) in units.iter().enumerate() {
        let diffs = unit_differences(&transient[i], &installed[i]);
        assert!(
            diffs.is_empty(),
            "{u}: transient and installed units differ:\n{}",
            diffs.join("\n")
        );
    }
    for u in order.iter().rev() {
        let _ = c.run(&["systemctl", "stop", u]);
    }
}

#[test]
fn control_plane_newest_minor() {
    let v = pinned("KUBERNETES_VERSIONS")[0].clone();
    end_to_end(&v, "10.0.0.0/24", "10.0.0.1");
}

#[test]
fn control_plane_previous_minor_with_other_service_cidr() {
    let v = pinned("KUBERNETES_VERSIONS")[1].clone();
    end_to_end(&v, "10.96.0.0/16", "10.96.0.1");
}

#[test]
fn wrong_version_binary_is_reported_before_anything_starts() {
    let ports = Ports::allocate();
    let c = Container::boot("wrongver");
    let versions = pinned("KUBERNETES_VERSIONS");
    // Profile pins the older minor, binDir holds the newer one.
    let state = gen_control_plane(
        &c,
        &versions[0],
        &ports,
        &["--set", &format!("versions.kubernetes={}", versions[1])],
    );
    let out = c.kubeunit(&["start", "--state-dir", state.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    let binary = k8s_dir(&versions[0]).join("kube-apiserver");
    assert!(t.contains(&binary.display().to_string()), "path named: {t}");
    assert!(
        t.contains(&format!("Kubernetes {}", versions[0]))
            && t.contains(versions[1].trim_start_matches('v')),
        "{t}"
    );
    assert_eq!(c.list_units("kubeunit-*"), "", "nothing may start");

    // Pinned right, the binaries' Go build info (module k8s.io/kubernetes at that tag, etcd's at
    // its) says so: none is run for its version, so none is in the data dir's cache of
    // `--version` answers (the hyperkube test below shows a script's answer lands there).
    // The second start is the one that could keep answers: the first creates the data dir.
    let state = gen_control_plane(&c, &versions[0], &ports, &[]);
    for verb in ["start", "stop", "start"] {
        let out = c.kubeunit(&[verb, "--state-dir", state.to_str().unwrap()]);
        assert!(out.status.success(), "{verb}: {}", text(&out));
    }
    let asked =
        std::fs::read_to_string(state.join("data/binary-versions.json")).unwrap_or_default();
    assert!(
        !asked.contains("kube-") && !asked.contains("etcd"),
        "a pinned binary was run for its version: {asked}"
    );
    assert!(c
        .kubeunit(&["stop", "--state-dir", state.to_str().unwrap()])
        .status
        .success());
}

#[test]
fn hyperkube_style_single_binary_runs_the_control_plane() {
    let ports = Ports::allocate();
    let c = Container::boot("hyperkube");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let k8s = k8s_dir(&version);
    // One binary, the component as its first argument (exec keeps the PID: sd_notify still works).
    let hyperkube = c.work.join("hyperkube");
    std::fs::write(
        &hyperkube,
        format!("#!/bin/sh\nc=$1; shift\nexec {}/$c \"$@\"\n", k8s.display()),
    )
    .unwrap();
    assert!(run(Command::new("chmod").arg("755").arg(&hyperkube))
        .status
        .success());
    let mut extra: Vec<String> = Vec::new();
    for comp in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        extra.extend([
            "--set".into(),
            format!("components.{comp}.binary={}", hyperkube.display()),
            "--set".into(),
            format!("components.{comp}.binaryArgs=[{comp}]"),
        ]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let state = gen_control_plane(&c, &version, &ports, &extra);
    let unit =
        std::fs::read_to_string(state.join("units").join(unit(&state, "kube-apiserver"))).unwrap();
    assert!(
        unit.contains(&format!(
            "ExecStart={} \\\n    kube-apiserver \\\n",
            hyperkube.display()
        )),
        "{unit}"
    );
    let out = c.kubeunit(&["start", "--state-dir", state.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let out = c.kubeunit(&["status", "--state-dir", state.to_str().unwrap()]);
    assert!(out.status.success(), "all healthy: {}", text(&out));
    // A script has no Go build info: it was asked `kube-apiserver --version`, and its answer kept
    // (by the second start: the first creates the data dir).
    for verb in ["stop", "start"] {
        let out = c.kubeunit(&[verb, "--state-dir", state.to_str().unwrap()]);
        assert!(out.status.success(), "{verb}: {}", text(&out));
    }
    let asked =
        std::fs::read_to_string(state.join("data/binary-versions.json")).unwrap_or_default();
    assert!(
        asked.contains(&format!("{} kube-apiserver", hyperkube.display())),
        "{asked}"
    );
    assert!(c
        .kubeunit(&["stop", "--state-dir", state.to_str().unwrap()])
        .status
        .success());
}

#[test]
fn a_second_environment_keeps_its_cluster_in_the_first_ones_etcd() {
    let ports = Ports::allocate();
    let ports2 = Ports::allocate();
    let c = Container::boot("datastore");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let first = gen_control_plane(&c, &version, &ports, &[]);
    let one = Cluster::started(&c, &version, first.clone(), &ports);

    let pki = first.join("pki");
    let datastore = |cert: &Path| {
        [
            "name=cp2".to_string(),
            "components.etcd.enabled=false".into(),
            format!(
                "datastore.endpoints=[https://127.0.0.1:{}]",
                ports.port("etcdClient")
            ),
            format!("datastore.caFile={}", pki.join("etcd/ca.crt").display()),
            format!("datastore.certFile={}", cert.display()),
            format!(
                "datastore.keyFile={}",
                pki.join("apiserver-etcd-client.key").display()
            ),
            "datastore.prefix=/clusters/cp2".into(),
        ]
        .into_iter()
        .flat_map(|s| ["--set".to_string(), s])
        .collect::<Vec<String>>()
    };

    // A missing client certificate: gen names the field and the path, and writes nothing.
    let missing = c.work.join("nope/client.crt");
    let bad = c.work.join("cp2-bad");
    let mut argv: Vec<String> = vec![
        "gen".into(),
        "--state-dir".into(),
        bad.display().to_string(),
    ];
    argv.extend(ports2.sets());
    argv.extend(control_plane_args(&version));
    argv.extend(datastore(&missing));
    let out = c.kubeunit(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("datastore.certFile") && t.contains(&missing.display().to_string()),
        "{t}"
    );
    assert!(!bad.exists(), "nothing written");

    let mut args = control_plane_args(&version);
    args.extend(datastore(&pki.join("apiserver-etcd-client.crt")));
    let second = gen_in(&c, "cp2", &ports2, &args);
    assert!(!second.join("units").join(unit(&second, "etcd")).exists());
    assert!(!second.join("pki/etcd").exists(), "no etcd certificates");
    let etcd = unit(&second, "etcd");
    let unit = std::fs::read_to_string(second.join("units").join(unit(&second, "kube-apiserver")))
        .unwrap();
    assert!(!unit.contains(&format!("Wants={etcd}")), "{unit}");
    assert!(unit.contains("--etcd-prefix=/clusters/cp2"), "{unit}");

    let two = Cluster::started(&c, &version, second.clone(), &ports2);
    let st = two.status();
    let names: Vec<&str> = st
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["component"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler"
        ]
    );
    assert!(
        st.as_array().unwrap().iter().all(|r| r["healthy"] == true),
        "{st}"
    );
    assert_eq!(two.kubectl(&["get", "--raw", "/readyz"]).trim(), "ok");

    // Each cluster sees its own objects; the second one's live under its prefix in the first's etcd.
    two.kubectl(&["create", "configmap", "only-in-two", "--from-literal=k=v"]);
    one.kubectl(&["create", "configmap", "only-in-one", "--from-literal=k=v"]);
    assert!(!one
        .kubectl_as("admin", &["get", "configmap", "only-in-two"])
        .status
        .success());
    assert!(!two
        .kubectl_as("admin", &["get", "configmap", "only-in-one"])
        .status
        .success());
    let keys = one.etcdctl(&[
        "get",
        "--prefix",
        "--keys-only",
        "/clusters/cp2/configmaps/default/",
    ]);
    assert!(
        text(&keys).contains("/clusters/cp2/configmaps/default/only-in-two"),
        "{}",
        text(&keys)
    );
    let keys = one.etcdctl(&[
        "get",
        "--prefix",
        "--keys-only",
        "/registry/configmaps/default/only-in",
    ]);
    assert!(!text(&keys).contains("only-in-two"), "{}", text(&keys));

    for cl in [&two, &one] {
        let out = cl.ku(&["stop"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    // Its etcd gone, the second one is refused before anything starts.
    let out = two.ku(&["start"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no endpoint of the external datastore"),
        "{}",
        text(&out)
    );
    assert_eq!(
        c.list_units(&format!("{}*", unit_prefix(&second))),
        "",
        "nothing may start"
    );
}

#[test]
fn the_admin_identity_is_merged_into_a_kubeconfig_next_to_other_clusters() {
    let ports = Ports::allocate();
    let c = Container::boot("kubeconfig");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let home = c.work.join("home/.kube");
    std::fs::create_dir_all(&home).unwrap();
    let config = home.join("config");
    let other = "apiVersion: v1\nkind: Config\nclusters:\n- name: kind-x\n  cluster: {server: 'https://192.0.2.1:6443'}\nusers:\n- name: kind-x\n  user: {token: abc}\ncontexts:\n- name: kind-x\n  context: {cluster: kind-x, user: kind-x}\ncurrent-context: kind-x\n";
    std::fs::write(&config, other).unwrap();
    std::fs::set_permissions(&config, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let write = format!("kubeconfig.write={}", config.display());
    let state = gen_control_plane(&c, &version, &ports, &["--set", &write]);
    let cl = Cluster {
        c: &c,
        state: state.clone(),
        kubectl: k8s_dir(&version).join("kubectl"),
        ports: &ports,
    };
    let out = cl.ku(&["start"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("merged into {}", config.display())),
        "{}",
        text(&out)
    );

    let kubectl = |args: &[&str]| {
        run(Command::new(&cl.kubectl)
            .arg("--kubeconfig")
            .arg(&config)
            .args(args))
    };
    let out = kubectl(&["--context", "control-plane", "get", "--raw", "/readyz"]);
    assert_eq!(text(&out).trim(), "ok");
    let out = kubectl(&["config", "get-contexts", "-o", "name"]);
    assert_eq!(text(&out), "control-plane\nkind-x\n");
    let out = kubectl(&["config", "current-context"]);
    assert_eq!(text(&out).trim(), "control-plane");
    let mode = std::fs::metadata(&config).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o640
    );

    // The command: printed, it is a kubeconfig of its own; merged with --keep-context elsewhere.
    let printed = c.work.join("printed.kubeconfig");
    let out = cl.ku(&["kubeconfig"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(&printed, &out.stdout).unwrap();
    let out = run(Command::new(&cl.kubectl)
        .arg("--kubeconfig")
        .arg(&printed)
        .args(["get", "--raw", "/readyz"]));
    assert_eq!(text(&out).trim(), "ok");
    let second = c.work.join("second/config");
    let out = cl.ku(&[
        "kubeconfig",
        "--write",
        second.to_str().unwrap(),
        "--mode",
        "0600",
        "-o",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["action"], "merged", "{report}");
    assert_eq!(report["currentContext"], "control-plane", "{report}");

    // Bad input: nothing changes.
    let in_state = state
        .join("kubeconfig/admin.kubeconfig")
        .display()
        .to_string();
    let before = std::fs::read(&config).unwrap();
    for bad in [
        vec![
            "kubeconfig",
            "--write",
            config.to_str().unwrap(),
            "--mode",
            "0999",
        ],
        vec!["kubeconfig", "--mode", "0600"],
        vec!["kubeconfig", "--write", c.work.to_str().unwrap()],
        vec!["kubeconfig", "--write", &in_state],
    ] {
        let out = cl.ku(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out));
    }
    assert_eq!(std::fs::read(&config).unwrap(), before);

    // destroy --all takes its entries out again, and only those.
    let out = cl.ku(&["destroy", "--all"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = kubectl(&["config", "get-contexts", "-o", "name"]);
    assert_eq!(text(&out), "kind-x\n");
    let out = kubectl(&[
        "config",
        "view",
        "-o",
        "jsonpath={.clusters[*].name} {.users[*].name}",
    ]);
    assert_eq!(text(&out), "kind-x kind-x");
}

#[test]
fn restarting_etcd_takes_what_needs_it_down_and_back() {
    let ports = Ports::allocate();
    let c = Container::boot("restart-deps");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let state = gen_control_plane(&c, &version, &ports, &[]);
    let cl = Cluster::started(&c, &version, state.clone(), &ports);
    let invocations = || -> Vec<String> {
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ]
        .iter()
        .map(|comp| {
            show_unit(&c, &unit(&state, comp))
                .get("InvocationID")
                .cloned()
                .unwrap_or_default()
        })
        .collect()
    };
    let before = invocations();
    // An edit to etcd's unit file (the transient unit is replaced, not restarted as it was).
    let file = state.join("units").join(unit(&state, "etcd"));
    let text_before = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text_before.replace(
            "[Service]\n",
            "[Service]\nEnvironment=KUBEUNIT_RESTART_TEST=1\n",
        ),
    )
    .unwrap();
    let out = cl.ku(&["restart", "etcd", "--timeout", "60"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = invocations();
    for (i, comp) in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .iter()
    .enumerate()
    {
        assert_ne!(before[i], after[i], "{comp} restarted");
        assert!(!after[i].is_empty(), "{comp} runs");
    }
    let env = show_unit(&c, &unit(&state, "etcd"));
    assert!(
        env.get("Environment")
            .is_some_and(|e| e.contains("KUBEUNIT_RESTART_TEST=1")),
        "the edit took effect: {:?}",
        env.get("Environment")
    );
    let st = cl.status();
    assert!(
        st.as_array().unwrap().iter().all(|r| r["healthy"] == true),
        "{st}"
    );
    assert_eq!(cl.kubectl(&["get", "--raw", "/readyz"]).trim(), "ok");
    let out = cl.ku(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// A component that fails while something it was started alongside is still coming up names that
/// one too, as systemd has it then: its own journal says only that it could not reach it. Here etcd
/// never gets past a start-pre step, and kube-apiserver's start fails at once.
#[test]
fn a_failure_during_the_overlapped_start_names_what_was_not_healthy_yet() {
    let ports = Ports::allocate();
    let c = Container::boot("overlap-fail");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let state = gen_control_plane(&c, &version, &ports, &[]);
    let edit = |component: &str, pre: &str| {
        let path = state.join("units").join(unit(&state, component));
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = text.replacen(
            "[Service]\n",
            &format!("[Service]\nExecStartPre={pre}\n"),
            1,
        );
        assert_ne!(edited, text);
        std::fs::write(&path, edited).unwrap();
    };
    edit("etcd", "/bin/sleep 600");
    edit("kube-apiserver", "/bin/false");
    let out = c.kubeunit(&[
        "start",
        "--state-dir",
        state.to_str().unwrap(),
        "--timeout",
        "60",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let etcd = unit(&state, "etcd");
    let said = text(&out);
    assert!(
        said.contains(&format!(
            "kube-apiserver ({}) failed to start",
            unit(&state, "kube-apiserver")
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "etcd ({etcd}), which it needs, was not healthy yet: activating/start-pre, job start running"
        )) && said.contains(&format!("(journalctl -u {etcd})")),
        "{said}"
    );
    // And nothing is left running (the failed start cleans up, etcd included).
    assert_eq!(c.list_units(&format!("{}*", unit_prefix(&state))), "");
}

/// `start` runs etcd and kube-apiserver together (the API server dials etcd until it answers). A
/// kill -9 of etcd in that overlap, once etcd was healthy and while the API server is still coming
/// up: systemd restarts etcd as it always does, the API server waits for it instead of failing,
/// and `start` returns with everything healthy and the data there.
#[test]
fn etcd_killed_during_the_overlapped_start_is_restarted_and_start_completes() {
    let ports = Ports::allocate();
    let c = Container::boot("overlap-kill");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let state = gen_control_plane(&c, &version, &ports, &[]);
    let cl = Cluster::started(&c, &version, state.clone(), &ports);
    cl.kubectl(&["create", "configmap", "before-kill", "--from-literal=k=v"]);
    let out = cl.ku(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));

    let state_arg = state.to_str().unwrap();
    let start = c
        .command(&[
            env!("CARGO_BIN_EXE_kubeunit"),
            "start",
            "--state-dir",
            state_arg,
        ])
        .env("SOURCE_DATE_EPOCH", test_epoch())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let unit_of = unit;
    let show = |component: &str, prop: &str| -> String {
        let out = c.run(&["systemctl", "show", "-P", prop, &unit_of(&state, component)]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // etcd healthy (as our own client sees it, so kubeunit's probe, every 50 ms, saw it too).
    wait_for("etcd healthy during start", Duration::from_secs(30), || {
        show("etcd", "ActiveState") == "active"
            && cl.etcdctl(&["endpoint", "health"]).status.success()
    });
    std::thread::sleep(Duration::from_millis(200));
    let apiserver = show("kube-apiserver", "ActiveState");
    let pid = show("etcd", "MainPID");
    assert!(c.run(&["kill", "-9", &pid]).status.success());
    // The window this test is about: the API server was started and not ready yet.
    assert_eq!(
        apiserver, "activating",
        "the API server was not coming up any more"
    );

    let out = start.wait_with_output().unwrap();
    assert!(out.status.success(), "start: {}", text(&out));
    let st = cl.status();
    let etcd = &st[0];
    assert_eq!(etcd["component"], "etcd");
    assert!(etcd["restarts"].as_u64() >= Some(1), "{etcd}");
    assert_ne!(etcd["pid"].to_string(), pid);
    for comp in st.as_array().unwrap() {
        assert_eq!(comp["healthy"], true, "{comp}");
    }
    assert_eq!(st[1]["restarts"], 0, "the API server crashed: {}", st[1]);
    assert!(cl
        .kubectl(&["get", "configmap", "before-kill", "-o", "name"])
        .contains("configmap/before-kill"));
    // Stopping still goes in order (the units keep After=): the API server is down before etcd,
    // not left waiting for it until systemd's stop timeout.
    let out = cl.ku(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    let journal = c.run(&[
        "journalctl",
        "--no-pager",
        "-o",
        "short-monotonic",
        "-u",
        &unit(&state, "kube-apiserver"),
        "-u",
        &unit(&state, "etcd"),
    ]);
    let journal = String::from_utf8_lossy(&journal.stdout).into_owned();
    assert!(!journal.contains("timed out. Killing"), "{journal}");
    let last = |what: &str| {
        journal
            .lines()
            .collect::<Vec<_>>()
            .iter()
            .rposition(|l| l.contains(what))
    };
    let (apiserver_stopped, etcd_stopping) = (
        last(&format!("Stopped {}", unit(&state, "kube-apiserver"))).expect("apiserver stopped"),
        last(&format!("Stopping {}", unit(&state, "etcd"))).expect("etcd stopping"),
    );
    assert!(apiserver_stopped < etcd_stopping, "{journal}");
}

/// `stop` killed (-9) at any moment of its run (also while it watches kube-apiserver's shutdown to
/// end its own connections): systemd's stop jobs go on without it, a second `stop` finishes, and
/// nothing is left running; kube-apiserver still exits 0 (whatever happened to its connections).
#[test]
fn stop_killed_midway_then_stop_again_leaves_nothing() {
    let ports = Ports::allocate();
    let c = Container::boot("stop-killed");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let state = gen_control_plane(&c, &version, &ports, &[]);
    let cl = Cluster::started(&c, &version, state, &ports);
    let state = cl.state.to_str().unwrap().to_string();
    for delay in ["0.05", "0.15", "0.3"] {
        // In the container: stop in the background, SIGKILL after `delay`.
        let script = format!(
            "{bin} stop --state-dir '{state}' >/dev/null 2>&1 & p=$!; sleep {delay}; kill -9 $p; wait $p; echo $?",
            bin = env!("CARGO_BIN_EXE_kubeunit"),
        );
        let out = c.run(&["sh", "-c", &script]);
        assert!(out.status.success(), "{}", text(&out));
        // 137: the kill landed while stop ran. A whole stop takes about 0.3 s, so the later kills
        // may come after it finished (0); the first must land, and either way the second stop
        // below must leave nothing.
        let code = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let landed = if delay == "0.05" {
            &["137"][..]
        } else {
            &["137", "0"][..]
        };
        assert!(
            landed.contains(&code.as_str()),
            "the stop killed after {delay}s exited {code}"
        );
        let out = cl.ku(&["stop", "-o", "json"]);
        assert!(
            out.status.success(),
            "stop after a killed stop: {}",
            text(&out)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stop -o json");
        assert_eq!(report["busyPorts"], serde_json::json!([]), "{report}");
        let units = c.list_units(&format!("{}*", unit_prefix(&cl.state)));
        assert!(units.is_empty(), "units left: {units}");
        let procs = c.run(&[
            "pgrep",
            "-f",
            &format!("--secure-port={}", ports.port("apiserver")),
        ]);
        assert!(!procs.status.success(), "kube-apiserver still runs");
        let journal = c.run(&[
            "journalctl",
            "--no-pager",
            "-o",
            "cat",
            "-u",
            &unit(&cl.state, "kube-apiserver"),
        ]);
        let journal = String::from_utf8_lossy(&journal.stdout).into_owned();
        let last = &journal[journal.rfind("ShutdownInitiated").expect("its shutdown")..];
        assert!(last.contains("Deactivated successfully"), "{last}");
        let out = cl.ku(&["start"]);
        assert!(out.status.success(), "start again: {}", text(&out));
    }
    assert!(cl.ku(&["stop"]).status.success());
}

/// `start` and `stop` of one environment at the same time, in rounds with the stop a little later
/// each time: they take turns (the state dir's lock), both succeed, and the environment ends as
/// the one that finished last left it: running with every component healthy, or stopped with no
/// unit, process or busy port left. A last stop leaves nothing.
#[test]
fn start_and_stop_at_once_end_in_one_state_with_nothing_leaked() {
    let ports = Ports::allocate();
    let c = Container::boot("start-stop");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let state = gen_control_plane(&c, &version, &ports, &[]);
    let cl = Cluster::started(&c, &version, state, &ports);
    assert!(cl.ku(&["stop"]).status.success());
    let nothing_left = |when: &str| {
        let units = c.list_units(&format!("{}*", unit_prefix(&cl.state)));
        assert!(units.is_empty(), "{when}: units left: {units}");
        let procs = c.run(&[
            "pgrep",
            "-f",
            &format!("--secure-port={}", ports.port("apiserver")),
        ]);
        assert!(!procs.status.success(), "{when}: kube-apiserver still runs");
        let out = cl.ku(&["stop", "-o", "json"]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stop -o json");
        assert_eq!(
            report["busyPorts"],
            serde_json::json!([]),
            "{when}: {report}"
        );
    };
    let mut seen = std::collections::BTreeSet::new();
    for (round, delay) in [0u64, 300, 1000, 2500, 5000].into_iter().enumerate() {
        let ((start, start_end), (stop, stop_end)) = std::thread::scope(|s| {
            let start = s.spawn(|| {
                let out = cl.ku(&["start"]);
                (out, std::time::Instant::now())
            });
            let stop = s.spawn(|| {
                std::thread::sleep(Duration::from_millis(delay));
                let out = cl.ku(&["stop"]);
                (out, std::time::Instant::now())
            });
            (start.join().unwrap(), stop.join().unwrap())
        });
        assert!(
            start.status.success(),
            "round {round}: start: {}",
            text(&start)
        );
        assert!(
            stop.status.success(),
            "round {round}: stop: {}",
            text(&stop)
        );
        let when = format!("round {round} (stop {delay} ms after start)");
        if stop_end > start_end {
            seen.insert("stopped");
            nothing_left(&when);
        } else {
            seen.insert("running");
            let out = cl.ku(&["status"]);
            assert!(
                out.status.success(),
                "{when}: running but not healthy: {}",
                text(&out)
            );
            assert!(cl.ku(&["stop"]).status.success());
            nothing_left(&format!("{when}, then stopped"));
        }
        // Both orders were taken at least once over the rounds (the last, late stop ends it).
        eprintln!(
            "{when}: ended {}",
            if stop_end > start_end {
                "stopped"
            } else {
                "running"
            }
        );
    }
    assert!(
        seen.contains("stopped"),
        "no round ended with the stop last"
    );
}

/// The Kubernetes clients start once kube-apiserver is up (READY=1, sent once it listens), not
/// alongside it: with an API server slow to get there (its binary sleeps 12 s first, longer than
/// the controller-manager's 10 s WaitForAPIServer, after which it would exit), the controller-manager
/// and the scheduler start only after it, need no restart, and `start` returns with everything
/// healthy.
#[test]
fn the_clients_start_once_a_slow_api_server_is_up_and_start_completes() {
    let ports = Ports::allocate();
    let c = Container::boot("slow-apiserver");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let real = k8s_dir(&version).join("kube-apiserver");
    let slow = c.work.join("slow-kube-apiserver");
    std::fs::write(
        &slow,
        format!(
            "#!/bin/sh\ncase \"$*\" in *--version*) exec {real} \"$@\";; esac\nsleep 12\nexec {real} \"$@\"\n",
            real = real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&slow, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let state = gen_control_plane(
        &c,
        &version,
        &ports,
        &[
            "--set",
            &format!("components.kube-apiserver.binary={}", slow.display()),
        ],
    );
    let cl = Cluster::started(&c, &version, state, &ports);
    let st = cl.status();
    for comp in st.as_array().unwrap() {
        assert_eq!(comp["healthy"], true, "{comp}");
        assert_eq!(comp["restarts"], 0, "{comp}");
    }
    let us = |component: &str, property: &str| -> u64 {
        show_unit(&c, &unit(&cl.state, component))[property]
            .parse()
            .unwrap()
    };
    let apiserver_up = us("kube-apiserver", "ActiveEnterTimestampMonotonic");
    let apiserver_exec = us("kube-apiserver", "ExecMainStartTimestampMonotonic");
    assert!(apiserver_up >= apiserver_exec + 12_000_000);
    for client in ["kube-controller-manager", "kube-scheduler"] {
        let started = us(client, "ExecMainStartTimestampMonotonic");
        assert!(
            started >= apiserver_up,
            "{client} started at {started} us, before kube-apiserver was up at {apiserver_up} us"
        );
    }
    let out = cl.ku(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// Two state dirs of one profile (the same environment name) with `ports: auto`, on one systemd
/// and one network at once: each has its own units and ports, both are healthy, and stopping one
/// leaves the other running. A recorded port that something else took meanwhile is named by
/// start's preflight before anything starts.
#[test]
fn two_state_dirs_of_one_profile_run_side_by_side_on_auto_ports() {
    let c = Container::boot("side-by-side");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let kubectl_bin = k8s_dir(&version).join("kubectl");
    let mut args = control_plane_args(&version);
    args.extend(["--set".into(), "ports=auto".into()]);
    let gen = |dir: &str| -> PathBuf {
        let state = c.work.join(dir);
        let mut argv = vec!["gen", "--state-dir", state.to_str().unwrap()];
        argv.extend(args.iter().map(String::as_str));
        let out = c.kubeunit(&argv);
        assert!(out.status.success(), "gen {dir}: {}", text(&out));
        state
    };
    let (a, b) = (gen("a"), gen("b"));
    let (pa, pb) = (recorded_ports(&a), recorded_ports(&b));
    assert!(
        pa.values().all(|p| !pb.values().any(|q| q == p)),
        "{pa:?} / {pb:?}"
    );
    let (ua, ub) = (unit_prefix(&a), unit_prefix(&b));
    assert_ne!(ua, ub);
    assert!(ua.starts_with("kubeunit-control-plane_") && ub.starts_with("kubeunit-control-plane_"));
    let ku = |state: &Path, args: &[&str]| -> Output {
        let mut argv = vec![args[0], "--state-dir", state.to_str().unwrap()];
        argv.extend_from_slice(&args[1..]);
        c.kubeunit(&argv)
    };
    let kubectl = |state: &Path, args: &[&str]| -> Output {
        run(Command::new(&kubectl_bin)
            .arg("--kubeconfig")
            .arg(state.join("kubeconfig/admin.kubeconfig"))
            .args(args))
    };
    let free = |ports: &std::collections::BTreeMap<String, u16>| {
        ports
            .iter()
            .filter(|(_, p)| std::net::TcpListener::bind(("0.0.0.0", **p)).is_err())
            .map(|(f, p)| format!("{f}={p}"))
            .collect::<Vec<_>>()
    };

    // Something took a's API server port after gen: start names it and starts nothing.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", pa["apiserver"])).unwrap();
    let out = ku(&a, &["start"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "port {} (ports.apiserver, for kube-apiserver) is already in use",
            pa["apiserver"]
        )),
        "{}",
        text(&out)
    );
    assert_eq!(c.list_units(&format!("{ua}*")), "", "nothing of a started");
    drop(squatter);

    // Both at once.
    std::thread::scope(|s| {
        let starts: Vec<_> = [&a, &b]
            .into_iter()
            .map(|state| s.spawn(move || (state, ku(state, &["start"]))))
            .collect();
        for h in starts {
            let (state, out) = h.join().unwrap();
            assert!(
                out.status.success(),
                "start {}: {}",
                state.display(),
                text(&out)
            );
        }
    });
    let status = |state: &Path| -> serde_json::Value {
        let out = ku(state, &["status", "-o", "json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    };
    for (state, prefix, ports) in [(&a, &ua, &pa), (&b, &ub, &pb)] {
        let st = status(state);
        assert_eq!(st.as_array().map(Vec::len), Some(4), "{st}");
        for comp in st.as_array().unwrap() {
            assert_eq!(comp["healthy"], true, "{comp}");
            assert!(
                comp["unit"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{prefix}-")),
                "{comp}"
            );
        }
        let out = kubectl(state, &["get", "--raw", "/readyz"]);
        assert_eq!(text(&out).trim(), "ok");
        let server = kubectl(
            state,
            &[
                "config",
                "view",
                "-o",
                "jsonpath={.clusters[0].cluster.server}",
            ],
        );
        assert_eq!(
            text(&server),
            format!("https://127.0.0.1:{}", ports["apiserver"])
        );
    }
    // Two clusters, not one: an object in a is not in b.
    assert!(kubectl(&a, &["create", "configmap", "only-in-a"])
        .status
        .success());
    assert!(!kubectl(&b, &["get", "configmap", "only-in-a"])
        .status
        .success());

    // Stopping a leaves b running.
    let out = ku(&a, &["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(ku(&a, &["status"]).status.code(), Some(3));
    assert_eq!(c.list_units(&format!("{ua}*")), "", "nothing of a left");
    assert_eq!(free(&pa), Vec::<String>::new(), "a's ports are free");
    for comp in status(&b).as_array().unwrap() {
        assert_eq!(comp["healthy"], true, "b after a's stop: {comp}");
    }
    assert_eq!(
        text(&kubectl(&b, &["get", "--raw", "/readyz"])).trim(),
        "ok"
    );
    // `list`: a stopped, b running, and one in the default place (/var/lib/kubeunit) never
    // started; each with its version and API address.
    let mut argv = vec!["gen", "--set", "name=listed"];
    argv.extend(args.iter().map(String::as_str));
    let out = c.kubeunit(&argv);
    assert!(out.status.success(), "gen listed: {}", text(&out));
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let list =
        |output: &str| c.kubeunit(&["list", "-o", output, "--state-dir", sa, "--state-dir", sb]);
    let out = list("json");
    assert!(out.status.success(), "{}", text(&out));
    let rows: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let row = |dir: &str| -> serde_json::Value {
        let found = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["stateDir"] == dir);
        found
            .unwrap_or_else(|| panic!("{dir} not listed: {rows}"))
            .clone()
    };
    let (ra, rb, rl) = (row(sa), row(sb), row("/var/lib/kubeunit/listed"));
    assert_eq!(rows.as_array().map(Vec::len), Some(3), "{rows}");
    assert_eq!(
        (&ra["status"], &ra["unitsUp"]),
        (&"stopped".into(), &0.into()),
        "{ra}"
    );
    assert_eq!(
        (&rb["status"], &rb["unitsUp"]),
        (&"running".into(), &4.into()),
        "{rb}"
    );
    assert_eq!(
        (&rl["status"], &rl["name"]),
        (&"stopped".into(), &"listed".into()),
        "{rl}"
    );
    for (r, ports) in [(&ra, &pa), (&rb, &pb)] {
        assert_eq!(r["version"], version.as_str(), "{r}");
        let api = format!("https://127.0.0.1:{}", ports["apiserver"]);
        assert_eq!((&r["api"], &r["units"]), (&api.into(), &4.into()), "{r}");
    }
    let table = text(&list("text"));
    for (dir, status) in [(sa, "stopped"), (sb, "running")] {
        let line = table.lines().find(|l| l.ends_with(dir));
        let line = line.unwrap_or_else(|| panic!("{dir} not in:\n{table}"));
        assert!(line.contains(status) && line.contains(&version), "{table}");
    }
    // ...and a starts again beside it, with its data.
    let out = ku(&a, &["start"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(kubectl(&a, &["get", "configmap", "only-in-a"])
        .status
        .success());
    // Stopping b leaves a running.
    let out = ku(&b, &["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(c.list_units(&format!("{ub}*")), "", "nothing of b left");
    assert_eq!(free(&pb), Vec::<String>::new(), "b's ports are free");
    for comp in status(&a).as_array().unwrap() {
        assert_eq!(comp["healthy"], true, "a after b's stop: {comp}");
    }
    let out = ku(&a, &["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(free(&pa), Vec::<String>::new(), "a's ports are free");
    let services: Vec<String> = c
        .list_units("kubeunit-*")
        .lines()
        .filter(|l| l.contains(".service"))
        .map(String::from)
        .collect();
    assert_eq!(services, Vec::<String>::new(), "no service left");
}

/// The `envtest` profile: etcd and kube-apiserver alone, as envtest runs its own. A pod in a
/// namespace without a `default` ServiceAccount is admitted (the plugin is off, as envtest's) and
/// stays unscheduled, and no ServiceAccount appears (nothing runs controllers); `destroy` and
/// `start` give an empty cluster again (the reset between suites).
#[test]
fn the_envtest_profile_is_an_api_server_alone_reset_by_destroy_and_start() {
    let ports = Ports::allocate();
    let c = Container::boot("envtest");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let mut args = control_plane_args(&version);
    args[1] = "envtest".into();
    let state = gen_in(&c, "envtest", &ports, &args);
    let cl = Cluster::started(&c, &version, state, &ports);
    let rows = cl.status();
    let running: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["subState"] == "running")
        .filter_map(|r| r["component"].as_str())
        .collect();
    assert_eq!(running, ["etcd", "kube-apiserver"], "{rows}");
    cl.kubectl(&["create", "namespace", "suite"]);
    cl.kubectl(&[
        "-n",
        "suite",
        "run",
        "p",
        "--image=registry.k8s.io/pause:3.10.2",
        "--restart=Never",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        cl.kubectl(&["-n", "suite", "get", "serviceaccounts", "-o", "name"]),
        "",
        "no controller made a ServiceAccount"
    );
    assert_eq!(
        cl.kubectl(&[
            "-n",
            "suite",
            "get",
            "pod",
            "p",
            "-o",
            "jsonpath={.status.phase} {.spec.nodeName}"
        ])
        .trim(),
        "Pending",
        "admitted without a ServiceAccount, scheduled by nothing"
    );
    for verb in ["destroy", "start"] {
        let out = cl.ku(&[verb]);
        assert!(out.status.success(), "{verb}: {}", text(&out));
    }
    let out = cl.kubectl_as("admin", &["get", "namespace", "suite"]);
    assert!(
        !out.status.success() && text(&out).contains("NotFound"),
        "the reset left: {}",
        text(&out)
    );
    let out = cl.ku(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));
}
