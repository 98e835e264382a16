//! `certs renew`'s restarts: the running components that use a renewed certificate, restarted one
//! after another and each waited for until it is healthy again. Which component uses which
//! certificate is `run::certs`' (`users`, `affected`).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::components::Instance;
use crate::error::Error;
use crate::run::certs::{affected, users};
use crate::run::{journal_tail, probe, Env};
use crate::systemd::{JobResult, Systemd};

/// What `certs renew` did about one component that uses a renewed certificate.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartOutcome {
    pub component: String,
    pub unit: String,
    pub action: RestartAction,
    /// The renewed certificates it uses.
    pub certificates: Vec<String>,
    /// Seconds until it was healthy again (restarted ones).
    pub healthy_after: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RestartAction {
    /// Restarted, and healthy again.
    Restarted,
    /// Not running: it reads the new certificates when it starts.
    NotRunning,
    /// Runs under a debugger (`kubeunit debug`): left alone, restarting it is the user's call.
    UnderDebugger,
    /// `--no-restart`: it still runs with the old certificates.
    Skipped,
}

impl RestartAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartAction::Restarted => "restarted",
            RestartAction::NotRunning => "not running",
            RestartAction::UnderDebugger => "under a debugger",
            RestartAction::Skipped => "not restarted (--no-restart)",
        }
    }
}

/// Restart the running components that use any of `renewed`, one after another in table order
/// (what a component needs comes back before it), each waited for until it is healthy; then wait
/// until every running component of the environment is healthy again (the API server's readiness
/// follows etcd's restart).
///
/// systemd restarts each transient unit in place (RestartUnit): its properties are unchanged by a
/// renewal (the certificates keep their paths), and the unit stays loaded, so the units that
/// Want= it keep running. (Stopping and starting it anew, as `restart` does to pick up an edited
/// unit file, would leave a unit that others Want= loaded and its name taken.)
pub async fn restart_users(
    env: &Env,
    sd: &Systemd,
    renewed: &[String],
    timeout: Duration,
) -> Result<Vec<RestartOutcome>, Error> {
    let users = users(env);
    let t0 = Instant::now();
    let deadline = t0 + timeout;
    let mut out = Vec::new();
    for (c, unit, certs) in affected(env, &users, renewed) {
        let debug = c.debug_unit();
        let mut outcome = RestartOutcome {
            component: c.name.clone(),
            unit: unit.name.clone(),
            action: RestartAction::NotRunning,
            certificates: certs,
            healthy_after: None,
        };
        if sd
            .state(&debug)
            .await?
            .is_some_and(|s| s.active_state.is_running())
        {
            outcome.action = RestartAction::UnderDebugger;
            outcome.unit = debug;
        } else if let Some(before) = sd
            .state(&unit.name)
            .await?
            .filter(|s| s.active_state.is_running())
        {
            let result = sd.restart(&unit.name).await?;
            if result != JobResult::Done {
                return Err(failed(c, &unit.name, &format!("restart job {result}")));
            }
            wait_healthy(c, sd, &unit.name, before.restarts, deadline).await?;
            outcome.action = RestartAction::Restarted;
            outcome.healthy_after = Some(t0.elapsed().as_secs_f64());
        }
        out.push(outcome);
    }
    if out.iter().any(|o| o.action == RestartAction::Restarted) {
        for (c, unit) in &env.units {
            if let Some(st) = sd
                .state(&unit.name)
                .await?
                .filter(|s| s.active_state.is_running())
            {
                wait_healthy(c, sd, &unit.name, st.restarts, deadline).await?;
            }
        }
    }
    Ok(out)
}

fn failed(instance: &Instance, unit: &str, reason: &str) -> Error {
    Error::Start(format!(
        "{} ({unit}) did not come back after its certificates were renewed: {reason}\n--- last 20 lines of its journal ---\n{}--- see more: journalctl -u {unit} ---",
        instance.name,
        journal_tail(&instance.plan, unit, 20),
    ))
}

/// Wait until a running unit's probe passes; a crash (systemd restarting it, or it stopping) fails.
async fn wait_healthy(
    instance: &Instance<'static>,
    sd: &Systemd,
    unit: &str,
    restarts_before: u32,
    deadline: Instant,
) -> Result<(), Error> {
    let prober = probe::Prober::new(&instance.plan, instance.component, Duration::from_secs(2))
        .map_err(|e| failed(instance, unit, &e.to_string()))?;
    // The unit's state is read again only when systemd signals a change: the probe is polled.
    let mut watched = sd.watch(unit).await?;
    loop {
        let st = watched.state(sd).await?;
        if st.active_state.is_stopped() || st.restarts > restarts_before {
            return Err(failed(
                instance,
                unit,
                &format!(
                    "the process exited (state {}/{}, Result={}, exit status {})",
                    st.active_state.as_str(),
                    st.sub_state,
                    st.result,
                    st.exec_main_status
                ),
            ));
        }
        match prober.probe_async().await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(failed(
                    instance,
                    unit,
                    &format!("not healthy before the timeout: {e}"),
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}
