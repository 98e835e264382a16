//! Side-by-side benchmark: four control-plane environments of one profile (the same name, four
//! state dirs, `ports: auto`) started at once on one systemd (PID 1 in a container), each one's
//! time to ready (`kubeunit start` returns once every component is healthy) against the solo time
//! (the median of a few starts of one of them alone, each just before a round; one warm-up round first,
//! not counted). Then all four stop, and every recorded port
//! must be free and no unit of them left. Not a test: it reports (and fails on a broken run).
//!
//!   cargo bench --bench side_by_side     # KUBEUNIT_BENCH_RUNS=N solo and side-by-side rounds (default 3)
//!                                        # KUBEUNIT_BENCH_ENVS=N environments side by side (default 4)
//!                                        # KUBEUNIT_BENCH_GEN_ARGS="--set a=b ..." more gen arguments
//!
//! The CPU bound: N solo bring-ups' CPU-seconds divided by the cores, the earliest the last of N
//! can be ready even with nothing else running; each environment's time is reported against it
//! (issue 25's goal: the median within 1.1x of it).

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::container::{control_plane_args, Container};
use common::{pinned, recorded_ports, text, unit_prefix};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `kubeunit start`, timed; its own report of the time inside start().
fn start(c: &Container, state: &Path) -> (f64, f64) {
    let t = Instant::now();
    let out = c.kubeunit(&[
        "start",
        "--state-dir",
        state.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let wall = t.elapsed().as_secs_f64();
    if !out.status.success() {
        // The environment's whole journal (start has stopped its units by now), before the
        // container goes with the panic: the report has one component's tail only.
        let journal = c.run(&[
            "journalctl",
            "--no-pager",
            "-o",
            "short-precise",
            "-n",
            "300",
            "-u",
            &format!("{}*", unit_prefix(state)),
        ]);
        panic!(
            "start {} failed after {wall:.2}s: {}\n--- the environment's journal ---\n{}",
            state.display(),
            text(&out),
            text(&journal)
        );
    }
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("start -o json");
    (wall, report["totalSeconds"].as_f64().unwrap_or(0.0))
}

/// CPU seconds the environment's processes have used so far (utime + stime of each component's
/// main process; none of them forks work out).
fn cpu_seconds(c: &Container, state: &Path) -> Vec<(String, f64)> {
    let out = c.kubeunit(&[
        "status",
        "--state-dir",
        state.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status -o json");
    st.as_array()
        .unwrap()
        .iter()
        .filter_map(|row| Some((row["component"].as_str()?.to_string(), row["pid"].as_u64()?)))
        .map(|(component, pid)| {
            let out = c.run(&["cat", &format!("/proc/{pid}/stat")]);
            let stat = String::from_utf8_lossy(&out.stdout).into_owned();
            // After the command name in parentheses: state is field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<f64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0.0))
                .collect();
            (
                component,
                (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0,
            )
        })
        .collect()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn ku_ok(c: &Container, verb: &str, state: &Path) {
    let out = c.kubeunit(&[verb, "--state-dir", state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{verb} {}: {}",
        state.display(),
        text(&out)
    );
}

/// Stop all at once; then every recorded port free and no unit of any left.
fn stop_all(c: &Container, states: &[PathBuf]) -> f64 {
    let t = Instant::now();
    std::thread::scope(|s| {
        for state in states {
            s.spawn(move || ku_ok(c, "stop", state));
        }
    });
    let secs = t.elapsed().as_secs_f64();
    for state in states {
        let busy: Vec<String> = recorded_ports(state)
            .into_iter()
            .filter(|(_, p)| std::net::TcpListener::bind(("0.0.0.0", *p)).is_err())
            .map(|(f, p)| format!("{f}={p}"))
            .collect();
        assert!(
            busy.is_empty(),
            "{}: ports still taken: {busy:?}",
            state.display()
        );
        let left = c.list_units(&format!("{}*", unit_prefix(state)));
        assert!(left.is_empty(), "{}: units left: {left}", state.display());
    }
    secs
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("side_by_side: bench");
        return;
    }
    let runs = env_usize("KUBEUNIT_BENCH_RUNS", 3);
    let n = env_usize("KUBEUNIT_BENCH_ENVS", 4);
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let c = Container::boot("bench-side");
    let mut args = control_plane_args(&version);
    args.extend(["--set".into(), "ports=auto".into()]);
    // KUBEUNIT_BENCH_GEN_ARGS: more gen arguments (whitespace-separated), to compare settings.
    args.extend(
        std::env::var("KUBEUNIT_BENCH_GEN_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from),
    );
    let states: Vec<PathBuf> = (1..=n)
        .map(|i| {
            let state = c.work.join(format!("env{i}"));
            let mut argv = vec!["gen", "--state-dir", state.to_str().unwrap()];
            argv.extend(args.iter().map(String::as_str));
            let out = c.kubeunit(&argv);
            assert!(out.status.success(), "gen: {}", text(&out));
            state
        })
        .collect();
    println!(
        "{n} control-plane environments side by side (profile control-plane, ports: auto), Kubernetes {version}, etcd {}, {} cores\n",
        pinned("ETCD_VERSION")[0],
        std::thread::available_parallelism().map_or(0, |p| p.get())
    );
    for state in &states {
        let ports = recorded_ports(state);
        println!(
            "  {}: units {}-*, apiserver :{}, etcd :{}",
            state.display(),
            unit_prefix(state),
            ports["apiserver"],
            ports["etcdClient"]
        );
    }

    // Warm-up, not counted: every environment's first start (page cache, data dirs) at once.
    let t = Instant::now();
    together(&c, &states);
    stop_all(&c, &states);
    for state in &states {
        ku_ok(&c, "destroy", state);
    }
    println!(
        "warm-up: all {n} started and stopped once ({:.2}s)",
        t.elapsed().as_secs_f64()
    );

    // Rounds: the first environment alone, then all at once, fresh data each time. Alternating,
    // so that the solo runs see the same machine as the rounds (other jobs' load drifts).
    let mut solo = Vec::new();
    let mut cpu = Vec::new();
    let mut rounds = Vec::new();
    for round in 1..=runs {
        let (wall, inside) = start(&c, &states[0]);
        let per = cpu_seconds(&c, &states[0]);
        let used: f64 = per.iter().map(|(_, s)| s).sum();
        let each: Vec<String> = per.iter().map(|(c, s)| format!("{c} {s:.2}")).collect();
        println!(
            "round {round}, solo: {wall:.2}s (inside start(): {inside:.2}s), its processes used {used:.2} CPU-s ({}) (load {})",
            each.join(", "),
            loadavg()
        );
        solo.push(wall);
        cpu.push(used);
        stop_all(&c, &states[..1]);
        ku_ok(&c, "destroy", &states[0]);

        let t = Instant::now();
        let times = together(&c, &states);
        let round_secs = t.elapsed().as_secs_f64();
        let each: Vec<String> = times
            .iter()
            .enumerate()
            .map(|(i, (wall, inside))| {
                format!("env{} {wall:.2}s (inside start(): {inside:.2}s)", i + 1)
            })
            .collect();
        println!(
            "round {round}, all {n} at once: ready after {round_secs:.2}s: {} (load {})",
            each.join(", "),
            loadavg()
        );
        let stop_secs = stop_all(&c, &states);
        println!("  all {n} stopped in {stop_secs:.2}s: every port free, no unit left");
        for state in &states {
            ku_ok(&c, "destroy", state);
        }
        rounds.push(times.iter().map(|(wall, _)| *wall).collect::<Vec<f64>>());
    }

    let solo_median = common::median(&solo);
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get()) as f64;
    let need = n as f64 * common::median(&cpu);
    let floor = need / cores;
    println!(
        "\nsolo median {solo_median:.2}s; {n} bring-ups need about {need:.1} CPU-s: on {cores} cores at least {floor:.2}s ({:.2}x solo) even with nothing else running",
        floor / solo_median
    );
    let all: Vec<f64> = rounds.iter().flatten().copied().collect();
    for (i, times) in rounds.iter().enumerate() {
        let ratios: Vec<String> = times
            .iter()
            .map(|w| format!("{:.2}x solo = {:.2}x bound", w / solo_median, w / floor))
            .collect();
        println!("round {}: {}", i + 1, ratios.join(", "));
    }
    let worst = all.iter().fold(0.0_f64, |m, w| m.max(*w));
    println!(
        "side by side median {:.2}s ({:.2}x solo, {:.2}x the CPU bound), worst {:.2}x solo ({:.2}x the bound) (goal: median <= 1.1x the bound)",
        common::median(&all),
        common::median(&all) / solo_median,
        common::median(&all) / floor,
        worst / solo_median,
        worst / floor
    );
}

/// Start every environment at once; each one's (wall, inside start()) seconds.
fn together(c: &Container, states: &[PathBuf]) -> Vec<(f64, f64)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = states
            .iter()
            .map(|state| s.spawn(move || start(c, state)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
