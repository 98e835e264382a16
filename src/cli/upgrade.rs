//! `kubeunit upgrade`: a running environment onto newer binaries, in version-skew order
//! (`ops::upgrade`), after rendering the state dir for them when asked to (`--profile`, `--set`,
//! `--bin-dir`), as `kubeadm upgrade plan` and `apply` do.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::common::{lock_wait, offline, print_json, say, Output, Target};
use crate::error::Error;
use crate::ops::install;
use crate::ops::upgrade::{self, Drain, Event, Targets, UpgradePlan};
use crate::pipeline::{self, request::GenRequest};

pub const AFTER_HELP: &str = "Examples:
  kubeunit upgrade --dry-run --bin-dir ~/k8s/v1.36.3 --set versions.kubernetes=v1.36.3
                                                   # what it would do, in order (kubeadm upgrade plan)
  kubeunit upgrade --bin-dir ~/k8s/v1.36.3 --set versions.kubernetes=v1.36.3
  kubeunit upgrade --profile dev --set versions.kubernetes=v1.36.3   # fetched binaries (kubeunit fetch first)
  kubeunit gen --profile dev --set versions.kubernetes=v1.36.3 && kubeunit upgrade
                                                   # render first, then upgrade what runs
  kubeunit upgrade --drain --bin-dir ~/k8s/v1.36.3 --set versions.kubernetes=v1.36.3
                                                   # installed: drain each node before its kubelet

The order is upstream's version skew policy: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, then node by node kubelet and kube-proxy, each healthy on its new version before the
next. An etcd snapshot (pre-upgrade-*) is taken first. Refused with exit 2, changing nothing: a
downgrade, a skipped minor version, and a new binary that is missing or reports another version than
versions.*. Installed units (kubeunit install) are written again first. An upgrade that stopped
goes on from there when run again. Without --profile, --set and
--bin-dir, it upgrades to what the state dir names now. docs/upgrades.md has the rest.";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Render the state dir from this profile first, as `gen --profile` does (with the same --set
    /// overrides as the gen that made it) [default: with --set or --bin-dir, the state dir's own
    /// profile.yaml].
    #[arg(short, long)]
    pub profile: Option<String>,
    /// Override a profile field for the render (repeatable), e.g. --set versions.kubernetes=v1.36.3.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Directory of the new binaries (same as --set binDir=DIR).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Print what it would do and stop: nothing is rendered, snapshotted or restarted.
    #[arg(long)]
    pub dry_run: bool,
    /// Drain each node before its kubelet is upgraded and uncordon it after (kubectl drain
    /// --ignore-daemonsets --delete-emptydir-data), as kubeadm's upgrade does. For installed
    /// environments (kubeunit install), on a host with the admin kubeconfig.
    #[arg(long)]
    pub drain: bool,
    /// Seconds each component may take to be healthy again (and each node's drain).
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Output format (json: the plan, before anything happens).
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub async fn exec(args: Args) -> Result<i32, Error> {
    let dir = crate::spec::host::local_state_dir(&args.target.state_dir())?;
    let sets: Vec<String> = args
        .bin_dir
        .iter()
        .map(|d| format!("binDir={}", d.display()))
        .chain(args.sets.iter().cloned())
        .collect();
    let render = args.profile.is_some() || !sets.is_empty();
    let env = args.target.env()?;
    if render && !env.plan.profile.host.is_empty() {
        return Err(Error::Usage {
            message: format!(
                "{} is host '{}' of an environment across hosts: its state dir is rendered with the others",
                dir.display(),
                env.plan.profile.host
            ),
            fix: "render every host's dir where the environment was generated (kubeunit gen --set versions.kubernetes=...), import this host's here (kubeunit import DIR), then run `kubeunit upgrade` without --profile, --set and --bin-dir (docs/upgrades.md)".into(),
        });
    }
    // One upgrade at a time, from its plan to its end: a second waits here, before it renders
    // anything (the render takes the state dir's own lock, and lets it go).
    let _upgrade_lock = if args.dry_run {
        None
    } else {
        Some(upgrade::lock(&env.plan.data_dir, lock_wait()?, &mut say)?)
    };
    let sd = args.target.systemd(&env).await?;
    let installed = crate::run::installed(&env.plan, &sd).await?;
    let timeout = Duration::from_secs(args.timeout);
    // The new profile, asked before anything is written: a refusal leaves the state dir as it is.
    let new_profile = render
        .then(|| new_profile(&args, &dir, &sets))
        .transpose()?;
    // Refused before anything is written: kubectl beside the new kubelet (the one drain_for
    // takes once the state dir names it).
    if args.drain {
        let kubelet = new_profile.as_ref().and_then(|p| {
            crate::components::find(crate::components::KUBELET).map(|c| c.binary_path_in(p))
        });
        Drain::beside(&env, installed, true, timeout, kubelet)?;
    }
    let targets = match &new_profile {
        Some(p) => Targets::Profile(p),
        None => Targets::Units,
    };
    let plan = upgrade::plan(&env, &sd, targets).await?;
    match args.output {
        Output::Json => print_json(&plan),
        Output::Text => print_plan(&plan, &dir),
    }
    if args.dry_run {
        return Ok(0);
    }
    // Nothing to restart: nothing is rendered either (an upgrade that stopped after its last
    // restart only leaves its record, which goes now).
    let nothing = plan.upgrades() == 0;
    if render && !nothing {
        render_state_dir(&args, &dir, &sets)?;
    }
    // From here on the state dir's units are what runs; the lock keeps other writers out.
    let (env, _lock) = args.target.env_locked()?;
    // Installed units are copies of the state dir's: written again, a restart starts the new.
    if installed && !nothing {
        if let Some(report) = install::rewrite_installed(&env, &sd).await? {
            say(&format!(
                "installed units written again in {}",
                report.unit_dir.display()
            ));
        }
    }
    let plan = if nothing {
        plan
    } else {
        upgrade::plan(&env, &sd, Targets::Units).await?
    };
    let drain = drain_for(&args, &env, &plan, installed, timeout)?;
    let done_already = plan.upgrades() == 0;
    let t0 = Instant::now();
    let mut progress = |e: Event| say(&progress_line(e));
    upgrade::apply(&env, &sd, &plan, timeout, drain.as_ref(), &mut progress).await?;
    match args.output {
        Output::Json => {}
        Output::Text if done_already => {
            println!("nothing to upgrade: every running component runs its target")
        }
        Output::Text => println!(
            "upgraded environment '{}' in {:.1}s",
            plan.environment,
            t0.elapsed().as_secs_f64()
        ),
    }
    Ok(0)
}

/// `--drain`'s drain, or only the uncordon of nodes an earlier run drained (with or without it).
fn drain_for(
    args: &Args,
    env: &crate::run::Env,
    plan: &UpgradePlan,
    installed: bool,
    timeout: Duration,
) -> Result<Option<Drain>, Error> {
    let drained = plan
        .resuming
        .as_ref()
        .is_some_and(|r| !r.drained.is_empty());
    (args.drain || drained)
        .then(|| Drain::for_env(env, installed, args.drain, timeout))
        .transpose()
}

/// What `apply` says, as a line of progress.
fn progress_line(e: Event) -> String {
    match e {
        Event::Snapshot(p) => format!("etcd snapshot {} taken", p.display()),
        Event::NoSnapshot(why) => why.to_string(),
        Event::Begin(s, n, of) => format!(
            "[{n}/{of}] {}: {} -> {}",
            s.component,
            word(&s.running),
            word(&s.target)
        ),
        Event::Already(s) => format!(
            "      {} runs {} already (it came back with one before it)",
            s.component,
            word(&s.target)
        ),
        Event::Drained(node) => format!("      node {node} drained"),
        Event::Uncordoned(node) => format!("      node {node} uncordoned"),
        Event::Done(s, took) => format!(
            "      {} healthy on {} after {:.1}s",
            s.component,
            word(&s.target),
            took.as_secs_f64()
        ),
    }
}

fn word(v: &Option<crate::ops::upgrade::Version>) -> &str {
    v.as_ref().map(|v| v.word.as_str()).unwrap_or("-")
}

/// The profile the state dir is rendered from: `--profile`'s, else its own, with the sets.
fn new_profile(
    args: &Args,
    dir: &std::path::Path,
    sets: &[String],
) -> Result<crate::spec::Profile, Error> {
    match &args.profile {
        Some(p) => {
            pipeline::profile_with_binaries(p, sets, crate::fetch::cache::default_dir().as_deref())
        }
        None => pipeline::resolved_profile_with(dir, sets),
    }
}

/// Render the state dir for the new binaries: from `--profile` as `gen` does, else from its own
/// profile with the sets on top (as `restart --binary` does).
fn render_state_dir(args: &Args, dir: &std::path::Path, sets: &[String]) -> Result<(), Error> {
    match &args.profile {
        Some(profile) => {
            let req = GenRequest {
                profile: Some(profile.clone()),
                state_dir: Some(dir.to_path_buf()),
                sets: sets.to_vec(),
                offline: offline()?,
                lock_wait: lock_wait()?,
                ..GenRequest::default()
            };
            pipeline::request::gen(&req, &mut say)?;
        }
        None => {
            let profile = pipeline::resolved_profile_with(dir, sets)?;
            pipeline::regen(profile, dir, lock_wait()?, &mut say)?;
        }
    }
    say(&format!(
        "state dir {} rendered for the new versions",
        dir.display()
    ));
    Ok(())
}

fn print_plan(plan: &UpgradePlan, dir: &std::path::Path) {
    println!(
        "upgrade of environment '{}' ({}), in this order:",
        plan.environment,
        dir.display()
    );
    println!(
        "  {:<32} {:<16} {:<16} ACTION",
        "COMPONENT", "RUNNING", "TARGET"
    );
    for s in &plan.steps {
        println!(
            "  {:<32} {:<16} {:<16} {}",
            s.component,
            word(&s.running),
            word(&s.target),
            s.action.as_str()
        );
    }
    if !plan.api_servers_elsewhere.is_empty() {
        let others: Vec<String> = plan
            .api_servers_elsewhere
            .iter()
            .map(|a| format!("{} {}", a.host, a.version.word))
            .collect();
        println!(
            "the other hosts' API servers (the skew policy holds against them): {}",
            others.join(", ")
        );
    }
    if let Some(r) = &plan.resuming {
        println!(
            "an upgrade stopped here before: going on from where it stopped{}",
            r.snapshot
                .as_ref()
                .map(|s| format!(" (its snapshot: {})", s.display()))
                .unwrap_or_default()
        );
    }
}
