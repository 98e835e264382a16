//! Bring-up benchmark: `kubeunit start` of the control-plane profile until every component is healthy,
//! then of the dev profile until the node is Ready and a first pod Running, against real systemd (PID 1
//! in a container) and the pinned binaries. Not a test: it reports.
//!
//!   cargo bench --bench bringup            # KUBEUNIT_BENCH_RUNS=N for more runs (default 5)
//!
//! Per run, each component's timeline comes from systemd (process started = InactiveExitTimestamp,
//! running = ActiveEnterTimestamp: READY=1 for notify units) and from kubeunit (healthy = probe ok).
//! etcd, kube-apiserver, the controller-manager and the scheduler start together (the API server
//! dials etcd until it answers, the others retry the API server), so the critical path is
//! kube-apiserver's own exec to /readyz; the rest of the total is kubeunit's overhead (preflight,
//! D-Bus, probes). scripts/bench-peers.sh measures that floor with etcd already running.

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::container::{control_plane_args, gen_in, up_sh_dev_args, Container};
use common::ports::Ports;
use common::{cache_dir, node_lock, pinned, run, text};

fn show_monotonic(c: &Container, unit: &str) -> BTreeMap<String, f64> {
    let out = c.run(&[
        "systemctl",
        "show",
        "-p",
        "InactiveExitTimestampMonotonic,ActiveEnterTimestampMonotonic",
        unit,
    ]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse::<f64>().unwrap_or(0.0) / 1e6))
        .collect()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("bringup: bench");
        return;
    }
    let runs: usize = common::bench_runs(5);
    let c = Container::boot("bench");
    let ports = Ports::allocate();
    let gen_args = control_plane_args(&pinned("KUBERNETES_VERSIONS")[0]);
    let state = gen_in(&c, "bench", &ports, &gen_args);
    let sd = state.to_string_lossy().into_owned();
    println!(
        "bring-up of the control-plane profile, Kubernetes {}, etcd {}, {runs} runs (fresh etcd data each run)\n",
        pinned("KUBERNETES_VERSIONS")[0],
        pinned("ETCD_VERSION")[0]
    );
    let mut totals = Vec::new();
    let mut criticals = Vec::new();
    let (mut stops, mut destroys) = (Vec::new(), Vec::new());
    for run in 1..=runs {
        let t = Instant::now();
        let out = c.kubeunit(&["start", "--state-dir", &sd, "-o", "json"]);
        let wall = t.elapsed().as_secs_f64();
        assert!(out.status.success(), "start: {}", text(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("start -o json");
        let t0 = report["monotonicStartUs"].as_f64().unwrap() / 1e6;
        println!(
            "run {run}: kubeunit start {wall:.2}s (inside start(): {:.2}s)",
            report["totalSeconds"].as_f64().unwrap()
        );
        println!(
            "  {:<26} {:>9} {:>9} {:>9} {:>9}",
            "component", "submitted", "process", "running", "healthy"
        );
        let mut critical = 0.0;
        for t in report["timings"].as_array().unwrap() {
            let unit = t["unit"].as_str().unwrap();
            let m = show_monotonic(&c, unit);
            let started = m["InactiveExitTimestampMonotonic"] - t0;
            let running = m["ActiveEnterTimestampMonotonic"] - t0;
            let healthy = t["healthy"].as_f64().unwrap();
            let component = t["component"].as_str().unwrap();
            println!(
                "  {component:<26} {:>8.3}s {started:>8.3}s {running:>8.3}s {healthy:>8.3}s",
                t["submitted"].as_f64().unwrap()
            );
            if component == "kube-apiserver" {
                critical = healthy - started;
            }
        }
        println!(
            "  critical path (kube-apiserver exec to /readyz): {critical:.3}s; total/critical = {:.3}\n",
            wall / critical
        );
        totals.push(wall);
        criticals.push(critical);
        // Odd runs: a graceful stop (then the data goes); even runs: destroy --all, which kills at once
        // (and a new gen).
        let t = Instant::now();
        if run % 2 == 1 {
            let out = c.kubeunit(&["stop", "--state-dir", &sd]);
            assert!(out.status.success(), "stop: {}", text(&out));
            stops.push(t.elapsed().as_secs_f64());
            let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
            assert!(out.status.success(), "destroy: {}", text(&out));
        } else {
            let out = c.kubeunit(&["destroy", "--all", "--state-dir", &sd]);
            assert!(out.status.success(), "destroy --all: {}", text(&out));
            destroys.push(t.elapsed().as_secs_f64());
            gen_in(&c, "bench", &ports, &gen_args);
        }
        assert_eq!(c.list_units("kubeunit-control-plane*"), "", "units left");
    }
    let (t, cp) = (common::median(&totals), common::median(&criticals));
    println!(
        "median: total {t:.3}s, critical path {cp:.3}s, ratio {:.3} (goal <= 1.1)",
        t / cp
    );
    println!(
        "median: stop {:.3}s ({} runs), destroy --all {:.3}s ({} runs)\n",
        common::median(&stops),
        stops.len(),
        if destroys.is_empty() {
            0.0
        } else {
            common::median(&destroys)
        },
        destroys.len()
    );
    drop(c);
    dev(runs);
}

/// Poll `f` every 0.1 s until it holds; the seconds since `t0` when it did.
fn until(what: &str, t0: Instant, timeout: Duration, mut f: impl FnMut() -> bool) -> f64 {
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
    t0.elapsed().as_secs_f64()
}

/// The dev profile: `start` (every component healthy, images imported), the node Ready, and the first
/// pod (the test image) Running, each from the moment `start` was called.
fn dev(runs: usize) {
    let _turn = node_lock();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let c = Container::boot_node("bench-node");
    let ports = Ports::allocate();
    let state = gen_in(&c, "bench-dev", &ports, &up_sh_dev_args(&version));
    let sd = state.to_string_lossy().into_owned();
    let kubectl_bin = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    let kubeconfig = state.join("kubeconfig/admin.kubeconfig");
    let kubectl = |args: &[&str]| -> Output {
        run(Command::new(&kubectl_bin)
            .env("KUBECONFIG", &kubeconfig)
            .args(args))
    };
    let image = pinned("TEST_IMAGE")[0].clone();
    println!("bring-up of the dev profile (node in its own network namespace), {runs} runs (fresh data each run)\n");
    println!(
        "  {:<5} {:>8} {:>11} {:>16}",
        "run", "start", "node Ready", "first pod Running"
    );
    let (mut starts, mut readies, mut pods) = (Vec::new(), Vec::new(), Vec::new());
    for i in 1..=runs {
        let t0 = Instant::now();
        let out = c.kubeunit(&["start", "--state-dir", &sd]);
        assert!(out.status.success(), "start: {}", text(&out));
        let started = t0.elapsed().as_secs_f64();
        let timeout = Duration::from_secs(180);
        let ready = until("node Ready", t0, timeout, || {
            kubectl(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={.items[0].status.conditions[?(@.type=='Ready')].status}",
            ])
            .stdout
                == b"True"
        });
        // Created as soon as the API server takes it (the default ServiceAccount comes a moment
        // after the API server is ready).
        until("the pod created", t0, timeout, || {
            kubectl(&[
                "run",
                "first",
                &format!("--image={image}"),
                "--restart=Never",
                "--",
                "sleep",
                "3600",
            ])
            .status
            .success()
        });
        let pod = until("the first pod Running", t0, timeout, || {
            kubectl(&["get", "pod", "first", "-o", "jsonpath={.status.phase}"]).stdout == b"Running"
        });
        println!("  {i:<5} {started:>7.2}s {ready:>10.2}s {pod:>16.2}s");
        starts.push(started);
        readies.push(ready);
        pods.push(pod);
        let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
        assert!(out.status.success(), "destroy: {}", text(&out));
        assert!(!Path::new(&state.join("data")).exists());
    }
    println!(
        "\nmedian: start {:.2}s, node Ready {:.2}s, first pod Running {:.2}s",
        common::median(&starts),
        common::median(&readies),
        common::median(&pods)
    );
}
