//! `kubeunit start`: run a state dir's components as transient units until all are healthy.

use std::fmt;
use std::io::IsTerminal;
use std::time::Duration;

use super::common::{print_json, Output, Target};
use crate::error::Error;
use crate::run::{self, Env, Progress, StartReport};

pub const AFTER_HELP: &str = "Examples:
  kubeunit start                          # /var/lib/kubeunit/dev as root
  kubeunit start --env ci --timeout 60
  kubeunit start --wait healthy           # return once the components are healthy
  kubeunit start --state-dir /tmp/k8s -o json
  kubeunit start --bus unix:path=/proc/1234/root/run/dbus/system_bus_socket

Exit codes: 0 up (or already up), 1 a component failed or a check failed, 2 bad state dir.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Seconds to wait for every component to become healthy (and the environment usable).
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// How far to wait: `usable` (with a node: also its nodes Ready and schedulable, the default
    /// ServiceAccount there and CoreDNS ready, so that a pod runs and resolves at once) or
    /// `healthy` (every component's health check passes).
    #[arg(long, value_enum, default_value = "usable")]
    pub wait: Wait,
    /// Output format (json: per-component timings and the addons applied).
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

/// `--wait`: run::Until as a flag value.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum Wait {
    Usable,
    Healthy,
}

impl From<Wait> for run::Until {
    fn from(w: Wait) -> run::Until {
        match w {
            Wait::Usable => run::Until::Usable,
            Wait::Healthy => run::Until::Healthy,
        }
    }
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let (env, _lock) = args.target.env_locked()?;
    let sd = args.target.systemd(&env).await?;
    let text = args.output == Output::Text;
    let tty = std::io::stdout().is_terminal();
    if text {
        println!(
            "starting environment '{}' from {}",
            env.plan.name(),
            env.plan.state_dir.display()
        );
    }
    let mut progress = |p: Progress| {
        if text {
            print_progress(&p, tty);
        }
    };
    let timeout = Duration::from_secs(args.timeout);
    let report = run::start(&env, &sd, timeout, args.wait.into(), &mut progress).await?;
    match args.output {
        Output::Json => print_json(&report),
        Output::Text => print!(
            "{}",
            Summary {
                env: &env,
                report: &report
            }
        ),
    }
    Ok(0)
}

/// On a terminal, say what is being waited for; in logs, one line per component.
fn print_progress(p: &Progress, tty: bool) {
    match p {
        Progress::Running { component, seconds } if tty => {
            println!("  - {component:<26} running after {seconds:>5.2}s, waiting until healthy")
        }
        Progress::Running { .. } => {}
        Progress::Healthy(t) => {
            let mark = if tty { "\u{2713}" } else { "ok" };
            println!(
                "  {mark} {:<26} running after {:>5.2}s, healthy after {:>5.2}s",
                t.component, t.job_done, t.healthy
            );
        }
        Progress::Usable(u) => {
            let mark = if tty { "\u{2713}" } else { "ok" };
            println!("  {mark} {:<26} after {:>5.2}s", u.what, u.seconds);
        }
        Progress::HookDone {
            component,
            hook,
            count,
            seconds,
        } => {
            let mark = if tty { "\u{2713}" } else { "ok" };
            println!("  {mark} {component:<26} {hook} ({count}) done after {seconds:>5.2}s");
        }
    }
}

struct Summary<'a> {
    env: &'a Env,
    report: &'a StartReport,
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (plan, report) = (&self.env.plan, self.report);
        for n in &report.notes {
            writeln!(f, "  note: {n}")?;
        }
        for n in &report.departed_nodes {
            writeln!(
                f,
                "  removed node {n}, which the profile no longer has: its units, network, data and Node object"
            )?;
        }
        if !report.imported.is_empty() {
            writeln!(
                f,
                "  imported {} images into containerd: {}",
                report.imported.len(),
                report.imported.join(", ")
            )?;
        }
        if !report.pushed.is_empty() {
            writeln!(
                f,
                "  loaded {} images into the node's registry: {}",
                report.pushed.len(),
                report.pushed.join(", ")
            )?;
        }
        if !report.applied.is_empty() {
            writeln!(
                f,
                "  applied {} addon objects (server-side, from {}/addons)",
                report.applied.len(),
                plan.state_dir.display()
            )?;
        }
        if let Some(egress) = &report.egress {
            writeln!(f, "  {egress}")?;
        }
        let name = plan.name();
        let dir_flag = format!("--state-dir {}", plan.state_dir.display());
        if report.already_running && report.departed_nodes.is_empty() {
            writeln!(f, "environment '{name}' is already running; nothing changed (see `kubeunit status {dir_flag}`)")?;
        } else {
            let usable = if report.usable.is_empty() {
                ""
            } else {
                " and usable"
            };
            writeln!(
                f,
                "environment '{name}' is up{usable} in {:.1}s\n",
                report.total_seconds
            )?;
        }
        // Across hosts only a control-plane host holds the admin identity.
        if plan.here_has(crate::spec::profile::HostRole::ControlPlane) {
            writeln!(
                f,
                "  export KUBECONFIG={}",
                plan.path(&crate::spec::paths::kubeconfig("admin"))
            )?;
            writeln!(f, "  kubectl get --raw /readyz\n")?;
        }
        if let Some(path) = &report.kubeconfig {
            writeln!(
                f,
                "kubeconfig: context '{name}' merged into {} (kubectl --context {name})",
                path.display()
            )?;
        }
        writeln!(
            f,
            "logs:    kubeunit logs -f {dir_flag}    (or journalctl -u {} -f)",
            plan.slice_name()
        )?;
        writeln!(f, "status:  kubeunit status {dir_flag}")?;
        writeln!(f, "stop:    kubeunit stop {dir_flag}")
    }
}
