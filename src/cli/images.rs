//! `kubeunit images load ARCHIVE...`: image archives into a running environment's containerd and
//! registry, without Docker.

use std::fmt;
use std::path::PathBuf;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::run::images::{self, LoadReport};

pub const AFTER_HELP: &str = "Examples:
  kubeunit images load app.tar                     # e.g. from: docker save -o app.tar kubeunit.local/app:dev
  kubeunit images load --state-dir /srv/a a.tar b.tar -o json";

const LOAD_HELP: &str = "Examples:
  docker save -o app.tar kubeunit.local/app:dev && kubeunit images load app.tar
  skopeo copy containers-storage:localhost/app:dev docker-archive:app.tar:kubeunit.local/app:dev
  kubeunit images load --state-dir /srv/a a.tar b.tar -o json | jq -r '.pushed[]'
  kubectl run app --image=kubeunit.local/app:dev --image-pull-policy=Always

Archives: docker archives (docker save, skopeo docker-archive:) and OCI layouts in a tar (skopeo
oci-archive:, ctr images export), their images named. Each is read whole and checked (a tar of a
known format, every manifest, config and layer for this platform there and matching its digest)
before any is imported: one that is not refuses them all and nothing changes. Then each goes into
containerd (ctr images import) and, where the environment has a registry, its images are pushed
there under their repository path (kubeunit.local/app:dev as app:dev), where every pull of the
node goes: a pod with imagePullPolicy: Always runs it too. The environment must be running.
Exit codes: 0 loaded, 1 not running or an import failed, 2 a bad archive or state dir.";

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Import docker/OCI archives into the running node's containerd and push them to its registry.
    #[command(after_help = LOAD_HELP)]
    Load(LoadArgs),
}

#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    #[command(flatten)]
    pub target: Target,
    /// Image archives (docker-archive or OCI layout tars).
    #[arg(required = true, value_name = "ARCHIVE")]
    pub archives: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(command: Command) -> Result<i32, Error> {
    match command {
        Command::Load(args) => load(args).await,
    }
}

async fn load(args: LoadArgs) -> Result<i32, Error> {
    let (env, _lock) = args.target.env_locked()?;
    let archives = images::check_archives(&env, &args.archives)?;
    let sd = args.target.systemd(&env).await?;
    let report = images::load(&env, &sd, archives).await?;
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => print!("{}", Summary(&report)),
    }
    Ok(0)
}

struct Summary<'a>(&'a LoadReport);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        for a in &r.archives {
            writeln!(f, "{}: {}", a.path.display(), a.names.join(", "))?;
        }
        let new = if r.imported.is_empty() {
            "none new".to_string()
        } else {
            format!("{} new: {}", r.imported.len(), r.imported.join(", "))
        };
        writeln!(f, "  containerd: imported ({new})")?;
        match &r.registry {
            Some(host) => writeln!(
                f,
                "  registry {host}: pushed {}",
                r.pushed
                    .iter()
                    .map(|p| p.strip_prefix(&format!("{host}/")).unwrap_or(p))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => writeln!(f, "  no registry in this environment"),
        }
    }
}
