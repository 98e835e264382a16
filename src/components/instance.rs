//! What runs: each enabled component once, a per-node one once on every node, a per-upstream one
//! once per pull-through cache (`Plan::upstreams`). The one place that
//! enumerates the environment's units; rendering, `start`, `stop`, `status` and the rest go through
//! it.

use super::component::{Component, Hook};
use crate::spec::{paths, Plan};

/// One running copy of a component: a cluster component's only one, or a per-node component's on
/// one node.
#[derive(Clone)]
pub struct Instance<'t> {
    pub component: &'t Component,
    /// The plan as this instance sees it: its node's view (`Plan::on_node`); the first node's for a
    /// cluster component.
    pub plan: Plan,
    /// Its name in `kubeunit` commands and reports: the component's, `<component>@<node>` on a
    /// node other than the first.
    pub name: String,
    /// Its service: `kubeunit-<host name>-<name>.service`.
    pub unit: String,
}

impl<'t> Instance<'t> {
    fn new(component: &'t Component, plan: Plan) -> Instance<'t> {
        let (name, unit) = match plan.upstream() {
            Some(u) if component.per_upstream => {
                let name = format!("{}@{}", component.name, u.name);
                let unit = plan.unit_of(&name, "service");
                (name, unit)
            }
            _ => (
                plan.node().qualified(component.name),
                plan.node_unit_of(component.name, "service"),
            ),
        };
        Instance {
            component,
            plan,
            name,
            unit,
        }
    }

    /// Its timer, for a component on a schedule: `kubeunit-<host name>-<name>.timer`.
    pub fn timer(&self) -> Option<String> {
        self.component
            .timer
            .map(|_| self.plan.node_unit_of(self.component.name, "timer"))
    }

    /// The transient unit it runs in under a debugger (`kubeunit debug`):
    /// `kubeunit-<host name>-<component>-debug.service` (`...-debug@<node>.service` on a further
    /// node).
    pub fn debug_unit(&self) -> String {
        self.plan
            .node_unit_of(&format!("{}-debug", self.component.name), "service")
    }

    /// The oneshot unit of its start hook (`kubeunit install`):
    /// `kubeunit-<host name>-<component>-<hook>.service`, with the node's instance on a further node.
    pub fn hook_unit(&self, hook: Hook) -> String {
        self.plan.node_unit_of(
            &format!("{}-{}", self.component.name, hook.slug()),
            "service",
        )
    }

    /// Its journal's syslog identifier: its unit's name without the type.
    pub fn syslog_identifier(&self) -> String {
        format!("{}-{}", self.plan.unit_prefix(), self.name)
    }

    /// A config file of its component (`File::path`) as the state dir has it for this instance: a
    /// per-node component's files are its node's (`NodePlan::file`).
    pub fn file_path(&self, rel: &str) -> String {
        match self.plan.upstream() {
            _ if self.component.per_node => self.plan.node().file(rel),
            Some(u) if self.component.per_upstream => paths::upstream_file(&u.name, rel),
            _ => rel.to_string(),
        }
    }

    /// Of `all`, the instance of component `dep` this one depends on: on its own node when `dep`
    /// runs on every node, else the environment's one. `None` when `dep` does not run.
    pub fn dep<'a, I>(&self, dep: &str, all: I) -> Option<&'a Instance<'t>>
    where
        I: IntoIterator<Item = &'a Instance<'t>>,
        't: 'a,
    {
        all.into_iter().find(|d| {
            d.component.name == dep
                && (!d.component.per_node || d.plan.node_index == self.plan.node_index)
        })
    }
}

/// Every instance of `table`'s enabled components, in table order; a per-node component's once per
/// node, in node order, each with its node's view of `plan`.
pub fn instances_of<'t>(table: &'t [Component], plan: &Plan) -> Vec<Instance<'t>> {
    let mut out = Vec::new();
    for c in table.iter().filter(|c| c.is_enabled(&plan.profile)) {
        if c.per_node {
            out.extend((0..plan.nodes.len()).map(|i| Instance::new(c, plan.on_node(i))));
        } else if c.per_upstream {
            out.extend((0..plan.upstreams.len()).map(|i| Instance::new(c, plan.on_upstream(i))));
        } else {
            out.push(Instance::new(c, plan.on_node(0)));
        }
    }
    out
}

/// The instances of `table`'s enabled per-node components on the node `plan` is the view of, in
/// table order (a node that `gen` removed: `Plan::departed`).
pub fn node_instances<'t>(table: &'t [Component], plan: &Plan) -> Vec<Instance<'t>> {
    table
        .iter()
        .filter(|c| c.per_node && c.is_enabled(&plan.profile))
        .map(|c| Instance::new(c, plan.clone()))
        .collect()
}
