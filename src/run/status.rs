//! `status`: per component, its unit's state, PID, memory, restarts, uptime and health.

use std::time::Duration;

use serde::Serialize;

use super::env::Env;
use super::probe;
use crate::error::Error;
use crate::systemd::{Systemd, UnitState};

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
        let st = sd.state(&unit.name).await?.unwrap_or_else(|| UnitState {
            sub_state: "dead".into(),
            ..Default::default()
        });
        let active = st.active_state.is_running();
        let (healthy, detail) = if active {
            match probe::probe_async(&env.plan, c, Duration::from_secs(2)).await {
                Ok(()) => (true, "ok".to_string()),
                Err(e) => (false, e.to_string()),
            }
        } else {
            (false, "not running".into())
        };
        out.push(ComponentStatus {
            component: c.name.into(),
            unit: unit.name.clone(),
            active_state: st.active_state.as_str().to_string(),
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
