//! `status`: per component, its unit's state, PID, memory, restarts, uptime and health.

use std::time::Duration;

use serde::Serialize;

use super::certs::{self, CertExpiry};
use super::env::{debugger_address, Env};
use super::probe;
use crate::error::Error;
use crate::systemd::{ActiveState, Systemd, UnitState};
use crate::unit::UnitFile;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentStatus {
    pub component: String,
    pub unit: String,
    pub active_state: String,
    pub sub_state: String,
    pub pid: u32,
    /// systemd's MemoryCurrent, or its cgroup's use when systemd does not account it (`memory.rs`).
    pub memory_bytes: Option<u64>,
    pub restarts: u32,
    pub uptime_seconds: Option<u64>,
    pub healthy: bool,
    pub health_detail: String,
    /// dlv's listen address while it runs under a debugger (`kubeunit debug`).
    pub debugger: Option<String>,
    /// The binary the profile names instead of the default one (`restart --binary`).
    pub binary_override: Option<String>,
    /// Certificates it uses that expire within 30 days (or have expired).
    pub certificates_expiring: Vec<Expiring>,
    /// A component on a schedule: its timer's next run (RFC 3339, UTC).
    pub next_run: Option<String>,
    /// ... and its last run, if any.
    pub last_run: Option<String>,
}

/// A certificate that expires soon.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expiring {
    pub name: String,
    pub not_after: String,
    pub residual_seconds: i64,
}

impl From<&CertExpiry> for Expiring {
    fn from(c: &CertExpiry) -> Expiring {
        Expiring {
            name: c.name.clone(),
            not_after: c.not_after.clone(),
            residual_seconds: c.residual_seconds,
        }
    }
}

/// Every certificate of the environment that expires within 30 days (CAs and those no component
/// uses too); `Err` when the state dir's certificates cannot be read.
pub fn certificates_expiring(env: &Env) -> Result<Vec<CertExpiry>, Error> {
    let users = certs::users(env);
    let all = certs::expiration(&env.plan, &users, time::OffsetDateTime::now_utc())?;
    Ok(certs::expiring(&all).into_iter().cloned().collect())
}

/// The Kubernetes release the environment's unit files run: what the API server's binary (on a
/// host without one, the kubelet's) reports, as `upgrade` asks it. `None` when there is neither, or
/// the binary cannot say.
pub fn kubernetes_version(env: &Env) -> Option<String> {
    let (i, unit) = ["kube-apiserver", "kubelet"]
        .iter()
        .find_map(|name| env.units.iter().find(|(i, _)| i.component.name == *name))?;
    let (path, argv, _) = unit.exec_start()?;
    super::versions::of_binary(
        std::path::Path::new(path),
        &super::versions::leading(argv),
        i.component.go_module,
    )
    .ok()
    .map(|v| v.word)
}

pub async fn status(env: &Env, sd: &Systemd) -> Result<Vec<ComponentStatus>, Error> {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    // A state dir whose certificates cannot be read shows no expiry here (`certs
    // check-expiration` says why); the components' health shows the consequences.
    let expiring = certificates_expiring(env).unwrap_or_default();
    let mut out = Vec::new();
    for (i, unit) in &env.units {
        let c = i.component;
        let debug_name = i.debug_unit();
        let debug = sd
            .state(&debug_name)
            .await?
            .filter(|s| s.active_state.is_running());
        let debugger = debug
            .as_ref()
            .map(|s| debugger_address(&s.description).unwrap_or("?").to_string());
        if let Some(timer) = env.timer(&i.name) {
            let mut row = scheduled(sd, &i.name, timer, unit).await?;
            row.binary_override =
                Some(env.plan.profile.component(c.name).binary).filter(|b| !b.is_empty());
            out.push(row);
            continue;
        }
        let (unit_name, st) = match debug {
            Some(st) => (debug_name, st),
            None => (
                unit.name.clone(),
                sd.state(&unit.name).await?.unwrap_or_else(|| UnitState {
                    sub_state: "dead".into(),
                    ..Default::default()
                }),
            ),
        };
        let active = st.active_state.is_running();
        let (healthy, detail) = if active {
            match probe::probe_async(&i.plan, c, Duration::from_secs(2)).await {
                Ok(()) => (true, "ok".to_string()),
                Err(e) => (false, e.to_string()),
            }
        } else {
            (false, "not running".into())
        };
        out.push(ComponentStatus {
            component: i.name.clone(),
            unit: unit_name,
            active_state: st.active_state.as_str().to_string(),
            sub_state: st.sub_state,
            pid: st.main_pid,
            memory_bytes: st
                .memory_bytes
                .or_else(|| active.then(|| super::memory::of_cgroup(&st.control_group))?),
            restarts: st.restarts,
            uptime_seconds: (active && st.active_enter_us > 0)
                .then(|| now_us.saturating_sub(st.active_enter_us) / 1_000_000),
            healthy,
            health_detail: detail,
            debugger,
            binary_override: Some(env.plan.profile.component(c.name).binary)
                .filter(|b| !b.is_empty()),
            certificates_expiring: expiring
                .iter()
                .filter(|e| e.used_by.contains(&i.name))
                .map(Expiring::from)
                .collect(),
            next_run: None,
            last_run: None,
        });
    }
    Ok(out)
}

/// A component on a schedule: healthy while its timer waits and its service's last run did not fail.
async fn scheduled(
    sd: &Systemd,
    component: &str,
    timer: &UnitFile,
    service: &UnitFile,
) -> Result<ComponentStatus, Error> {
    let st = sd.state(&timer.name).await?.unwrap_or_else(|| UnitState {
        sub_state: "dead".into(),
        ..Default::default()
    });
    let svc = sd.state(&service.name).await?.unwrap_or_default();
    let active = st.active_state.is_running();
    let (healthy, detail) = match (active, svc.active_state) {
        (false, _) => (false, "timer not running".to_string()),
        (true, ActiveState::Failed) => (
            false,
            format!(
                "its last run failed (Result={}, exit status {}): journalctl -u {}",
                svc.result, svc.exec_main_status, service.name
            ),
        ),
        (true, _) => (true, "ok".to_string()),
    };
    Ok(ComponentStatus {
        component: component.into(),
        unit: timer.name.clone(),
        active_state: st.active_state.as_str().to_string(),
        sub_state: st.sub_state,
        pid: svc.main_pid,
        memory_bytes: None,
        restarts: 0,
        uptime_seconds: None,
        healthy,
        health_detail: detail,
        debugger: None,
        binary_override: None,
        certificates_expiring: vec![],
        next_run: st.next_elapse_us.filter(|_| active).and_then(rfc3339),
        last_run: Some(st.last_trigger_us)
            .filter(|t| *t != 0 && *t != u64::MAX)
            .and_then(rfc3339),
    })
}

/// CLOCK_REALTIME microseconds as RFC 3339 (UTC, whole seconds).
fn rfc3339(us: u64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp((us / 1_000_000) as i64).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}
