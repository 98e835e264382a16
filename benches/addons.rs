//! What the addons cost: `kubeunit start` of dev with every addon (the `apps` profile's: metrics-server,
//! local-path-provisioner, MetalLB, the Gateway API with Traefik, and their images) against dev without them (the in-tree hostPath class, as before they
//! came, and only the pause, CoreDNS and busybox images), on real systemd (PID 1 in a node
//! container) and the pinned binaries. Per run: `start` until usable, then until the addons' Deployments are
//! available, then, after a minute of settling, the environment's memory (the proportional set
//! size of every process in its slice: every unit and every pod). Not a test: it reports. The two
//! take turns run by run (with, without, then without, with, ...), so a noisy machine's slow minute
//! falls on both; each run starts from fresh data (`destroy`).
//!
//!   cargo bench --bench addons            # KUBEUNIT_BENCH_RUNS=N rounds (default 3)

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::container::{dev_args, gen_in, offline_images_but, Container};
use common::ports::Ports;
use common::{cache_dir, node_lock, pinned, run, text, unit_prefix};

/// The addons' archives, left out of the environment without them.
const ADDON_ARCHIVES: [&str; 4] = [
    "metrics-server.tar",
    "local-path-provisioner.tar",
    "metallb-controller.tar",
    "metallb-speaker.tar",
];
/// How long the environment settles before its memory is read.
const SETTLE: Duration = Duration::from_secs(60);

struct Case {
    name: &'static str,
    state: PathBuf,
    /// The addons' Deployments (namespace/name) that must be available.
    deployments: &'static [&'static str],
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("addons: bench");
        return;
    }
    let rounds: usize = common::bench_runs(3);
    let _turn = node_lock();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let c = Container::boot_node("bench-addons");
    let kubectl_bin = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    let core_images = offline_images_but(&ADDON_ARCHIVES);
    let case = |name: &'static str, extra: Vec<String>, deployments| {
        let mut args = dev_args(&version);
        args.extend(["--set".into(), format!("name={name}")]);
        for set in extra {
            args.extend(["--set".into(), set]);
        }
        let state = gen_in(&c, name, &Ports::allocate(), &args);
        Case {
            name,
            state,
            deployments,
        }
    };
    // The networks of tests/it/multi.rs (the tests' reject routes cover them), one pair each.
    let cases = [
        case(
            "with",
            vec![
                "network.podCIDR=10.90.0.0/16".into(),
                "network.serviceCIDR=10.0.2.0/24".into(),
                "addons.metricsServer=true".into(),
                "addons.loadBalancer=true".into(),
                "addons.gateway=true".into(),
            ],
            &[
                "kube-system/metrics-server",
                "local-path-storage/local-path-provisioner",
                "metallb-system/controller",
            ][..],
        ),
        case(
            "without",
            vec![
                "network.podCIDR=10.91.0.0/16".into(),
                "network.serviceCIDR=10.0.3.0/24".into(),
                "addons.storageProvisioner=host-path".into(),
                format!("images=[{}]", core_images.join(",")),
            ],
            &[][..],
        ),
    ];
    println!(
        "dev with and without its addons (metrics-server, local-path-provisioner, MetalLB, Gateway API and Traefik), Kubernetes {version}, {} cores, {rounds} rounds, alternating; memory after {} s\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        SETTLE.as_secs()
    );
    println!(
        "  {:<6} {:<8} {:>8} {:>13} {:>11}",
        "round", "addons", "usable", "addons ready", "memory"
    );
    let mut results: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = vec![Default::default(); cases.len()];
    for round in 1..=rounds {
        let mut order: Vec<usize> = (0..cases.len()).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        for i in order {
            let case = &cases[i];
            let sd = case.state.to_string_lossy().into_owned();
            let kubeconfig = case.state.join("kubeconfig/admin.kubeconfig");
            let kubectl = |args: &[&str]| {
                run(Command::new(&kubectl_bin)
                    .env("KUBECONFIG", &kubeconfig)
                    .args(args))
            };
            let t0 = Instant::now();
            let out = c.kubeunit(&["start", "--state-dir", &sd, "--timeout", "300"]);
            assert!(out.status.success(), "start {}: {}", case.name, text(&out));
            let usable = t0.elapsed().as_secs_f64();
            for d in case.deployments {
                let (ns, name) = d.split_once('/').unwrap_or(("default", d));
                let out = kubectl(&[
                    "-n",
                    ns,
                    "wait",
                    "--for=condition=Available",
                    &format!("deployment/{name}"),
                    "--timeout=300s",
                ]);
                assert!(out.status.success(), "{d}: {}", text(&out));
            }
            let ready = t0.elapsed().as_secs_f64();
            std::thread::sleep(SETTLE);
            // The proportional set size of every process in the slice and below (what `status`
            // reads where systemd accounts no memory, as in this container), the pods' too.
            let slice = format!("{}.slice", unit_prefix(&case.state));
            let out = c.sh(&format!(
                "cg=$(systemctl show -P ControlGroup {slice}); \
                 for t in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do \
                   [ -f \"$t$cg/cgroup.procs\" ] && {{ d=$t$cg; break; }}; done; \
                 find \"$d\" -name cgroup.procs -exec cat {{}} + | sort -u | \
                 while read -r p; do awk '/^Pss:/ {{print $2}}' /proc/$p/smaps_rollup 2>/dev/null; done | \
                 awk '{{t += $1}} END {{print t * 1024}}'"
            ));
            let bytes: f64 = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or(f64::NAN);
            let mib = bytes / (1024.0 * 1024.0);
            println!(
                "  {round:<6} {:<8} {usable:>7.2}s {ready:>12.2}s {mib:>7.0} MiB",
                case.name
            );
            results[i].0.push(usable);
            results[i].1.push(ready);
            results[i].2.push(mib);
            let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
            assert!(
                out.status.success(),
                "destroy {}: {}",
                case.name,
                text(&out)
            );
        }
    }
    println!(
        "\n  {:<8} {:>14} {:>20} {:>14}",
        "addons", "median usable", "median addons ready", "median memory"
    );
    for (case, (usable, ready, mib)) in cases.iter().zip(results.iter_mut()) {
        println!(
            "  {:<8} {:>13.2}s {:>19.2}s {:>10.0} MiB",
            case.name,
            common::median(usable),
            common::median(ready),
            common::median(mib)
        );
    }
}
