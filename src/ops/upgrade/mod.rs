//! `upgrade`: bring a running environment to the versions its state dir names, one component at a
//! time in the order of upstream's version skew policy
//! (<https://kubernetes.io/releases/version-skew-policy/#supported-component-upgrade-order>): etcd,
//! kube-apiserver, then kube-controller-manager, kube-scheduler and cloud-controller-manager, then
//! node by node its kubelet and kube-proxy. That is the component table's order for the cluster's
//! components, with the per-node ones grouped by node after them. Each is healthy again, and runs
//! its new version, before the next goes.
//!
//! What runs is asked of the processes themselves (`/proc/PID/exe`), so an upgrade that stopped
//! half-way resumes where it stopped: what already runs its new version is left alone. Before the
//! first restart an etcd snapshot is taken; a record in the data dir says which, and that an
//! upgrade is under way.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

mod drain;

use crate::components::{self, Instance};
use crate::error::Error;
use crate::ops::snapshot::{self, SaveRequest};
pub use crate::run::versions::Version;
use crate::run::versions::{self, Refusal};
use crate::run::Env;
use crate::spec::Profile;
use crate::systemd::Systemd;
use crate::unit::UnitFile;
pub use drain::Drain;

/// The record of an upgrade under way, in the data dir (gone once it has finished).
pub const RECORD: &str = "upgrade.json";
/// The lock an upgrade holds from its plan to its end, in the data dir (flock; empty): a second
/// upgrade waits for it, or fails naming the holder, before it renders anything.
pub const LOCK_FILE: &str = "upgrade.lock";
/// What the snapshot taken before an upgrade is called (`snapshot list`).
pub const SNAPSHOT_PREFIX: &str = "pre-upgrade";

/// Where the new versions' binaries are: the state dir's unit files (what `start` and `restart`
/// run), or a profile not rendered yet (`upgrade --set ...` asks before it writes anything).
pub enum Targets<'p> {
    Units,
    Profile(&'p Profile),
}

/// One instance of a component that follows a Kubernetes or etcd version.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// As `kubeunit status` names it (`kubelet@worker-1`).
    pub component: String,
    /// The `versions` field it follows (`kubernetes`, `etcd`).
    pub follows: &'static str,
    /// What its process runs; `None` when it does not run.
    #[serde(serialize_with = "word")]
    pub running: Option<Version>,
    #[serde(serialize_with = "word")]
    pub target: Option<Version>,
    pub action: Action,
    /// The node a per-node component's instance runs for (what `--drain` drains first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

fn word<S: serde::Serializer>(v: &Option<Version>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&v.word),
        None => s.serialize_none(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Runs its target already.
    Keep,
    /// Restarted on its new binary.
    Upgrade,
    /// Not running: a later `start` starts its new binary. (Unless an upgrade under way stopped
    /// it: that one's next run starts it, an upgrade.)
    NotRunning,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Keep => "keep",
            Action::Upgrade => "upgrade",
            Action::NotRunning => "not running",
        }
    }
}

/// What an upgrade of the environment would do, in order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePlan {
    pub environment: String,
    pub steps: Vec<Step>,
    /// An upgrade that stopped: the record it left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resuming: Option<Record>,
    /// Across hosts: every other control-plane host's API server, as it answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_servers_elsewhere: Vec<ApiServerElsewhere>,
}

/// Another control-plane host's API server and the version it says it runs (`/version`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiServerElsewhere {
    pub host: String,
    pub url: String,
    #[serde(serialize_with = "version_word")]
    pub version: Version,
}

fn version_word<S: serde::Serializer>(v: &Version, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.word)
}

impl UpgradePlan {
    pub fn upgrades(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.action == Action::Upgrade)
            .count()
    }
}

/// What an upgrade under way keeps in the data dir: its targets and the snapshot it took.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The snapshot taken before the first restart (`None`: no etcd runs here).
    pub snapshot: Option<PathBuf>,
    /// Each component that changes, with the version it goes from and to.
    pub steps: Vec<(String, String, String)>,
    /// Nodes drained and not uncordoned yet (`--drain`): the next run uncordons them once their
    /// kubelet is upgraded, with or without `--drain`.
    #[serde(default)]
    pub drained: Vec<String>,
}

/// The environment's versioned instances in the order they are upgraded: the cluster's in table
/// order, then node by node the per-node ones, in table order.
fn in_skew_order(env: &Env) -> Vec<&(Instance<'static>, UnitFile)> {
    let mut units: Vec<_> = env
        .units
        .iter()
        .filter(|(i, _)| i.component.follows().is_some())
        .collect();
    // A stable sort keeps the table's order within the cluster's and within each node's.
    units.sort_by_key(|(i, _)| {
        if i.component.per_node {
            1 + i.plan.node_index
        } else {
            0
        }
    });
    units
}

/// Ask every versioned instance what it runs and what its new binary is, and say what an upgrade
/// does. Refused (exit 2, nothing changed) when a new binary is missing or reports no version or
/// another than the profile pins, and when going to it is not an upgrade the skew policy supports.
pub async fn plan(env: &Env, sd: &Systemd, targets: Targets<'_>) -> Result<UpgradePlan, Error> {
    let resuming = read_record(&env.plan.data_dir)?;
    let mut steps = Vec::new();
    for (i, unit) in in_skew_order(env) {
        let c = i.component;
        let follows = c.follows().unwrap_or_default();
        let (path, lead) = match targets {
            Targets::Units => {
                let (path, argv, _) = unit.exec_start().ok_or_else(|| {
                    Error::Internal(format!("{}: a unit file without ExecStart=", unit.name))
                })?;
                (PathBuf::from(path), versions::leading(argv))
            }
            Targets::Profile(p) => (c.binary_path_in(p), p.component(c.name).binary_args.clone()),
        };
        let pinned = match targets {
            Targets::Units => (c.version)(&env.plan.profile.versions).to_string(),
            Targets::Profile(p) => (c.version)(&p.versions).to_string(),
        };
        let target = versions::of_binary(&path, &lead, c.go_module)
            .map_err(|why| missing_binary(&i.name, &path, follows, &pinned, &why))?;
        if !pinned.is_empty()
            && !crate::run::preflight::is_version(&target.word, pinned.trim_start_matches('v'))
        {
            return Err(Error::Usage {
                message: format!(
                    "{}: {} reports {target}, and versions.{follows} is {pinned}",
                    i.name,
                    path.display()
                ),
                fix: format!("put the binaries of {pinned} there, or set versions.{follows} to what they are"),
            });
        }
        let state = sd.state(&unit.name).await?;
        let pid = state
            .filter(|s| s.active_state.is_running())
            .map(|s| s.main_pid)
            .filter(|p| *p != 0);
        let running = match pid {
            None => None,
            Some(pid) => Some(
                versions::of_process(pid, &lead, c.go_module).map_err(|why| Error::Preflight {
                    message: format!("{}: cannot tell what its process {pid} runs: {why}", i.name),
                    fix: format!("see `kubeunit status` and `kubeunit logs {}`", i.name),
                })?,
            ),
        };
        // Stopped by the upgrade that stopped half-way through its restart: only what its record
        // names (a component the user stopped stays stopped).
        let recorded = resuming
            .as_ref()
            .is_some_and(|r| r.steps.iter().any(|(c, _, _)| *c == i.name));
        let action = match &running {
            None if recorded => Action::Upgrade,
            None => Action::NotRunning,
            Some(r) if *r == target => Action::Keep,
            Some(_) => Action::Upgrade,
        };
        steps.push(Step {
            component: i.name.clone(),
            follows,
            running,
            target: Some(target),
            action,
            node: c.per_node.then(|| i.plan.node().name.clone()),
        });
    }
    if let Some(record) = &resuming {
        refuse_another_target(record, &steps, &env.plan.data_dir.join(RECORD))?;
    }
    refuse_without_snapshot(&steps, resuming.as_ref())?;
    let plan = UpgradePlan {
        environment: env.plan.name().to_string(),
        steps,
        resuming,
        api_servers_elsewhere: api_servers_elsewhere(&env.plan)?,
    };
    refuse_unsupported(&plan)?;
    Ok(plan)
}

/// Across hosts, every other control-plane host's API server, asked for its version (`/version`)
/// before anything happens: the skew policy holds for the whole environment, and a worker host has
/// no API server of its own to hold its kubelet to. One that does not answer refuses the upgrade:
/// what it runs is not known.
fn api_servers_elsewhere(plan: &crate::spec::Plan) -> Result<Vec<ApiServerElsewhere>, Error> {
    let others: Vec<_> = plan
        .hosts
        .iter()
        .enumerate()
        .filter(|(i, h)| {
            *i != plan.host_index
                && h.roles
                    .contains(&crate::spec::profile::HostRole::ControlPlane)
        })
        .map(|(_, h)| h)
        .collect();
    if others.is_empty() {
        return Ok(vec![]);
    }
    let client = crate::run::probe::api_client(plan, Duration::from_secs(5))?;
    let port = components::port::APISERVER.of(plan);
    others
        .into_iter()
        .map(|h| {
            let url = format!(
                "https://{}/version",
                crate::spec::plan::host_port(h.address.into(), port)
            );
            let unanswered = |why: String| Error::Preflight {
                message: format!(
                    "host {}'s API server did not say what it runs ({url}): {why}",
                    h.name
                ),
                fix: format!(
                    "start it (kubeunit start on {}), then upgrade again: every API server's version is checked against the skew policy before anything changes",
                    h.name
                ),
            };
            let body = client
                .get(&url)
                .call()
                .map_err(|e| unanswered(e.to_string()))?
                .body_mut()
                .read_to_string()
                .map_err(|e| unanswered(e.to_string()))?;
            let said = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["gitVersion"].as_str().map(String::from));
            let version = said
                .as_deref()
                .and_then(Version::parse)
                .ok_or_else(|| {
                    let start: String = body.chars().take(200).collect();
                    unanswered(format!("no gitVersion in {start:?}"))
                })?;
            Ok(ApiServerElsewhere {
                host: h.name.clone(),
                url,
                version,
            })
        })
        .collect()
}

/// An upgrade starts with an etcd snapshot: where etcd runs here and is stopped, none can be taken,
/// and the upgrade is refused now, before anything is rendered or written (not after).
fn refuse_without_snapshot(steps: &[Step], resuming: Option<&Record>) -> Result<(), Error> {
    let upgrades = steps.iter().any(|s| s.action == Action::Upgrade);
    let etcd_stopped = steps
        .iter()
        .any(|s| s.component == components::ETCD && s.running.is_none());
    if upgrades && resuming.is_none() && etcd_stopped {
        return Err(Error::Preflight {
            message: "etcd is not running: no snapshot can be taken before the upgrade".into(),
            fix: "start the environment first: kubeunit start".into(),
        });
    }
    Ok(())
}

/// An upgrade that stopped half-way, and this one goes elsewhere: going on would take that one's
/// snapshot as the way back and start what it stopped, so it is refused until that upgrade is
/// finished, or its record is gone (`snapshot restore` removes it).
fn refuse_another_target(record: &Record, steps: &[Step], path: &Path) -> Result<(), Error> {
    for (component, _, to) in &record.steps {
        let Some(step) = steps.iter().find(|s| s.component == *component) else {
            continue;
        };
        let same = match (Version::parse(to), &step.target) {
            (Some(recorded), Some(target)) => recorded.cmp(target).is_eq(),
            _ => false,
        };
        if !same {
            let target = step.target.as_ref().map(|t| t.word.as_str()).unwrap_or("-");
            return Err(Error::Usage {
                message: format!(
                    "an upgrade that took {component} to {to} stopped half-way ({}), and this one takes it to {target}",
                    path.display()
                ),
                fix: format!(
                    "finish that upgrade first (kubeunit upgrade with the binaries of {to}); or, if the environment went back to its snapshot another way, delete {}",
                    path.display()
                ),
            });
        }
    }
    Ok(())
}

/// The new binary of `component` is not there or says no version.
fn missing_binary(component: &str, path: &Path, follows: &str, pinned: &str, why: &str) -> Error {
    let in_cache = crate::fetch::cache::default_dir().is_some_and(|cache| path.starts_with(cache));
    let fix = if in_cache {
        format!(
            "fetch it first: kubeunit fetch --set versions.{follows}={}",
            if pinned.is_empty() { "VERSION" } else { pinned }
        )
    } else {
        "put the new binaries there (scripts/build-test-binaries.sh builds the pinned ones), or name where they are with --bin-dir".to_string()
    };
    Error::Usage {
        message: format!("{component}: its new binary {}: {why}", path.display()),
        fix,
    }
}

/// Downgrades, skipped minors, and a Kubernetes component the plan would leave outside its skew
/// against kube-apiserver (upstream's version skew policy, by minor version).
fn refuse_unsupported(plan: &UpgradePlan) -> Result<(), Error> {
    for s in &plan.steps {
        let (Some(from), Some(to)) = (&s.running, &s.target) else {
            continue;
        };
        let Some(why) = versions::refusal(from, to) else {
            continue;
        };
        let fix = match why {
            Refusal::Downgrade => format!(
                "kubeunit does not downgrade a running environment: to go back, stop it and restore the snapshot taken before its upgrade with the old binaries (`kubeunit snapshot list`, docs/upgrades.md), or destroy it (kubeunit destroy --state-dir ...) and generate it again for {to}"
            ),
            Refusal::SkippedMinor => format!(
                "upgrade one minor version at a time: first to v{}.{}.x, then on",
                from.major,
                from.minor + 1
            ),
            Refusal::OtherMajor => "kubeunit upgrades within one major version".to_string(),
        };
        return Err(Error::Usage {
            message: format!("{}: going from {from} to {to} {why}", s.component),
            fix,
        });
    }
    // Where the plan leaves each component (its target, else what runs) against the API servers:
    // API servers within their skew of the newest of the whole environment (this host's as the
    // plan leaves them, the other hosts' as they answered); every other component within its skew
    // of the oldest it talks to: this host's own, else (a host without one, whose node reaches
    // them all through its load balancer) every other host's. By minor version.
    let name_of = |component: &str| component.split('@').next().unwrap_or_default().to_string();
    let after = |s: &Step| s.target.clone().or_else(|| s.running.clone());
    let here: Vec<Version> = plan
        .steps
        .iter()
        .filter(|s| name_of(&s.component) == components::KUBE_APISERVER)
        .filter_map(after)
        .collect();
    let there: Vec<Version> = plan
        .api_servers_elsewhere
        .iter()
        .map(|a| a.version.clone())
        .collect();
    let Some(newest) = here.iter().chain(&there).max() else {
        return Ok(());
    };
    let reached = if here.is_empty() { &there } else { &here };
    let Some(oldest) = reached.iter().min() else {
        return Ok(());
    };
    let checked = plan
        .steps
        .iter()
        .filter_map(|s| after(s).map(|v| (s.component.clone(), "would run", v)))
        .chain(plan.api_servers_elsewhere.iter().map(|a| {
            (
                format!("{} on host {}", components::KUBE_APISERVER, a.host),
                "runs",
                a.version.clone(),
            )
        }));
    for (component, runs, version) in checked {
        let name = name_of(component.split(' ').next().unwrap_or_default());
        let Some(skew) = components::find(&name).and_then(|c| c.skew) else {
            continue;
        };
        let api = if name == components::KUBE_APISERVER {
            newest
        } else {
            oldest
        };
        if let Some(why) = versions::skew_refusal(&version, api, skew) {
            // Another host's, named.
            let host = plan
                .api_servers_elsewhere
                .iter()
                .find(|a| a.version == *api && !here.contains(api))
                .map(|a| format!(" (host {})", a.host))
                .unwrap_or_default();
            return Err(Error::Usage {
                message: format!("{component} {runs} {version}, {why} kube-apiserver's {api}{host}"),
                fix: "give every Kubernetes component binaries of one version (binDir), or upgrade one minor version at a time, control plane first (docs/upgrades.md: upstream's version skew policy)".into(),
            });
        }
    }
    Ok(())
}

/// What `apply` says as it goes.
pub enum Event<'a> {
    Snapshot(&'a Path),
    NoSnapshot(&'a str),
    /// A step begins: its number (from 1) of how many.
    Begin(&'a Step, usize, usize),
    /// It runs its target already: it came back with one restarted before it.
    Already(&'a Step),
    Done(&'a Step, Duration),
    Drained(&'a str),
    Uncordoned(&'a str),
}

/// Carry out `plan`: the snapshot (unless a record says one was taken), then each upgrade in turn,
/// healthy and on its new version before the next. With `drain`, each node is drained before its
/// first step and uncordoned after its last (`drain.nodes` false: only what an earlier run drained
/// is uncordoned). A failure says where it stopped and how to go on or back.
pub async fn apply(
    env: &Env,
    sd: &Systemd,
    plan: &UpgradePlan,
    timeout: Duration,
    drain: Option<&Drain>,
    say: &mut dyn FnMut(Event),
) -> Result<(), Error> {
    let todo: Vec<&Step> = plan
        .steps
        .iter()
        .filter(|s| s.action == Action::Upgrade)
        .collect();
    let data_dir = &env.plan.data_dir;
    if todo.is_empty() {
        if let Some(record) = &plan.resuming {
            let mut record = record.clone();
            uncordon_left(data_dir, &mut record, drain, say)?;
        }
        remove_record(data_dir)?;
        return Ok(());
    }
    let mut record = match &plan.resuming {
        Some(record) => record.clone(),
        None => {
            let taken = take_snapshot(env, sd, say).await?;
            let record = Record {
                snapshot: taken,
                steps: todo
                    .iter()
                    .map(|s| {
                        let w = |v: &Option<Version>| {
                            v.as_ref().map(|v| v.word.clone()).unwrap_or_default()
                        };
                        (s.component.clone(), w(&s.running), w(&s.target))
                    })
                    .collect(),
                drained: vec![],
            };
            write_record(data_dir, &record)?;
            record
        }
    };
    let snapshot = record.snapshot.clone();
    for (n, step) in todo.iter().enumerate() {
        say(Event::Begin(step, n + 1, todo.len()));
        let stopped = |e: String| stopped_at(step, n + 1, todo.len(), snapshot.as_deref(), e);
        if let (Some(node), Some(d)) = (&step.node, drain.filter(|d| d.nodes)) {
            if !record.drained.contains(node) {
                // In the record before the drain: a kill meanwhile leaves it to be uncordoned.
                record.drained.push(node.clone());
                write_record(data_dir, &record)?;
                d.drain(node).map_err(|e| stopped(e.to_string()))?;
                say(Event::Drained(node));
            }
        }
        let (i, unit) = env.unit(&step.component)?;
        // A transient unit's dependents come back with what they need (`restart`): it may run
        // its new version already.
        if running_version(sd, i, unit).await? == step.target {
            say(Event::Already(step));
        } else {
            let t0 = Instant::now();
            crate::ops::restart(env, sd, &step.component, timeout)
                .await
                .map_err(|e| stopped(e.to_string()))?;
            let now = running_version(sd, i, unit).await?;
            if now != step.target {
                return Err(stopped(format!(
                    "it runs {} after its restart, not {}",
                    now.map(|v| v.word).unwrap_or_else(|| "nothing".into()),
                    step.target
                        .as_ref()
                        .map(|v| v.word.as_str())
                        .unwrap_or_default()
                )));
            }
            say(Event::Done(step, t0.elapsed()));
        }
        // Its node's last step: it takes pods again.
        let node_done = step
            .node
            .as_ref()
            .filter(|node| !todo[n + 1..].iter().any(|s| s.node.as_ref() == Some(node)));
        if let Some(node) = node_done.filter(|node| record.drained.contains(node)) {
            uncordon(data_dir, &mut record, node, drain, say)
                .map_err(|e| stopped(e.to_string()))?;
        }
    }
    uncordon_left(data_dir, &mut record, drain, say)?;
    remove_record(data_dir)
}

/// Uncordon `node`, drained by this run or an earlier one, and say so in the record.
fn uncordon(
    data_dir: &Path,
    record: &mut Record,
    node: &str,
    drain: Option<&Drain>,
    say: &mut dyn FnMut(Event),
) -> Result<(), Error> {
    let d = drain.ok_or_else(|| {
        Error::Internal(format!(
            "node {node} is drained, and no kubectl to uncordon it"
        ))
    })?;
    d.uncordon(node)?;
    record.drained.retain(|n| n != node);
    write_record(data_dir, record)?;
    say(Event::Uncordoned(node));
    Ok(())
}

/// The nodes an earlier run drained whose steps were all done before this one.
fn uncordon_left(
    data_dir: &Path,
    record: &mut Record,
    drain: Option<&Drain>,
    say: &mut dyn FnMut(Event),
) -> Result<(), Error> {
    for node in record.drained.clone() {
        uncordon(data_dir, record, &node, drain, say)?;
    }
    Ok(())
}

/// What an instance's process runs now (`None`: it does not run, or cannot be asked).
async fn running_version(
    sd: &Systemd,
    i: &Instance<'static>,
    unit: &UnitFile,
) -> Result<Option<Version>, Error> {
    let lead = unit
        .exec_start()
        .map(|(_, argv, _)| versions::leading(argv))
        .unwrap_or_default();
    Ok(sd
        .state(&unit.name)
        .await?
        .filter(|s| s.active_state.is_running() && s.main_pid != 0)
        .and_then(|s| versions::of_process(s.main_pid, &lead, i.component.go_module).ok()))
}

fn stopped_at(step: &Step, n: usize, of: usize, snapshot: Option<&Path>, why: String) -> Error {
    let back = match snapshot {
        Some(s) => format!(
            "; to go back instead, stop the environment and restore {} with the old binaries (docs/upgrades.md)",
            s.display()
        ),
        None => String::new(),
    };
    Error::Start(format!(
        "upgrade stopped at {} (step {n} of {of}): {why}\n  fix: see `kubeunit logs {}`, then run the same `kubeunit upgrade` again: it goes on from there{back}",
        step.component, step.component
    ))
}

/// The snapshot before the first restart, when etcd runs here.
async fn take_snapshot(
    env: &Env,
    sd: &Systemd,
    say: &mut dyn FnMut(Event),
) -> Result<Option<PathBuf>, Error> {
    let etcd = env
        .units
        .iter()
        .find(|(i, _)| i.component.name == components::ETCD);
    let Some((_, unit)) = etcd else {
        say(Event::NoSnapshot(
            "no etcd runs here (take one where it runs: kubeunit snapshot save)",
        ));
        return Ok(None);
    };
    if !sd
        .state(&unit.name)
        .await?
        .is_some_and(|s| s.active_state.is_running())
    {
        return Err(Error::Preflight {
            message: "etcd is not running: no snapshot can be taken before the upgrade".into(),
            fix: "start the environment first: kubeunit start".into(),
        });
    }
    let report = snapshot::save(
        &env.plan,
        &SaveRequest {
            path: None,
            prefix: SNAPSHOT_PREFIX,
            prune_to: None,
        },
    )?;
    say(Event::Snapshot(&report.snapshot.path));
    Ok(Some(report.snapshot.path))
}

/// The record of an upgrade under way; `None` without one. One that cannot be read is ignored:
/// the versions the processes run say what is left to do, only the snapshot's name is lost.
fn read_record(data_dir: &Path) -> Result<Option<Record>, Error> {
    let path = data_dir.join(RECORD);
    let small = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() < 1 << 20);
    Ok(small
        .then(|| std::fs::read(&path).ok())
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok()))
}

/// Written whole or not at all (a temporary file renamed over it), 0600.
fn write_record(data_dir: &Path, record: &Record) -> Result<(), Error> {
    use std::io::Write;
    let path = data_dir.join(RECORD);
    let json = serde_json::to_vec_pretty(record)
        .map_err(|e| Error::Internal(format!("upgrade record: {e}")))?;
    let mut tmp =
        tempfile::NamedTempFile::new_in(data_dir).map_err(Error::io(data_dir, "write"))?;
    tmp.write_all(&json)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(Error::io(&path, "write"))?;
    tmp.persist(&path)
        .map_err(|e| e.error)
        .map_err(Error::io(&path, "write"))?;
    Ok(())
}

/// Take the upgrade lock of the environment whose data dir is `data_dir` (made, 0700, when the
/// environment never ran), waiting up to `wait` and telling `on_wait` whom it waits for.
pub fn lock(
    data_dir: &Path,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<crate::state::Lock, Error> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir)
        .map_err(Error::io(data_dir, "create"))?;
    let (_, lock) = crate::state::lock::acquire_file(
        data_dir,
        LOCK_FILE,
        crate::state::lock::Access::Exclusive,
        true,
        wait,
        on_wait,
    )?
    .ok_or_else(|| Error::Internal("no upgrade lock file after creating it".into()))?;
    Ok(lock)
}

/// The record of an upgrade that stopped, gone: its environment went back (`snapshot restore`).
/// Whether there was one.
pub fn forget_record(data_dir: &Path) -> Result<bool, Error> {
    let there = std::fs::symlink_metadata(data_dir.join(RECORD)).is_ok();
    remove_record(data_dir)?;
    Ok(there)
}

fn remove_record(data_dir: &Path) -> Result<(), Error> {
    let path = data_dir.join(RECORD);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&path, "delete")(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(component: &str, follows: &'static str, from: &str, to: &str) -> Step {
        let running = Version::parse(from);
        let target = Version::parse(to);
        let action = if running.is_none() {
            Action::NotRunning
        } else if running == target {
            Action::Keep
        } else {
            Action::Upgrade
        };
        Step {
            component: component.into(),
            follows,
            running,
            target,
            action,
            node: None,
        }
    }

    fn plan(steps: Vec<Step>) -> UpgradePlan {
        UpgradePlan {
            environment: "dev".into(),
            steps,
            resuming: None,
            api_servers_elsewhere: vec![],
        }
    }

    #[test]
    fn downgrades_skipped_minors_and_a_kubelet_newer_than_its_api_server_are_refused() {
        let ok = plan(vec![
            step("etcd", "etcd", "3.6.16", "3.6.16"),
            step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3"),
            step("kubelet", "kubernetes", "v1.35.4", "v1.36.3"),
            // Half-way through an upgrade: already there.
            step("kube-proxy", "kubernetes", "v1.36.3", "v1.36.3"),
            step("kubelet@worker-1", "kubernetes", "", "v1.36.3"),
        ]);
        assert!(refuse_unsupported(&ok).is_ok());
        assert_eq!(ok.upgrades(), 2);
        // By minor version, not patch; a kubelet up to three minors behind, a pre-release on.
        for steps in [
            vec![
                step("kube-apiserver", "kubernetes", "v1.36.0", "v1.36.0"),
                step("kubelet", "kubernetes", "v1.36.0", "v1.36.3"),
            ],
            vec![
                step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3"),
                step("kubelet@worker-1", "kubernetes", "v1.33.1", "v1.33.1"),
                step(
                    "kube-controller-manager",
                    "kubernetes",
                    "v1.35.4",
                    "v1.35.4",
                ),
            ],
            vec![step(
                "kube-apiserver",
                "kubernetes",
                "v1.37.0-rc.9",
                "v1.37.0-rc.10",
            )],
        ] {
            let p = plan(steps);
            assert!(refuse_unsupported(&p).is_ok(), "{:?}", p.steps);
        }
        for (steps, says) in [
            (
                vec![step("kube-apiserver", "kubernetes", "v1.36.3", "v1.35.4")],
                "kube-apiserver: going from v1.36.3 to v1.35.4 is a downgrade",
            ),
            (
                vec![step("etcd", "etcd", "3.6.16", "3.5.21")],
                "etcd: going from 3.6.16 to 3.5.21 is a downgrade",
            ),
            (
                vec![
                    step("kube-apiserver", "kubernetes", "v1.36.3", "v1.36.3"),
                    step("kubelet", "kubernetes", "v1.34.1", "v1.36.3"),
                ],
                "kubelet: going from v1.34.1 to v1.36.3 skips a minor version",
            ),
            (
                vec![
                    step("kube-apiserver", "kubernetes", "v1.35.4", "v1.35.4"),
                    step("kubelet", "kubernetes", "", "v1.36.3"),
                ],
                "kubelet would run v1.36.3, 1 minor version newer than (upstream's version skew policy allows 0) kube-apiserver's v1.35.4",
            ),
            (
                // Only the API server goes on: the kubelet left four minors behind it.
                vec![
                    step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3"),
                    step("kubelet@worker-1", "kubernetes", "v1.32.9", "v1.32.9"),
                ],
                "kubelet@worker-1 would run v1.32.9, 4 minor versions older than",
            ),
            (
                vec![
                    step("kube-apiserver", "kubernetes", "v1.36.3", "v1.36.3"),
                    step("kube-scheduler", "kubernetes", "v1.34.2", "v1.34.2"),
                ],
                "kube-scheduler would run v1.34.2, 2 minor versions older than",
            ),
            (
                // API servers of one environment: within one minor of each other.
                vec![
                    step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3"),
                    step("kube-apiserver@cp-2", "kubernetes", "v1.34.9", "v1.34.9"),
                ],
                "kube-apiserver@cp-2 would run v1.34.9, 2 minor versions older than (upstream's version skew policy allows 1) kube-apiserver's v1.36.3",
            ),
        ] {
            let e = refuse_unsupported(&plan(steps)).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    fn elsewhere(apis: &[(&str, &str)]) -> Vec<ApiServerElsewhere> {
        apis.iter()
            .map(|(host, v)| ApiServerElsewhere {
                host: host.to_string(),
                url: format!("https://{host}:6443/version"),
                version: Version::parse(v).unwrap(),
            })
            .collect()
    }

    #[test]
    fn across_hosts_every_api_server_counts_and_a_worker_host_is_held_to_them() {
        let across = |steps: Vec<Step>, apis: &[(&str, &str)]| UpgradePlan {
            api_servers_elsewhere: elsewhere(apis),
            ..plan(steps)
        };
        let worker = || {
            vec![
                step("kubelet", "kubernetes", "v1.35.4", "v1.36.3"),
                step("kube-proxy", "kubernetes", "v1.35.4", "v1.36.3"),
            ]
        };
        // A worker host after the control plane: fine.
        let p = across(worker(), &[("cp-1", "v1.36.3"), ("cp-2", "v1.36.3")]);
        assert!(refuse_unsupported(&p).is_ok());
        // A control-plane host first, the others still on the older minor: its controllers and
        // kubelet talk to its own API server.
        let p = across(
            vec![
                step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3"),
                step(
                    "kube-controller-manager",
                    "kubernetes",
                    "v1.35.4",
                    "v1.36.3",
                ),
                step("kubelet", "kubernetes", "v1.35.4", "v1.36.3"),
            ],
            &[("cp-2", "v1.35.4"), ("cp-3", "v1.35.4")],
        );
        assert!(refuse_unsupported(&p).is_ok(), "{:?}", p.steps);
        for (p, says) in [
            (
                // A worker host before the control plane: past every API server.
                across(worker(), &[("cp-1", "v1.35.4"), ("cp-2", "v1.36.3")]),
                "kubelet would run v1.36.3, 1 minor version newer than (upstream's version skew policy allows 0) kube-apiserver's v1.35.4 (host cp-1)",
            ),
            (
                // Left more than 3 minors behind the API servers it reaches.
                across(
                    vec![step("kubelet", "kubernetes", "v1.32.1", "v1.32.1")],
                    &[("cp-1", "v1.36.3")],
                ),
                "kubelet would run v1.32.1, 4 minor versions older than",
            ),
            (
                // API servers of one environment within one minor of each other.
                across(
                    vec![step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3")],
                    &[("cp-2", "v1.34.9")],
                ),
                "kube-apiserver on host cp-2 runs v1.34.9, 2 minor versions older than (upstream's version skew policy allows 1) kube-apiserver's v1.36.3",
            ),
        ] {
            let e = refuse_unsupported(&p).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn an_upgrade_with_etcd_stopped_is_refused_before_it_begins() {
        let stopped = [
            step("etcd", "etcd", "", "3.6.16"),
            step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3"),
        ];
        let e = refuse_without_snapshot(&stopped, None).unwrap_err();
        assert!(e.to_string().contains("etcd is not running"), "{e}");
        // Resuming: the snapshot was taken by the run that stopped.
        let record = Record {
            snapshot: None,
            steps: vec![],
            drained: vec![],
        };
        assert!(refuse_without_snapshot(&stopped, Some(&record)).is_ok());
        // Nothing to upgrade, or etcd running: nothing to refuse.
        let running = [
            step("etcd", "etcd", "3.6.16", "3.6.16"),
            step("kube-apiserver", "kubernetes", "v1.35.4", "v1.36.3"),
        ];
        assert!(refuse_without_snapshot(&running, None).is_ok());
        assert!(refuse_without_snapshot(&stopped[..1], None).is_ok());
    }

    #[test]
    fn a_second_upgrade_waits_for_the_first_then_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let first = lock(&data, Duration::ZERO, &mut |_| {}).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&data).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        let mut told = Vec::new();
        let e = lock(&data, Duration::from_millis(200), &mut |m| {
            told.push(m.to_string())
        })
        .unwrap_err();
        assert_eq!(e.exit_code(), 1, "{e}");
        assert!(told.iter().any(|m| m.contains("waiting for")), "{told:?}");
        drop(first);
        // (A wait: a child another test forks in this process holds a copy of the lock's open file
        // description until its exec closes it; CI failed here once without it.)
        assert!(lock(&data, Duration::from_secs(5), &mut |_| {}).is_ok());
    }

    #[test]
    fn a_symlinked_or_huge_record_is_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::write(&elsewhere, r#"{"snapshot": null, "steps": []}"#).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(RECORD)).unwrap();
        assert_eq!(read_record(dir.path()).unwrap(), None);
        std::fs::remove_file(dir.path().join(RECORD)).unwrap();
        let huge = format!(
            r#"{{"snapshot": null, "steps": [], "drained": ["{}"]}}"#,
            "x".repeat(2 << 20)
        );
        std::fs::write(dir.path().join(RECORD), huge).unwrap();
        assert_eq!(read_record(dir.path()).unwrap(), None);
        // forget_record removes the link, never what it points to.
        std::fs::remove_file(dir.path().join(RECORD)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(RECORD)).unwrap();
        assert!(forget_record(dir.path()).unwrap());
        assert!(elsewhere.exists());
    }

    #[test]
    fn a_record_of_another_target_is_refused() {
        let record = Record {
            snapshot: None,
            steps: vec![("kube-apiserver".into(), "v1.35.4".into(), "v1.36.3".into())],
            drained: vec![],
        };
        let path = Path::new("/var/lib/kubeunit/dev/data/upgrade.json");
        let same = [step("kube-apiserver", "kubernetes", "", "1.36.3")];
        assert!(refuse_another_target(&record, &same, path).is_ok());
        let other = [step("kube-apiserver", "kubernetes", "", "v1.36.4")];
        let e = refuse_another_target(&record, &other, path).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains(
                "an upgrade that took kube-apiserver to v1.36.3 stopped half-way (/var/lib/kubeunit/dev/data/upgrade.json), and this one takes it to v1.36.4"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_record_is_written_whole_read_back_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_record(dir.path()).unwrap(), None);
        let record = Record {
            snapshot: Some(dir.path().join("pre-upgrade-x.db")),
            steps: vec![("kube-apiserver".into(), "v1.35.4".into(), "v1.36.3".into())],
            drained: vec!["worker-1".into()],
        };
        write_record(dir.path(), &record).unwrap();
        assert_eq!(read_record(dir.path()).unwrap(), Some(record));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(RECORD))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A record of a kubeunit before --drain: nothing drained.
        std::fs::write(
            dir.path().join(RECORD),
            r#"{"snapshot": null, "steps": []}"#,
        )
        .unwrap();
        assert_eq!(read_record(dir.path()).unwrap().unwrap().drained.len(), 0);
        // Garbage is no record: what the processes run says what is left.
        std::fs::write(dir.path().join(RECORD), "{half").unwrap();
        assert_eq!(read_record(dir.path()).unwrap(), None);
        assert!(forget_record(dir.path()).unwrap());
        assert!(!forget_record(dir.path()).unwrap());
        assert!(!dir.path().join(RECORD).exists());
    }
}
