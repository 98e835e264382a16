//! systemd unit files: the environment's slice, one service per component instance (a per-node
//! component's on each node) and a timer for each that runs on a schedule, from `units/*.hbs`. The command line is quoted for ExecStart=; a component's environment goes to a 0600
//! file under `env/` (never into the unit).

use serde_json::json;

use super::generated::{put, Generated};
use crate::components::{self, command_line, Component, Instance};
use crate::error::Error;
use crate::render::quote::{env_file_line, systemd_path, systemd_word};
use crate::render::{self, Renderer};
use crate::spec::{paths, Plan};
use crate::state::{MODE_PRIVATE, MODE_SECRET};

/// kubeunit's version, which every unit names.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The slice, and a unit per instance of `table`'s enabled components.
pub fn units(
    table: &[Component],
    plan: &Plan,
    r: &Renderer,
    g: &mut Generated,
) -> Result<(), Error> {
    let slice = plan.slice_name();
    let text = r.render(
        &render::SLICE,
        &json!({ "version": VERSION, "env": plan.name(), "slice": slice }),
    )?;
    put(
        &mut g.tree,
        &paths::unit(&slice),
        text.into_bytes(),
        MODE_PRIVATE,
    );
    let instances = components::instances_of(table, plan);
    for instance in &instances {
        service(instance, &instances, &slice, r, g)?;
        timer(instance, r, g)?;
    }
    Ok(())
}

/// The service unit of one instance (`slice`: the environment's), and its component's
/// environment file when it has an environment.
fn service<'t>(
    instance: &Instance<'t>,
    instances: &[Instance<'t>],
    slice: &str,
    r: &Renderer,
    g: &mut Generated,
) -> Result<(), Error> {
    let (c, plan) = (instance.component, &instance.plan);
    let (wants, after) = dependencies(instance, instances);
    let env_file = env_file(plan, c, g);
    let mut argv = command_line(plan, c);
    if c.uts {
        let uts = format!("--uts={}", plan.node().uts_path().display());
        let wrapper = [crate::spec::plan::NSENTER.to_string(), uts, "--".into()];
        argv.splice(0..0, wrapper);
    }
    let own_user = super::own_user::own_user(plan, c, &instance.unit, &mut argv)?;
    let exec: Vec<String> = argv.iter().map(|a| systemd_word(a)).collect();
    let command = |argv: &Vec<String>| {
        argv.iter()
            .map(|a| systemd_word(a))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut pre_start: Vec<String> = Vec::new();
    // `-`: a module that will not load is named by the component's own failure, and a rootless
    // manager cannot load one (its host loads them).
    if !c.kernel_modules.is_empty() && !plan.profile.rootless {
        let mut modprobe = vec![crate::spec::plan::MODPROBE.to_string(), "-abq".into()];
        modprobe.extend(c.kernel_modules.iter().map(|m| m.to_string()));
        pre_start.push(format!("-{}", command(&modprobe)));
    }
    // `+`: as root, outside the user and the namespace (the data dirs made and given to it).
    if let Some(o) = &own_user {
        pre_start.extend(o.pre_start.iter().map(|argv| format!("+{}", command(argv))));
    }
    pre_start.extend((c.pre_start)(plan).iter().map(command));
    let stop_post: Vec<String> = (c.stop_post)(plan).iter().map(command).collect();
    let netns = c
        .netns
        .then(|| systemd_path(&plan.node().link.netns_path().to_string_lossy()));
    let data = json!({
        "version": VERSION,
        "env": plan.name(),
        "component": instance.name,
        "wants": wants,
        "after": after,
        "type": match (c.oneshot || c.timer.is_some(), c.notify) {
            (true, _) => "oneshot",
            (_, true) => "notify",
            _ => "exec",
        },
        "remain_after_exit": c.oneshot,
        "triggered": c.timer.is_some(),
        "exec_stop_post": stop_post,
        "netns": netns,
        "notify": c.notify,
        "exec": exec,
        "exec_start_pre": pre_start,
        "environment": c
            .environment
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain((c.environment_of)(plan))
            .map(|(k, v)| systemd_word(&format!("{k}={v}")))
            .collect::<Vec<_>>(),
        "env_file": env_file,
        "delegate": c.delegate,
        "kill_mode": c.kill_mode,
        // A further node's units run in its own slice below the environment's (its kubelet's
        // cgroup root: `NodePlan::slice`).
        "slice": if c.per_node { plan.node().slice.as_str() } else { slice },
        "rootless": plan.profile.rootless,
        "syslog_identifier": instance.syslog_identifier(),
        "own_user": own_user.as_ref().map(|o| json!({
            "user": o.user,
            "credentials": o.credentials.iter()
                // Taken whole by systemd (no quotes), specifiers expanded.
                .map(|(id, path)| systemd_path(&format!("{id}:{path}")))
                .collect::<Vec<_>>(),
            "hidden": o.hidden.iter().map(|p| systemd_word(p)).collect::<Vec<_>>(),
            "data_dirs": o.data_dirs.iter().map(|p| systemd_word(&format!("-{p}"))).collect::<Vec<_>>(),
            "read_only": o.read_only.iter().map(|p| systemd_word(p)).collect::<Vec<_>>(),
        })),
    });
    let text = r.render(&render::SERVICE, &data)?;
    put(
        &mut g.tree,
        &paths::unit(&instance.unit),
        text.into_bytes(),
        MODE_PRIVATE,
    );
    Ok(())
}

/// The units an instance's service wants and is ordered after: those of what its component needs
/// and of what it comes after, on its own node or the environment's one.
fn dependencies<'t>(
    instance: &Instance<'t>,
    instances: &[Instance<'t>],
) -> (Vec<String>, Vec<String>) {
    let (c, plan) = (instance.component, &instance.plan);
    let unit = |n: &&str| instance.dep(n, instances).map(|d| d.unit.clone());
    // A need that a stand-in replaces (an external etcd) has no unit. A timer's service is
    // ordered after what it needs but never starts it: a run while the environment is stopped
    // fails rather than starting etcd behind `stop`'s back.
    let needs: Vec<String> = c
        .needs
        .iter()
        .filter(|n| plan.enabled(n))
        .filter_map(unit)
        .collect();
    let wants = if c.timer.is_some() {
        vec![]
    } else {
        needs.clone()
    };
    // After= those it starts alongside too: `start` goes past it (ignore-dependencies), and
    // stopping takes it down before them (an API server stopping after etcd hangs).
    let mut after = needs;
    // Those of them that have an instance here.
    after.extend(c.after_if_enabled.iter().filter_map(unit));
    (wants, after)
}

/// A component's environment, into a 0600 file under `env/` (never into the unit, which anyone
/// can read); its path as EnvironmentFile= takes it, `None` without an environment.
fn env_file(plan: &Plan, c: &Component, g: &mut Generated) -> Option<String> {
    let env = plan.profile.component(c.name).env;
    if env.is_empty() {
        return None;
    }
    let rel = paths::env_file(c.name);
    let text: String = env.iter().map(|(k, v)| env_file_line(k, v)).collect();
    put(&mut g.tree, &rel, text.into_bytes(), MODE_SECRET);
    Some(systemd_path(&plan.path(&rel)))
}

/// The timer unit of an instance whose component runs on a schedule; nothing for the rest.
fn timer(instance: &Instance, r: &Renderer, g: &mut Generated) -> Result<(), Error> {
    let (c, plan) = (instance.component, &instance.plan);
    let (Some(timer), Some(timer_unit)) = (&c.timer, instance.timer()) else {
        return Ok(());
    };
    let data = json!({
        "version": VERSION,
        "env": plan.name(),
        "component": instance.name,
        "service": instance.unit,
        "on_calendar": (timer.on_calendar)(plan),
        "persistent": timer.persistent,
    });
    let text = r.render(&render::TIMER, &data)?;
    put(
        &mut g.tree,
        &paths::unit(&timer_unit),
        text.into_bytes(),
        MODE_PRIVATE,
    );
    Ok(())
}
