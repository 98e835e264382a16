use super::*;
use crate::pki::{When, CERTS};
use crate::spec::load;

#[test]
fn table_references_resolve() {
    let ports = load::layered("base", &[]).unwrap().1.ports;
    for c in COMPONENTS {
        for field in c.ports {
            assert!(ports.get(field).is_some(), "{}: no ports.{field}", c.name);
        }
        if let Some(probe) = c.probe {
            assert!(
                c.ports.contains(&probe.port),
                "{}: probe port {} is not one of its ports",
                c.name,
                probe.port
            );
        }
        for dep in c.needs.iter().chain(c.after_if_enabled) {
            assert!(find(dep).is_some(), "{}: unknown dependency {dep}", c.name);
        }
        for f in c.files {
            assert!(
                crate::spec::paths::is_in(f.path, crate::spec::paths::MANAGED_DIRS),
                "{}: {} is outside the managed dirs",
                c.name,
                f.path
            );
        }
    }
    for cert in CERTS {
        if let When::Component(name) = cert.when {
            assert!(
                find(name).is_some(),
                "{}: unknown component {name}",
                cert.name
            );
        }
    }
}

#[test]
fn component_checks_report_every_problem() {
    let sets: Vec<String> = [
        "components.etcd.enabled=false",
        "components.kube-dns.enabled=true",
        "components.cloud-controller-manager.enabled=true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (_, p) = load::layered("control-plane", &sets).unwrap();
    let errs = validate(COMPONENTS, &p);
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "components.kube-dns",
            "components.etcd.enabled",
            "components.etcd.enabled",
            "components.cloud-controller-manager.extraArgs.cloud-provider",
        ],
        "{errs:#?}"
    );
    assert!(
        errs[0].fix.contains("kube-apiserver"),
        "lists the known ones"
    );
    assert!(errs[2]
        .message
        .contains("kube-apiserver is enabled and needs etcd"));
    for (name, _) in crate::spec::profile::BUILTIN {
        let (_, p) = load::layered(name, &[]).unwrap();
        assert_eq!(validate(COMPONENTS, &p), vec![], "{name}");
    }
}
