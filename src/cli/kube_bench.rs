//! `kubeunit kube-bench`: the CIS Kubernetes Benchmark (aquasecurity/kube-bench) against a running
//! environment, with its benchmark files as shipped and kubeunit's paths in its config
//! (`cis`).

use std::path::PathBuf;

use super::common::Target;
use crate::cis;
use crate::error::Error;

pub const AFTER_HELP: &str = "Examples:
  sudo kubeunit kube-bench                                   # every target this host runs, as text
  sudo kubeunit kube-bench --kube-bench ~/kube-bench/kube-bench -- --json
  sudo kubeunit kube-bench --targets node -- --check 4.1.1,4.2.1
  sudo kubeunit kube-bench -- --exit-code 3                  # exit 3 when a check fails

kube-bench finds each component by its process (`ps`): run it where the environment runs (in the
container scripts/up.sh booted: scripts/kubeunit kube-bench). Its cfg directory is taken from beside
the binary (its release tarball), else /etc/kube-bench/cfg. docs/cis.md lists every check with its
result on dev and how kubeunit meets it.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// The kube-bench binary.
    #[arg(long, value_name = "PATH", default_value = "kube-bench")]
    pub kube_bench: PathBuf,
    /// kube-bench's cfg directory [default: cfg beside the binary, else /etc/kube-bench/cfg].
    #[arg(long, value_name = "DIR")]
    pub cfg: Option<PathBuf>,
    /// The benchmark (a directory of the cfg directory).
    #[arg(long, default_value = cis::BENCHMARK)]
    pub benchmark: String,
    /// kube-bench's targets, comma-separated [default: those of what this host runs: master,
    /// controlplane, policies with kube-apiserver, etcd with etcd, node with a kubelet].
    #[arg(long, value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Further arguments for `kube-bench run`.
    #[arg(last = true)]
    pub args: Vec<String>,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    if args.benchmark.is_empty() || args.benchmark.contains(['/', '\0']) || args.benchmark == ".." {
        return Err(Error::Usage {
            message: format!("--benchmark {:?} is no benchmark name", args.benchmark),
            fix: format!(
                "give the name of a directory of kube-bench's cfg, e.g. {}",
                cis::BENCHMARK
            ),
        });
    }
    let kube_bench = which(&args.kube_bench)?;
    let env = args.target.env()?;
    let cfg = args
        .cfg
        .clone()
        .unwrap_or_else(|| cis::default_cfg(&kube_bench));
    let status = cis::run(
        &env,
        &cis::Request {
            kube_bench,
            cfg,
            benchmark: args.benchmark,
            targets: args.targets,
            args: args.args,
        },
    )?;
    Ok(status.code().unwrap_or(1))
}

/// `name` as a path: as given when it names a directory, else found on PATH.
fn which(name: &std::path::Path) -> Result<PathBuf, Error> {
    let missing = |what: String| {
        Error::Usage {
        message: what,
        fix: "build or download kube-bench (github.com/aquasecurity/kube-bench) and give --kube-bench PATH"
            .into(),
    }
    };
    if name.components().count() > 1 {
        return if name.is_file() {
            Ok(name.to_path_buf())
        } else {
            Err(missing(format!(
                "--kube-bench {}: no such file",
                name.display()
            )))
        };
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| missing(format!("no {} on PATH", name.display())))
}
