//! Stop benchmark: `kubeunit stop` of a running environment until every unit is gone and every port
//! free, against real systemd (PID 1 in a container) and the pinned binaries, this build's kubeunit
//! against a baseline build in alternating runs (the machine's load drifts). Each run starts from
//! fresh data with the binary it measures. Not a test: it reports (and fails on a broken run).
//!
//!   KUBEUNIT_BENCH_BASELINE=/path/to/older/kubeunit cargo bench --bench stop
//!       KUBEUNIT_BENCH_RUNS=N     runs of each binary (default 10)
//!       KUBEUNIT_BENCH_PROFILE    control-plane (default) or dev (a node: containerd, kubelet, pods)
//!
//! Without a baseline it times this build alone.

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::container::{control_plane_args, dev_args, gen_in, Container};
use common::ports::Ports;
use common::{node_lock, pinned, text, unit_prefix};

/// `kubeunit ARGS` of the binary `exe` (this build's or the baseline) in the container.
fn ku(c: &Container, exe: &Path, args: &[&str]) -> f64 {
    let mut argv = vec![exe.to_str().unwrap()];
    argv.extend_from_slice(args);
    let t = Instant::now();
    let out = c.run(&argv);
    let secs = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        exe.display(),
        text(&out)
    );
    secs
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("stop: bench");
        return;
    }
    let runs: usize = common::bench_runs(10);
    let profile = std::env::var("KUBEUNIT_BENCH_PROFILE").unwrap_or("control-plane".into());
    let baseline = std::env::var_os("KUBEUNIT_BENCH_BASELINE").map(PathBuf::from);
    let this = PathBuf::from(env!("CARGO_BIN_EXE_kubeunit"));
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let args = match profile.as_str() {
        "control-plane" => control_plane_args(&version),
        "dev" => dev_args(&version),
        p => panic!("KUBEUNIT_BENCH_PROFILE={p}: control-plane or dev"),
    };
    let _turn = (profile == "dev").then(node_lock);
    // The baseline's directory is bound into the container read-only, as this build's is.
    let bind = baseline
        .as_ref()
        .map(|b| format!("--bind-ro={}", b.parent().unwrap().display()));
    let extra: Vec<&str> = bind.iter().map(String::as_str).collect();
    let c = if profile == "dev" {
        Container::boot_node_with("bench-stop", &extra)
    } else {
        Container::boot_with("bench-stop", &extra)
    };
    let ports = Ports::allocate();
    let state = gen_in(&c, "bench-stop", &ports, &args);
    let sd = state.to_str().unwrap();
    let mut binaries = vec![("this build", this)];
    binaries.extend(baseline.map(|b| ("baseline", b)));
    println!(
        "stop of the {profile} profile, Kubernetes {version}, {runs} runs of each of: {}\n",
        binaries
            .iter()
            .map(|(n, p)| format!("{n} ({})", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); binaries.len()];
    for run in 1..=runs {
        // Alternating which goes first, so that neither always follows the other.
        let mut order: Vec<usize> = (0..binaries.len()).collect();
        if run % 2 == 0 {
            order.reverse();
        }
        for i in order {
            let (name, exe) = &binaries[i];
            ku(&c, exe, &["start", "--state-dir", sd]);
            let secs = ku(&c, exe, &["stop", "--state-dir", sd]);
            let left = c.list_units(&format!("{}*", unit_prefix(&state)));
            assert!(left.is_empty(), "{name}: units left after stop: {left}");
            ku(&c, exe, &["destroy", "--state-dir", sd]);
            println!("run {run}, {name}: stop {secs:.3}s");
            times[i].push(secs);
        }
    }
    println!();
    for ((name, _), t) in binaries.iter().zip(&times) {
        println!(
            "median stop, {name}: {:.3}s ({} runs)",
            common::median(t),
            t.len()
        );
    }
    if let [a, b] = times.as_slice() {
        println!(
            "this build / baseline: {:.3} (goal: <= 1, stop no slower)",
            common::median(a) / common::median(b)
        );
    }
}
