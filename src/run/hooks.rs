//! Lifecycle hooks of the component table (`Component::after_healthy`), run by `start`.

use tokio::task::JoinHandle;

use super::addons;
use crate::components::Hook;
use crate::error::Error;
use crate::spec::Plan;

/// What a hook did, for the start report.
#[derive(Debug, Default)]
pub struct HookReport {
    /// API paths of the addon objects applied.
    pub applied: Vec<String>,
}

/// Run `hook` off the async runtime (hooks make blocking API calls), while other components start.
pub fn spawn(plan: &Plan, hook: Hook) -> JoinHandle<Result<HookReport, Error>> {
    let plan = plan.clone();
    tokio::task::spawn_blocking(move || match hook {
        Hook::ApplyAddons => addons::apply(&plan).map(|applied| HookReport { applied }),
    })
}

/// Wait for spawned hooks; the first failure wins.
pub async fn join(tasks: Vec<JoinHandle<Result<HookReport, Error>>>) -> Result<HookReport, Error> {
    let mut report = HookReport::default();
    for task in tasks {
        let done = task
            .await
            .map_err(|e| Error::Internal(format!("a start hook panicked: {e}")))??;
        report.applied.extend(done.applied);
    }
    Ok(report)
}
