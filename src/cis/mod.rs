//! The CIS Kubernetes Benchmark by kube-bench (aquasecurity/kube-bench), against a running
//! environment: kube-bench's benchmark files as it ships them, a `config.yaml` that points its
//! components at the environment's files (`config`), and a private view of `/etc` in which the
//! paths the benchmark hard-codes from kubeadm are the environment's (`view`).

pub mod config;
pub mod view;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::error::Error;
use crate::run::Env;
use crate::spec::paths;

/// The benchmark kube-bench v0.15.6 maps Kubernetes 1.32 and later to.
pub const BENCHMARK: &str = "cis-1.12";

/// One run of kube-bench.
#[derive(Debug, Clone)]
pub struct Request {
    /// The kube-bench binary.
    pub kube_bench: PathBuf,
    /// Its `cfg` directory (config.yaml and one directory per benchmark).
    pub cfg: PathBuf,
    pub benchmark: String,
    /// Its targets (master, controlplane, etcd, node, policies); empty: those of what this host
    /// runs (`targets`).
    pub targets: Vec<String>,
    /// Further arguments, as kube-bench takes them (`--json`, `--check 1.2.1`, ...).
    pub args: Vec<String>,
}

/// kube-bench's targets for what the environment runs on this host: the control plane's when it
/// runs kube-apiserver, etcd's when etcd, the node's when a kubelet.
pub fn targets(env: &Env) -> Vec<String> {
    let runs = |c: &str| env.unit(c).is_ok();
    let mut targets = Vec::new();
    if runs("kube-apiserver") {
        targets.extend(["master", "controlplane", "policies"]);
    }
    if runs("etcd") {
        targets.push("etcd");
    }
    if runs("kubelet") {
        targets.push("node");
    }
    targets.into_iter().map(String::from).collect()
}

/// Run kube-bench against `env` (as root: its view of /etc is a private mount). Its output is
/// kube-bench's, on this process's stdout and stderr.
pub fn run(env: &Env, req: &Request) -> Result<ExitStatus, Error> {
    let shipped_path = req.cfg.join("config.yaml");
    let shipped = std::fs::read_to_string(&shipped_path).map_err(|e| Error::Usage {
        message: format!("cannot read {}: {e}", shipped_path.display()),
        fix: "give --cfg the cfg directory that came with kube-bench (its release has it beside the binary)"
            .into(),
    })?;
    let benchmark = req.cfg.join(&req.benchmark);
    if !benchmark.join("master.yaml").is_file() && !benchmark.join("node.yaml").is_file() {
        return Err(Error::Usage {
            message: format!("no benchmark {} in {}", req.benchmark, req.cfg.display()),
            fix: format!(
                "give --benchmark one of the directories in {} (e.g. {BENCHMARK})",
                req.cfg.display()
            ),
        });
    }
    let yaml = config::config_yaml(env, &shipped_path, &shipped)?;
    // kube-bench reads `<config dir>/<benchmark>/`: a private dir with our config.yaml and a link
    // to the shipped benchmark, gone when the run is (tempfile removes it).
    let dir = tempfile::Builder::new()
        .prefix("kubeunit-kube-bench-")
        .tempdir()
        .map_err(Error::io(
            std::env::temp_dir(),
            "create a temporary directory in",
        ))?;
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, yaml).map_err(Error::io(&config, "write"))?;
    let link = dir.path().join(&req.benchmark);
    std::os::unix::fs::symlink(&benchmark, &link).map_err(Error::io(&link, "create"))?;
    let targets = if req.targets.is_empty() {
        targets(env)
    } else {
        req.targets.clone()
    };
    let mut args: Vec<String> = vec![
        "run".into(),
        format!("--targets={}", targets.join(",")),
        format!("--benchmark={}", req.benchmark),
        format!("--config-dir={}", dir.path().display()),
        format!("--config={}", config.display()),
    ];
    args.extend(req.args.iter().cloned());
    let mut command = view::command(&env.plan.state_dir, dir.path(), &req.kube_bench, &args)?;
    cluster_client(env, &mut command);
    command.status().map_err(Error::io(&req.kube_bench, "run"))
}

/// The policies' checks (5.x) ask the cluster with `kubectl`: as the environment's admin, with the
/// kubectl beside its kube-apiserver when there is one (a Kubernetes release's server binaries).
fn cluster_client(env: &Env, command: &mut std::process::Command) {
    let admin = env.plan.state_dir.join(paths::kubeconfig("admin"));
    if admin.is_file() {
        command.env("KUBECONFIG", admin);
    }
    let apiserver = env
        .unit("kube-apiserver")
        .ok()
        .and_then(|(_, u)| u.exec_start())
        .map(|(path, _, _)| PathBuf::from(path));
    if let Some(dir) = apiserver.as_deref().and_then(Path::parent) {
        if dir.join("kubectl").is_file() {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path));
            if let Ok(joined) = std::env::join_paths(dirs) {
                command.env("PATH", joined);
            }
        }
    }
}

/// Where kube-bench's `cfg` directory is when not given: beside its binary (its release tarball),
/// else where its packages install it.
pub fn default_cfg(kube_bench: &Path) -> PathBuf {
    let beside = kube_bench
        .parent()
        .map(|d| d.join("cfg"))
        .unwrap_or_default();
    if beside.join("config.yaml").is_file() {
        beside
    } else {
        PathBuf::from("/etc/kube-bench/cfg")
    }
}
