//! `kubeunit upgrade` on dev, from the older pinned Kubernetes minor to the newer, on real systemd and
//! the pinned binaries of both. Refused moves (a skipped minor, a missing binary, a downgrade) change
//! neither the state dir nor what runs; a dry run gives upstream's order; an upgrade killed with -9
//! while its first restart is under way goes on when run again. Afterwards every key that was in
//! etcd is still there, the pods run on in the same containers, and the node and the API server
//! report the new version. `multi`, installed (`kubeunit install`), goes node by node with `--drain`,
//! and on after a kill between two nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::common::container::{dev_args, gen_in, show_unit, unit_differences, Container, Env};
use crate::common::ports::Ports;
use crate::common::*;

/// The components of dev that follow a version, in the order an upgrade goes.
const ORDER: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
];

/// The state dir without its data dir (etcd, logs: they change as the environment runs).
fn config_files(state: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32, std::time::SystemTime)> {
    let mut files = snapshot(state);
    files.retain(|p, _| !p.starts_with("data"));
    files
}

/// Each unit of the environment: its configuration as systemd shows it, and its main PID.
fn units(c: &Container, state: &Path) -> BTreeMap<String, (BTreeMap<String, String>, String)> {
    ORDER
        .iter()
        .map(|name| {
            let props = show_unit(c, &unit(state, name));
            let pid = props.get("MainPID").cloned().unwrap_or_default();
            (name.to_string(), (props, pid))
        })
        .collect()
}

/// What differs between two `units` readings: configuration, or a process that is another one.
fn unit_changes(
    a: &BTreeMap<String, (BTreeMap<String, String>, String)>,
    b: &BTreeMap<String, (BTreeMap<String, String>, String)>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, (props, pid)) in a {
        let (props_b, pid_b) = &b[name];
        if pid != pid_b {
            out.push(format!("{name}: MainPID {pid} -> {pid_b}"));
        }
        out.extend(
            unit_differences(props, props_b)
                .into_iter()
                .map(|d| format!("{name}: {d}")),
        );
    }
    out
}

/// Every key in the environment's etcd, read inside the container with the pinned etcdctl and the
/// API server's client certificate.
fn etcd_keys(c: &Container, state: &Path) -> BTreeSet<String> {
    let etcd_unit = std::fs::read_to_string(state.join("units").join(unit(state, "etcd"))).unwrap();
    let urls = etcd_unit
        .split_whitespace()
        .find_map(|w| w.strip_prefix("--listen-client-urls="))
        .unwrap_or_else(|| panic!("no --listen-client-urls in etcd's unit:\n{etcd_unit}"));
    let endpoint = urls.split(',').next().unwrap();
    let pki = |f: &str| state.join("pki").join(f).display().to_string();
    let etcdctl = etcd_bin_dir().join("etcdctl").display().to_string();
    let out = c.run(&[
        &etcdctl,
        &format!("--endpoints={endpoint}"),
        &format!("--cacert={}", pki("etcd/ca.crt")),
        &format!("--cert={}", pki("apiserver-etcd-client.crt")),
        &format!("--key={}", pki("apiserver-etcd-client.key")),
        "get",
        "",
        "--prefix",
        "--keys-only",
    ]);
    assert!(out.status.success(), "etcdctl get: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// The web pods: name -> (UID, container ID).
fn web_pods(n: &Env) -> BTreeMap<String, (String, String)> {
    pods_of(n, "app=web")
}

/// The pods with `label`: name -> (UID, container ID).
fn pods_of(n: &Env, label: &str) -> BTreeMap<String, (String, String)> {
    let out = n.kubectl_ok(&[
        "get",
        "pods",
        "-l",
        label,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[0].containerID}{\"\\n\"}{end}",
    ]);
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.to_string(),
                (w.next()?.to_string(), w.next()?.to_string()),
            ))
        })
        .collect()
}

/// The environment's pre-upgrade snapshots.
fn pre_upgrade_snapshots(n: &Env) -> Vec<String> {
    let list: Value = serde_json::from_str(&n.ku_ok(&["snapshot", "list", "-o", "json"])).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .filter(|name| name.starts_with("pre-upgrade-"))
        .map(String::from)
        .collect()
}

/// Directory of stand-in Kubernetes binaries that report `version` (the skipped minor kubeunit
/// must refuse before anything changes; no such release is pinned here).
fn binaries_reporting(dir: &Path, version: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    for name in &ORDER[1..] {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\necho Kubernetes {version}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir.to_path_buf()
}

/// The longest time between two answers of the API server's /readyz, asked every 100 ms until
/// `until` turns false.
fn longest_silence(n: &Env, until: &std::sync::atomic::AtomicBool) -> f64 {
    let mut last = std::time::Instant::now();
    let mut longest = Duration::ZERO;
    while until.load(std::sync::atomic::Ordering::Relaxed) {
        let t = std::time::Instant::now();
        if n.kubectl(&["get", "--raw=/readyz", "--request-timeout=1s"])
            .status
            .success()
        {
            longest = longest.max(t - last);
            last = t;
        }
        std::thread::sleep(Duration::from_millis(100).saturating_sub(t.elapsed()));
    }
    longest.max(last.elapsed()).as_secs_f64()
}

/// Run `kubeunit upgrade ARGS` in the container and kill it with -9 once the shell condition `when`
/// holds (polled every 50 ms, for up to `polls`): the run's output, and success only when it was
/// killed (not finished first, nor timed out).
fn kill_upgrade_when(c: &Container, args: &str, when: &str, polls: u32) -> std::process::Output {
    let script = format!(
        "cd {work}; KUBEUNIT_OFFLINE=1 SOURCE_DATE_EPOCH={epoch} {ku} upgrade {args} >upgrade.log 2>&1 & pid=$!
         for i in $(seq {polls}); do
           if ! kill -0 $pid 2>/dev/null; then echo finished first; cat upgrade.log; exit 3; fi
           if {when}; then kill -9 $pid; echo killed; cat upgrade.log; exit 0; fi
           sleep 0.05
         done
         echo timed out; cat upgrade.log; exit 4",
        work = c.work.display(),
        epoch = test_epoch(),
        ku = env!("CARGO_BIN_EXE_kubeunit"),
    );
    c.sh(&script)
}

#[test]
fn dev_upgrades_in_place_from_the_older_minor_and_goes_on_after_a_kill() {
    let _turn = node_lock();
    let pinned_k8s = pinned("KUBERNETES_VERSIONS");
    let (new, old) = (pinned_k8s[0].clone(), pinned_k8s[1].clone());
    let bin = |v: &str| cache_dir().join("bin").join(format!("kubernetes-{v}"));
    let c = Container::boot_node("upgrade");
    let ports = Ports::allocate();
    let state = gen_in(&c, "dev", &ports, &dev_args(&old));
    let n = Env {
        c: &c,
        state: state.clone(),
        kubectl: bin(&new).join("kubectl"),
    };
    let state_arg = state.display().to_string();
    let out = c.kubeunit(&["start", "--state-dir", &state_arg, "--timeout", "300"]);
    assert!(out.status.success(), "start:\n{}", text(&out));
    n.create_web(2);
    n.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=300s"]);
    let pods = web_pods(&n);
    assert_eq!(pods.len(), 2, "{pods:?}");
    let keys = etcd_keys(&c, &state);
    assert!(
        keys.iter()
            .any(|k| k.starts_with("/registry/deployments/default/web")),
        "{keys:?}"
    );

    // Refused, changing nothing: a skipped minor, a binary that is not there, and a move that
    // would make the kubelet newer than its API server.
    let upgrade_to = |dir: &Path, version: &str, more: &[&str]| {
        let dir = dir.display().to_string();
        let mut args = vec!["upgrade", "--bin-dir", &dir, "--set"];
        let set = format!("versions.kubernetes={version}");
        args.push(&set);
        args.extend_from_slice(more);
        n.ku(&args)
    };
    let skipped = {
        let v = new.trim_start_matches('v').split('.').collect::<Vec<_>>();
        format!("v{}.{}.0", v[0], v[1].parse::<u32>().unwrap() + 1)
    };
    let fake = binaries_reporting(&c.work.join("fake-bin"), &skipped);
    let files = config_files(&state);
    let running = units(&c, &state);
    for (dir, version, says) in [
        (fake.clone(), skipped.clone(), "skips a minor version"),
        (c.work.join("no-such-dir"), new.clone(), "cannot run it"),
    ] {
        let out = upgrade_to(&dir, &version, &[]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "upgrade to {version}: {}",
            text(&out)
        );
        assert!(text(&out).contains(says), "{says}: {}", text(&out));
        assert_eq!(config_files(&state), files, "the state dir changed");
        let changes = unit_changes(&running, &units(&c, &state));
        assert!(changes.is_empty(), "units changed: {changes:#?}");
    }
    // --drain on transient units: the kubelet would restart with the API server, undrained.
    let out = upgrade_to(&bin(&new), &new, &["--drain"]);
    assert_eq!(out.status.code(), Some(2), "--drain: {}", text(&out));
    assert!(text(&out).contains("transient units"), "{}", text(&out));
    assert_eq!(config_files(&state), files, "the state dir changed");
    let changes = unit_changes(&running, &units(&c, &state));
    assert!(changes.is_empty(), "units changed: {changes:#?}");
    assert!(pre_upgrade_snapshots(&n).is_empty());

    // The plan: upstream's order, etcd kept (one etcd for both minors), nothing touched.
    let out = upgrade_to(&bin(&new), &new, &["--dry-run", "-o", "json"]);
    assert!(out.status.success(), "dry run: {}", text(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps: Vec<(String, String, String, String)> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let w = |k: &str| s[k].as_str().unwrap_or("").to_string();
            (w("component"), w("running"), w("target"), w("action"))
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(names, ORDER, "{plan:#}");
    for (name, from, to, action) in &steps[1..] {
        assert_eq!(
            (from, to, action.as_str()),
            (&old, &new, "upgrade"),
            "{name}: {plan:#}"
        );
    }
    assert_eq!(steps[0].3, "keep", "{plan:#}");
    assert_eq!(
        config_files(&state),
        files,
        "a dry run changed the state dir"
    );
    assert!(unit_changes(&running, &units(&c, &state)).is_empty());

    // kill -9 while the first restart is under way: once the kubelet, which comes back after the
    // API server, is down.
    let kubelet = unit(&state, "kubelet");
    let out = kill_upgrade_when(
        &c,
        &format!(
            "--state-dir {state_arg} --bin-dir {} --set versions.kubernetes={new}",
            bin(&new).display()
        ),
        &format!(
            "grep -q '^kubeunit: \\[1/' upgrade.log && ! systemctl is-active --quiet {kubelet}"
        ),
        3000,
    );
    assert!(out.status.success(), "the kill: {}", text(&out));
    assert!(
        state.join("data/upgrade.json").exists(),
        "no record of the upgrade under way"
    );
    assert_eq!(pre_upgrade_snapshots(&n).len(), 1);

    // The same command goes on from there, while a client asks the API server every 100 ms.
    let answering = std::sync::atomic::AtomicBool::new(true);
    let (out, gap) = std::thread::scope(|s| {
        let poller = s.spawn(|| longest_silence(&n, &answering));
        let out = upgrade_to(&bin(&new), &new, &[]);
        answering.store(false, std::sync::atomic::Ordering::Relaxed);
        (out, poller.join().unwrap())
    });
    println!("upgrade: the API server did not answer for {gap:.1}s at most");
    assert!(out.status.success(), "upgrade again: {}", text(&out));
    assert!(
        text(&out).contains("an upgrade stopped here before"),
        "{}",
        text(&out)
    );
    assert!(!state.join("data/upgrade.json").exists());
    assert_eq!(pre_upgrade_snapshots(&n).len(), 1, "a second snapshot");

    // Where it ended: the new version everywhere, nothing lost.
    let version: Value = serde_json::from_str(&n.kubectl_ok(&["version", "-o", "json"])).unwrap();
    assert_eq!(version["serverVersion"]["gitVersion"], new.as_str());
    wait_for(
        "the node on the new kubelet, Ready",
        Duration::from_secs(120),
        || {
            let out = n.kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.nodeInfo.kubeletVersion} {.items[0].status.conditions[?(@.type==\"Ready\")].status}",
        ]);
            String::from_utf8_lossy(&out.stdout).trim() == format!("{new} True")
        },
    );
    assert_eq!(
        web_pods(&n),
        pods,
        "the web pods are other pods or containers"
    );
    let after = etcd_keys(&c, &state);
    let lost: Vec<&String> = keys.difference(&after).collect();
    assert!(lost.is_empty(), "keys gone from etcd: {lost:#?}");
    let out = n.ku(&["status"]);
    assert!(out.status.success(), "status: {}", text(&out));

    // Run again: nothing to do. A downgrade is refused, changing nothing.
    let out = upgrade_to(&bin(&new), &new, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing to upgrade"), "{}", text(&out));
    let files = config_files(&state);
    let running = units(&c, &state);
    let out = upgrade_to(&bin(&old), &old, &[]);
    assert_eq!(out.status.code(), Some(2), "downgrade: {}", text(&out));
    assert!(text(&out).contains("is a downgrade"), "{}", text(&out));
    assert_eq!(
        config_files(&state),
        files,
        "the refused downgrade changed the state dir"
    );
    let changes = unit_changes(&running, &units(&c, &state));
    assert!(changes.is_empty(), "units changed: {changes:#?}");
    assert_eq!(pre_upgrade_snapshots(&n).len(), 1);
}

/// The nodes: name -> (kubelet version, Ready, unschedulable).
fn nodes(n: &Env) -> BTreeMap<String, (String, String, String)> {
    let out = n.kubectl_ok(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type==\"Ready\")].status} {.spec.unschedulable}{\"\\n\"}{end}",
    ]);
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.to_string();
            let version = w.next()?.to_string();
            let ready = w.next()?.to_string();
            // Unset when schedulable.
            let unschedulable = w.next().unwrap_or("false").to_string();
            Some((name, (version, ready, unschedulable)))
        })
        .collect()
}

/// multi installed (`kubeunit install --now`, as environments across hosts and VMs run) goes to
/// the newer minor node by node with `--drain`: each node is drained before its kubelet restarts
/// and uncordoned after; killed with -9 right after worker-1's drain, the run without `--drain`
/// goes on and uncordons worker-1. The installed unit files are the state dir's again.
#[test]
fn multi_installed_upgrades_node_by_node_drains_and_goes_on_after_a_kill() {
    let _turn = node_lock();
    let pinned_k8s = pinned("KUBERNETES_VERSIONS");
    let (new, old) = (pinned_k8s[0].clone(), pinned_k8s[1].clone());
    let bin = |v: &str| cache_dir().join("bin").join(format!("kubernetes-{v}"));
    let c = Container::boot_node("upgrade-multi");
    let out = c.sh("ip route replace unreachable 10.88.0.0/13 metric 4294967295");
    assert!(out.status.success(), "{}", text(&out));
    let ports = Ports::allocate();
    let mut args = dev_args(&old);
    args[1] = "multi".into();
    for set in [
        "network.podCIDR=10.95.0.0/16",
        "network.serviceCIDR=10.0.7.0/24",
    ] {
        args.extend(["--set".to_string(), set.to_string()]);
    }
    let state = gen_in(&c, "multi", &ports, &args);
    let n = Env {
        c: &c,
        state: state.clone(),
        kubectl: bin(&new).join("kubectl"),
    };
    let state_arg = state.display().to_string();
    let out = n.ku(&["install", "--now"]);
    assert!(out.status.success(), "install --now:\n{}", text(&out));
    n.create_web(2);
    // A DaemonSet on every node (the control plane's taint tolerated): drain leaves its pods, and
    // a kubelet's restart does not restart them.
    let image = pinned("TEST_IMAGE")[0].clone();
    let manifest = c.work.join("keep.yaml");
    std::fs::write(
        &manifest,
        format!(
            r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: keep}}
spec:
  selector: {{matchLabels: {{app: keep}}}}
  template:
    metadata: {{labels: {{app: keep}}}}
    spec:
      terminationGracePeriodSeconds: 1
      tolerations: [{{operator: Exists}}]
      containers: [{{name: c, image: {image}, command: [sleep, "36000"]}}]
"#
        ),
    )
    .unwrap();
    n.kubectl_ok(&["apply", "-f", &manifest.display().to_string()]);
    n.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=300s"]);
    n.kubectl_ok(&["rollout", "status", "ds/keep", "--timeout=300s"]);
    let kept = pods_of(&n, "app=keep");
    assert_eq!(kept.len(), 3, "{kept:?}");
    // Which pods a drain may evict (all but DaemonSets'): their keys alone may go from etcd.
    let evictable: BTreeSet<String> = n
        .kubectl_ok(&[
            "get",
            "pods",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.ownerReferences[0].kind}{\"\\n\"}{end}",
        ])
        .lines()
        .filter(|l| !l.ends_with(" DaemonSet"))
        .filter_map(|l| l.split_whitespace().next())
        .map(|p| format!("/registry/pods/{p}"))
        .collect();
    let keys = etcd_keys(&c, &state);
    let before = nodes(&n);
    assert_eq!(before.len(), 3, "{before:?}");
    for (name, (version, ready, unschedulable)) in &before {
        assert_eq!(
            (version.as_str(), ready.as_str(), unschedulable.as_str()),
            (old.as_str(), "True", "false"),
            "{name}"
        );
    }

    // kill -9 right after worker-1's drain, while its kubelet's turn is under way.
    let out = kill_upgrade_when(
        &c,
        &format!(
            "--state-dir {state_arg} --drain --timeout 240 --bin-dir {} --set versions.kubernetes={new}",
            bin(&new).display()
        ),
        "grep -q 'node worker-1 drained' upgrade.log",
        6000,
    );
    assert!(out.status.success(), "the kill: {}", text(&out));
    let first = text(&out);
    assert!(
        first.contains("installed units written again in /etc/systemd/system"),
        "{first}"
    );
    // The control-plane node went first, drained and back before worker-1's turn.
    let cp = first
        .find("node control-plane drained")
        .unwrap_or_else(|| panic!("no drain of control-plane:\n{first}"));
    let cp_back = first
        .find("node control-plane uncordoned")
        .unwrap_or_else(|| panic!("control-plane not uncordoned:\n{first}"));
    let w1 = first.find("node worker-1 drained").unwrap();
    assert!(cp < cp_back && cp_back < w1, "{first}");
    // worker-1 is cordoned and runs no pod but DaemonSets'.
    assert_eq!(nodes(&n)["worker-1"].2, "true", "worker-1 not cordoned");
    let on_w1 = n.kubectl_ok(&[
        "get",
        "pods",
        "-A",
        "--field-selector=spec.nodeName=worker-1",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.metadata.ownerReferences[0].kind}{\"\\n\"}{end}",
    ]);
    let left: Vec<&str> = on_w1
        .lines()
        .filter(|l| !l.ends_with(" DaemonSet") && !l.trim().is_empty())
        .collect();
    assert!(left.is_empty(), "pods left on drained worker-1: {left:?}");
    let record = std::fs::read_to_string(state.join("data/upgrade.json")).unwrap();
    assert!(record.contains("worker-1"), "{record}");

    // Run again without --drain: it goes on, and uncordons worker-1 (its record says so).
    let bin_arg = bin(&new).display().to_string();
    let set = format!("versions.kubernetes={new}");
    let out = n.ku(&[
        "upgrade",
        "--timeout",
        "240",
        "--bin-dir",
        &bin_arg,
        "--set",
        &set,
    ]);
    let second = text(&out);
    assert!(out.status.success(), "upgrade again: {second}");
    assert!(
        second.contains("an upgrade stopped here before"),
        "{second}"
    );
    assert!(second.contains("node worker-1 uncordoned"), "{second}");
    assert!(
        !second.contains("drained"),
        "a drain without --drain: {second}"
    );
    assert!(!state.join("data/upgrade.json").exists());

    // Every node on the new kubelet, Ready and schedulable; web served by both its pods.
    wait_for(
        "every node on the new kubelet, Ready, schedulable",
        Duration::from_secs(180),
        || {
            let now = nodes(&n);
            now.len() == 3
                && now.values().all(|(v, r, u)| {
                    (v.as_str(), r.as_str(), u.as_str()) == (&new, "True", "false")
                })
        },
    );
    n.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=300s"]);
    assert_eq!(
        pods_of(&n, "app=keep"),
        kept,
        "the DaemonSet's pods are other pods or containers"
    );
    let after = etcd_keys(&c, &state);
    let lost: Vec<&String> = keys
        .difference(&after)
        .filter(|k| !evictable.contains(*k))
        .collect();
    assert!(lost.is_empty(), "keys gone from etcd: {lost:#?}");
    let version: Value = serde_json::from_str(&n.kubectl_ok(&["version", "-o", "json"])).unwrap();
    assert_eq!(version["serverVersion"]["gitVersion"], new.as_str());
    // What systemd runs is the state dir's units, written again.
    let out = c.sh(&format!(
        "cd {state_arg}/units && for f in *; do cmp \"$f\" \"/etc/systemd/system/$f\" || exit 1; done; grep -l {new} /etc/systemd/system/*kubelet*.service"
    ));
    assert!(out.status.success(), "installed units: {}", text(&out));
}
