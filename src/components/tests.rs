use super::*;
use crate::pki::{When, CERTS};
use crate::spec::{load, Plan};

#[test]
fn table_references_resolve() {
    let ports = load::layered("base", &[])
        .unwrap()
        .1
        .ports
        .fixed()
        .cloned()
        .unwrap();
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
        // Started alongside (past After=) or once up (by After=): one start mode per component.
        assert!(
            c.starts_alongside.is_empty() || c.starts_once_up.is_empty(),
            "{}: both starts_alongside and starts_once_up",
            c.name
        );
        for dep in c.starts_alongside.iter().chain(c.starts_once_up) {
            assert!(
                c.needs.contains(dep),
                "{}: {dep} is not one of its needs",
                c.name
            );
        }
        // "Up" means something only for a unit that tells systemd (READY=1).
        for dep in c.starts_once_up {
            assert!(
                find(dep).is_some_and(|d| d.notify),
                "{}: {dep} does not notify",
                c.name
            );
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

#[test]
fn an_external_datastore_stands_in_for_etcd() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    let key = dir.path().join("client.key");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(&key, "not pem\n").unwrap();
    let load = |sets: &[String]| load::layered("control-plane", sets).unwrap().1;
    let external = |etcd: bool| {
        vec![
            format!("components.etcd.enabled={etcd}"),
            "datastore.endpoints=[https://127.0.0.1:2379]".to_string(),
            format!("datastore.caFile={}", ca.display()),
            format!(
                "datastore.certFile={}",
                dir.path().join("missing.crt").display()
            ),
            format!("datastore.keyFile={}", key.display()),
        ]
    };
    let errs = validate(COMPONENTS, &load(&external(false)));
    let got: Vec<(&str, &str)> = errs
        .iter()
        .map(|e| (e.field.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "datastore.certFile",
                "cannot read it: No such file or directory (os error 2)"
            ),
            ("datastore.keyFile", "no PEM PRIVATE KEY block in it"),
        ]
    );
    // A device is not read (it may never end).
    let mut dev = external(false);
    dev[2] = "datastore.caFile=/dev/zero".into();
    let errs = validate(COMPONENTS, &load(&dev));
    assert!(
        errs.iter()
            .any(|e| e.field == "datastore.caFile" && e.message == "not a regular file"),
        "{errs:?}"
    );
    // Both at once: which one is meant?
    let errs = validate(COMPONENTS, &load(&external(true)));
    assert_eq!(errs[0].field, "components.etcd.enabled");
    assert!(
        errs[0].fix.contains("clear datastore.endpoints"),
        "{errs:?}"
    );
    // Neither: kube-apiserver has nowhere to keep the cluster.
    let errs = validate(COMPONENTS, &load(&["components.etcd.enabled=false".into()]));
    assert_eq!(
        errs.len(),
        2,
        "required, and needed by kube-apiserver: {errs:?}"
    );
    assert!(
        errs.iter().all(|e| e.fix.contains("datastore.endpoints")),
        "{errs:?}"
    );
}

#[test]
fn a_rootless_profile_refuses_the_node() {
    let sets = vec!["rootless=true".to_string()];
    let (_, dev) = load::layered("dev", &sets).unwrap();
    let fields: Vec<String> = validate(COMPONENTS, &dev)
        .into_iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(
        fields,
        [
            "components.node-network.enabled",
            "components.containerd.enabled",
            "components.registry.enabled",
            "components.kubelet.enabled",
            "components.kube-proxy.enabled",
        ]
    );
    let (_, cp) = load::layered("control-plane", &sets).unwrap();
    assert_eq!(validate(COMPONENTS, &cp), vec![]);
}

// Command lines.

fn plan(sets: &[&str]) -> Plan {
    Plan::for_tests("dev", sets)
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

#[test]
fn host_routes_overlapping_the_cluster_networks_clash() {
    let p = plan(&[]);
    let route = |net: &str, iface: &str| (net.parse().unwrap(), iface.to_string());
    let routes = [
        route("0.0.0.0/0", "eth0"), // the default route: what the node link replaces
        route("192.0.2.0/24", "eth0"), // the LAN, apart
        route("10.88.0.0/16", "ku-other"), // another environment's pods
        route("10.0.0.128/25", "docker0"), // inside the Service network
        route("10.0.0.0/8", "tun0"), // a VPN around both
        route("10.88.0.0/16", &p.node().link.interface), // this node's own (it runs)
    ];
    let clashes = super::table::host::route_clashes(&p, &routes);
    assert_eq!(
        clashes,
        [
            "network.podCIDR 10.88.0.0/16 and 10.88.0.0/16 dev ku-other",
            "network.podCIDR 10.88.0.0/16 and 10.0.0.0/8 dev tun0",
            "network.serviceCIDR 10.0.0.0/24 and 10.0.0.128/25 dev docker0",
            "network.serviceCIDR 10.0.0.0/24 and 10.0.0.0/8 dev tun0",
        ]
    );
    let apart = [
        route("0.0.0.0/0", "eth0"),
        route("10.89.0.0/16", "ku-other"),
    ];
    assert_eq!(
        super::table::host::route_clashes(&p, &apart),
        Vec::<String>::new()
    );
}

#[test]
fn a_node_takes_ipv4_cluster_networks_only() {
    let (_, dev) =
        load::layered("dev", &["network.serviceCIDR=fd00:10::/108".to_string()]).unwrap();
    let errs = validate(COMPONENTS, &dev);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].field, "network.serviceCIDR");
    assert!(errs[0].message.contains("IPv6"), "{errs:?}");
    // Without a node nothing routes them: the control plane takes IPv6 ranges.
    let (_, cp) = load::layered(
        "control-plane",
        &["network.serviceCIDR=fd00:10::/108".to_string()],
    )
    .unwrap();
    assert_eq!(validate(COMPONENTS, &cp), vec![]);
}

#[test]
fn per_node_components_run_once_on_every_node_and_the_rest_once() {
    let per_node: Vec<&str> = COMPONENTS
        .iter()
        .filter(|c| c.per_node)
        .map(|c| c.name)
        .collect();
    assert_eq!(
        per_node,
        ["node-network", "containerd", "kubelet", "kube-proxy"]
    );
    let one = plan(&["etcd.snapshot.schedule=hourly"]);
    let two = plan(&["etcd.snapshot.schedule=hourly"]).with_extra_node_for_tests("worker-1");
    // One node: a unit per enabled component, named as ever.
    let names = |p: &Plan| -> Vec<(String, String)> {
        instances(p).into_iter().map(|i| (i.name, i.unit)).collect()
    };
    let single = names(&one);
    let enabled: Vec<&str> = enabled(COMPONENTS, &one.profile).map(|c| c.name).collect();
    assert_eq!(
        single.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        enabled
    );
    for (name, unit) in &single {
        assert_eq!(unit, &one.unit_name(name));
    }
    // Two: the per-node ones twice (node order, next to each other), the rest once, in table order.
    let mut want = Vec::new();
    for &c in &enabled {
        want.push((c.to_string(), format!("kubeunit-dev-{c}.service")));
        if per_node.contains(&c) {
            want.push((
                format!("{c}@worker-1"),
                format!("kubeunit-dev-{c}@worker-1.service"),
            ));
        }
    }
    assert_eq!(names(&two), want);
    assert!(want.iter().any(|(n, _)| n == "etcd-snapshot"));
    for i in instances(&two) {
        let on_second = i.name.ends_with("@worker-1");
        assert_eq!(i.plan.node_index, usize::from(on_second), "{}", i.name);
        assert_eq!(i.timer().is_some(), i.name == "etcd-snapshot");
    }
    let find = |name: &str| {
        instances(&two)
            .into_iter()
            .find(|i| i.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(
        find("kubelet@worker-1").debug_unit(),
        "kubeunit-dev-kubelet-debug@worker-1.service"
    );
    assert_eq!(
        find("containerd@worker-1").hook_unit(Hook::ImportImages),
        "kubeunit-dev-containerd-import-images@worker-1.service"
    );
    assert_eq!(
        find("kubelet").debug_unit(),
        "kubeunit-dev-kubelet-debug.service"
    );
    // Dependencies: on its own node where the dependency runs on every node, else the one.
    let all = instances(&two);
    let kubelet1 = find("kubelet@worker-1");
    let dep = |i: &Instance, d: &str| i.dep(d, &all).map(|d| d.name.clone());
    assert_eq!(
        dep(&kubelet1, "node-network").as_deref(),
        Some("node-network@worker-1")
    );
    assert_eq!(
        dep(&kubelet1, "kube-apiserver").as_deref(),
        Some("kube-apiserver")
    );
    assert_eq!(
        dep(&find("registry"), "containerd").as_deref(),
        Some("containerd"),
        "the registry is the first node's"
    );
    assert_eq!(dep(&kubelet1, "cloud-controller-manager"), None);
}

#[test]
fn each_per_node_instance_names_its_own_node() {
    let two = plan(&[]).with_extra_node_for_tests("worker-1");
    let (first, second) = (&two.nodes[0], &two.nodes[1]);
    let argv_of = |name: &str| {
        let i = instances(&two)
            .into_iter()
            .find(|i| i.name == name)
            .unwrap_or_else(|| panic!("no {name}"));
        command_line(&i.plan, i.component)
    };
    let has =
        |argv: &[String], flag: &str| assert!(argv.iter().any(|a| a == flag), "{flag}: {argv:?}");
    let kubelet = argv_of("kubelet@worker-1");
    has(&kubelet, "--hostname-override=worker-1");
    has(&kubelet, &format!("--node-ip={}", second.link.node));
    has(
        &kubelet,
        "--config=/s/nodes/worker-1/config/kubelet-config.yaml",
    );
    has(&kubelet, "--root-dir=/s/data/nodes/worker-1/kubelet");
    // Its own identity (a per-node row of the certificate table); the first node's is where it was.
    has(
        &kubelet,
        "--kubeconfig=/s/nodes/worker-1/kubeconfig/kubelet.kubeconfig",
    );
    let kubelet = argv_of("kubelet");
    has(&kubelet, "--kubeconfig=/s/kubeconfig/kubelet.kubeconfig");
    has(&kubelet, "--hostname-override=dev");
    has(&kubelet, &format!("--node-ip={}", first.link.node));
    has(&kubelet, "--config=/s/config/kubelet-config.yaml");
    has(&kubelet, "--root-dir=/s/data/kubelet");
    let proxy = argv_of("kube-proxy@worker-1");
    has(&proxy, "--hostname-override=worker-1");
    has(
        &proxy,
        "--config=/s/nodes/worker-1/config/kube-proxy-config.yaml",
    );
    has(&argv_of("kube-proxy"), "--hostname-override=dev");
    has(
        &argv_of("containerd@worker-1"),
        "--config=/s/nodes/worker-1/config/containerd.toml",
    );
    has(&argv_of("containerd"), "--config=/s/config/containerd.toml");
    has(
        &argv_of("node-network@worker-1"),
        "/s/nodes/worker-1/config/node-network.sh",
    );
    // Cluster components are the first node's: etcd's member is named by it.
    has(&argv_of("etcd"), "--name=dev");
}
