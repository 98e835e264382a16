//! systemd over D-Bus (zbus on tokio): transient units, jobs (waited for exactly, as systemd-run
//! does) and unit state. A client only: it knows no kubeunit types. `calendar`: systemd's calendar
//! expressions, checked as systemd parses them (spec's validation and unit files use it).

pub mod calendar;

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use zbus::fdo::PropertiesProxy;
use zbus::proxy::CacheProperties;
use zbus::{Connection, OwnedObjectPath, OwnedVariant};
use zbus_systemd::systemd1::{JobProxy, ManagerProxy};

/// Which manager to talk to.
#[derive(Debug, Clone)]
pub enum Bus {
    /// The system manager, through the system bus.
    System,
    /// The calling user's manager, through the session bus.
    User,
    /// Any D-Bus address, e.g. `unix:path=/proc/PID/root/run/dbus/system_bus_socket` for a container.
    Address(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    #[error("cannot connect to systemd ({bus}): {source}.\n  fix: {fix}")]
    Connect {
        bus: String,
        source: zbus::Error,
        fix: &'static str,
    },
    #[error("systemd refused {what}: {source}")]
    Call { what: String, source: zbus::Error },
    #[error("the D-Bus connection closed while waiting for job {job}")]
    Closed { job: String },
}

fn call(what: impl Into<String>) -> impl FnOnce(zbus::Error) -> SystemdError {
    let what = what.into();
    move |source| SystemdError::Call { what, source }
}

/// How a start job treats the unit's dependencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// Wants= pulled in, After= waited for.
    InOrder,
    /// Started now, whatever its Wants= and After= say (ignore-dependencies): the caller started
    /// what it needs. The unit keeps them for everything else (stopping goes in reverse order).
    Now,
}

impl StartMode {
    fn job_mode(self, in_order: &'static str) -> &'static str {
        match self {
            StartMode::InOrder => in_order,
            StartMode::Now => "ignore-dependencies",
        }
    }
}

pub struct Systemd {
    conn: Connection,
    manager: ManagerProxy<'static>,
}

/// What a finished job reports (`JobRemoved`'s result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobResult {
    /// simple: forked; exec: execve succeeded; notify: READY=1 received; oneshot: exited.
    Done,
    Canceled,
    Timeout,
    Failed,
    Dependency,
    Skipped,
    /// A result this client does not know (a newer systemd).
    Other(String),
}

impl JobResult {
    fn parse(s: &str) -> JobResult {
        match s {
            "done" => JobResult::Done,
            "canceled" => JobResult::Canceled,
            "timeout" => JobResult::Timeout,
            "failed" => JobResult::Failed,
            "dependency" => JobResult::Dependency,
            "skipped" => JobResult::Skipped,
            other => JobResult::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for JobResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            JobResult::Done => "done",
            JobResult::Canceled => "canceled",
            JobResult::Timeout => "timeout",
            JobResult::Failed => "failed",
            JobResult::Dependency => "dependency",
            JobResult::Skipped => "skipped",
            JobResult::Other(s) => s,
        };
        f.write_str(s)
    }
}

/// A unit's ActiveState.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ActiveState {
    Active,
    Reloading,
    #[default]
    Inactive,
    Failed,
    Activating,
    Deactivating,
    /// Newer states (maintenance, refreshing) and anything unknown.
    Other,
}

impl ActiveState {
    fn parse(s: &str) -> ActiveState {
        match s {
            "active" => ActiveState::Active,
            "reloading" => ActiveState::Reloading,
            "inactive" => ActiveState::Inactive,
            "failed" => ActiveState::Failed,
            "activating" => ActiveState::Activating,
            "deactivating" => ActiveState::Deactivating,
            _ => ActiveState::Other,
        }
    }

    /// Running as far as a caller is concerned (active, or reloading its configuration).
    pub fn is_running(self) -> bool {
        matches!(self, ActiveState::Active | ActiveState::Reloading)
    }

    /// Stopped: nothing of it runs.
    pub fn is_stopped(self) -> bool {
        matches!(self, ActiveState::Inactive | ActiveState::Failed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ActiveState::Active => "active",
            ActiveState::Reloading => "reloading",
            ActiveState::Inactive => "inactive",
            ActiveState::Failed => "failed",
            ActiveState::Activating => "activating",
            ActiveState::Deactivating => "deactivating",
            ActiveState::Other => "other",
        }
    }
}

#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitState {
    pub load_state: String,
    pub description: String,
    pub active_state: ActiveState,
    pub sub_state: String,
    pub main_pid: u32,
    pub memory_bytes: Option<u64>,
    /// Its cgroup ("/x.slice/y.service"; empty without processes).
    pub control_group: String,
    pub restarts: u32,
    /// CLOCK_REALTIME microseconds when the unit last became active (0 if never).
    pub active_enter_us: u64,
    pub result: String,
    pub exec_main_status: i32,
    /// A timer's next run, CLOCK_REALTIME microseconds (`None`: not a timer, or no next run).
    pub next_elapse_us: Option<u64>,
    /// A timer's last run, CLOCK_REALTIME microseconds (0 if never).
    pub last_trigger_us: u64,
    /// Its pending job, as `systemctl list-jobs` shows it: type and state ("start waiting",
    /// "start running"); `None` without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

impl Systemd {
    pub async fn connect(bus: &Bus) -> Result<Systemd, SystemdError> {
        let (builder, label, fix) = match bus {
            Bus::System => (
                zbus::connection::Builder::system(),
                "system bus".to_string(),
                "run on a host booted with systemd (is /run/dbus/system_bus_socket there?), or pass --bus",
            ),
            Bus::User => (
                zbus::connection::Builder::session(),
                "session bus".to_string(),
                "log in with a user session (systemd --user), or pass --bus",
            ),
            Bus::Address(a) => (
                zbus::connection::Builder::address(a.as_str()),
                a.clone(),
                "check the --bus address (e.g. unix:path=/run/dbus/system_bus_socket)",
            ),
        };
        let err = |source| SystemdError::Connect {
            bus: label.clone(),
            source,
            fix,
        };
        let conn = builder.build().await.map_err(err)?;
        let manager = ManagerProxy::new(&conn).await.map_err(err)?;
        // systemd only sends JobRemoved and friends to subscribed clients.
        manager.subscribe().await.map_err(err)?;
        Ok(Systemd { conn, manager })
    }

    /// Start a transient unit and wait for its start job. Subscribes to JobRemoved before the call so
    /// a fast job cannot finish unseen (as systemd-run does).
    pub async fn start_transient(
        &self,
        name: &str,
        properties: Vec<(String, OwnedVariant)>,
    ) -> Result<JobResult, SystemdError> {
        self.start_transient_with(name, properties, vec![]).await
    }

    /// Start a transient unit with auxiliary transient units, which systemd loads but does not start
    /// (a timer's service, as `systemd-run --on-calendar` does); waits for the start job.
    pub async fn start_transient_with(
        &self,
        name: &str,
        properties: Vec<(String, OwnedVariant)>,
        aux: Vec<(String, Vec<(String, OwnedVariant)>)>,
    ) -> Result<JobResult, SystemdError> {
        self.start_transient_then(name, properties, aux, StartMode::InOrder, || {})
            .await
    }

    /// `start_transient_with` in `mode`, calling `submitted` once systemd has the unit and its
    /// start job (before the job finishes): what starts alongside it may go then.
    pub async fn start_transient_then(
        &self,
        name: &str,
        properties: Vec<(String, OwnedVariant)>,
        aux: Vec<(String, Vec<(String, OwnedVariant)>)>,
        mode: StartMode,
        submitted: impl FnOnce(),
    ) -> Result<JobResult, SystemdError> {
        // An inactive unit of that name that systemd has not unloaded yet (or whose transient file
        // it has not removed yet) refuses the name for a moment: clear it and try again. Each try
        // subscribes afresh, so that no unread subscription holds up the connection's signals.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let mut removed = self
                .manager
                .receive_job_removed()
                .await
                .map_err(call("subscribing to JobRemoved"))?;
            let result = self
                .manager
                .start_transient_unit(
                    name.to_string(),
                    mode.job_mode("fail").into(),
                    properties.clone(),
                    aux.clone(),
                )
                .await;
            match result {
                Ok(job) => {
                    submitted();
                    return wait_job(&mut removed, &job).await;
                }
                Err(e) if is_unit_exists(&e) && tokio::time::Instant::now() < deadline => {
                    drop(removed);
                    if self
                        .state(name)
                        .await?
                        .is_some_and(|s| !s.active_state.is_stopped())
                    {
                        return Err(call(format!("StartTransientUnit {name}"))(e));
                    }
                    for n in std::iter::once(name).chain(aux.iter().map(|(n, _)| n.as_str())) {
                        self.stop(n).await?;
                        self.reset_failed(n).await?;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(call(format!("StartTransientUnit {name}"))(e)),
            }
        }
    }

    /// Stop a unit and wait for the job; a unit that is not loaded counts as stopped.
    pub async fn stop(&self, name: &str) -> Result<Option<JobResult>, SystemdError> {
        self.stop_then(name, async { Ok(()) }).await
    }

    /// Stop a service and SIGKILL its main process at once, then wait for the job. The stop job is
    /// queued first, so systemd takes the death for the stop (no restart). The main process only:
    /// the stop job's SIGTERM may already have ended it, and then systemd runs ExecStopPost=, which
    /// a SIGKILL to every process of the unit would kill too (a registry cache's filter was left
    /// on the host that way). What the main process leaves, systemd ends as for any stop.
    pub async fn stop_killing(&self, name: &str) -> Result<Option<JobResult>, SystemdError> {
        self.stop_then(name, self.kill(name, "main")).await
    }

    /// Queue a stop job, run `then` while it runs, and wait for it (`None`: no such unit).
    async fn stop_then(
        &self,
        name: &str,
        then: impl std::future::Future<Output = Result<(), SystemdError>>,
    ) -> Result<Option<JobResult>, SystemdError> {
        let mut removed = self
            .manager
            .receive_job_removed()
            .await
            .map_err(call("subscribing to JobRemoved"))?;
        match self
            .manager
            .stop_unit(name.to_string(), "replace".into())
            .await
        {
            Ok(job) => {
                then.await?;
                wait_job(&mut removed, &job).await.map(Some)
            }
            Err(e) if is_no_such_unit(&e) => Ok(None),
            Err(e) => Err(call(format!("StopUnit {name}"))(e)),
        }
    }

    /// Restart a loaded unit in place (RestartUnit, mode replace) and wait for the job: it keeps its
    /// properties and stays loaded, so units that Want= it are not disturbed.
    pub async fn restart(&self, name: &str) -> Result<JobResult, SystemdError> {
        let job = self
            .manager
            .restart_unit(name.to_string(), "replace".into());
        self.job(format!("RestartUnit {name}"), job, || {}).await
    }

    /// Start a unit systemd loads from its unit file (an installed one) and wait for the start job.
    pub async fn start_unit(&self, name: &str) -> Result<JobResult, SystemdError> {
        self.start_unit_then(name, StartMode::InOrder, || {}).await
    }

    /// `start_unit` in `mode`, calling `submitted` once the start job is queued (before it
    /// finishes).
    pub async fn start_unit_then(
        &self,
        name: &str,
        mode: StartMode,
        submitted: impl FnOnce(),
    ) -> Result<JobResult, SystemdError> {
        let job = self
            .manager
            .start_unit(name.to_string(), mode.job_mode("replace").into());
        self.job(format!("StartUnit {name}"), job, submitted).await
    }

    /// Submit a job (`submit` is not polled before the subscription is in place, so a fast job
    /// cannot finish unseen), call `submitted` once it is queued, and wait for its result.
    async fn job(
        &self,
        what: String,
        submit: impl std::future::Future<Output = zbus::Result<OwnedObjectPath>>,
        submitted: impl FnOnce(),
    ) -> Result<JobResult, SystemdError> {
        let mut removed = self
            .manager
            .receive_job_removed()
            .await
            .map_err(call("subscribing to JobRemoved"))?;
        let job = submit.await.map_err(call(what))?;
        submitted();
        wait_job(&mut removed, &job).await
    }

    /// Names of the active (or activating) units matching a glob such as `kubeunit-*-kubelet.service`.
    pub async fn active_units(&self, pattern: &str) -> Result<Vec<String>, SystemdError> {
        let units = self
            .manager
            .list_units_by_patterns(
                vec!["active".into(), "activating".into(), "reloading".into()],
                vec![pattern.to_string()],
            )
            .await
            .map_err(call(format!("ListUnitsByPatterns {pattern}")))?;
        Ok(units.into_iter().map(|u| u.0).collect())
    }

    /// The failed units matching a glob, each with the slice it is in (its `Slice` property).
    pub async fn failed_units(&self, pattern: &str) -> Result<Vec<(String, String)>, SystemdError> {
        let units = self
            .manager
            .list_units_by_patterns(vec!["failed".into()], vec![pattern.to_string()])
            .await
            .map_err(call(format!("ListUnitsByPatterns {pattern}")))?;
        let mut out = Vec::new();
        for unit in units {
            let props = self.all_properties(&unit.0).await?;
            let slice = prop::<&str>(&props, "Slice")
                .unwrap_or_default()
                .to_string();
            out.push((unit.0, slice));
        }
        Ok(out)
    }

    /// SIGKILL every process left in a unit's cgroup (a slice's: its whole subtree), stopped or not.
    /// Nothing left to signal is no error: systemd 252 answers an empty or vanishing cgroup with
    /// IOError ("Failed to send signal SIGKILL to auxiliary processes").
    pub async fn kill_all(&self, name: &str) -> Result<(), SystemdError> {
        self.kill(name, "all").await
    }

    /// SIGKILL to `who` of a unit (KillUnit's "main", "control" or "all"); nothing to kill is no error.
    async fn kill(&self, name: &str, who: &str) -> Result<(), SystemdError> {
        match self
            .manager
            .kill_unit(name.to_string(), who.into(), libc::SIGKILL)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if is_no_such_unit(&e) || is_nothing_to_kill(&e) => Ok(()),
            Err(e) => Err(call(format!("KillUnit {name}"))(e)),
        }
    }

    pub async fn reset_failed(&self, name: &str) -> Result<(), SystemdError> {
        match self.manager.reset_failed_unit(name.to_string()).await {
            Ok(()) => Ok(()),
            Err(e) if is_no_such_unit(&e) => Ok(()),
            Err(e) => Err(call(format!("ResetFailedUnit {name}"))(e)),
        }
    }

    /// Current state of a unit; `None` when systemd has no such unit loaded. One round trip:
    /// GetAll with an empty interface name on the unit's object path answers with the properties
    /// of every interface it has (Unit, Service, Timer...), as `systemctl show` asks (systemd's
    /// bus_map_all_properties). A pending job costs one call more, for its type and state.
    pub async fn state(&self, name: &str) -> Result<Option<UnitState>, SystemdError> {
        // A look at a unit's path loads it. A service or timer without a file loads as
        // "not-found" (below); a slice needs no file and would load as an inactive slice, which
        // then refuses to be started as a transient unit: ask first whether it is there.
        if name.ends_with(".slice") && !self.is_loaded(name).await? {
            return Ok(None);
        }
        let props = self.all_properties(name).await?;
        let text = |key: &str| prop::<&str>(&props, key).unwrap_or_default().to_string();
        let number = |key: &str| prop::<u64>(&props, key);
        let active_state = ActiveState::parse(&text("ActiveState"));
        // Asking for a unit by its path makes systemd load it; one it has no file or transient
        // definition for is "not-found", which is what GetUnit calls no such unit.
        if text("LoadState") == "not-found" && active_state.is_stopped() {
            return Ok(None);
        }
        let mut st = UnitState {
            load_state: text("LoadState"),
            description: text("Description"),
            active_state,
            sub_state: text("SubState"),
            active_enter_us: number("ActiveEnterTimestamp").unwrap_or(0),
            result: text("Result"),
            ..Default::default()
        };
        let job = props
            .get("Job")
            .and_then(|v| <(u32, OwnedObjectPath)>::try_from(v.try_clone().ok()?).ok());
        if let Some((id, job_path)) = job {
            if id != 0 {
                st.job = self.job_words(job_path).await;
            }
        }
        if name.ends_with(".service") {
            st.main_pid = prop(&props, "MainPID").unwrap_or(0);
            st.restarts = prop(&props, "NRestarts").unwrap_or(0);
            st.exec_main_status = prop(&props, "ExecMainStatus").unwrap_or(0);
            // u64::MAX means "not accounted".
            st.memory_bytes = number("MemoryCurrent").filter(|m| *m != u64::MAX);
            st.control_group = text("ControlGroup");
        }
        if name.ends_with(".timer") {
            // u64::MAX and 0 mean "none".
            st.next_elapse_us =
                number("NextElapseUSecRealtime").filter(|t| *t != 0 && *t != u64::MAX);
            st.last_trigger_us = number("LastTriggerUSec").unwrap_or(0);
        }
        Ok(Some(st))
    }

    /// Whether systemd has the unit loaded (GetUnit). Unlike a look at its object path, which
    /// loads the unit, this leaves systemd as it is: a slice needs no file, so a slice looked at
    /// would be loaded again and again.
    pub async fn is_loaded(&self, name: &str) -> Result<bool, SystemdError> {
        match self.manager.get_unit(name.to_string()).await {
            Ok(_) => Ok(true),
            Err(e) if is_no_such_unit(&e) => Ok(false),
            Err(e) => Err(call(format!("GetUnit {name}"))(e)),
        }
    }

    /// Every property of a unit, by name, from all its interfaces: one GetAll call.
    async fn all_properties(
        &self,
        name: &str,
    ) -> Result<HashMap<String, OwnedVariant>, SystemdError> {
        let path = unit_path(name);
        let what = || format!("GetAll {name}");
        let reply = self
            .conn
            .call_method(
                Some("org.freedesktop.systemd1"),
                path.as_str(),
                Some("org.freedesktop.DBus.Properties"),
                "GetAll",
                &("",),
            )
            .await
            .map_err(call(what()))?;
        reply
            .body()
            .deserialize::<HashMap<String, OwnedVariant>>()
            .map_err(call(what()))
    }

    /// "TYPE STATE" of a job; `None` once it is gone.
    async fn job_words(&self, path: OwnedObjectPath) -> Option<String> {
        let job = JobProxy::builder(&self.conn)
            .path(path)
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .ok()?;
        Some(format!(
            "{} {}",
            job.job_type().await.ok()?,
            job.state().await.ok()?
        ))
    }

    /// Signals that something about unit `name` changed (PropertiesChanged on its path), or that
    /// any unit was unloaded (the manager's UnitRemoved). Subscribed before the state is read, so
    /// that no change between the read and the wait goes unseen (as systemd-run waits).
    async fn changes(&self, name: Option<&str>) -> Result<Changes, SystemdError> {
        let removed = self
            .manager
            .receive_unit_removed()
            .await
            .map_err(call("subscribing to UnitRemoved"))?
            .map(|_| ())
            .boxed();
        let Some(name) = name else {
            return Ok(Changes::new(removed));
        };
        let properties = PropertiesProxy::builder(&self.conn)
            .destination("org.freedesktop.systemd1")
            .path(unit_path(name))
            .cache_properties(CacheProperties::No)
            .build()
            .await
            .map_err(call(format!("properties proxy of {name}")))?;
        let changed = properties
            .receive_properties_changed()
            .await
            .map_err(call(format!("subscribing to PropertiesChanged of {name}")))?
            .map(|_| ());
        Ok(Changes::new(
            futures_util::stream::select(removed, changed).boxed(),
        ))
    }

    /// Unit `name`'s state, for a caller that polls something else meanwhile (a health probe):
    /// read now, and again only when systemd signals a change.
    pub async fn watch(&self, name: &str) -> Result<WatchedUnit, SystemdError> {
        let changes = self.changes(Some(name)).await?;
        let state = self.state(name).await?.unwrap_or_default();
        Ok(WatchedUnit {
            name: name.to_string(),
            changes,
            state,
        })
    }

    /// Wait until systemd has unloaded an inactive transient unit, so that its name can be started
    /// again; at most `timeout`. `false` for a unit that is not inactive.
    pub async fn wait_unloaded(&self, name: &str, timeout: Duration) -> Result<bool, SystemdError> {
        if self
            .state(name)
            .await?
            .is_some_and(|s| !s.active_state.is_stopped())
        {
            return Ok(false);
        }
        Ok(self.collect(&[name], timeout).await?.is_empty())
    }

    /// Stop every unit of `names` still loaded and wait until systemd has unloaded them all, at
    /// most `timeout`; the ones still loaded then. A unit that went inactive while others referred
    /// to it is not queued for garbage collection again by itself: a (no-op) stop job of its own
    /// puts it back in the queue. Woken by UnitRemoved, not polled; each check asks only for the
    /// units still loaded.
    pub async fn collect(
        &self,
        names: &[&str],
        timeout: Duration,
    ) -> Result<Vec<String>, SystemdError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let changes = self.changes(None).await?;
        let mut loaded: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        loop {
            let mut still = Vec::new();
            for name in loaded {
                if self.is_loaded(&name).await? {
                    still.push(name);
                }
            }
            loaded = still;
            if loaded.is_empty() || tokio::time::Instant::now() >= deadline {
                return Ok(loaded);
            }
            for name in &loaded {
                self.stop(name).await?;
                self.reset_failed(name).await?;
            }
            // The next unit unloaded (any: the signal is the manager's), or a second, whichever
            // comes first.
            changes
                .next(deadline.min(tokio::time::Instant::now() + Duration::from_secs(1)))
                .await;
        }
    }

    /// `systemctl daemon-reload`: systemd reads unit files again (answers once it has).
    pub async fn reload(&self) -> Result<(), SystemdError> {
        self.manager.reload().await.map_err(call("Reload"))
    }

    /// Whether a unit file of that name is installed, and its state (`enabled`, `static`, ...).
    pub async fn unit_file_state(&self, name: &str) -> Result<Option<String>, SystemdError> {
        match self.manager.get_unit_file_state(name.to_string()).await {
            Ok(state) => Ok(Some(state)),
            Err(e) if is_no_such_file(&e) => Ok(None),
            Err(e) => Err(call(format!("GetUnitFileState {name}"))(e)),
        }
    }

    /// Wait until the unit is gone or inactive (after a stop), at most `timeout`. Woken by its
    /// PropertiesChanged and the manager's UnitRemoved, not polled.
    pub async fn wait_gone(&self, name: &str, timeout: Duration) -> Result<bool, SystemdError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let changes = self.changes(Some(name)).await?;
        loop {
            match self.state(name).await? {
                None => return Ok(true),
                Some(s) if s.active_state.is_stopped() => return Ok(true),
                _ if tokio::time::Instant::now() >= deadline => return Ok(false),
                _ => changes.next(deadline).await,
            }
        }
    }
}

/// A unit's state as `Systemd::watch` keeps it.
pub struct WatchedUnit {
    name: String,
    changes: Changes,
    state: UnitState,
}

impl WatchedUnit {
    /// The unit's state: read again when systemd signalled a change since the last call.
    pub async fn state(&mut self, sd: &Systemd) -> Result<&UnitState, SystemdError> {
        if self.changes.take() {
            self.state = sd.state(&self.name).await?.unwrap_or_default();
        }
        Ok(&self.state)
    }
}

/// Signals of `Systemd::changes`: wakes a waiter at each, and remembers that one came.
/// A task of its own reads the signals as they come: zbus queues a stream's signals until it is
/// read, and a full queue holds up every other message of the connection, the replies to the
/// waiter's own calls too.
struct Changes {
    signalled: std::sync::Arc<tokio::sync::Notify>,
    /// Set at each signal, cleared by `take`.
    seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
}

impl Changes {
    fn new(mut signals: futures_util::stream::BoxStream<'static, ()>) -> Changes {
        let signalled = std::sync::Arc::new(tokio::sync::Notify::new());
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (notify, mark) = (signalled.clone(), seen.clone());
        let reader = tokio::spawn(async move {
            while signals.next().await.is_some() {
                mark.store(true, std::sync::atomic::Ordering::SeqCst);
                // A permit is kept when no one waits: a signal between a check and the wait
                // still wakes it.
                notify.notify_one();
            }
        });
        Changes {
            signalled,
            seen,
            reader,
        }
    }

    /// Until the next signal (or one since the last wait), or `deadline`.
    async fn next(&self, deadline: tokio::time::Instant) {
        let _ = tokio::time::timeout_at(deadline, self.signalled.notified()).await;
    }

    /// Whether a signal came since the last call (or since the watch began): the state is worth
    /// reading again.
    fn take(&self) -> bool {
        self.seen.swap(false, std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Changes {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Property `key` as a `T`, when it is there and of that type.
fn prop<'a, T: TryFrom<&'a OwnedVariant>>(
    props: &'a HashMap<String, OwnedVariant>,
    key: &str,
) -> Option<T> {
    props.get(key).and_then(|v| T::try_from(v).ok())
}

/// A unit's object path: systemd's own escaping of its name (bus_label_escape).
fn unit_path(name: &str) -> String {
    format!(
        "/org/freedesktop/systemd1/unit/{}",
        zbus_systemd::bus_label_escape(name)
    )
}

async fn wait_job<S>(removed: &mut S, job: &OwnedObjectPath) -> Result<JobResult, SystemdError>
where
    S: futures_util::Stream<Item = zbus_systemd::systemd1::JobRemoved> + Unpin,
{
    while let Some(signal) = removed.next().await {
        let Ok(args) = signal.args() else { continue };
        if args.job.as_str() == job.as_str() {
            return Ok(JobResult::parse(&args.result));
        }
    }
    Err(SystemdError::Closed {
        job: job.as_str().to_string(),
    })
}

fn is_nothing_to_kill(e: &zbus::Error) -> bool {
    match e {
        // zbus turns the org.freedesktop.DBus.Error names into fdo::Error values.
        zbus::Error::FDO(fdo) => matches!(**fdo, zbus::fdo::Error::IOError(_)),
        zbus::Error::MethodError(name, _, _) => {
            name.as_str() == "org.freedesktop.systemd1.NoSuchProcess"
        }
        _ => false,
    }
}

/// GetUnitFileState of a unit without a file: ENOENT, as an fdo error or systemd's own.
fn is_no_such_file(e: &zbus::Error) -> bool {
    match e {
        zbus::Error::FDO(fdo) => matches!(**fdo, zbus::fdo::Error::FileNotFound(_)),
        zbus::Error::MethodError(name, _, _) => {
            let n = name.as_str();
            n == "org.freedesktop.DBus.Error.FileNotFound"
                || n == "org.freedesktop.systemd1.NoSuchUnit"
        }
        _ => false,
    }
}

fn is_unit_exists(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _) if name.as_str() == "org.freedesktop.systemd1.UnitExists")
}

fn is_no_such_unit(e: &zbus::Error) -> bool {
    match e {
        zbus::Error::MethodError(name, _, _) => {
            let n = name.as_str();
            n == "org.freedesktop.systemd1.NoSuchUnit" || n == "org.freedesktop.systemd1.LoadFailed"
        }
        _ => false,
    }
}
