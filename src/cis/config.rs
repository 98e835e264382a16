//! kube-bench's `config.yaml` for an environment: where its components' processes, unit files,
//! configs, kubeconfigs and data are, in kube-bench's own keys (its `cfg/config.yaml`). The
//! benchmark's files stay as kube-bench ships them; only this file says where kubeunit keeps
//! things, as a distribution's kube-bench config does (k3s's, RKE2's).

use std::path::Path;

use serde_yaml_ng::{Mapping, Value};

use crate::error::Error;
use crate::run::Env;
use crate::spec::paths;
use crate::unit::flag_value;

/// What a kube-bench component entry is given of its kubeunit component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Its process alone (`bins`).
    Process,
    /// A control-plane component: its unit file is its "pod specification file" (`confs`), and
    /// its kubeconfig the one its delegated authentication names.
    ControlPlane,
    /// etcd: its unit file and its data dir (`--data-dir`).
    Etcd,
    /// The kubelet: its unit (`svc`), config file (`--config`), kubeconfig and client CA.
    Kubelet,
    /// kube-proxy: its config file, kubeconfig and unit.
    Proxy,
}

/// One entry of kube-bench's config: `section.name` is kubeunit's `component`.
struct Seat {
    section: &'static str,
    name: &'static str,
    component: &'static str,
    role: Role,
}

const fn seat(
    section: &'static str,
    name: &'static str,
    component: &'static str,
    role: Role,
) -> Seat {
    Seat {
        section,
        name,
        component,
        role,
    }
}

/// kube-bench's components (cfg/config.yaml of v0.15.6), each with the kubeunit component behind it.
const SEATS: &[Seat] = &[
    seat("master", "apiserver", "kube-apiserver", Role::ControlPlane),
    seat("master", "scheduler", "kube-scheduler", Role::ControlPlane),
    seat(
        "master",
        "controllermanager",
        "kube-controller-manager",
        Role::ControlPlane,
    ),
    seat("master", "etcd", "etcd", Role::Etcd),
    seat("master", "kubelet", "kubelet", Role::Process),
    seat("node", "kubelet", "kubelet", Role::Kubelet),
    seat("node", "proxy", "kube-proxy", Role::Proxy),
    seat("etcd", "etcd", "etcd", Role::Etcd),
    seat("controlplane", "apiserver", "kube-apiserver", Role::Process),
];

/// kube-bench's `config.yaml` (`shipped`, its text as kube-bench ships it) with every component
/// kubeunit runs pointed at the environment's files. Each list is replaced, not extended: a
/// kubeadm file elsewhere on the host must not stand in for kubeunit's.
pub fn config_yaml(env: &Env, shipped_path: &Path, shipped: &str) -> Result<String, Error> {
    let bad = |why: String| Error::Artifact {
        path: shipped_path.to_path_buf(),
        message: format!("not kube-bench's config.yaml: {why}"),
        fix: "give --cfg the cfg directory that came with this kube-bench binary".into(),
    };
    let mut root: Value =
        serde_yaml_ng::from_str(shipped).map_err(|e| bad(format!("not YAML: {e}")))?;
    for seat in SEATS {
        let Some(entry) = entry_of(env, seat)? else {
            continue;
        };
        let section = root
            .get_mut(seat.section)
            .and_then(Value::as_mapping_mut)
            .ok_or_else(|| bad(format!("no section `{}`", seat.section)))?;
        let old = section
            .get(seat.name)
            .and_then(Value::as_mapping)
            .cloned()
            .unwrap_or_default();
        let mut new = Mapping::new();
        // What kubeunit does not say (optional:, kube-bench's own keys) stays as shipped.
        for (k, v) in old {
            new.insert(k, v);
        }
        for (k, v) in entry {
            new.insert(k, v);
        }
        section.insert(seat.name.into(), Value::Mapping(new));
    }
    serde_yaml_ng::to_string(&root).map_err(|e| bad(format!("cannot write it back: {e}")))
}

/// The keys of one component's entry, or None when the environment does not run the component
/// here (the shipped entry stays).
fn entry_of(env: &Env, seat: &Seat) -> Result<Option<Vec<(Value, Value)>>, Error> {
    // A per-node component's first instance (named as the component): the node of this host.
    let Ok((instance, unit)) = env.unit(seat.component) else {
        return Ok(None);
    };
    let argv = unit
        .exec_start()
        .map(|(_, a, _)| a.clone())
        .unwrap_or_default();
    let flag = |name: &str| flag_value(&argv, name);
    let unit_path = unit.path.to_string_lossy().into_owned();
    let plan = &instance.plan;
    let mut keys = vec![("bins", list([seat.component.to_string()]))];
    let mut with_default = |key: &'static str, default: &'static str, value: Option<String>| {
        if let Some(v) = value {
            keys.push((key, list([v.clone()])));
            keys.push((default, Value::String(v)));
        }
    };
    match seat.role {
        Role::Process => {}
        Role::ControlPlane => {
            with_default("confs", "defaultconf", Some(unit_path));
            with_default(
                "kubeconfig",
                "defaultkubeconfig",
                flag("kubeconfig").or_else(|| flag("authentication-kubeconfig")),
            );
        }
        Role::Etcd => {
            with_default("confs", "defaultconf", Some(unit_path));
            with_default("datadirs", "defaultdatadir", flag("data-dir"));
        }
        Role::Kubelet => {
            with_default("svc", "defaultsvc", Some(unit_path.clone()));
            with_default("kubeconfig", "defaultkubeconfig", flag("kubeconfig"));
            with_default(
                "cafile",
                "defaultcafile",
                Some(plan.path(&paths::cert("ca"))),
            );
            // kube-bench reads the kubelet's settings from its config file, and from its unit
            // (its own comment: the paths under svc must be under confs too).
            let config = flag("config").unwrap_or_default();
            keys.push(("confs", list([config.clone(), unit_path])));
            keys.push(("defaultconf", Value::String(config)));
        }
        Role::Proxy => {
            with_default("confs", "defaultconf", flag("config"));
            with_default(
                "kubeconfig",
                "defaultkubeconfig",
                Some(plan.path(&paths::kubeconfig("kube-proxy"))),
            );
            keys.push(("svc", list([unit_path])));
        }
    }
    Ok(Some(
        keys.into_iter()
            .map(|(k, v)| (Value::String(k.into()), v))
            .collect(),
    ))
}

fn list<const N: usize>(items: [String; N]) -> Value {
    Value::Sequence(items.into_iter().map(Value::String).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of kube-bench v0.15.6's cfg/config.yaml this module touches, with a kubeadm path
    /// in each list it replaces and a key of kube-bench's own.
    const SHIPPED: &str = r#"
master:
  components: [apiserver, scheduler, controllermanager, etcd, kubelet]
  apiserver:
    bins: [kube-apiserver, "hyperkube apiserver"]
    confs: [/etc/kubernetes/manifests/kube-apiserver.yaml]
    defaultconf: /etc/kubernetes/manifests/kube-apiserver.yaml
  scheduler:
    bins: [kube-scheduler]
    kubeconfig: [/etc/kubernetes/scheduler.conf]
  controllermanager:
    bins: [kube-controller-manager]
  etcd:
    optional: true
    bins: [etcd]
    datadirs: [/var/lib/etcd/default.etcd]
  kubelet:
    optional: true
    bins: [kubelet]
node:
  components: [kubelet, proxy]
  kubelet:
    svc: [/etc/systemd/system/kubelet.service]
    confs: [/var/lib/kubelet/config.yaml]
  proxy:
    optional: true
    bins: [kube-proxy]
etcd:
  components: [etcd]
  etcd:
    bins: [etcd]
controlplane:
  components: [apiserver]
  apiserver:
    bins: [kube-apiserver]
policies:
  components: []
version_mapping:
  "1.34": "cis-1.12"
"#;

    fn yaml(env: &Env) -> Value {
        let text = config_yaml(env, Path::new("cfg/config.yaml"), SHIPPED).unwrap();
        serde_yaml_ng::from_str(&text).unwrap()
    }

    fn strings(v: &Value) -> Vec<String> {
        v.as_sequence()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn each_component_points_at_the_environments_own_files_only() {
        let (_tmp, env) = Env::generated_for_tests("dev", &[]);
        let y = yaml(&env);
        let dir = env.plan.state_dir.to_string_lossy().into_owned();
        let unit_of = |c: &str| {
            env.units
                .iter()
                .find(|(i, _)| i.component.name == c)
                .map(|(_, u)| u.path.to_string_lossy().into_owned())
                .unwrap()
        };
        let api = &y["master"]["apiserver"];
        assert_eq!(strings(&api["bins"]), ["kube-apiserver"]);
        assert_eq!(strings(&api["confs"]), [unit_of("kube-apiserver")]);
        assert_eq!(
            api["defaultconf"].as_str(),
            Some(unit_of("kube-apiserver").as_str())
        );
        assert_eq!(
            strings(&y["master"]["scheduler"]["kubeconfig"]),
            [format!("{dir}/kubeconfig/scheduler.kubeconfig")]
        );
        assert_eq!(
            strings(&y["master"]["controllermanager"]["kubeconfig"]),
            [format!("{dir}/kubeconfig/controller-manager.kubeconfig")]
        );
        let etcd = &y["etcd"]["etcd"];
        assert_eq!(
            strings(&etcd["datadirs"]),
            [format!("{}/etcd", env.plan.data_dir.display())]
        );
        assert_eq!(
            y["master"]["etcd"]["optional"].as_bool(),
            Some(true),
            "kube-bench's own key stays"
        );
        let kubelet = &y["node"]["kubelet"];
        assert_eq!(strings(&kubelet["svc"]), [unit_of("kubelet")]);
        assert_eq!(
            strings(&kubelet["confs"]),
            [
                format!("{dir}/config/kubelet-config.yaml"),
                unit_of("kubelet")
            ]
        );
        assert_eq!(strings(&kubelet["cafile"]), [format!("{dir}/pki/ca.crt")]);
        let proxy = &y["node"]["proxy"];
        assert_eq!(
            strings(&proxy["confs"]),
            [format!("{dir}/config/kube-proxy-config.yaml")]
        );
        assert_eq!(
            strings(&proxy["kubeconfig"]),
            [format!("{dir}/kubeconfig/kube-proxy.kubeconfig")]
        );
        // kube-bench's other keys are as shipped.
        assert_eq!(y["version_mapping"]["1.34"].as_str(), Some("cis-1.12"));
        let text = serde_yaml_ng::to_string(&y).unwrap();
        assert!(
            !text.contains("/etc/kubernetes/"),
            "a kubeadm path is left: {text}"
        );
    }

    #[test]
    fn a_component_the_environment_does_not_run_keeps_its_shipped_entry() {
        let (_tmp, env) = Env::generated_for_tests("control-plane", &[]);
        assert!(!env.units.iter().any(|(i, _)| i.component.name == "kubelet"));
        let y = yaml(&env);
        assert_eq!(
            strings(&y["node"]["kubelet"]["confs"]),
            ["/var/lib/kubelet/config.yaml"]
        );
        assert_eq!(
            strings(&y["master"]["apiserver"]["bins"]),
            ["kube-apiserver"]
        );
    }

    #[test]
    fn a_config_that_is_not_kube_benchs_is_refused_naming_the_file() {
        let (_tmp, env) = Env::generated_for_tests("dev", &[]);
        for bad in ["[1, 2", "node: {}", "42"] {
            let e = config_yaml(&env, Path::new("/x/cfg/config.yaml"), bad).unwrap_err();
            assert!(e.to_string().contains("/x/cfg/config.yaml"), "{e}");
        }
    }
}
