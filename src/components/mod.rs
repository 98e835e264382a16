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
    Cleanup, Component, Content, EnabledBy, File, FileContext, FileMode, Hook, HostCheck,
    Namespace, Port, Probe, Skew, StandIn, Timer,
};
pub use instance::{instances_of, Instance};
pub use table::{
    api_urls, apiserver_url, etcd_url, node_apiserver_url, node_network_copy, port, COMPONENTS,
    NODE_NETWORK_SCRIPT, NODE_OBJECT_FILE, SCHEDULED_SNAPSHOT_PREFIX,
};

/// etcd's name in the table: what etcd snapshots (`ops::snapshot`) save and restore.
pub const ETCD: &str = "etcd";
/// The API server: no Kubernetes component may run a newer version (`ops::upgrade`).
pub const KUBE_APISERVER: &str = "kube-apiserver";
/// The node agent: kubectl, which `upgrade --drain` runs, is taken from beside its binary.
pub const KUBELET: &str = "kubelet";

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

/// The users of their own (`Component::own_user`) the instances on this host run as, each once:
/// the host must have them (`hosts seed` makes them).
pub fn own_users(plan: &crate::spec::Plan) -> Vec<String> {
    let mut users: Vec<String> = instances(plan)
        .iter()
        .map(|i| (i.component.own_user)(&i.plan.profile).to_string())
        .filter(|u| !u.is_empty())
        .collect();
    users.sort();
    users.dedup();
    users
}

/// The command that adds `user` as a system user of its own, as a package would (no home, no
/// shell). `user` is a validated name (`spec::validate`).
pub fn useradd_command(user: &str) -> String {
    format!("useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin {user}")
}

/// The instances on the node `plan` is the view of (`instance::node_instances` of the table).
pub fn node_instances(plan: &crate::spec::Plan) -> Vec<Instance<'static>> {
    instance::node_instances(COMPONENTS, plan)
}

/// Every port the components of `table` listen on, each once, in slot order: the fields of
/// `ports:`, and of a `ports: auto` block.
pub fn ports_of(table: &[Component]) -> Vec<Port> {
    let mut ports: Vec<Port> = Vec::new();
    for p in table.iter().flat_map(|c| c.ports) {
        if !ports.contains(p) {
            ports.push(*p);
        }
    }
    ports.sort_by_key(|p| p.slot);
    ports
}

/// The `ports.*` fields of the table's ports in slot order: what `spec::auto::port_block` picks a
/// block for, and the order `profile.yaml` records.
pub fn port_fields() -> Vec<&'static str> {
    ports_of(COMPONENTS).iter().map(|p| p.field).collect()
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
    let mut errs = port_names(table, p);
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
        // The environment's components, whichever host this profile is the view of.
        let on = c.in_environment(p);
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

/// `ports:` names exactly the ports the components of `table` listen on (its numbers are the
/// schema's to check, `spec::validate`).
fn port_names(table: &[Component], p: &Profile) -> Vec<FieldError> {
    let Some(ports) = p.ports.fixed() else {
        return vec![];
    };
    let declared = ports_of(table);
    let fields: Vec<&str> = declared.iter().map(|d| d.field).collect();
    let mut errs: Vec<FieldError> = ports
        .all()
        .into_iter()
        .filter(|(field, _)| !fields.contains(field))
        .map(|(field, port)| {
            FieldError::new(
                format!("ports.{field}"),
                port,
                "no component listens on a port of this name",
                format!("use one of: {}", fields.join(", ")),
            )
        })
        .collect();
    for d in declared.iter().filter(|d| ports.get(d.field).is_none()) {
        let users: Vec<&str> = table
            .iter()
            .filter(|c| c.ports.contains(d))
            .map(|c| c.name)
            .collect();
        errs.push(FieldError::new(
            format!("ports.{}", d.field),
            "(unset)",
            format!("missing: the port {} listens on", users.join(" and ")),
            format!(
                "set ports.{}={} (its default) or another free port",
                d.field, d.default
            ),
        ));
    }
    errs
}

#[cfg(test)]
mod tests;
