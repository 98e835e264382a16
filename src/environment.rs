//! A generated environment at run time: preflight, start (dependency waves, job waits, health probes),
//! stop, status and restart, all through systemd.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Serialize;

use crate::artifacts::{self, Options};
use crate::bootstrap;
use crate::components::Component;
use crate::error::Error;
use crate::health;
use crate::pki::Entropy;
use crate::plan::Plan;
use crate::profile;
use crate::state::{self, DiffKind, Existing};
use crate::systemd::{self, Systemd, SystemdError, UnitState};
use crate::unitfile::UnitFile;

impl From<SystemdError> for Error {
    fn from(e: SystemdError) -> Self {
        match e {
            SystemdError::Connect { bus, source, fix } => Error::Preflight {
                message: format!("cannot connect to systemd ({bus}): {source}"),
                fix: fix.into(),
            },
            other => Error::Other(other.to_string()),
        }
    }
}

/// A state dir loaded for running: its resolved plan and its unit files.
pub struct Env {
    pub plan: Plan,
    pub slice: UnitFile,
    pub units: Vec<(&'static Component, UnitFile)>,
}

impl Env {
    pub fn load(state_dir: &Path) -> Result<Env, Error> {
        let profile_path = state_dir.join(state::PROFILE);
        if !profile_path.exists() {
            return Err(Error::state(
                state_dir,
                format!("no {}: not a generated state dir", state::PROFILE),
                format!(
                    "run `kubeunit gen --state-dir {}` first",
                    state_dir.display()
                ),
            ));
        }
        let plan = Plan::new(profile::load_resolved(&profile_path)?, state_dir)?;
        let units_dir = plan.state_dir.join("units");
        let slice = UnitFile::read(&units_dir.join(plan.slice_name()))?;
        let units = plan
            .components()
            .map(|c| Ok((c, UnitFile::read(&units_dir.join(plan.unit_name(c.name)))?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Env { plan, slice, units })
    }

    /// A component of this environment, or an error listing the ones there are.
    pub fn unit(&self, component: &str) -> Result<&(&'static Component, UnitFile), Error> {
        self.units
            .iter()
            .find(|(c, _)| c.name == component)
            .ok_or_else(|| {
                let names: Vec<_> = self.units.iter().map(|(c, _)| c.name).collect();
                Error::Preflight {
                    message: format!(
                        "no component '{component}' in environment '{}'",
                        self.plan.name()
                    ),
                    fix: format!("use one of: {}", names.join(", ")),
                }
            })
    }

    /// Every port the environment's components listen on.
    pub fn ports(&self) -> Vec<u16> {
        self.units
            .iter()
            .flat_map(|(c, _)| (c.ports)(&self.plan.profile.ports))
            .collect()
    }

    fn deps(&self, c: &Component) -> Vec<&'static str> {
        c.needs
            .iter()
            .chain(c.after_if_enabled)
            .copied()
            .filter(|d| self.plan.enabled(d))
            .collect()
    }
}

fn is_running(s: &Option<UnitState>) -> bool {
    matches!(s, Some(s) if s.active_state == "active" || s.active_state == "reloading")
}

/// The last lines of a unit's journal (for failure reports).
pub fn journal_tail(unit: &str, lines: usize) -> String {
    let out = std::process::Command::new("journalctl")
        .args(["--no-pager", "--no-hostname", "-o", "short-precise", "-n"])
        .arg(lines.to_string())
        .arg("-u")
        .arg(unit)
        .output();
    match out {
        Ok(o) if !o.stdout.is_empty() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => format!(
            "(no journal entries: {})",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("(journalctl not available: {e})"),
    }
}

/// Checks before anything starts: the state dir is intact (edited unit files are allowed and reported),
/// binaries are there, ports are free. `running`: components already up (their ports are theirs).
pub fn preflight(env: &Env, running: &BTreeSet<&str>) -> Result<Vec<String>, Error> {
    let plan = &env.plan;
    let mut notes = Vec::new();
    let old = Existing::load(&plan.state_dir)?;
    let opts = Options {
        entropy: Entropy::Os,
        force: false,
    };
    let tree = artifacts::generate(plan, &old, &opts)?.tree;
    let mut problems = Vec::new();
    for d in state::check(&plan.state_dir, &old, &tree)? {
        let editable = d.path.starts_with("units/") || d.path.starts_with("addons/");
        if d.kind == DiffKind::Tampered && editable {
            notes.push(format!("using your edited {}", d.path));
        } else if d.kind == DiffKind::Unknown && d.path.starts_with("addons/") {
            notes.push(format!("applying your {} too", d.path));
        } else if d.kind == DiffKind::Unknown {
            notes.push(format!("{} is not kubeunit's; left alone", d.path));
        } else {
            problems.push(format!("{:?} {}", d.kind, d.path).to_lowercase());
        }
    }
    if !problems.is_empty() {
        return Err(Error::state(
            &plan.state_dir,
            format!("does not match its manifest: {}", problems.join(", ")),
            format!(
                "run `kubeunit gen --state-dir {}` to repair it (keys and CAs are kept); `kubeunit gen --check` lists the differences",
                plan.state_dir.display()
            ),
        ));
    }
    for (c, unit) in &env.units {
        if running.contains(c.name) {
            continue;
        }
        let Some((path, _, _)) = unit.exec_start() else {
            return Err(Error::Artifact {
                path: unit.path.clone(),
                message: "no ExecStart=".into(),
                fix: "regenerate it with `kubeunit gen`".into(),
            });
        };
        let meta = std::fs::metadata(path);
        let executable = meta
            .as_ref()
            .map(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
            .unwrap_or(false);
        if !executable {
            let why = match meta {
                Err(e) => e.to_string(),
                Ok(_) => "not an executable file".into(),
            };
            return Err(Error::Preflight {
                message: format!("{}: binary {path}: {why}", c.name),
                fix: format!(
                    "install {} there, or regenerate with the right directory: kubeunit gen --bin-dir DIR (or --set components.{}.binary=PATH)",
                    c.binary, c.name
                ),
            });
        }
    }
    check_versions(env, running)?;
    let wanted: Vec<(u16, &str)> = env
        .units
        .iter()
        .filter(|(c, _)| !running.contains(c.name))
        .flat_map(|(c, _)| {
            (c.ports)(&plan.profile.ports)
                .into_iter()
                .map(move |p| (p, c.name))
        })
        .collect();
    let ports: Vec<u16> = wanted.iter().map(|(p, _)| *p).collect();
    if let Some(busy) = health::listeners(&ports).into_iter().next() {
        let component = wanted
            .iter()
            .find(|(p, _)| *p == busy.port)
            .map(|(_, c)| *c)
            .unwrap_or("?");
        let field = plan
            .profile
            .ports
            .all()
            .into_iter()
            .find(|(_, p)| *p == busy.port)
            .map(|(f, _)| f)
            .unwrap_or("?");
        return Err(Error::Preflight {
            message: format!(
                "port {} (ports.{field}, for {component}) is already in use: {} listens on {}",
                busy.port, busy.process, busy.address
            ),
            fix: format!(
                "stop that process, or give this environment other ports: kubeunit gen --state-dir {} --set ports.{field}=N",
                plan.state_dir.display()
            ),
        });
    }
    Ok(notes)
}

/// Binaries must report the versions the profile pins (`versions.kubernetes`, `versions.etcd`).
/// The `--version` calls run side by side: each costs a process start, and they sit on the critical path.
fn check_versions(env: &Env, running: &BTreeSet<&str>) -> Result<(), Error> {
    let versions = &env.plan.profile.versions;
    type Check<'a> = (&'a Component, &'a str, &'a (String, Vec<String>, bool));
    let checks: Vec<Check> = env
        .units
        .iter()
        .filter(|(c, _)| !running.contains(c.name))
        .filter_map(|(c, unit)| {
            let expected = (c.version)(versions).trim_start_matches('v');
            Some((*c, expected, unit.exec_start()?)).filter(|_| !expected.is_empty())
        })
        .collect();
    let found: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = checks
            .iter()
            .map(|(_, _, (path, argv, _))| {
                s.spawn(move || {
                    // argv[1..] up to the first flag: a hyperkube-style binary's component argument.
                    let leading = argv.iter().skip(1).take_while(|a| !a.starts_with('-'));
                    match std::process::Command::new(path)
                        .args(leading)
                        .arg("--version")
                        .output()
                    {
                        Ok(o) => format!(
                            "{}{}",
                            String::from_utf8_lossy(&o.stdout),
                            String::from_utf8_lossy(&o.stderr)
                        ),
                        Err(e) => format!("(cannot run it: {e})"),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for ((c, expected, (path, _, _)), found) in checks.iter().zip(found) {
        let matches = found
            .split(|ch: char| ch.is_whitespace() || ch == ',')
            .any(|word| {
                let w = word.trim_start_matches('v');
                w == *expected
                    || w.starts_with(&format!("{expected}."))
                    || w.starts_with(&format!("{expected}-"))
            });
        if !matches {
            return Err(Error::Preflight {
                message: format!(
                    "{}: {path} reports {:?}, the profile wants {expected}",
                    c.name,
                    found.lines().next().unwrap_or("").trim()
                ),
                fix: "install the pinned version there (scripts/build-test-binaries.sh builds them), or change versions.* in the profile".into(),
            });
        }
    }
    Ok(())
}

/// What `start` reports while it works.
pub enum Progress<'a> {
    /// systemd's start job finished (READY=1 for notify units); now waiting for the health probe.
    Running {
        component: &'a str,
        seconds: f64,
    },
    Healthy(&'a Timing),
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
    pub total_seconds: f64,
    /// CLOCK_MONOTONIC (µs) when `start` began: lines kubeunit's timings up with systemd's
    /// `*TimestampMonotonic` properties (the bring-up benchmark does).
    pub monotonic_start_us: u64,
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

pub async fn start(
    env: &Env,
    sd: &Systemd,
    timeout: Duration,
    progress: &mut dyn FnMut(Progress),
) -> Result<StartReport, Error> {
    // Shared by the concurrently polled start futures of one wave (all on this task).
    let progress = std::cell::RefCell::new(progress);
    let t0 = Instant::now();
    let monotonic_start_us = monotonic_us();
    let plan = &env.plan;
    let mut running: BTreeSet<&str> = BTreeSet::new();
    for (c, unit) in &env.units {
        let st = sd.state(&unit.name).await?;
        if is_running(&st) {
            running.insert(c.name);
        } else if st.is_some() {
            // Failed (or left over inactive): clear it so the name can be used again.
            sd.reset_failed(&unit.name).await?;
        }
    }
    if running.len() == env.units.len() {
        let applied = apply_addons(plan).await?;
        return Ok(StartReport {
            already_running: true,
            notes: vec![],
            timings: vec![],
            applied,
            total_seconds: t0.elapsed().as_secs_f64(),
            monotonic_start_us,
        });
    }
    let notes = preflight(env, &running)?;

    if !is_running(&sd.state(&env.slice.name).await?) {
        sd.reset_failed(&env.slice.name).await?;
        let result = sd
            .start_transient(&env.slice.name, systemd::properties(&env.slice)?)
            .await?;
        if result != "done" {
            return Err(Error::Start(format!(
                "{}: start job {result}",
                env.slice.name
            )));
        }
    }

    let deadline = t0 + timeout;
    let mut healthy: BTreeSet<&str> = running.clone();
    let mut pending: Vec<&(&'static Component, UnitFile)> = env
        .units
        .iter()
        .filter(|(c, _)| !running.contains(c.name))
        .collect();
    let mut timings = Vec::new();
    // Addons go in as soon as the API server is ready, while the rest of the control plane starts.
    let mut bootstrap = running
        .contains("kube-apiserver")
        .then(|| spawn_addons(plan));
    // Each component starts the moment everything it needs is healthy.
    let mut starting = FuturesUnordered::new();
    loop {
        let (ready, rest): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .partition(|(c, _)| env.deps(c).iter().all(|d| healthy.contains(d)));
        pending = rest;
        for (c, unit) in ready {
            let progress = &progress;
            starting.push(async move {
                (
                    c.name,
                    start_one(plan, sd, c, unit, t0, deadline, progress).await,
                )
            });
        }
        let Some((name, result)) = starting.next().await else {
            break;
        };
        match result {
            Ok(timing) => {
                (progress.borrow_mut())(Progress::Healthy(&timing));
                if name == "kube-apiserver" {
                    bootstrap = Some(spawn_addons(plan));
                }
                healthy.insert(name);
                timings.push(timing);
            }
            Err(failure) => {
                drop(starting);
                // Leave nothing behind: stop everything of this environment.
                let _ = stop(env, sd).await;
                return Err(failure);
            }
        }
    }
    if !pending.is_empty() {
        return Err(Error::Other(
            "internal: component dependencies form a cycle".into(),
        ));
    }
    let applied = match bootstrap {
        Some(task) => task.await.map_err(|e| Error::Other(e.to_string()))??,
        None => vec![],
    };
    Ok(StartReport {
        already_running: false,
        notes,
        timings,
        applied,
        total_seconds: t0.elapsed().as_secs_f64(),
        monotonic_start_us,
    })
}

fn spawn_addons(plan: &Plan) -> tokio::task::JoinHandle<Result<Vec<String>, Error>> {
    let plan = plan.clone();
    tokio::task::spawn_blocking(move || bootstrap::apply(&plan))
}

async fn apply_addons(plan: &Plan) -> Result<Vec<String>, Error> {
    if !plan.enabled("kube-apiserver") {
        return Ok(vec![]);
    }
    spawn_addons(plan)
        .await
        .map_err(|e| Error::Other(e.to_string()))?
}

async fn start_one(
    plan: &Plan,
    sd: &Systemd,
    c: &'static Component,
    unit: &UnitFile,
    t0: Instant,
    deadline: Instant,
    progress: &std::cell::RefCell<&mut dyn FnMut(Progress)>,
) -> Result<Timing, Error> {
    let submitted = t0.elapsed().as_secs_f64();
    let fail = |reason: String| {
        Error::Start(format!(
            "{} ({}) failed to start: {reason}\n--- last 20 lines of its journal ---\n{}--- see more: journalctl -u {} ---",
            c.name,
            unit.name,
            journal_tail(&unit.name, 20),
            unit.name
        ))
    };
    let result = sd
        .start_transient(&unit.name, systemd::properties(unit)?)
        .await?;
    let job_done = t0.elapsed().as_secs_f64();
    if result != "done" {
        let st = sd.state(&unit.name).await?.unwrap_or_default();
        return Err(fail(format!(
            "start job {result} (Result={}, exit status {})",
            st.result, st.exec_main_status
        )));
    }
    (progress.borrow_mut())(Progress::Running {
        component: c.name,
        seconds: job_done,
    });
    loop {
        let st = sd.state(&unit.name).await?.unwrap_or_default();
        if st.active_state == "failed" || st.restarts > 0 || st.active_state == "inactive" {
            return Err(fail(format!(
                "the process exited (state {}/{}, Result={}, exit status {}, restarts {})",
                st.active_state, st.sub_state, st.result, st.exec_main_status, st.restarts
            )));
        }
        let plan2 = plan.clone();
        let probe =
            tokio::task::spawn_blocking(move || health::probe(&plan2, c, Duration::from_secs(2)))
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
        match probe {
            Ok(()) => {
                return Ok(Timing {
                    component: c.name.into(),
                    unit: unit.name.clone(),
                    submitted,
                    job_done,
                    healthy: t0.elapsed().as_secs_f64(),
                })
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(fail(format!("not healthy before the timeout: {e}")))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StopReport {
    pub stopped: Vec<String>,
    pub busy_ports: Vec<u16>,
    pub seconds: f64,
}

/// Stop the slice (and with it every unit), clear failed units, wait for the ports to be released.
pub async fn stop(env: &Env, sd: &Systemd) -> Result<StopReport, Error> {
    let t0 = Instant::now();
    let mut stopped = Vec::new();
    for (_, unit) in &env.units {
        if sd.state(&unit.name).await?.is_some() {
            stopped.push(unit.name.clone());
        }
    }
    sd.stop(&env.slice.name).await?;
    for (_, unit) in env.units.iter().rev() {
        // Units outside the slice (a user edited Slice=) are stopped one by one.
        sd.stop(&unit.name).await?;
        sd.wait_gone(&unit.name, Duration::from_secs(60)).await?;
        sd.reset_failed(&unit.name).await?;
    }
    sd.reset_failed(&env.slice.name).await?;
    // systemd unloads inactive transient units on its next garbage-collection pass; wait for it so
    // that a caller sees no unit left (and a following start can reuse the names).
    let gc_deadline = Instant::now() + Duration::from_secs(10);
    let names: Vec<&str> = env
        .units
        .iter()
        .rev()
        .map(|(_, u)| u.name.as_str())
        .chain([env.slice.name.as_str()])
        .collect();
    loop {
        let mut loaded = Vec::new();
        for n in &names {
            if sd.state(n).await?.is_some() {
                loaded.push(*n);
            }
        }
        if loaded.is_empty() || Instant::now() >= gc_deadline {
            break;
        }
        // A unit whose dependents were still loaded when it went inactive is not queued for
        // collection again; a (no-op) stop job of its own puts it back in the queue.
        for n in loaded {
            sd.stop(n).await?;
            sd.reset_failed(n).await?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ports = env.ports();
    let port_deadline = Instant::now() + Duration::from_secs(10);
    let mut busy: Vec<u16> = health::listeners(&ports).iter().map(|l| l.port).collect();
    while !busy.is_empty() && Instant::now() < port_deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        busy = health::listeners(&ports).iter().map(|l| l.port).collect();
    }
    Ok(StopReport {
        stopped,
        busy_ports: busy,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    pub component: String,
    pub unit: String,
    pub active_state: String,
    pub sub_state: String,
    pub pid: u32,
    pub memory_bytes: Option<u64>,
    pub restarts: u32,
    pub uptime_seconds: Option<u64>,
    pub healthy: bool,
    pub health_detail: String,
}

pub async fn status(env: &Env, sd: &Systemd) -> Result<Vec<ComponentStatus>, Error> {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let mut out = Vec::new();
    for (c, unit) in &env.units {
        let st = sd.state(&unit.name).await?;
        let active = is_running(&st);
        let st = st.unwrap_or_else(|| UnitState {
            active_state: "inactive".into(),
            sub_state: "dead".into(),
            ..Default::default()
        });
        let (healthy, detail) = if active {
            let plan = env.plan.clone();
            let c2: &'static Component = c;
            match tokio::task::spawn_blocking(move || {
                health::probe(&plan, c2, Duration::from_secs(2))
            })
            .await
            {
                Ok(Ok(())) => (true, "ok".to_string()),
                Ok(Err(e)) => (false, e),
                Err(e) => (false, e.to_string()),
            }
        } else {
            (false, "not running".into())
        };
        out.push(ComponentStatus {
            component: c.name.into(),
            unit: unit.name.clone(),
            active_state: st.active_state,
            sub_state: st.sub_state,
            pid: st.main_pid,
            memory_bytes: st.memory_bytes,
            restarts: st.restarts,
            uptime_seconds: (active && st.active_enter_us > 0)
                .then(|| now_us.saturating_sub(st.active_enter_us) / 1_000_000),
            healthy,
            health_detail: detail,
        });
    }
    Ok(out)
}

/// Stop one component and start it again from its unit file (so an edited file or a swapped binary
/// takes effect), waiting until it is healthy.
pub async fn restart(
    env: &Env,
    sd: &Systemd,
    component: &str,
    timeout: Duration,
) -> Result<Timing, Error> {
    let (c, unit) = env.unit(component)?;
    let t0 = Instant::now();
    sd.stop(&unit.name).await?;
    sd.wait_gone(&unit.name, Duration::from_secs(60)).await?;
    sd.reset_failed(&unit.name).await?;
    let mut others: BTreeSet<&str> = env.units.iter().map(|(c, _)| c.name).collect();
    others.remove(c.name);
    preflight(env, &others)?;
    if !is_running(&sd.state(&env.slice.name).await?) {
        sd.start_transient(&env.slice.name, systemd::properties(&env.slice)?)
            .await?;
    }
    let mut quiet = |_: Progress| {};
    let progress: std::cell::RefCell<&mut dyn FnMut(Progress)> =
        std::cell::RefCell::new(&mut quiet);
    start_one(&env.plan, sd, c, unit, t0, t0 + timeout, &progress).await
}
