//! The component table: everything kubeunit knows about a component, in one entry each (`table.rs`):
//! binary, start type, dependencies, ports, health probe, flags, the config files it reads (rendered
//! from templates under `configs/` and `addons/`), what `start` does once it is healthy, and the
//! profile checks particular to it. Table order is start order (within what dependencies allow).
//!
//! Adding a component with one config file is one `Component` entry in `table.rs` plus its template
//! (a `Template` constant next to the entries, text under `configs/`); the unit file, preflight, start, status, logs and restart
//! follow from the entry. A test-only component shows it (`tests` below).
//!
//! Outside this module and the templates no code branches on a component's name. What the certificate
//! table (`pki::CERTS`) says about components (`When::Component("kubelet")`) is data, checked by a test
//! here. Kept exception: the test helpers list binary names to fake a bin dir.

mod command;
mod component;
mod instance;
mod table;

use crate::error::FieldError;
use crate::spec::Profile;

pub use command::{command_line, feature_gates};
pub use component::{
    Cleanup, Component, Content, EnabledBy, File, FileContext, Hook, HostCheck, Probe, StandIn,
    Timer,
};
pub use instance::{instances_of, Instance};
pub use table::{COMPONENTS, SCHEDULED_SNAPSHOT_PREFIX};

/// etcd's name in the table: what etcd snapshots (`run::snapshot`) save and restore.
pub const ETCD: &str = "etcd";

/// etcd's companion tool `tool` (etcdctl, etcdutl): the profile's `etcd.snapshot.<tool>`, else the
/// binary of that name next to etcd's.
pub fn etcd_tool(plan: &crate::spec::Plan, tool: &str) -> std::path::PathBuf {
    let s = &plan.profile.etcd.snapshot;
    let given = match tool {
        "etcdctl" => &s.etcdctl,
        _ => &s.etcdutl,
    };
    if !given.as_os_str().is_empty() {
        return given.clone();
    }
    let etcd = find(ETCD).map(|c| c.binary_path(plan)).unwrap_or_default();
    etcd.parent().unwrap_or(&plan.profile.bin_dir).join(tool)
}

/// Every instance of the table's enabled components: what runs (`instances_of`).
pub fn instances(plan: &crate::spec::Plan) -> Vec<Instance<'static>> {
    instances_of(COMPONENTS, plan)
}

pub fn find(name: &str) -> Option<&'static Component> {
    COMPONENTS.iter().find(|c| c.name == name)
}

/// Enabled components of `table` in table order.
pub fn enabled<'t, 'p>(
    table: &'t [Component],
    profile: &'p Profile,
) -> impl Iterator<Item = &'t Component> + 'p
where
    't: 'p,
{
    table.iter().filter(move |c| c.is_enabled(profile))
}

/// The profile checks that need the table: known names, required components, dependencies, and each
/// enabled component's own checks.
pub fn validate(table: &[Component], p: &Profile) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let known: Vec<&str> = table.iter().map(|c| c.name).collect();
    for name in p.components.keys() {
        if !known.contains(&name.as_str()) {
            errs.push(FieldError::new(
                format!("components.{name}"),
                name,
                "unknown component",
                format!("use one of: {}", known.join(", ")),
            ));
        }
    }
    let replaced = |name: &str| {
        table
            .iter()
            .find(|c| c.name == name)
            .is_some_and(|c| c.replaced(p))
    };
    for c in table {
        let on = c.is_enabled(p);
        if let Some(s) = c.stand_in.filter(|_| on && c.replaced(p)) {
            errs.push(FieldError::new(
                format!("components.{}.enabled", c.name),
                true,
                format!("{} names an existing {} to take instead", s.field, c.name),
                format!(
                    "set components.{}.enabled=false to take that one, or clear {}",
                    c.name, s.field
                ),
            ));
        }
        if let Some(by) = &c.enabled_by {
            if p.components.get(c.name).is_some_and(|s| s.enabled) {
                errs.push(FieldError::new(
                    format!("components.{}.enabled", c.name),
                    true,
                    format!("{} is enabled by {}, not here", c.name, by.field),
                    format!("remove components.{}.enabled and set {}", c.name, by.field),
                ));
            }
        }
        if c.required && !on && !c.replaced(p) {
            errs.push(FieldError::new(
                format!("components.{}.enabled", c.name),
                false,
                "every environment needs this component",
                match c.stand_in {
                    Some(s) => format!("set it to true, or name an existing one in {}", s.field),
                    None => "set it to true".into(),
                },
            ));
        }
        if !on {
            continue;
        }
        if c.needs_root && p.rootless {
            errs.push(FieldError::new(
                format!("components.{}.enabled", c.name),
                true,
                "needs root (a node: network namespace, iptables, mounts, cgroups); a rootless environment runs the control plane only",
                format!(
                    "disable {} (--profile control-plane has no node), or generate without rootless and run it as root",
                    c.name
                ),
            ));
        }
        for dep in c.needs {
            if !p.component(dep).enabled && !replaced(dep) {
                errs.push(FieldError::new(
                    format!("components.{dep}.enabled"),
                    false,
                    format!("{} is enabled and needs {dep}", c.name),
                    match table
                        .iter()
                        .find(|d| d.name == *dep)
                        .and_then(|d| d.stand_in)
                    {
                        Some(s) => format!(
                            "enable {dep}, name an existing one in {}, or disable {}",
                            s.field, c.name
                        ),
                        None => format!("enable {dep} or disable {}", c.name),
                    },
                ));
            }
        }
        errs.extend((c.validate)(p));
    }
    errs
}

#[cfg(test)]
mod tests;
