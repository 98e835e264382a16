//! Lifecycle hooks of the component table (`Component::after_healthy`), run by `start`.

use tokio::task::JoinHandle;

use super::{addons, images};
use crate::components::{Component, Hook, Instance};
use crate::error::Error;
use crate::spec::Plan;

/// What a hook did, for the start report.
#[derive(Debug, Default)]
pub struct HookReport {
    /// API paths of the addon objects applied.
    pub applied: Vec<String>,
    /// References of the images imported into containerd.
    pub imported: Vec<String>,
    /// References of the images pushed to the node's registry (`HOST:PORT/PATH:TAG`).
    pub pushed: Vec<String>,
}

impl HookReport {
    pub fn add(&mut self, other: HookReport) {
        self.applied.extend(other.applied);
        self.imported.extend(other.imported);
        self.pushed.extend(other.pushed);
    }

    /// How many things it did (for a progress line).
    pub fn count(&self) -> usize {
        self.applied.len() + self.imported.len() + self.pushed.len()
    }
}

/// Run `hook` of `instance` off the async runtime (hooks make blocking calls), with its node's plan.
pub fn spawn(instance: &Instance<'static>, hook: Hook) -> JoinHandle<Result<HookReport, Error>> {
    let (plan, component) = (instance.plan.clone(), instance.component);
    tokio::task::spawn_blocking(move || run(&plan, component, hook))
}

/// Run `hook` of `component` (blocking).
pub fn run(plan: &Plan, component: &Component, hook: Hook) -> Result<HookReport, Error> {
    match hook {
        Hook::ApplyAddons => addons::apply(plan).map(|applied| HookReport {
            applied,
            ..HookReport::default()
        }),
        Hook::ImportImages => images::import(plan, component).map(|imported| HookReport {
            imported,
            ..HookReport::default()
        }),
        Hook::LoadRegistry => images::load_registry(plan, component).map(|pushed| HookReport {
            pushed,
            ..HookReport::default()
        }),
        Hook::LabelNode => addons::label_node(plan).map(|applied| HookReport {
            applied,
            ..HookReport::default()
        }),
    }
}

/// The result of one spawned hook.
pub async fn finish(task: JoinHandle<Result<HookReport, Error>>) -> Result<HookReport, Error> {
    task.await
        .map_err(|e| Error::Internal(format!("a start hook panicked: {e}")))?
}

/// Wait for spawned hooks; the first failure wins.
pub async fn join(tasks: Vec<JoinHandle<Result<HookReport, Error>>>) -> Result<HookReport, Error> {
    let mut report = HookReport::default();
    for task in tasks {
        report.add(finish(task).await?);
    }
    Ok(report)
}
