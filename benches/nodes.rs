//! How bring-up grows with the number of nodes: `kubeunit start` of the dev profile with `nodes: N`
//! (the first node the control plane's, the others workers) until every node is Ready, for N = 1, 2
//! and 4, on real systemd (PID 1 in a node container) and the pinned binaries. Not a test: it
//! reports. The node counts take turns run by run (1 2 4, then 4 2 1, ...), so that a noisy
//! machine's slow minute falls on all of them; each run starts from fresh data (`destroy`).
//!
//!   cargo bench --bench nodes            # KUBEUNIT_BENCH_RUNS=N rounds (default 3)

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::container::{gen_in, up_sh_dev_args, Container};
use common::ports::Ports;
use common::{cache_dir, node_lock, pinned, run, text};

const COUNTS: [usize; 3] = [1, 2, 4];

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("nodes: bench");
        return;
    }
    let rounds: usize = common::bench_runs(3);
    let _turn = node_lock();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let c = Container::boot_node("bench-nodes");
    let kubectl_bin = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    // One state dir per node count, each with its own ports and networks.
    let envs: Vec<(usize, std::path::PathBuf, Ports)> = COUNTS
        .iter()
        .map(|&n| {
            let ports = Ports::allocate();
            let mut args = up_sh_dev_args(&version);
            args.extend([
                "--set".into(),
                format!("nodes={n}"),
                "--set".into(),
                format!("name=nodes-{n}"),
            ]);
            let state = gen_in(&c, &format!("nodes-{n}"), &ports, &args);
            (n, state, ports)
        })
        .collect();
    println!(
        "bring-up of dev with N nodes until all are Ready, Kubernetes {version}, {} cores, {rounds} rounds, counts alternating\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "  {:<6} {:<6} {:>8} {:>10}",
        "round", "nodes", "start", "all Ready"
    );
    let mut results: BTreeMap<usize, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for round in 1..=rounds {
        let order: Vec<&(usize, std::path::PathBuf, Ports)> = if round % 2 == 1 {
            envs.iter().collect()
        } else {
            envs.iter().rev().collect()
        };
        for (n, state, _) in order {
            let sd = state.to_string_lossy().into_owned();
            let kubeconfig = state.join("kubeconfig/admin.kubeconfig");
            let t0 = Instant::now();
            let out = c.kubeunit(&["start", "--state-dir", &sd, "--timeout", "300"]);
            assert!(out.status.success(), "start {n}: {}", text(&out));
            let started = t0.elapsed().as_secs_f64();
            let want = vec!["True"; *n].join(" ");
            while run(Command::new(&kubectl_bin)
                .env("KUBECONFIG", &kubeconfig)
                .args([
                    "get",
                    "nodes",
                    "-o",
                    "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}",
                ]))
            .stdout
                != want.as_bytes()
            {
                assert!(
                    t0.elapsed() < Duration::from_secs(300),
                    "{n} nodes not Ready in 300 s"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            let ready = t0.elapsed().as_secs_f64();
            println!("  {round:<6} {n:<6} {started:>7.2}s {ready:>9.2}s");
            let entry = results.entry(*n).or_default();
            entry.0.push(started);
            entry.1.push(ready);
            let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
            assert!(out.status.success(), "destroy {n}: {}", text(&out));
        }
    }
    let base = common::median(&results.get(&1).map(|r| r.1.clone()).unwrap_or_default());
    println!(
        "\n  {:<6} {:>13} {:>17} {:>12}",
        "nodes", "median start", "median all Ready", "vs 1 node"
    );
    for (n, (starts, readies)) in results.iter_mut() {
        let ready = common::median(readies);
        println!(
            "  {n:<6} {:>12.2}s {:>16.2}s {:>11.2}x",
            common::median(starts),
            ready,
            ready / base
        );
    }
}
