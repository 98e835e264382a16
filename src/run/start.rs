//! `start`: its steps in order, as small functions. Components start the moment everything they are
//! ordered after is healthy, together with what they start alongside (etcd and kube-apiserver at
//! once: `Component::starts_alongside`) or once that is up (the Kubernetes clients once
//! kube-apiserver listens: `Component::starts_once_up`), and a component's hook runs as soon as it
//! is healthy.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::future::LocalBoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;

use super::env::{journal_tail, Env};
use super::hooks::{self, HookReport};
use super::preflight::{preflight, Running};
use super::probe;
use super::stop::stop;
use super::usable::Usable;
use crate::components::{Hook, Instance};
use crate::error::Error;
use crate::systemd::{JobResult, StartMode, Systemd};
use crate::unit::{self, UnitFile};

/// What `start` reports while it works.
pub enum Progress<'a> {
    /// systemd's start job finished (READY=1 for notify units); now waiting for the health probe.
    Running {
        component: &'a str,
        seconds: f64,
    },
    Healthy(&'a Timing),
    /// A hook that dependents wait for (image import) finished.
    HookDone {
        component: &'a str,
        hook: &'a str,
        /// How many things it did (images imported).
        count: usize,
        seconds: f64,
    },
    /// One condition of a usable environment holds (`run::usable`).
    Usable(&'a Usable),
}

/// How far `start` waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Every component healthy.
    Healthy,
    /// ... and the environment usable: its nodes Ready and schedulable, the default
    /// ServiceAccount there, CoreDNS ready (`run::usable`).
    Usable,
}

/// One component's way up, for progress lines and the bring-up benchmark.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    pub component: String,
    pub unit: String,
    /// Seconds from the start of `start` until the start call was made.
    pub submitted: f64,
    /// ... until systemd's start job finished (notify: READY=1; exec: execve done).
    pub job_done: f64,
    /// ... until the health probe passed.
    pub healthy: f64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartReport {
    pub already_running: bool,
    pub notes: Vec<String>,
    pub timings: Vec<Timing>,
    /// API paths of the addon objects applied.
    pub applied: Vec<String>,
    /// References of the images imported into containerd.
    pub imported: Vec<String>,
    /// References of the images pushed to the node's registry.
    pub pushed: Vec<String>,
    pub total_seconds: f64,
    /// The kubeconfig the admin identity was merged into (profile `kubeconfig.write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The conditions of a usable environment and when each held (`--wait usable`).
    pub usable: Vec<Usable>,
    /// Nodes a later `gen` removed, which this start took down (`run::departed`).
    pub departed_nodes: Vec<String>,
    /// Where the node and its pods reach beyond this host (with a node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<super::egress::EgressReport>,
    /// CLOCK_MONOTONIC (µs) when `start` began: lines kubeunit's timings up with systemd's
    /// `*TimestampMonotonic` properties (the bring-up benchmark does).
    pub monotonic_start_us: u64,
}

/// Shared by the concurrently polled start futures (all on this task).
type ProgressCell<'p> = RefCell<&'p mut dyn FnMut(Progress)>;

pub async fn start(
    env: &Env,
    sd: &Systemd,
    timeout: Duration,
    until: Until,
    progress: &mut dyn FnMut(Progress),
) -> Result<StartReport, Error> {
    let progress: ProgressCell = RefCell::new(progress);
    let t0 = Instant::now();
    let monotonic_start_us = monotonic_us();
    // A node the profile no longer has goes first, whole; the others stay as they are.
    let departed = super::departed::departed(env, sd).await?;
    let departed_problems = super::departed::take_down(env, sd, &departed).await?;
    let running = running_components(env, sd).await?;
    let mut report = StartReport {
        already_running: running.len() == env.units.len(),
        notes: vec![],
        timings: vec![],
        applied: vec![],
        imported: vec![],
        pushed: vec![],
        total_seconds: 0.0,
        kubeconfig: None,
        departed_nodes: departed.clone(),
        monotonic_start_us,
        usable: vec![],
        egress: super::egress::EgressReport::of(&env.plan),
    };
    report.notes.extend(
        departed_problems
            .into_iter()
            .map(|p| format!("departed node: {p}")),
    );
    if !report.already_running {
        report.notes.extend(preflight(env, &running)?);
        start_slice(env, sd).await?;
    }
    // Hooks of what already runs go again (they are idempotent): a start after a partial one
    // finishes what that one left. Those that gate dependents finish before anything starts.
    let mut hooks_done = HookReport::default();
    let mut hook_tasks = Vec::new();
    for (i, _) in env
        .units
        .iter()
        .filter(|(i, _)| running.contains(i.name.as_str()))
    {
        match i.component.after_healthy {
            Some(hook) if hook.gates_dependents() => {
                hooks_done.add(hooks::finish(hooks::spawn(i, hook)).await?)
            }
            Some(hook) => hook_tasks.push(hooks::spawn(i, hook)),
            None => {}
        }
    }
    if !report.already_running {
        let deadline = t0 + timeout;
        let started =
            start_components(env, sd, &running, t0, deadline, &progress, &mut hook_tasks).await;
        match started {
            Ok((timings, done)) => {
                report.timings = timings;
                hooks_done.add(done);
            }
            Err(failure) => {
                // Leave nothing behind: stop everything of this environment.
                let _ = stop(env, sd).await;
                return Err(failure);
            }
        }
    }
    hooks_done.add(hooks::join(hook_tasks).await?);
    if !departed.is_empty() {
        let plan = env.plan.clone();
        let names = departed.clone();
        tokio::task::spawn_blocking(move || super::departed::forget(&plan, &names))
            .await
            .map_err(|e| Error::Internal(format!("deleting departed Nodes panicked: {e}")))??;
    }
    let conditions = match until {
        Until::Usable => super::usable::conditions(env),
        Until::Healthy => vec![],
    };
    if !conditions.is_empty() {
        report.usable = wait_usable(env, conditions, t0, t0 + timeout, &progress).await?;
    }
    report.applied = hooks_done.applied;
    report.imported = hooks_done.imported;
    report.pushed = hooks_done.pushed;
    report.kubeconfig = write_kubeconfig(&env.plan)?;
    report.total_seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// `usable::wait` off the async runtime, with a progress line per condition as it holds.
async fn wait_usable(
    env: &Env,
    conditions: Vec<super::usable::Condition>,
    t0: Instant,
    deadline: Instant,
    progress: &ProgressCell<'_>,
) -> Result<Vec<Usable>, Error> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let env_plan = env.plan.clone();
    let waiting = tokio::task::spawn_blocking(move || {
        super::usable::wait(&env_plan, conditions, t0, deadline, &mut |u| {
            let _ = tx.send(u.clone());
        })
    });
    while let Some(u) = rx.recv().await {
        (progress.borrow_mut())(Progress::Usable(&u));
    }
    waiting
        .await
        .map_err(|e| Error::Internal(format!("waiting for a usable environment panicked: {e}")))?
}

/// The profile's `kubeconfig.write`: the admin identity merged there, its context made current.
fn write_kubeconfig(plan: &crate::spec::Plan) -> Result<Option<std::path::PathBuf>, Error> {
    let out = &plan.profile.kubeconfig;
    if out.write.as_os_str().is_empty() {
        return Ok(None);
    }
    let mode = crate::spec::profile::parse_mode(&out.mode);
    let merged = super::kubeconfig::merge_admin(plan, &out.write, mode, false)?;
    Ok(Some(merged.path))
}

/// Instances whose units run already; failed or left-over inactive units are reset so their
/// names can be used again.
async fn running_components<'e>(env: &'e Env, sd: &Systemd) -> Result<Running<'e>, Error> {
    let mut running = BTreeSet::new();
    for (i, unit) in &env.units {
        // Under a debugger (`kubeunit debug`) counts as running: its ports are taken.
        let debug = i.debug_unit();
        if sd
            .state(&debug)
            .await?
            .is_some_and(|s| s.active_state.is_running())
        {
            running.insert(i.name.as_str());
            continue;
        }
        // A component on a schedule runs while its timer does (its service runs now and then).
        let probe = env.running_unit(&i.name, unit);
        match sd.state(&probe.name).await? {
            Some(st) if st.active_state.is_running() => {
                running.insert(i.name.as_str());
            }
            Some(_) => sd.reset_failed(&probe.name).await?,
            None => {}
        }
        if probe.name != unit.name {
            sd.reset_failed(&unit.name).await?;
        }
    }
    Ok(running)
}

/// The environment's slice, unless it runs.
pub(crate) async fn start_slice(env: &Env, sd: &Systemd) -> Result<(), Error> {
    let name = &env.slice.name;
    if sd
        .state(name)
        .await?
        .is_some_and(|s| s.active_state.is_running())
    {
        return Ok(());
    }
    sd.reset_failed(name).await?;
    let result = if super::env::installed(&env.plan, sd).await? {
        sd.start_unit(name).await?
    } else {
        sd.start_transient(name, unit::properties(&env.slice)?)
            .await?
    };
    match result {
        JobResult::Done => Ok(()),
        result => Err(Error::Start(format!("{name}: start job {result}"))),
    }
}

/// What happened to one of the instances being started.
enum Event<'e> {
    Healthy(&'e Instance<'static>, Result<Timing, Error>),
    HookDone(&'e Instance<'static>, Hook, f64, Result<HookReport, Error>),
}

/// Which instances may start: each once what it is ordered after is healthy (and its gating hook
/// done) and what it starts alongside is started. What it needs is named by instance: a per-node
/// component's needs on its own node.
struct StartOrder<'e> {
    env: &'e Env,
    /// Healthy, and past the hook that gates their dependents.
    ready_for_dependents: BTreeSet<&'e str>,
    /// Started (their start call made).
    launched: BTreeSet<&'e str>,
    pending: Vec<&'e (Instance<'static>, UnitFile)>,
}

impl<'e> StartOrder<'e> {
    fn new(env: &'e Env, running: &Running<'e>) -> Self {
        StartOrder {
            env,
            ready_for_dependents: running.clone(),
            launched: running.clone(),
            pending: env
                .units
                .iter()
                .filter(|(i, _)| !running.contains(i.name.as_str()))
                .collect(),
        }
    }

    /// Those that may go now, marked launched. Launching one may let those alongside it go in the
    /// same round.
    fn take_ready(&mut self) -> Vec<&'e (Instance<'static>, UnitFile)> {
        let mut taken = Vec::new();
        loop {
            let env = self.env;
            let (ready, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|(i, _)| {
                    let c = i.component;
                    env.deps_of(i, &c.ordered_after(&i.plan))
                        .iter()
                        .all(|d| self.ready_for_dependents.contains(d))
                        && env
                            .deps_of(i, &c.deps(&i.plan))
                            .iter()
                            .all(|d| self.launched.contains(d))
                });
            self.pending = rest;
            if ready.is_empty() {
                return taken;
            }
            self.launched
                .extend(ready.iter().map(|(i, _)| i.name.as_str()));
            taken.extend(ready);
        }
    }

    fn ready_for_dependents(&mut self, instance: &'e Instance<'static>) {
        self.ready_for_dependents.insert(instance.name.as_str());
    }
}

/// Start every instance not running, each as soon as `StartOrder` lets it; spawn each one's other
/// hook the moment it is healthy.
async fn start_components<'e>(
    env: &'e Env,
    sd: &'e Systemd,
    running: &Running<'e>,
    t0: Instant,
    deadline: Instant,
    progress: &'e ProgressCell<'_>,
    hook_tasks: &mut Vec<tokio::task::JoinHandle<Result<HookReport, Error>>>,
) -> Result<(Vec<Timing>, HookReport), Error> {
    let milestones = &Milestones::new(running);
    let mut order = StartOrder::new(env, running);
    let mut timings = Vec::new();
    let mut gated = HookReport::default();
    let mut events: FuturesUnordered<LocalBoxFuture<'_, Event>> = FuturesUnordered::new();
    loop {
        for (i, unit) in order.take_ready() {
            let timer = env.timer(&i.name);
            let deps = env.deps_of(i, &i.component.deps(&i.plan));
            let once_up = env.deps_of(i, i.component.starts_once_up);
            events.push(Box::pin(async move {
                // Its own start call after theirs (systemd then knows the units it Wants=), and
                // after those it starts once up are.
                milestones.wait(Milestone::Submitted, &deps).await;
                milestones.wait(Milestone::Up, &once_up).await;
                let result = start_one(i, sd, unit, timer, t0, deadline, progress, |m| {
                    milestones.reached(m, &i.name)
                })
                .await;
                Event::Healthy(i, result)
            }));
        }
        let Some(event) = events.next().await else {
            break;
        };
        match event {
            Event::Healthy(i, result) => {
                let timing = match result {
                    Err(Error::Start(why)) => {
                        let needs = unhealthy_needs(env, sd, i, &order.ready_for_dependents).await;
                        return Err(Error::Start(why + &needs));
                    }
                    result => result?,
                };
                (progress.borrow_mut())(Progress::Healthy(&timing));
                timings.push(timing);
                match i.component.after_healthy {
                    Some(hook) if hook.gates_dependents() => {
                        let task = hooks::spawn(i, hook);
                        events.push(Box::pin(async move {
                            let result = hooks::finish(task).await;
                            Event::HookDone(i, hook, t0.elapsed().as_secs_f64(), result)
                        }));
                        continue;
                    }
                    Some(hook) => hook_tasks.push(hooks::spawn(i, hook)),
                    None => {}
                }
                order.ready_for_dependents(i);
            }
            Event::HookDone(i, hook, seconds, result) => {
                let done = result?;
                (progress.borrow_mut())(Progress::HookDone {
                    component: &i.name,
                    hook: hook.as_str(),
                    count: done.count(),
                    seconds,
                });
                gated.add(done);
                order.ready_for_dependents(i);
            }
        }
    }
    if !order.pending.is_empty() {
        return Err(Error::Internal(
            "component dependencies form a cycle".into(),
        ));
    }
    Ok((timings, gated))
}

/// What `instance` needs that was not healthy yet when it failed, as systemd has it then (for a
/// report: a component that waited for its datastore says so only between its own journal's lines).
async fn unhealthy_needs(
    env: &Env,
    sd: &Systemd,
    instance: &Instance<'static>,
    healthy: &BTreeSet<&str>,
) -> String {
    let mut out = String::new();
    for dep in env.deps_of(instance, &instance.component.deps(&instance.plan)) {
        if healthy.contains(dep) {
            continue;
        }
        let Some((_, unit)) = env.units.iter().find(|(d, _)| d.name == dep) else {
            continue;
        };
        let state = match sd.state(&unit.name).await {
            Ok(Some(st)) => format!(
                "{}/{}, {}{}",
                st.active_state.as_str(),
                st.sub_state,
                st.job.map_or("no job".into(), |j| format!("job {j}")),
                match st.main_pid {
                    0 => String::new(),
                    pid => format!(", main PID {pid}"),
                }
            ),
            Ok(None) => "not loaded".into(),
            Err(e) => format!("state unknown: {e}"),
        };
        out += &format!(
            "\n{dep} ({}), which it needs, was not healthy yet: {state} (journalctl -u {})",
            unit.name, unit.name
        );
    }
    out
}

/// Where a component's start is: its start job queued, then done (for a notify unit: READY=1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Milestone {
    Submitted,
    Up,
}

/// The components that reached each milestone (those running before `start` have both), and a
/// wake-up for those waiting on them.
struct Milestones<'e> {
    submitted: RefCell<BTreeSet<&'e str>>,
    up: RefCell<BTreeSet<&'e str>>,
    changed: tokio::sync::Notify,
}

impl<'e> Milestones<'e> {
    fn new(running: &Running<'e>) -> Self {
        Milestones {
            submitted: RefCell::new(running.clone()),
            up: RefCell::new(running.clone()),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn set(&self, m: Milestone) -> &RefCell<BTreeSet<&'e str>> {
        match m {
            Milestone::Submitted => &self.submitted,
            Milestone::Up => &self.up,
        }
    }

    fn reached(&self, m: Milestone, name: &'e str) {
        self.set(m).borrow_mut().insert(name);
        self.changed.notify_waiters();
    }

    /// Until every one of `names` reached `m`.
    async fn wait(&self, m: Milestone, names: &[&str]) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a change between the two is not missed.
            notified.as_mut().enable();
            if names.iter().all(|n| self.set(m).borrow().contains(n)) {
                return;
            }
            notified.await;
        }
    }
}

/// Start one instance's transient unit, wait for its job, then for its health probe. A component
/// on a schedule: its timer, with its service loaded (not started) alongside. `milestone` is called
/// once systemd has its start job, and once that job is done.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn start_one(
    instance: &Instance<'static>,
    sd: &Systemd,
    service: &UnitFile,
    timer: Option<&UnitFile>,
    t0: Instant,
    deadline: Instant,
    progress: &ProgressCell<'_>,
    mut milestone: impl FnMut(Milestone),
) -> Result<Timing, Error> {
    let submitted = t0.elapsed().as_secs_f64();
    let unit = timer.unwrap_or(service);
    let result = submit(instance, sd, service, timer, || {
        milestone(Milestone::Submitted)
    })
    .await?;
    let job_done = t0.elapsed().as_secs_f64();
    if result != JobResult::Done {
        let st = sd.state(&unit.name).await?.unwrap_or_default();
        return Err(start_failed(
            instance,
            unit,
            format!(
                "start job {result} (Result={}, exit status {})",
                st.result, st.exec_main_status
            ),
        ));
    }
    milestone(Milestone::Up);
    (progress.borrow_mut())(Progress::Running {
        component: &instance.name,
        seconds: job_done,
    });
    wait_healthy(instance, sd, unit, deadline).await?;
    Ok(Timing {
        component: instance.name.clone(),
        unit: unit.name.clone(),
        submitted,
        job_done,
        healthy: t0.elapsed().as_secs_f64(),
    })
}

/// The start call and its job: a transient unit from the unit file (a timer's with its service
/// alongside), or an installed environment's unit loaded from its file (`kubeunit install`).
async fn submit(
    instance: &Instance<'static>,
    sd: &Systemd,
    service: &UnitFile,
    timer: Option<&UnitFile>,
    on_submitted: impl FnOnce(),
) -> Result<JobResult, Error> {
    let (plan, c) = (&instance.plan, instance.component);
    let unit = timer.unwrap_or(service);
    let installed = super::env::installed(plan, sd).await?;
    // Alongside what it retries by itself: past its After= on them (the caller started them, and
    // waited for the health of everything else it is ordered after, or for the start jobs of what
    // it starts once up). Otherwise in order.
    let mode = if c.deps(plan).iter().any(|d| c.starts_alongside.contains(d)) {
        StartMode::Now
    } else {
        StartMode::InOrder
    };
    let result = match timer {
        _ if installed => sd.start_unit_then(&unit.name, mode, on_submitted).await?,
        Some(timer) => {
            let aux = vec![(service.name.clone(), unit::properties(service)?)];
            let props = unit::properties(timer)?;
            sd.start_transient_then(&timer.name, props, aux, mode, on_submitted)
                .await?
        }
        None => {
            let props = unit::properties(unit)?;
            sd.start_transient_then(&unit.name, props, vec![], mode, on_submitted)
                .await?
        }
    };
    Ok(result)
}

/// Until its health probe answers, or it exits, or `deadline`. The unit's state is read again
/// only when systemd signals a change: the probe is what is polled.
async fn wait_healthy(
    instance: &Instance<'static>,
    sd: &Systemd,
    unit: &UnitFile,
    deadline: Instant,
) -> Result<(), Error> {
    let prober = probe::Prober::new(&instance.plan, instance.component, Duration::from_secs(2))
        .map_err(|e| start_failed(instance, unit, e.to_string()))?;
    let mut watched = sd.watch(&unit.name).await?;
    loop {
        let st = watched.state(sd).await?;
        if st.active_state.is_stopped() || st.restarts > 0 {
            return Err(start_failed(
                instance,
                unit,
                format!(
                    "the process exited (state {}/{}, Result={}, exit status {}, restarts {})",
                    st.active_state.as_str(),
                    st.sub_state,
                    st.result,
                    st.exec_main_status,
                    st.restarts
                ),
            ));
        }
        match prober.probe_async().await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(start_failed(
                    instance,
                    unit,
                    format!("not healthy before the timeout: {e}"),
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// A failed start, with the tail of the unit's journal (and the fix of a cause it names, if
/// known).
fn start_failed(instance: &Instance<'static>, unit: &UnitFile, reason: String) -> Error {
    let tail = journal_tail(&instance.plan, &unit.name, 20);
    // The cause may be older than the tail (a kubelet logs on for a while after its CA watcher
    // failed).
    let fix = known_cause(&journal_tail(&instance.plan, &unit.name, 500))
        .map(|fix| format!("\n  fix: {fix}"))
        .unwrap_or_default();
    Error::Start(format!(
        "{} ({}) failed to start: {reason}\n--- last 20 lines of its journal ---\n{tail}--- see more: journalctl -u {} ---{fix}",
        instance.name, unit.name, unit.name
    ))
}

/// What a journal says that this host lacks, and the fix: limits that several nodes on one host
/// reach (each kubelet and containerd watches files with inotify), as kind's known issues name
/// them.
fn known_cause(journal: &str) -> Option<String> {
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/fs/inotify/{name}"))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    };
    // cAdvisor's words, and Go's fsnotify's (the kubelet's CA bundle watcher).
    if journal.contains("inotify_init: too many open files")
        || journal.contains("fsnotify watcher: too many open files")
    {
        return Some(format!(
            "this host's inotify instances are used up (fs.inotify.max_user_instances is {}): raise the limit, e.g. sysctl -w fs.inotify.max_user_instances=512",
            sysctl("max_user_instances")
        ));
    }
    if journal.contains("inotify_add_watch") && journal.contains("no space left on device") {
        return Some(format!(
            "this host's inotify watches are used up (fs.inotify.max_user_watches is {}): raise the limit, e.g. sysctl -w fs.inotify.max_user_watches=524288",
            sysctl("max_user_watches")
        ));
    }
    None
}

fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

#[cfg(test)]
mod tests {
    #[test]
    fn used_up_inotify_is_named_with_its_fix() {
        let journal = "E1127 manager.go:326] Registration of the raw container factory failed: inotify_init: too many open files\n";
        let fix = super::known_cause(journal).unwrap();
        assert!(fix.contains("fs.inotify.max_user_instances"), "{fix}");
        // As a kubelet of five hosts in one machine logged it.
        let journal = r#"E1127 dynamic_cafile_content.go:170] "Failed to watch CA file, will retry later" err="error creating fsnotify watcher: too many open files""#;
        let fix = super::known_cause(journal).unwrap();
        assert!(fix.contains("fs.inotify.max_user_instances"), "{fix}");
        let fix = super::known_cause("inotify_add_watch /sys/fs/cgroup: no space left on device")
            .unwrap();
        assert!(fix.contains("fs.inotify.max_user_watches"), "{fix}");
        assert_eq!(super::known_cause("some other failure"), None);
    }
}
