//! A component's command line: binary, binary args, kubeunit's flags with the profile's extraArgs and
//! feature gates merged in.

use std::collections::BTreeMap;

use super::Component;
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
    argv.extend(flags.into_iter().map(|(n, v)| format!("--{n}={v}")));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::find;
    use crate::spec::{load, HostFacts};

    fn plan(sets: &[&str]) -> Plan {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let (_, p) = load::layered("dev", &sets).unwrap();
        let host = HostFacts {
            address_v4: Some("192.0.2.5".parse().unwrap()),
            address_v6: None,
            epoch: time::OffsetDateTime::UNIX_EPOCH,
        };
        Plan::new(p, std::path::Path::new("/s"), &host).unwrap()
    }

    fn argv(plan: &Plan, name: &str) -> Vec<String> {
        command_line(plan, find(name).unwrap())
    }

    #[test]
    fn binary_flags_and_verbosity() {
        let a = argv(&plan(&["logging.verbosity=3"]), "kube-apiserver");
        assert_eq!(a[0], "/usr/local/bin/kube-apiserver");
        assert!(a.contains(&"--secure-port=6443".to_string()), "{a:?}");
        assert!(a.contains(&"--tls-cert-file=/s/pki/apiserver.crt".to_string()));
        assert_eq!(a.last().unwrap(), "--v=3", "{a:?}");
        // etcd is no Kubernetes component: no --v.
        assert!(!argv(&plan(&[]), "etcd")
            .iter()
            .any(|f| f.starts_with("--v=")));
    }

    #[test]
    fn extra_args_replace_add_and_remove() {
        let p = plan(&[
            "components.kube-apiserver.extraArgs.secure-port=7443",
            "components.kube-apiserver.extraArgs.profiling=false",
            "components.kube-apiserver.extraArgs.allow-privileged=null",
            "components.kube-apiserver.extraArgs.not-set-anyway=null",
        ]);
        let a = argv(&p, "kube-apiserver");
        assert!(a.contains(&"--secure-port=7443".to_string()));
        assert!(!a.contains(&"--secure-port=6443".to_string()));
        assert!(a.contains(&"--profiling=false".to_string()));
        assert!(!a.iter().any(|f| f.starts_with("--allow-privileged")));
        assert!(!a.iter().any(|f| f.contains("not-set-anyway")));
        // Replaced in place: the position of the flag is kept.
        let before = argv(&plan(&[]), "kube-apiserver");
        let i = before
            .iter()
            .position(|f| f == "--secure-port=6443")
            .unwrap();
        assert_eq!(a[i], "--secure-port=7443");
    }

    #[test]
    fn binary_and_binary_args() {
        let p = plan(&[
            "components.kube-scheduler.binary=/opt/k8s/hyperkube",
            "components.kube-scheduler.binaryArgs=[kube-scheduler]",
            "components.kube-proxy.binary=my-proxy",
        ]);
        let a = argv(&p, "kube-scheduler");
        assert_eq!(&a[..2], &["/opt/k8s/hyperkube", "kube-scheduler"]);
        assert!(a[2].starts_with("--"));
        assert_eq!(argv(&p, "kube-proxy")[0], "/usr/local/bin/my-proxy");
    }

    #[test]
    fn feature_gates_go_to_flags_or_config() {
        let p = plan(&[
            "featureGates.A=true",
            "components.kube-apiserver.featureGates.B=false",
            "components.etcd.featureGates.C=true",
        ]);
        let a = argv(&p, "kube-apiserver");
        assert!(
            a.contains(&"--feature-gates=A=true,B=false".to_string()),
            "{a:?}"
        );
        // The kubelet takes them in its config file; etcd gets only its own.
        assert!(!argv(&p, "kubelet")
            .iter()
            .any(|f| f.starts_with("--feature-gates")));
        let kubelet = find("kubelet").unwrap();
        assert_eq!(feature_gates(&p, kubelet).len(), 1);
        let e = argv(&p, "etcd");
        assert!(e.contains(&"--feature-gates=C=true".to_string()), "{e:?}");
    }
}
