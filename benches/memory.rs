//! What `dev` holds in memory at rest: 60 s after `start` returned usable, the proportional set size
//! (PSS: a shared page counted once, split among its users) of every process of each of the
//! environment's units, and of its pods (the rest of its slice), on real systemd (PID 1 in a node
//! container) and the pinned binaries. PSS, not `memory.current`: in the test containers systemd
//! accounts no memory (the legacy tree is read-only there) and the page cache would blur it anyway.
//! Not a test: it reports, as `kubeunit status` would show it per unit.
//!
//! Variants take turns run by run (A, B, then B, A, ...), each from fresh data (`destroy`), so a
//! noisy minute falls on all of them; each run's `start` is timed too (a lever must not make it
//! slower). `KUBEUNIT_BENCH_VARIANTS="NAME:KEY=VALUE,KEY=VALUE;NAME2:..."` adds variants beside
//! `default` (each KEY=VALUE a `--set`):
//!
//!   cargo bench --bench memory                 # KUBEUNIT_BENCH_RUNS=N rounds (default 3)
//!   KUBEUNIT_BENCH_VARIANTS='gogc100:components.kube-apiserver.env.GOGC=100' cargo bench --bench memory

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::container::{gen_in, up_sh_dev_args, Container};
use common::ports::Ports;
use common::{node_lock, pinned, text, unit_prefix};

/// How long the environment settles after `start` before its memory is read.
const SETTLE: Duration = Duration::from_secs(60);

struct Variant {
    name: String,
    state: PathBuf,
}

/// One run's readings: seconds to usable, and MiB by unit (and "pods", and "total").
type Reading = (f64, BTreeMap<String, f64>);

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("memory: bench");
        return;
    }
    let rounds: usize = common::bench_runs(3);
    let _turn = node_lock();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let c = Container::boot_node("bench-memory");
    let mut asked: Vec<(String, Vec<String>)> = vec![("default".into(), vec![])];
    for v in std::env::var("KUBEUNIT_BENCH_VARIANTS")
        .unwrap_or_default()
        .split(';')
        .filter(|v| !v.trim().is_empty())
    {
        let (name, sets) = v.split_once(':').unwrap_or((v, ""));
        let sets = sets
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        asked.push((name.trim().to_string(), sets));
    }
    let variants: Vec<Variant> = asked
        .iter()
        .enumerate()
        .map(|(i, (name, sets))| {
            let mut args = up_sh_dev_args(&version);
            // Networks of tests/it/multi.rs and the addons bench (the tests' reject routes cover
            // them), one pair per variant.
            for set in [
                format!("name=mem{i}"),
                format!("network.podCIDR=10.{}.0.0/16", 90 + i),
                format!("network.serviceCIDR=10.0.{}.0/24", 2 + i),
            ]
            .into_iter()
            .chain(sets.iter().cloned())
            {
                args.extend(["--set".into(), set]);
            }
            let state = gen_in(&c, &format!("mem{i}"), &Ports::allocate(), &args);
            Variant {
                name: name.clone(),
                state,
            }
        })
        .collect();
    println!(
        "dev at rest, {} s after start, Kubernetes {version}, {} cores, {rounds} rounds, variants alternating: {}\n",
        SETTLE.as_secs(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        asked
            .iter()
            .map(|(n, s)| format!("{n} [{}]", s.join(" ")))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut readings: Vec<Vec<Reading>> = vec![vec![]; variants.len()];
    for round in 1..=rounds {
        let mut order: Vec<usize> = (0..variants.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        for i in order {
            let v = &variants[i];
            let reading = one_run(&c, v);
            println!(
                "  round {round} {:<12} start {:>5.2}s  total {:>5.0} MiB",
                v.name, reading.0, reading.1["total"]
            );
            readings[i].push(reading);
        }
    }
    println!("\nmedians (MiB; start in seconds):");
    let mut columns: Vec<String> = readings[0][0].1.keys().cloned().collect();
    columns.retain(|k| k != "total" && k != "pods");
    columns.extend(["pods".to_string(), "total".to_string()]);
    print!("  {:<28}", "");
    for v in &variants {
        print!(" {:>12}", v.name);
    }
    println!();
    let row = |label: &str, pick: &dyn Fn(&Reading) -> f64| {
        print!("  {label:<28}");
        for r in &readings {
            let values: Vec<f64> = r.iter().map(pick).collect();
            print!(" {:>12.1}", common::median(&values));
        }
        println!();
    };
    row("start (s)", &|r| r.0);
    for column in &columns {
        row(column, &|r| r.1.get(column).copied().unwrap_or(0.0));
    }
}

/// `start` until usable, `SETTLE`, then the PSS of each unit of the environment's slice, of the
/// pods (the slice's rest) and of the whole slice; then `destroy`.
fn one_run(c: &Container, v: &Variant) -> Reading {
    let sd = v.state.to_string_lossy().into_owned();
    let t0 = Instant::now();
    let out = c.kubeunit(&["start", "--state-dir", &sd, "--timeout", "300"]);
    assert!(out.status.success(), "start {}: {}", v.name, text(&out));
    let started = t0.elapsed().as_secs_f64();
    std::thread::sleep(SETTLE);
    let prefix = unit_prefix(&v.state);
    // Each loaded unit of the slice, with the PSS (KiB) of the processes of its cgroup and below;
    // the slice's own line last.
    let out = c.sh(&format!(
        "pss() {{ for t in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do \
           [ -f \"$t$1/cgroup.procs\" ] && {{ d=$t$1; break; }}; done; \
           [ -n \"${{d:-}}\" ] || {{ echo 0; return; }}; \
           find \"$d\" -name cgroup.procs -exec cat {{}} + | sort -u | \
           while read -r p; do awk '/^Pss:/ {{print $2}}' /proc/$p/smaps_rollup 2>/dev/null; done | \
           awk '{{t += $1}} END {{print t + 0}}'; d=; }}; \
         for u in $(systemctl list-units --no-legend --plain --state=running '{prefix}-*.service' | awk '{{print $1}}'); do \
           echo \"$u $(pss \"$(systemctl show -P ControlGroup \"$u\")\")\"; done; \
         echo \"total $(pss \"$(systemctl show -P ControlGroup {prefix}.slice)\")\""
    ));
    let mut mib: BTreeMap<String, f64> = BTreeMap::new();
    for line in text(&out).lines() {
        let Some((unit, kib)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(kib) = kib.trim().parse::<f64>() else {
            continue;
        };
        let name = unit
            .trim_start_matches(&format!("{prefix}-"))
            .trim_end_matches(".service")
            .to_string();
        mib.insert(name, kib / 1024.0);
    }
    let units: f64 = mib
        .iter()
        .filter(|(k, _)| k.as_str() != "total")
        .map(|(_, v)| v)
        .sum();
    let total = mib.get("total").copied().unwrap_or(f64::NAN);
    mib.insert("pods".into(), (total - units).max(0.0));
    let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
    assert!(out.status.success(), "destroy {}: {}", v.name, text(&out));
    (started, mib)
}
