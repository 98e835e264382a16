//! `kubeunit kubeconfig`: the environment's admin kubeconfig under names of its own (context NAME),
//! printed, or merged into a kubeconfig next to other clusters (`--write`), or taken out again.

use std::path::PathBuf;

use serde::Serialize;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::run::kubeconfig;
use crate::spec::profile::parse_mode;

pub const AFTER_HELP: &str = "Examples:
  kubeunit kubeconfig > dev.kubeconfig                    # self-contained: context, cluster, user
  kubeunit kubeconfig --write ~/.kube/config              # merge; its current context becomes 'dev'
  kubectl --context dev get nodes
  kubeunit kubeconfig --env ci --write ~/.kube/config --keep-context --mode 0640
  kubeunit kubeconfig --write ~/.kube/config --remove     # take the entries out again
  kubeunit kubeconfig --as kubelet@worker-1 > w1.kubeconfig  # a node's own identity (system:node:worker-1)

Entries are named context NAME, cluster kubeunit-NAME, user kubeunit-NAME-admin; a merge replaces
those and keeps everything else. A context NAME of another cluster is refused (exit 2). The profile's
kubeconfig.write does the same at every `start` (and `destroy --all` removes it).";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Merge into this kubeconfig (created if missing) instead of printing.
    #[arg(long, value_name = "PATH")]
    pub write: Option<PathBuf>,
    /// Print the kubeconfig of another identity of the environment as its component uses it
    /// instead: scheduler, controller-manager, kubelet, kube-proxy, a further node's
    /// kubelet@NODE or kube-proxy@NODE.
    #[arg(long = "as", value_name = "IDENTITY", conflicts_with = "write")]
    pub identity: Option<String>,
    /// Mode of the written file, octal [default: the file's own, 0600 for a new file].
    #[arg(long, requires = "write", value_parser = mode)]
    pub mode: Option<u32>,
    /// Leave the file's current context as it is.
    #[arg(long, requires = "write")]
    pub keep_context: bool,
    /// Remove the environment's entries from the --write file instead.
    #[arg(long, requires = "write", conflicts_with_all = ["mode", "keep_context"])]
    pub remove: bool,
    /// Output format (of what a --write did).
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

/// A --mode that is not one (clap prints it as the usage error).
#[derive(Debug, thiserror::Error)]
#[error("'{0}' is not an octal file mode such as 0600")]
struct NotAMode(String);

fn mode(s: &str) -> Result<u32, NotAMode> {
    parse_mode(s).ok_or_else(|| NotAMode(s.to_string()))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    path: PathBuf,
    context: String,
    /// merged (new entries), replaced (entries of this environment were there) or removed.
    action: &'static str,
    current_context: Option<String>,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let env = args.target.env()?;
    let name = env.plan.name().to_string();
    if let Some(identity) = &args.identity {
        print!("{}", kubeconfig::identity_kubeconfig(&env.plan, identity)?);
        return Ok(0);
    }
    let Some(path) = args.write else {
        print!("{}", kubeconfig::admin_entries(&env.plan)?.to_yaml());
        return Ok(0);
    };
    let report = if args.remove {
        let removed = kubeconfig::remove(&path, &name)?;
        Report {
            path,
            context: name,
            action: if removed { "removed" } else { "absent" },
            current_context: None,
        }
    } else {
        let m = kubeconfig::merge_admin(&env.plan, &path, args.mode, args.keep_context)?;
        Report {
            path: m.path,
            context: name,
            action: if m.replaced { "replaced" } else { "merged" },
            current_context: Some(m.current_context),
        }
    };
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => match (&report.current_context, report.action) {
            (Some(current), action) => println!(
                "{action} context '{}' in {} (current context: {current})",
                report.context,
                report.path.display()
            ),
            (None, "removed") => println!(
                "removed context '{}' from {}",
                report.context,
                report.path.display()
            ),
            (None, _) => println!(
                "{} has no entries of '{}'",
                report.path.display(),
                report.context
            ),
        },
    }
    Ok(0)
}
