//! Helpers shared by the integration tests: run the kubeunit binary, snapshot a directory, find the
//! pinned test binaries (built by scripts/build-test-binaries.sh; missing ones are an install error).
//! `container` boots systemd, `ports` hands out ports, `internet` is a simulated internet.
#![allow(dead_code)]

pub mod container;
pub mod history;
pub mod hosts_net;
pub mod internet;
pub mod ports;
pub mod releases;
pub mod vm;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// kubeunit on this host. What it renders does not depend on how the tests were started:
/// `KUBEUNIT_OFFLINE` (scripts/test.sh sets it) is not passed on; a test that wants it sets it.
pub fn kubeunit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kubeunit"));
    c.env_remove("KUBEUNIT_STATE_DIR")
        .env_remove("KUBEUNIT_BIN_DIR")
        .env_remove("KUBEUNIT_OFFLINE");
    c.env("SOURCE_DATE_EPOCH", test_epoch());
    c
}

/// Validity start for tests: the start of the current UTC day, fixed for a test run (so repeated
/// gens agree to the byte) and never so old that certificates have run out (a pinned date would
/// break every test that verifies a certificate one validity period later).
pub fn test_epoch() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    (now - now % 86_400).to_string()
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("spawn")
}

/// A bench's rounds: `KUBEUNIT_BENCH_RUNS`, else `default`.
pub fn bench_runs(default: usize) -> usize {
    std::env::var("KUBEUNIT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of a bench's readings (the upper middle of an even count; NaN of none).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A binDir whose component binaries exist and are executable (what `systemd-analyze verify` checks).
pub fn executable_bin_dir(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
        "kube-proxy",
        "containerd",
        "registry",
        "cloud-controller-manager",
        "hyperkube",
    ] {
        let p = bin.join(name);
        std::fs::copy("/bin/true", &p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// gen into `dir` with extra args; panics with the output on failure.
pub fn gen_ok(dir: &Path, args: &[&str]) -> Output {
    let out = run(kubeunit().arg("gen").arg("--state-dir").arg(dir).args(args));
    assert!(out.status.success(), "gen {args:?} failed:\n{}", text(&out));
    out
}

/// `gen --hermetic --out OUT` of `ha` (five host dirs, for /var/lib/kubeunit/ha), from `seed`:
/// nothing of this machine read.
pub fn gen_hermetic_ha(out: &Path, seed: &str) {
    gen_hermetic_ha_with(out, seed, &[]);
}

/// `gen_hermetic_ha` with more `gen` arguments.
pub fn gen_hermetic_ha_with(out: &Path, seed: &str, more: &[&str]) {
    let o = run(kubeunit()
        .args(["gen", "--hermetic", "--profile", "ha", "--seed", seed])
        .args(["--set", "pki.epoch=2026-01-01T00:00:00Z"])
        .args(more)
        .args(["--state-dir", "/var/lib/kubeunit/ha", "--out"])
        .arg(out));
    assert!(o.status.success(), "gen --hermetic --out: {}", text(&o));
}

/// A subject alternative name as text: a DNS name, or an address; `None` for another kind.
pub fn san_text(n: &x509_parser::extensions::GeneralName) -> Option<String> {
    use x509_parser::extensions::GeneralName;
    match n {
        GeneralName::DNSName(d) => Some(d.to_string()),
        GeneralName::IPAddress(b) => Some(match b.len() {
            4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).ok()?).to_string(),
            _ => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*b).ok()?).to_string(),
        }),
        _ => None,
    }
}

/// The subject alternative names of the PEM certificate `pem` (`san_text` each).
pub fn sans_of_pem(pem: &[u8]) -> std::collections::BTreeSet<String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).unwrap();
    let cert = pem.parse_x509().unwrap();
    let sans = cert.subject_alternative_name().unwrap();
    sans.iter()
        .flat_map(|s| s.value.general_names.iter().filter_map(san_text))
        .collect()
}

/// Path -> (bytes, mode, mtime) of every file below `dir`.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return out;
    }
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        let meta = e.metadata().unwrap();
        let content = if meta.is_file() {
            std::fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        out.insert(
            e.path().strip_prefix(dir).unwrap().to_path_buf(),
            (
                content,
                meta.permissions().mode() & 0o7777,
                meta.modified().unwrap(),
            ),
        );
    }
    out
}

/// Pinned versions from scripts/versions.env (the one place they are written).
pub fn pinned(key: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/versions.env");
    let text = std::fs::read_to_string(path).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} missing in scripts/versions.env"));
    line.split_once('=')
        .unwrap()
        .1
        .trim_matches('"')
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// A script of the repository's scripts/.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

/// The archives of a built images dir (its images.txt names them).
pub fn archives(dir: &Path) -> Vec<String> {
    let list = std::fs::read_to_string(dir.join("images.txt"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join("images.txt").display()));
    list.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .map(|f| dir.join(f).display().to_string())
        .collect()
}

/// scripts/conformance.sh running the conformance subset (tests/conformance-subset.txt) against the
/// running environment of `state`, 4 Ginkgo processes per core (it is a few dozen specs, not the
/// suite), its results in `results`.
pub fn conformance_subset(state: &Path, version: &str, results: &Path) -> Output {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    run(Command::new(script("conformance.sh"))
        .args(["--procs", &(4 * cores).to_string()])
        .arg("--state-dir")
        .arg(state)
        .args(["--minor", version, "--specs"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance-subset.txt"))
        .arg("--results")
        .arg(results))
}

/// The cache of pinned binaries and the rootfs, as the scripts compute it (scripts/lib.sh).
pub fn cache_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = run(Command::new(script("container.sh")).arg("cache-dir"));
        assert!(
            out.status.success(),
            "scripts/container.sh cache-dir: {}",
            text(&out)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
    .clone()
}

/// Directory of the pinned Kubernetes binaries (newest minor unless `KUBEUNIT_TEST_K8S` names one).
pub fn kubernetes_bin_dir() -> PathBuf {
    let version = std::env::var("KUBEUNIT_TEST_K8S")
        .unwrap_or_else(|_| pinned("KUBERNETES_VERSIONS")[0].clone());
    let dir = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"));
    assert!(
        dir.join(".complete").exists(),
        "pinned Kubernetes {version} binaries missing in {}: run scripts/build-test-binaries.sh (the README's test command does)",
        dir.display()
    );
    dir
}

pub fn etcd_bin_dir() -> PathBuf {
    let version = pinned("ETCD_VERSION")[0].clone();
    let dir = cache_dir().join("bin").join(format!("etcd-{version}"));
    assert!(
        dir.join(".complete").exists(),
        "pinned etcd {version} missing in {}: run scripts/build-test-binaries.sh",
        dir.display()
    );
    dir
}

/// A directory scripts/build-test-binaries.sh built (`--print` lists them), by its name's prefix
/// (`containerd-`, `images-`, ...).
pub fn built_dir(prefix: &str) -> PathBuf {
    let out = Command::new(script("build-test-binaries.sh"))
        .arg("--print")
        .output()
        .expect("scripts/build-test-binaries.sh --print");
    let dir = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("build-test-binaries.sh --print lists no {prefix}* dir"));
    assert!(
        dir.join(".complete").exists(),
        "{} missing: run scripts/build-test-binaries.sh (the README's test command does)",
        dir.display()
    );
    dir
}

/// One node test at a time on this host (and the bring-up benchmark): the test containers share the
/// host's network, where a node's link (`ku-<name>`, its /30) is named after its environment, and two
/// nodes at once would also overload a small machine. Held until the file is dropped.
pub fn node_lock() -> std::fs::File {
    let path = Path::new("/tmp/kubeunit-it/node.lock");
    let f = lock_file(path);
    f.lock()
        .unwrap_or_else(|e| panic!("flock {}: {e}", path.display()));
    f
}

/// A lock file of the harness (its directory made), open for `flock` (`File::lock`): the lock,
/// not the file, is what is shared.
pub fn lock_file(path: &Path) -> std::fs::File {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Poll `f` until it holds; fail the test naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: std::time::Duration, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// The LoadBalancer segment's interface on this host (one host: the bridge) and the pool of the
/// environment in `state`, as its node-network script names them (`lb_segment=`, `lb_pool=`);
/// empty without the addon.
pub fn load_balancer_of(state: &std::path::Path) -> (String, String) {
    let script = std::fs::read_to_string(state.join("config/node-network.sh")).unwrap_or_default();
    let value = |key: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(|v| v.trim_matches(['"', '\'']).to_string())
            .unwrap_or_default()
    };
    (value("lb_segment"), value("lb_pool"))
}

/// What an HTTP/1.0 GET of `path` at `address`:80 from this host answered (3 s at most), and
/// whether it answered at all.
pub fn http_get_from(c: &container::Container, address: &str, path: &str) -> (bool, String) {
    let out = c.run(&[
        "timeout",
        "3",
        "bash",
        "-c",
        &format!(
            "exec 3<>/dev/tcp/{address}/80; printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
        ),
    ]);
    (out.status.success(), text(&out))
}

/// `wait_for`, and a timeout says what `f` saw last (`f` gives whether it is done, and what it saw).
pub fn wait_for_saying(
    what: &str,
    timeout: std::time::Duration,
    mut f: impl FnMut() -> (bool, String),
) {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let (done, saw) = f();
        if done {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; last seen:\n{saw}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// What the unit names of the environment in `state` start with, as its profile.yaml records it:
/// `kubeunit-NAME`, or `kubeunit-NAME_INSTANCE` for a state dir outside the name's default place.
pub fn unit_prefix(state: &Path) -> String {
    let path = state.join("profile.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let p: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let name = p["name"]
        .as_str()
        .expect("profile.yaml names the environment");
    match p.get("instance").and_then(|i| i.as_str()).unwrap_or("") {
        "" => format!("kubeunit-{name}"),
        i => format!("kubeunit-{name}_{i}"),
    }
}

/// The service of `component` of the environment in `state` (`kubeunit-NAME[_INSTANCE]-etcd.service`).
pub fn unit(state: &Path, component: &str) -> String {
    format!("{}-{component}.service", unit_prefix(state))
}

/// The ports of the environment in `state` as its profile.yaml records them (field -> port): what
/// `ports: auto` resolved to.
pub fn recorded_ports(state: &Path) -> BTreeMap<String, u16> {
    let path = state.join("profile.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let p: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    p["ports"]
        .as_mapping()
        .unwrap_or_else(|| panic!("ports are not numbers in:\n{text}"))
        .iter()
        .map(|(k, v)| {
            let port = v.as_u64().and_then(|v| u16::try_from(v).ok());
            (
                k.as_str().unwrap().to_string(),
                port.expect("a port number"),
            )
        })
        .collect()
}

/// The addresses an `nslookup` answered for the name it looked up: the `Address` lines after the
/// `Name:` line (the lines before it name the server, 10.0.0.10 and its port, which a `contains`
/// of the answer would match).
pub fn nslookup_answers(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.starts_with("Name:"))
        .filter_map(|l| l.strip_prefix("Address:"))
        .map(|a| a.trim().to_string())
        .collect()
}

#[test]
fn nslookup_answers_are_the_lines_after_the_name() {
    let busybox = "Server:\t\t10.0.0.10\nAddress:\t10.0.0.10:53\n\nName:\tkubernetes.default.svc.cluster.local\nAddress: 10.0.0.1\n";
    assert_eq!(nslookup_answers(busybox), vec!["10.0.0.1"]);
    assert!(nslookup_answers("Server:\t\t10.0.0.10\nAddress:\t10.0.0.10:53\n").is_empty());
}

/// StatefulSet `kept` of `replicas` pods of `image`, one per node (the control plane's taint
/// tolerated), each writing its hostname and a time to its claim's `/data/id` once and keeping it.
pub fn kept_statefulset(replicas: u32, image: &str) -> String {
    let keep = "[ -e /data/id ] || echo \"$(hostname) $(date +%s%N)\" >/data/id; exec sleep 3600";
    format!(
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: kept}}
spec:
  replicas: {replicas}
  serviceName: kept
  selector: {{matchLabels: {{app: kept}}}}
  template:
    metadata: {{labels: {{app: kept}}}}
    spec:
      terminationGracePeriodSeconds: 1
      tolerations: [{{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}}]
      topologySpreadConstraints:
      - {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: kept}}}}}}
      containers:
      - name: c
        image: {image}
        command: [sh, -c, {keep:?}]
        volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Mi}}}}}}
"#
    )
}

/// Service `svc`'s LoadBalancer address, waited for up to `timeout` (`kubectl_ok` runs kubectl),
/// checked to be one of `pool`.
pub fn external_ip_of(
    kubectl_ok: impl Fn(&[&str]) -> String,
    svc: &str,
    pool: &str,
    timeout: std::time::Duration,
) -> String {
    let mut address = String::new();
    wait_for("an EXTERNAL-IP", timeout, || {
        address = kubectl_ok(&[
            "get",
            "svc",
            svc,
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ]);
        !address.is_empty()
    });
    let net: ipnet::Ipv4Net = pool.parse().unwrap();
    assert!(
        net.contains(&address.parse::<std::net::Ipv4Addr>().unwrap()),
        "{svc}: {address} is not of {pool}"
    );
    address
}

/// The MAC address in a line of `ip -br link show DEV` (its third word), empty without one.
pub fn brief_link_mac(line: &str) -> String {
    line.split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

/// The Deployment `lb-web` (one pod of `image` running `serve`, which answers on 8080) on `node`,
/// behind a LoadBalancer Service of the same name on port 80 with externalTrafficPolicy Local.
pub fn lb_web_on(node: &str, image: &str, serve: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: lb-web}}
spec:
  selector: {{matchLabels: {{app: lb-web}}}}
  template:
    metadata: {{labels: {{app: lb-web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {{kubernetes.io/hostname: {node}}}
      containers: [{{name: c, image: {image}, command: [sh, -c, {serve:?}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: lb-web}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {{app: lb-web}}
  ports: [{{port: 80, targetPort: 8080}}]
"#
    )
}

/// Shell, for a sandbox of two nodes' node-network.sh (`$first`, `$second`): the first node's
/// `up` killed (SIGKILL) at instants from 5 ms to 0.6 s in, each time (the next `up` begins with
/// the `down` that takes what it left); then both nodes up at once. A failure prints `up: failed`
/// and its output.
pub const KILLED_THEN_UP_AT_ONCE: &str = r#"
for delay in 0.005 0.01 0.02 0.04 0.08 0.15 0.3 0.6; do
  timeout -s KILL "$delay" sh "$first" up >/dev/null 2>&1
done
sh "$first" up >/run/up1.log 2>&1 & one=$!
sh "$second" up >/run/up2.log 2>&1 & two=$!
wait "$one" || { echo "up: failed"; cat /run/up1.log; }
wait "$two" || { echo "up: failed"; cat /run/up2.log; }
"#;

/// Shell: both nodes of `KILLED_THEN_UP_AT_ONCE` down at once (`down: failed` and its output).
pub const DOWN_AT_ONCE: &str = r#"
sh "$first" down >/run/down1.log 2>&1 & one=$!
sh "$second" down >/run/down2.log 2>&1 & two=$!
wait "$one" || { echo "down: failed"; cat /run/down1.log; }
wait "$two" || { echo "down: failed"; cat /run/down2.log; }
"#;

/// `sh -c body sandbox ARGS...` in a mount and network namespace of its own (the body mounts its
/// own /run).
pub fn in_net_sandbox(body: &str, args: &[&std::ffi::OsStr]) -> Output {
    run(Command::new("unshare")
        .args([
            "--mount",
            "--net",
            "--propagation",
            "private",
            "sh",
            "-c",
            body,
            "sandbox",
        ])
        .args(args))
}

/// `gen` of multi (a control plane and two workers) into `tmp/state`, with `sets` (`KEY=VALUE`)
/// too: the rendered node-network.sh scripts the sandboxes run.
pub fn multi_state(tmp: &Path, sets: &[&str]) -> PathBuf {
    let dir = tmp.join("state");
    let bin = executable_bin_dir(tmp);
    let mut cmd = kubeunit();
    cmd.args(["gen", "--profile", "multi", "--seed", "7", "--bin-dir"])
        .arg(&bin)
        .args(["--set", "network.advertiseAddress=192.0.2.10"]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = run(cmd.arg("--state-dir").arg(&dir));
    assert!(out.status.success(), "gen: {}", text(&out));
    dir
}
