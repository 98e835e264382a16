//! A component's command line: binary, binary args, kubeunit's flags with the profile's extraArgs and
//! feature gates merged in.

use std::collections::BTreeMap;

use super::component::Component;
use crate::spec::Plan;

/// Feature gates of one component: the profile's global ones (Kubernetes components), then its own.
pub fn feature_gates(plan: &Plan, c: &Component) -> BTreeMap<String, bool> {
    let mut gates = if c.kubernetes {
        plan.profile.feature_gates.clone()
    } else {
        BTreeMap::new()
    };
    gates.extend(plan.profile.component(c.name).feature_gates);
    gates
}
pub fn command_line(plan: &Plan, c: &Component) -> Vec<String> {
    let settings = plan.profile.component(c.name);
    let mut flags = (c.flags)(plan);
    if c.kubernetes {
        flags.push(("v".into(), plan.profile.logging.verbosity.to_string()));
    }
    let gates = feature_gates(plan, c);
    if !c.gates_in_config && !gates.is_empty() {
        let list: Vec<String> = gates.iter().map(|(k, v)| format!("{k}={v}")).collect();
        flags.push(("feature-gates".into(), list.join(",")));
    }
    for (name, value) in &settings.extra_args {
        match (flags.iter().position(|(n, _)| n == name), value) {
            (Some(i), Some(v)) => flags[i].1 = v.clone(),
            (Some(i), None) => {
                flags.remove(i);
            }
            (None, Some(v)) => flags.push((name.clone(), v.clone())),
            (None, None) => {}
        }
    }
    let mut argv = vec![c.binary_path(plan).to_string_lossy().into_owned()];
    argv.extend(settings.binary_args.iter().cloned());
    argv.extend((c.args)(plan));
    argv.extend(flags.into_iter().map(|(n, v)| format!("--{n}={v}")));
    argv
}
