//! `kubeunit logs`: hand over to journalctl (it pages, follows and formats better than we would).

use std::io::IsTerminal;

use super::common::Target;
use crate::error::Error;

pub const AFTER_HELP: &str = "Examples:
  kubeunit logs -f
  kubeunit logs kube-apiserver -n 200
  kubeunit logs etcd kube-apiserver --since '5 min ago'";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Components as `kubeunit status` names them (etcd, kubelet, kubelet@NODE on a further node, ...).
    pub components: Vec<String>,
    /// Follow.
    #[arg(short, long)]
    pub follow: bool,
    /// Number of lines.
    #[arg(short = 'n', long, default_value_t = 100)]
    pub lines: u64,
    /// Only entries since this time (journalctl --since syntax).
    #[arg(long)]
    pub since: Option<String>,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let env = args.target.env()?;
    let mut cmd = std::process::Command::new("journalctl");
    if args.target.user || env.plan.profile.rootless {
        cmd.arg("--user");
    }
    cmd.args(["--no-hostname", "-o", "short-precise", "-n"])
        .arg(args.lines.to_string());
    if args.follow {
        cmd.arg("-f");
    }
    if !std::io::stdout().is_terminal() {
        cmd.arg("--no-pager");
    }
    if let Some(s) = &args.since {
        cmd.args(["--since", s]);
    }
    if args.components.is_empty() {
        // -u on the slice matches _SYSTEMD_SLICE: every unit of the environment.
        cmd.arg("-u").arg(env.plan.slice_name());
    }
    for name in &args.components {
        let (c, unit) = env.unit(name)?;
        cmd.arg("-u").arg(&unit.name);
        // ... and its runs under dlv (`kubeunit debug`).
        cmd.arg("-u").arg(c.debug_unit());
    }
    let status = cmd.status().map_err(|e| Error::Preflight {
        message: format!("cannot run journalctl: {e}"),
        fix: "install systemd's journalctl (Debian package systemd)".into(),
    })?;
    Ok(status.code().unwrap_or(1))
}
