//! Command line: parsing, output formats and exit codes (0 ok, 1 failed check or operation, 2 bad input).

use std::io::Write;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use crate::artifacts::{self, Options};
use crate::environment::{self, Env};
use crate::error::Error;
use crate::pki::Entropy;
use crate::plan::Plan;
use crate::profile::{self, Profile};
use crate::state::{self, Existing};
use crate::systemd::{Bus, Systemd};

#[derive(Parser, Debug)]
#[command(
    name = "kubeunit",
    version,
    about = "A real Kubernetes environment on one Linux host, run by systemd",
    long_about = "kubeunit renders a Kubernetes environment (PKI, kubeconfigs, component configs, systemd units) \
into a state directory, then runs each component as a transient systemd unit.",
    after_help = "Examples:\n  kubeunit gen --profile dev\n  kubeunit gen --profile ci --set ports.apiserver=7443 --state-dir /tmp/ci\n  kubeunit gen --check\n  kubeunit profile show control-plane"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render an environment into a state directory (PKI, kubeconfigs, configs, units).
    #[command(after_help = "Examples:\n  \
        kubeunit gen --profile dev\n  \
        kubeunit gen --profile ./my-profile.yaml --state-dir /srv/k8s\n  \
        kubeunit gen --profile ci --set network.serviceCIDR=10.96.0.0/16 --set logging.verbosity=4\n  \
        SOURCE_DATE_EPOCH=1767225600 kubeunit gen --seed 42   # byte-identical output\n  \
        kubeunit gen --check                                   # exit 1 if the state dir differs\n\n\
        Re-running gen keeps keys and CAs and reissues only the certificates whose inputs changed.")]
    Gen(GenArgs),
    /// Start every component of a state dir as transient systemd units and wait until all are healthy.
    #[command(after_help = "Examples:\n  \
        kubeunit start                          # /var/lib/kubeunit/dev as root\n  \
        kubeunit start --env ci --timeout 60\n  \
        kubeunit start --state-dir /tmp/k8s -o json\n  \
        kubeunit start --bus unix:path=/proc/1234/root/run/dbus/system_bus_socket\n\n\
        Exit codes: 0 up (or already up), 1 a component failed or a check failed, 2 bad state dir.")]
    Start {
        #[command(flatten)]
        target: Target,
        /// Seconds to wait for every component to become healthy.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
        /// Output format (json: per-component timings and the addons applied).
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Stop every unit of the environment (its slice) and wait until they and their ports are gone.
    Stop {
        #[command(flatten)]
        target: Target,
    },
    /// Per component: unit state, PID, memory, restarts, uptime and health.
    #[command(
        after_help = "Examples:\n  kubeunit status\n  kubeunit status -o json | jq '.[] | select(.healthy | not)'"
    )]
    Status {
        #[command(flatten)]
        target: Target,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Show component logs from journald (all components when none is named).
    #[command(
        after_help = "Examples:\n  kubeunit logs -f\n  kubeunit logs kube-apiserver -n 200\n  kubeunit logs etcd kube-apiserver --since '5 min ago'"
    )]
    Logs {
        #[command(flatten)]
        target: Target,
        /// Components (etcd, kube-apiserver, ...).
        components: Vec<String>,
        /// Follow.
        #[arg(short, long)]
        follow: bool,
        /// Number of lines.
        #[arg(short = 'n', long, default_value_t = 100)]
        lines: u64,
        /// Only entries since this time (journalctl --since syntax).
        #[arg(long)]
        since: Option<String>,
    },
    /// Stop one component and start it again from its unit file (picks up edits and swapped binaries).
    #[command(
        after_help = "Example:\n  cp _output/bin/kube-apiserver /usr/local/bin/ && kubeunit restart kube-apiserver"
    )]
    Restart {
        #[command(flatten)]
        target: Target,
        component: String,
        /// Seconds to wait until it is healthy again.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// Stop the environment and delete its runtime data (etcd data, logs); --all deletes the state dir.
    Destroy {
        #[command(flatten)]
        target: Target,
        /// Delete the whole state dir, PKI included.
        #[arg(long)]
        all: bool,
    },
    /// Inspect built-in profiles.
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, ...).
    #[command(
        after_help = "Example:\n  kubeunit completion bash > /etc/bash_completion.d/kubeunit"
    )]
    Completion { shell: clap_complete::Shell },
}

#[derive(clap::Args, Debug)]
pub struct GenArgs {
    /// Built-in profile name (dev, control-plane, ci) or a path to a YAML profile [default: dev; with
    /// --check: the state dir's own profile.yaml].
    #[arg(short, long)]
    pub profile: Option<String>,
    /// State directory [default: $KUBEUNIT_STATE_DIR, /var/lib/kubeunit/NAME as root, else $XDG_STATE_HOME/kubeunit/NAME].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Override a profile field by dotted path; repeatable (e.g. --set ports.apiserver=7443).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Directory of the component binaries (same as --set binDir=DIR).
    #[arg(long, env = "KUBEUNIT_BIN_DIR", value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Derive every key from this seed: same profile + seed + epoch = byte-identical state dir.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Replace CAs, keys and certificates instead of keeping them.
    #[arg(long)]
    pub force: bool,
    /// Compare the state dir with its manifest and the profile; write nothing; exit 1 on any difference.
    #[arg(long)]
    pub check: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

/// Which environment, and which systemd.
#[derive(clap::Args, Debug)]
pub struct Target {
    /// State directory [default: $KUBEUNIT_STATE_DIR, /var/lib/kubeunit/ENV as root, else $XDG_STATE_HOME/kubeunit/ENV].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Environment name, for the default state dir.
    #[arg(short, long = "env", value_name = "NAME", default_value = "dev")]
    pub env: String,
    /// Use the calling user's systemd instead of the system manager.
    #[arg(long, conflicts_with = "bus")]
    pub user: bool,
    /// D-Bus address of the systemd to use (e.g. a container's system bus socket).
    #[arg(long, env = "KUBEUNIT_BUS_ADDRESS", value_name = "ADDRESS")]
    pub bus: Option<String>,
}

impl Target {
    fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| state::default_state_dir(&self.env))
    }

    fn bus(&self) -> Bus {
        match (&self.bus, self.user) {
            (Some(a), _) => Bus::Address(a.clone()),
            (None, true) => Bus::User,
            (None, false) => Bus::System,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum ProfileCommand {
    /// List the built-in profiles.
    List,
    /// Print a profile fully resolved (extends and --set applied).
    Show {
        #[arg(default_value = "dev")]
        profile: String,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
}

/// Run the CLI; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

fn dispatch(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Gen(args) => gen(args),
        Command::Logs {
            target,
            components,
            follow,
            lines,
            since,
        } => logs(&target, &components, follow, lines, since.as_deref()),
        Command::Start { .. }
        | Command::Stop { .. }
        | Command::Status { .. }
        | Command::Restart { .. }
        | Command::Destroy { .. } => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::Other(format!("cannot start the async runtime: {e}")))?;
            rt.block_on(run_systemd_command(cli.command))
        }
        Command::Profile { command } => {
            match command {
                ProfileCommand::List => {
                    for (name, text) in profile::BUILTIN {
                        let about = text
                            .lines()
                            .next()
                            .unwrap_or("")
                            .trim_start_matches('#')
                            .trim();
                        println!("{name:<15} {about}");
                    }
                }
                ProfileCommand::Show { profile, sets } => {
                    print!("{}", profile::load(&profile, &sets)?.to_yaml())
                }
            }
            Ok(0)
        }
        Command::Completion { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "kubeunit",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
    }
}

fn gen(args: GenArgs) -> Result<i32, Error> {
    let mut sets = Vec::new();
    if let Some(dir) = &args.bin_dir {
        sets.push(format!("binDir={}", dir.display()));
    }
    sets.extend(args.sets.iter().cloned());
    let mut profile: Profile = profile::load(args.profile.as_deref().unwrap_or("dev"), &sets)?;
    let dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| state::default_state_dir(&profile.name));
    // `gen --check` without a profile checks the state dir against the profile it was generated from.
    if args.check && args.profile.is_none() {
        let resolved = dir.join(state::PROFILE);
        if resolved.exists() {
            profile = profile::load_resolved(&resolved)?;
        }
    }
    let plan = Plan::new(profile, &dir)?;
    let opts = Options {
        entropy: args.seed.map(Entropy::Seed).unwrap_or(Entropy::Os),
        force: args.force,
    };
    let mut out = std::io::stdout().lock();
    if args.check {
        let old = Existing::load(&plan.state_dir)?;
        let generated = artifacts::generate(&plan, &old, &opts)?;
        let diffs = state::check(&plan.state_dir, &old, &generated.tree)?;
        if args.output == Output::Json {
            let v = serde_json::json!({ "stateDir": plan.state_dir, "ok": diffs.is_empty(), "differences": diffs });
            let _ = writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            );
        } else if diffs.is_empty() {
            let _ = writeln!(
                out,
                "{}: matches its manifest and profile",
                plan.state_dir.display()
            );
        } else {
            let _ = writeln!(
                out,
                "{}: {} difference(s)",
                plan.state_dir.display(),
                diffs.len()
            );
            for d in &diffs {
                let kind = serde_json::to_value(d.kind).unwrap_or_default();
                let _ = writeln!(out, "  {:<9} {}", kind.as_str().unwrap_or(""), d.path);
            }
            let _ = writeln!(
                out,
                "run `kubeunit gen` to bring the state dir back in line (keys and CAs are kept)"
            );
        }
        return Ok(if diffs.is_empty() { 0 } else { 1 });
    }
    let (generated, summary) = crate::gen(&plan, &opts)?;
    if args.output == Output::Json {
        let v = serde_json::json!({
            "stateDir": plan.state_dir,
            "name": plan.name(),
            "written": summary.written,
            "unchanged": summary.unchanged,
            "removed": summary.removed,
            "certificates": generated.notes,
        });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).unwrap_or_default()
        );
        return Ok(0);
    }
    let count = |w: &str| generated.notes.iter().filter(|n| n.ends_with(w)).count();
    let _ = writeln!(
        out,
        "environment '{}' in {}: {} files written, {} unchanged, {} removed",
        plan.name(),
        plan.state_dir.display(),
        summary.written.len(),
        summary.unchanged,
        summary.removed.len()
    );
    let _ = writeln!(
        out,
        "certificates: {} created, {} reissued, {} kept",
        count(": created"),
        count(": reissued"),
        count(": kept")
    );
    let _ = writeln!(
        out,
        "next: kubeunit start --state-dir {}",
        plan.state_dir.display()
    );
    Ok(0)
}

async fn run_systemd_command(command: Command) -> Result<i32, Error> {
    match command {
        Command::Start {
            target,
            timeout,
            output,
        } => {
            let env = Env::load(&target.state_dir())?;
            let sd = Systemd::connect(&target.bus()).await?;
            let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
            let text = output == Output::Text;
            if text {
                println!(
                    "starting environment '{}' from {}",
                    env.plan.name(),
                    env.plan.state_dir.display()
                );
            }
            let mut progress = |p: environment::Progress| {
                if !text {
                    return;
                }
                match p {
                    // On a terminal, say what is being waited for; in logs, one line per component.
                    environment::Progress::Running { component, seconds } if tty => {
                        println!("  - {component:<26} running after {seconds:>5.2}s, waiting until healthy")
                    }
                    environment::Progress::Running { .. } => {}
                    environment::Progress::Healthy(t) => {
                        let mark = if tty { "\u{2713}" } else { "ok" };
                        println!(
                            "  {mark} {:<26} running after {:>5.2}s, healthy after {:>5.2}s",
                            t.component, t.job_done, t.healthy
                        );
                    }
                }
            };
            let report = environment::start(
                &env,
                &sd,
                std::time::Duration::from_secs(timeout),
                &mut progress,
            )
            .await?;
            if !text {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
                return Ok(0);
            }
            for n in &report.notes {
                println!("  note: {n}");
            }
            if !report.applied.is_empty() {
                println!(
                    "  applied {} addon objects (server-side, from {}/addons)",
                    report.applied.len(),
                    env.plan.state_dir.display()
                );
            }
            let name = env.plan.name();
            let dir_flag = format!("--state-dir {}", env.plan.state_dir.display());
            if report.already_running {
                println!("environment '{name}' is already running; nothing changed (see `kubeunit status {dir_flag}`)");
            } else {
                println!(
                    "environment '{name}' is up in {:.1}s\n",
                    report.total_seconds
                );
            }
            println!(
                "  export KUBECONFIG={}",
                env.plan.path("kubeconfig/admin.kubeconfig")
            );
            println!("  kubectl get --raw /readyz\n");
            println!(
                "logs:    kubeunit logs -f {dir_flag}    (or journalctl -u {} -f)",
                env.plan.slice_name()
            );
            println!("status:  kubeunit status {dir_flag}");
            println!("stop:    kubeunit stop {dir_flag}");
            Ok(0)
        }
        Command::Stop { target } => {
            let env = Env::load(&target.state_dir())?;
            let sd = Systemd::connect(&target.bus()).await?;
            let report = environment::stop(&env, &sd).await?;
            println!(
                "environment '{}' stopped ({} units) in {:.1}s",
                env.plan.name(),
                report.stopped.len(),
                report.seconds
            );
            if !report.busy_ports.is_empty() {
                eprintln!(
                    "warning: ports still in use after stop: {:?}",
                    report.busy_ports
                );
                return Ok(1);
            }
            Ok(0)
        }
        Command::Status { target, output } => {
            let env = Env::load(&target.state_dir())?;
            let sd = Systemd::connect(&target.bus()).await?;
            let rows = environment::status(&env, &sd).await?;
            if output == Output::Json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&rows).unwrap_or_default()
                );
            } else {
                println!(
                    "{:<26} {:<20} {:>8} {:>9} {:>8} {:>8}  HEALTH",
                    "COMPONENT", "STATE", "PID", "MEMORY", "RESTARTS", "UPTIME"
                );
                for r in &rows {
                    let mem = r
                        .memory_bytes
                        .map(|m| format!("{}Mi", m / (1 << 20)))
                        .unwrap_or_else(|| "-".into());
                    let up = r
                        .uptime_seconds
                        .map(human_duration)
                        .unwrap_or_else(|| "-".into());
                    let pid = if r.pid == 0 {
                        "-".to_string()
                    } else {
                        r.pid.to_string()
                    };
                    let health = if r.healthy {
                        "ok".to_string()
                    } else {
                        r.health_detail.clone()
                    };
                    println!(
                        "{:<26} {:<20} {:>8} {:>9} {:>8} {:>8}  {}",
                        r.component,
                        format!("{}/{}", r.active_state, r.sub_state),
                        pid,
                        mem,
                        r.restarts,
                        up,
                        health
                    );
                }
            }
            // Exit code for scripts: 0 all healthy, 3 anything not running or unhealthy (like systemctl is-active).
            Ok(if rows.iter().all(|r| r.healthy) { 0 } else { 3 })
        }
        Command::Restart {
            target,
            component,
            timeout,
        } => {
            let env = Env::load(&target.state_dir())?;
            let sd = Systemd::connect(&target.bus()).await?;
            let t = environment::restart(
                &env,
                &sd,
                &component,
                std::time::Duration::from_secs(timeout),
            )
            .await?;
            println!(
                "{} restarted: running after {:.2}s, healthy after {:.2}s",
                t.component, t.job_done, t.healthy
            );
            Ok(0)
        }
        Command::Destroy { target, all } => {
            let dir = target.state_dir();
            let env = Env::load(&dir)?;
            let sd = Systemd::connect(&target.bus()).await?;
            environment::stop(&env, &sd).await?;
            let doomed = if all {
                env.plan.state_dir.clone()
            } else {
                env.plan.data_dir.clone()
            };
            match std::fs::remove_dir_all(&doomed) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::state(
                        &doomed,
                        format!("cannot delete: {e}"),
                        "check its permissions",
                    ))
                }
            }
            println!(
                "environment '{}' stopped; deleted {}",
                env.plan.name(),
                doomed.display()
            );
            Ok(0)
        }
        _ => Ok(0),
    }
}

fn human_duration(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// `logs`: hand over to journalctl (it pages, follows and formats better than we would).
fn logs(
    target: &Target,
    components: &[String],
    follow: bool,
    lines: u64,
    since: Option<&str>,
) -> Result<i32, Error> {
    let env = Env::load(&target.state_dir())?;
    let mut cmd = std::process::Command::new("journalctl");
    if target.user {
        cmd.arg("--user");
    }
    cmd.args(["--no-hostname", "-o", "short-precise", "-n"])
        .arg(lines.to_string());
    if follow {
        cmd.arg("-f");
    }
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        cmd.arg("--no-pager");
    }
    if let Some(s) = since {
        cmd.args(["--since", s]);
    }
    if components.is_empty() {
        // -u on the slice matches _SYSTEMD_SLICE: every unit of the environment.
        cmd.arg("-u").arg(env.plan.slice_name());
    }
    for name in components {
        let (_, unit) = env.unit(name)?;
        cmd.arg("-u").arg(&unit.name);
    }
    let status = cmd
        .status()
        .map_err(|e| Error::Other(format!("cannot run journalctl: {e}")))?;
    Ok(status.code().unwrap_or(1))
}
