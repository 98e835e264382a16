//! What `dev` holds in memory at rest: 60 s after `start` returned usable, the proportional set size
//! (PSS: a shared page counted once, split among its users) of every process of each of the
//! environment's units, and of its pods (the rest of its slice), on real systemd (PID 1 in a node
//! container) and the pinned binaries. PSS, not `memory.current`: in the test containers systemd
//! accounts no memory (the legacy tree is read-only there) and the page cache would blur it anyway.
//! Not a test: it reports, as `kubeunit status` would show it per unit. Then it loads the e2e images
//! (`kubeunit images load`), runs the conformance subset (tests/conformance-subset.txt, through
//! scripts/conformance.sh) and reads the same again: what dev holds once it has served some work.
//! `KUBEUNIT_BENCH_SUBSET=0` reads at rest only.
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

/// MiB by unit (and "pods", and "total").
type Mib = BTreeMap<String, f64>;

/// One run's readings: seconds to usable, at rest, and after the conformance subset (if run).
type Reading = (f64, Mib, Option<Mib>);

/// What the subset needs: the e2e images (scripts/build-e2e-images.sh) and the specs' list.
struct Subset {
    images: PathBuf,
    version: String,
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("memory: bench");
        return;
    }
    let rounds: usize = common::bench_runs(3);
    let _turn = node_lock();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let subset = (std::env::var("KUBEUNIT_BENCH_SUBSET").as_deref() != Ok("0")).then(|| {
        let images = common::cache_dir().join(format!("e2e-images-{version}"));
        assert!(
            images.join(".complete").exists(),
            "{} missing: run scripts/build-e2e-images.sh (or KUBEUNIT_BENCH_SUBSET=0)",
            images.display()
        );
        Subset {
            images,
            version: version.clone(),
        }
    });
    let bind = subset
        .as_ref()
        .map(|s| format!("--bind-ro={}", s.images.display()));
    let c = Container::boot_node_with(
        "bench-memory",
        &bind.iter().map(|b| b.as_str()).collect::<Vec<_>>(),
    );
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
        "dev at rest, {} s after start{}, Kubernetes {version}, {} cores, {rounds} rounds, variants alternating: {}\n",
        SETTLE.as_secs(),
        if subset.is_some() {
            ", then after the conformance subset"
        } else {
            ""
        },
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
            let reading = one_run(&c, v, subset.as_ref());
            println!(
                "  round {round} {:<12} start {:>5.2}s  total {:>5.0} MiB at rest{}",
                v.name,
                reading.0,
                reading.1["total"],
                reading.2.as_ref().map_or(String::new(), |m| format!(
                    ", {:>5.0} MiB after the subset",
                    m["total"]
                ))
            );
            readings[i].push(reading);
        }
    }
    print_medians("at rest", &variants, &readings, |r| Some(&r.1), true);
    if subset.is_some() {
        print_medians(
            "after the conformance subset",
            &variants,
            &readings,
            |r| r.2.as_ref(),
            false,
        );
    }
}

/// The median of each column over the runs, one column per variant.
fn print_medians(
    title: &str,
    variants: &[Variant],
    readings: &[Vec<Reading>],
    pick: fn(&Reading) -> Option<&Mib>,
    with_start: bool,
) {
    println!("\nmedians, {title} (MiB; start in seconds):");
    let Some(first) = readings[0].first().and_then(pick) else {
        return;
    };
    let mut columns: Vec<String> = first.keys().cloned().collect();
    columns.retain(|k| k != "total" && k != "pods");
    columns.extend(["pods".to_string(), "total".to_string()]);
    print!("  {:<28}", "");
    for v in variants {
        print!(" {:>12}", v.name);
    }
    println!();
    let row = |label: &str, value: &dyn Fn(&Reading) -> f64| {
        print!("  {label:<28}");
        for r in readings {
            let values: Vec<f64> = r.iter().map(value).collect();
            print!(" {:>12.1}", common::median(&values));
        }
        println!();
    };
    if with_start {
        row("start (s)", &|r| r.0);
    }
    for column in &columns {
        row(column, &|r| {
            pick(r).and_then(|m| m.get(column)).copied().unwrap_or(0.0)
        });
    }
}

/// `start` until usable, `SETTLE`, then the PSS of each unit of the environment's slice, of the
/// pods (the slice's rest) and of the whole slice; the same after the conformance subset; then
/// `destroy`.
fn one_run(c: &Container, v: &Variant, subset: Option<&Subset>) -> Reading {
    let sd = v.state.to_string_lossy().into_owned();
    let t0 = Instant::now();
    let out = c.kubeunit(&["start", "--state-dir", &sd, "--timeout", "300"]);
    assert!(out.status.success(), "start {}: {}", v.name, text(&out));
    let started = t0.elapsed().as_secs_f64();
    std::thread::sleep(SETTLE);
    let at_rest = pss_by_unit(c, v);
    let after = subset.map(|s| {
        run_subset(c, v, s);
        pss_by_unit(c, v)
    });
    let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
    assert!(out.status.success(), "destroy {}: {}", v.name, text(&out));
    (started, at_rest, after)
}

/// The e2e images onto the node, then the conformance subset (as tests/it/conformance.rs runs it).
fn run_subset(c: &Container, v: &Variant, s: &Subset) {
    let sd = v.state.to_string_lossy().into_owned();
    let mut load = vec![
        "images".to_string(),
        "load".into(),
        "--state-dir".into(),
        sd,
    ];
    load.extend(common::archives(&s.images));
    let out = c.kubeunit(&load.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "images load {}: {}",
        v.name,
        text(&out)
    );
    // conformance.sh runs nothing until the node lists them (its status, at the kubelet's next
    // update): it would load the missing ones itself, through the dev container's systemd.
    let missing = format!(
        "{} --kubeconfig {} get nodes -o json | {} {}",
        common::built_dir(&format!("kubernetes-{}", s.version))
            .join("kubectl")
            .display(),
        v.state.join("kubeconfig/admin.kubeconfig").display(),
        common::script("images-missing.py").display(),
        s.images.join("images.txt").display()
    );
    common::wait_for(
        "the node to list the e2e images",
        Duration::from_secs(180),
        || {
            let out = common::run(std::process::Command::new("sh").args(["-ec", &missing]));
            out.status.success() && out.stdout.iter().all(u8::is_ascii_whitespace)
        },
    );
    let results = c.work.join(format!("subset-{}", v.name));
    let out = common::conformance_subset(&v.state, &s.version, &results);
    assert!(
        out.status.success(),
        "the conformance subset failed on {}: {}",
        v.name,
        text(&out)
    );
}

/// The PSS (MiB) of each running unit of the environment's slice, of its pods (the slice's rest)
/// and of the whole slice.
fn pss_by_unit(c: &Container, v: &Variant) -> Mib {
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
    let mut mib = Mib::new();
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
    mib
}
