//! Time to a usable `dev`, the way minikube's time-to-k8s benchmark measures local clusters
//! (kubernetes/minikube site/content/docs/benchmarks/timeToK8s): from the command's start, the
//! moment each of these first holds:
//!
//!   command returned     `kubeunit start` exited (0)
//!   API answering        GET /version
//!   kubernetes Service   default/kubernetes exists
//!   DNS Service          kube-system/kube-dns exists
//!   app running          a Deployment created once the command returned has its pod Running
//!   DNS answering        nslookup of kubernetes.default.svc.cluster.local in that pod answers
//!
//! The first three are polled while `start` runs; the app is created when it returns, as a user
//! would. Watches (one kubectl each) record when the cluster got there too: the Node registered,
//! Ready and without its not-ready taint, the default ServiceAccount, CoreDNS's pod created,
//! scheduled, Running and Ready, and kube-dns's first ready endpoint. Each run starts from
//! `destroy` (fresh data), on real systemd (PID 1 in a node container) and the pinned binaries.
//! Not a test: it reports a table and JSON (KUBEUNIT_BENCH_JSON, default
//! target/time-to-k8s.json); KUBEUNIT_BENCH_JOURNALS=DIR keeps each run's journal there, and
//! KUBEUNIT_BENCH_SET="KEY=VALUE ..." adds `--set`s to the profile.
//!
//!   cargo bench --bench time_to_k8s      # KUBEUNIT_BENCH_RUNS=N runs (default 5)

#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::container::{gen_in, up_sh_dev_args, Container};
use common::ports::Ports;
use common::{cache_dir, node_lock, pinned, run, text};

const STEPS: [&str; 6] = [
    "command returned",
    "API answering",
    "kubernetes Service",
    "DNS Service",
    "app running",
    "DNS answering",
];

/// When each watched milestone was first seen, seconds from the command's start.
type Timeline = Arc<Mutex<BTreeMap<&'static str, f64>>>;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("time_to_k8s: bench");
        return;
    }
    let runs: usize = common::bench_runs(5);
    let _turn = node_lock();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let image = pinned("TEST_IMAGE")[0].clone();
    let c = Container::boot_node("bench-ttk");
    let kubectl_bin = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    let ports = Ports::allocate();
    let mut args = up_sh_dev_args(&version);
    // KUBEUNIT_BENCH_SET="KEY=VALUE KEY=VALUE": more --set, to compare a setting run against run.
    for set in std::env::var("KUBEUNIT_BENCH_SET")
        .unwrap_or_default()
        .split_whitespace()
    {
        args.extend(["--set".to_string(), set.to_string()]);
    }
    let state = gen_in(&c, "dev", &ports, &args);
    let sd = state.to_string_lossy().into_owned();
    let k = Kubectl {
        bin: kubectl_bin,
        kubeconfig: state.join("kubeconfig/admin.kubeconfig"),
    };
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("time to a usable dev (minikube's time-to-k8s steps), Kubernetes {version}, {cores} cores, {runs} runs, each from destroy\n");
    let mut all = Vec::new();
    for n in 1..=runs {
        let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
        assert!(out.status.success(), "destroy: {}", text(&out));
        let (steps, timeline) = one_run(&c, &sd, &k, &image);
        print_run(n, &steps, &timeline);
        if let Some(dir) = std::env::var_os("KUBEUNIT_BENCH_JOURNALS") {
            // The run's journal with microsecond times, to see where the time goes.
            let out = c.sh("journalctl -o short-precise --no-pager -u 'kubeunit-*'");
            let path = Path::new(&dir).join(format!("time-to-k8s-run-{n}.log"));
            let _ = std::fs::create_dir_all(&dir);
            std::fs::write(&path, &out.stdout).unwrap();
        }
        all.push((steps, timeline));
    }
    let out = c.kubeunit(&["destroy", "--state-dir", &sd]);
    assert!(out.status.success(), "destroy: {}", text(&out));

    println!("\n  {:<28} {:>8}  (median of {runs})", "step", "seconds");
    let mut medians = serde_json::Map::new();
    for step in STEPS {
        let m = common::median(
            &all.iter()
                .filter_map(|(s, _)| s.get(step).copied())
                .collect::<Vec<_>>(),
        );
        println!("  {step:<28} {m:>7.2}s");
        medians.insert(step.into(), json!(m));
    }
    let milestones: Vec<&str> = all
        .iter()
        .flat_map(|(_, t)| t.keys().copied())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut timeline_medians = serde_json::Map::new();
    for m in &milestones {
        timeline_medians.insert(
            (*m).into(),
            json!(common::median(
                &all.iter()
                    .filter_map(|(_, t)| t.get(m).copied())
                    .collect::<Vec<_>>()
            )),
        );
    }
    let report = json!({
        "kubernetes": version,
        "cores": cores,
        "runs": all.iter().map(|(s, t)| json!({"steps": s, "timeline": t})).collect::<Vec<_>>(),
        "median": {"steps": medians, "timeline": timeline_medians},
    });
    let path = std::env::var_os("KUBEUNIT_BENCH_JSON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/time-to-k8s.json"));
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("\nJSON: {}", path.display());
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .arg("--request-timeout=5s")
            .args(args);
        cmd
    }

    fn ok(&self, args: &[&str]) -> bool {
        run(&mut self.command(args)).status.success()
    }

    fn stdout(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&run(&mut self.command(args)).stdout).into_owned()
    }
}

/// Poll `f` every 100 ms until it holds (at most 300 s); the seconds since `t0` when it did.
fn until(t0: Instant, what: &str, mut f: impl FnMut() -> bool) -> f64 {
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "{what}: not within 300 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t0.elapsed().as_secs_f64()
}

fn one_run(
    c: &Container,
    sd: &str,
    k: &Kubectl,
    image: &str,
) -> (BTreeMap<&'static str, f64>, BTreeMap<&'static str, f64>) {
    let timeline: Timeline = Arc::default();
    let t0 = Instant::now();
    let mut start = c
        .command(&[env!("CARGO_BIN_EXE_kubeunit"), "start", "--state-dir", sd])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubeunit start");
    let watches: Vec<Watch> = [
        ("nodes", &["get", "nodes"][..]),
        ("pods", &["get", "pods", "-A"][..]),
        (
            "serviceaccounts",
            &["get", "serviceaccounts", "-n", "default"][..],
        ),
        (
            "endpointslices",
            &["get", "endpointslices", "-n", "kube-system"][..],
        ),
    ]
    .into_iter()
    .map(|(kind, args)| Watch::start(k, kind, args, t0, timeline.clone()))
    .collect();

    let mut steps = BTreeMap::new();
    steps.insert(
        "API answering",
        until(t0, "API", || k.ok(&["get", "--raw", "/version"])),
    );
    steps.insert(
        "kubernetes Service",
        until(t0, "kubernetes Service", || {
            k.ok(&[
                "get",
                "--raw",
                "/api/v1/namespaces/default/services/kubernetes",
            ])
        }),
    );
    steps.insert(
        "DNS Service",
        until(t0, "DNS Service", || {
            k.ok(&[
                "get",
                "--raw",
                "/api/v1/namespaces/kube-system/services/kube-dns",
            ])
        }),
    );
    let status = start.wait().expect("kubeunit start");
    steps.insert("command returned", t0.elapsed().as_secs_f64());
    if !status.success() {
        let out = start.wait_with_output().expect("start output");
        panic!("start: {}", text(&out));
    }
    let image_arg = format!("--image={image}");
    assert!(
        k.ok(&[
            "create",
            "deployment",
            "ttk",
            &image_arg,
            "--",
            "sleep",
            "3600"
        ]),
        "create deployment"
    );
    steps.insert(
        "app running",
        until(t0, "app running", || {
            k.stdout(&[
                "get",
                "pods",
                "-l",
                "app=ttk",
                "-o",
                "jsonpath={.items[*].status.phase}",
            ]) == "Running"
        }),
    );
    steps.insert(
        "DNS answering",
        until(t0, "DNS answering", || {
            k.ok(&[
                "exec",
                "deploy/ttk",
                "--",
                "nslookup",
                "kubernetes.default.svc.cluster.local",
            ])
        }),
    );
    drop(watches);
    let timeline = timeline.lock().unwrap().clone();
    (steps, timeline)
}

/// `kubectl get KIND -w -o json --output-watch-events`, restarted until the API server answers;
/// each object seen is judged by `milestones` as it arrives.
struct Watch {
    child: Arc<Mutex<Option<Child>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Watch {
    fn start(k: &Kubectl, kind: &'static str, args: &[&str], t0: Instant, tl: Timeline) -> Watch {
        let mut cmd = k.command(args);
        cmd.args(["-w", "-o", "json", "--output-watch-events"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child: Arc<Mutex<Option<Child>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c2, s2) = (child.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s2.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(mut ch) = cmd.spawn() else { return };
                let stdout = ch.stdout.take();
                *c2.lock().unwrap() = Some(ch);
                if let Some(stdout) = stdout {
                    let events =
                        serde_json::Deserializer::from_reader(BufReader::new(stdout)).into_iter();
                    for ev in events.flatten() {
                        let ev: Value = ev;
                        let at = t0.elapsed().as_secs_f64();
                        let mut tl = tl.lock().unwrap();
                        for m in milestones(kind, &ev["object"]) {
                            tl.entry(m).or_insert(at);
                        }
                    }
                }
                if let Some(mut ch) = c2.lock().unwrap().take() {
                    let _ = ch.kill();
                    let _ = ch.wait();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Watch { child, stop }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(ch) = self.child.lock().unwrap().as_mut() {
            let _ = ch.kill();
        }
    }
}

/// The milestones an object of `kind` shows.
fn milestones(kind: &str, o: &Value) -> Vec<&'static str> {
    let mut seen = Vec::new();
    let condition = |t: &str| {
        o["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    };
    match kind {
        "nodes" => {
            seen.push("node registered");
            if condition("Ready") {
                seen.push("node Ready");
                let tainted = o["spec"]["taints"].as_array().is_some_and(|ts| {
                    ts.iter().any(|t| {
                        t["key"]
                            .as_str()
                            .is_some_and(|k| k.starts_with("node.kubernetes.io/"))
                    })
                });
                if !tainted {
                    seen.push("node schedulable (no not-ready taint)");
                }
            }
        }
        "pods" => {
            let name = o["metadata"]["name"].as_str().unwrap_or("");
            let who = if name.starts_with("coredns-") {
                "CoreDNS"
            } else if name.starts_with("ttk-") {
                "app"
            } else {
                return seen;
            };
            let phase = o["status"]["phase"].as_str().unwrap_or("");
            let scheduled = o["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            let pick = |created, sched, running, ready| {
                let mut v = vec![created];
                if scheduled {
                    v.push(sched);
                }
                if phase == "Running" {
                    v.push(running);
                }
                if condition("Ready") {
                    v.push(ready);
                }
                v
            };
            seen = if who == "CoreDNS" {
                pick(
                    "CoreDNS pod created",
                    "CoreDNS pod scheduled",
                    "CoreDNS pod Running",
                    "CoreDNS pod Ready",
                )
            } else {
                pick(
                    "app pod created",
                    "app pod scheduled",
                    "app pod Running",
                    "app pod Ready",
                )
            };
        }
        "serviceaccounts" if o["metadata"]["name"] == "default" => {
            seen.push("default ServiceAccount");
        }
        "endpointslices" if o["metadata"]["labels"]["kubernetes.io/service-name"] == "kube-dns" => {
            let ready = o["endpoints"]
                .as_array()
                .is_some_and(|es| es.iter().any(|e| e["conditions"]["ready"] == true));
            if ready {
                seen.push("kube-dns endpoint ready");
            }
        }
        _ => {}
    }
    seen
}

fn print_run(n: usize, steps: &BTreeMap<&str, f64>, timeline: &BTreeMap<&str, f64>) {
    println!("run {n}:");
    let mut all: Vec<(f64, String)> = steps
        .iter()
        .map(|(s, t)| (*t, format!("step      {s}")))
        .chain(timeline.iter().map(|(m, t)| (*t, format!("  seen    {m}"))))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (t, what) in all {
        println!("  {t:>6.2}s  {what}");
    }
}
