use super::*;
use crate::pki::{When, CERTS};
use crate::spec::{load, Plan};

#[test]
fn table_references_resolve() {
    for c in COMPONENTS {
        if let Some(probe) = c.probe {
            assert!(
                c.ports.contains(&probe.port),
                "{}: probe port {} is not one of its ports",
                c.name,
                probe.port.field
            );
        }
        if let Some(port) = c.connections_ended_on_stop {
            assert!(c.ports.contains(&port), "{}: {}", c.name, port.field);
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

/// The `ports:` mapping base.yaml lists, as (field, default).
fn base_ports() -> Vec<(String, u16)> {
    let (_, base) = load::layered("base", &[]).unwrap();
    let ports = base.ports.fixed().cloned().unwrap();
    ports
        .all()
        .iter()
        .map(|(f, p)| (f.to_string(), *p))
        .collect()
}

#[test]
fn each_port_is_declared_once_by_the_component_that_listens_on_it() {
    let ports = ports_of(COMPONENTS);
    assert_eq!(ports.len(), 12);
    for (i, p) in ports.iter().enumerate() {
        assert_eq!(
            usize::from(p.slot),
            i,
            "{}: slots are 0, 1, 2, ... each once",
            p.field
        );
        let same_field = ports.iter().filter(|o| o.field == p.field).count();
        let same_default = ports.iter().filter(|o| o.default == p.default).count();
        assert_eq!(same_field, 1, "ports.{} declared twice", p.field);
        assert_eq!(
            same_default, 1,
            "the default {} of ports.{} twice",
            p.default, p.field
        );
        let listeners: Vec<&Component> =
            COMPONENTS.iter().filter(|c| c.ports.contains(p)).collect();
        assert_eq!(
            listeners.len(),
            1,
            "ports.{}: one component listens on it",
            p.field
        );
        // Where it listens is where its component runs.
        let node = listeners[0].netns;
        assert_eq!(
            p.namespace,
            if node {
                Namespace::Node
            } else {
                Namespace::Host
            },
            "ports.{}",
            p.field
        );
    }
    // base.yaml, which lists every key with its default for people, lists these: the same
    // fields, defaults and order.
    let declared: Vec<(String, u16)> = ports
        .iter()
        .map(|p| (p.field.to_string(), p.default))
        .collect();
    assert_eq!(base_ports(), declared);
    assert_eq!(
        port_fields(),
        declared.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>()
    );
}

#[test]
fn the_auto_block_is_one_port_per_declared_port_where_it_always_was() {
    use crate::spec::auto;
    let fields = port_fields();
    let block = auto::port_block(std::path::Path::new("/srv/a"), &fields, |_| true).unwrap();
    assert_eq!(block.all().len(), ports_of(COMPONENTS).len());
    // With 12 ports, a state dir's block is at 12000 + 12 * (the path hash % 750), in the order
    // of the ports it recorded (a state dir keeps the block it recorded with fewer).
    let expected: Vec<(&str, u16)> = [
        "etcdClient",
        "etcdPeer",
        "apiserver",
        "controllerManager",
        "scheduler",
        "kubelet",
        "kubeletHealthz",
        "kubeProxyHealthz",
        "kubeProxyMetrics",
        "cloudControllerManager",
        "registry",
        "registryCache",
    ]
    .into_iter()
    .zip(13920..)
    .collect();
    assert_eq!(block.all(), expected);
    let dev = auto::port_block(
        std::path::Path::new("/var/lib/kubeunit/dev"),
        &fields,
        |_| true,
    );
    assert_eq!(dev.unwrap().get("etcdClient"), Some(14448));
}

#[test]
fn a_recorded_profiles_ports_load_as_they_were_written() {
    // The ports of a state dir generated with `ports: auto`, as its profile.yaml recorded them.
    let recorded =
        "name: dev\nports:\n  etcdClient: 13870\n  etcdPeer: 13871\n  apiserver: 13872\n  \
                    controllerManager: 13873\n  scheduler: 13874\n  kubelet: 13875\n  \
                    kubeletHealthz: 13876\n  kubeProxyHealthz: 13877\n  kubeProxyMetrics: 13878\n  \
                    cloudControllerManager: 13879\n  registry: 13880\n";
    let (_, p) = load::resolved(std::path::Path::new("/x/profile.yaml"), recorded).unwrap();
    assert_eq!(crate::spec::validate::validate(&p), vec![]);
    assert_eq!(validate(COMPONENTS, &p), vec![]);
    let ports = p.ports.fixed().unwrap();
    assert_eq!(ports.get("apiserver"), Some(13872));
    assert_eq!(ports.get("registry"), Some(13880));
    // Written again as it was read.
    let again = p.to_yaml();
    let block = &recorded[recorded.find("ports:").unwrap()..];
    assert!(again.contains(block), "{again}");
    let plan = Plan::new(
        p,
        std::path::Path::new("/s"),
        &crate::spec::HostFacts::fixed(Some("192.0.2.5")),
    )
    .unwrap();
    assert_eq!(port::APISERVER.of(&plan), 13872);
    assert_eq!(apiserver_url(&plan), "https://127.0.0.1:13872");
    assert_eq!(etcd_url(&plan), "https://127.0.0.1:13870");
}

#[test]
fn ports_the_table_does_not_declare_or_misses_are_named() {
    let (_, p) = load::layered("control-plane", &["ports.apiServer=7443".to_string()]).unwrap();
    let errs = validate(COMPONENTS, &p);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(
        (errs[0].field.as_str(), errs[0].value.as_str()),
        ("ports.apiServer", "7443")
    );
    assert!(
        errs[0].fix.contains("etcdClient, etcdPeer, apiserver,"),
        "{}",
        errs[0].fix
    );
    // A whole mapping in place of base's: every port it leaves out is named, with its default.
    let (_, p) = load::layered("control-plane", &["ports={apiserver: 7443}".to_string()]).unwrap();
    let errs = validate(COMPONENTS, &p);
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields.len(), 11, "{errs:#?}");
    assert!(!fields.contains(&"ports.apiserver"));
    let kubelet = errs.iter().find(|e| e.field == "ports.kubelet").unwrap();
    assert!(
        kubelet.message.contains("kubelet listens on"),
        "{kubelet:?}"
    );
    assert!(kubelet.fix.contains("ports.kubelet=10250"), "{kubelet:?}");
    // `auto` names none.
    let (_, p) = load::layered("control-plane", &["ports=auto".to_string()]).unwrap();
    assert_eq!(validate(COMPONENTS, &p), vec![]);
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

/// Across hosts the pool is addresses of the hosts' network: that network's route holds it, and
/// only a route of another network inside or around it clashes.
#[test]
fn across_hosts_the_pool_must_be_on_the_hosts_network() {
    use super::table::host::{pool_on_the_hosts_network, route_clashes};
    let p = Plan::for_tests("ha", &["host=cp-1"]);
    let lb = p.load_balancer.clone().unwrap();
    let address = lb.uplink_address.unwrap();
    let route = |net: &str, iface: &str| (net.parse().unwrap(), iface.to_string());
    let lan = [route("0.0.0.0/0", "eth0"), route("198.19.254.0/24", "eth0")];
    assert_eq!(route_clashes(&p, &lan), Vec::<String>::new());
    assert!(pool_on_the_hosts_network(&p, lb.pool, address, &lan).is_ok());
    // A network that holds the host's address but not the pool.
    let small = [route("0.0.0.0/0", "eth0"), route("198.19.254.0/25", "eth0")];
    let (problem, fix) = pool_on_the_hosts_network(&p, lb.pool, address, &small).unwrap_err();
    assert!(
        problem.contains("198.19.254.240/28 is not on the hosts' network")
            && problem.contains("198.19.254.0/25 dev eth0"),
        "{problem}"
    );
    assert!(fix.contains("addons.loadBalancerPool"), "{fix}");
    // Something else inside the pool.
    let inside = [
        route("198.19.254.0/24", "eth0"),
        route("198.19.254.240/29", "docker0"),
    ];
    assert_eq!(
        route_clashes(&p, &inside),
        ["addons.loadBalancerPool 198.19.254.240/28 and 198.19.254.240/29 dev docker0"]
    );
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
    // Offline: no caches, whose instances are per upstream (`per_upstream_...` below).
    let one = plan(&["etcd.snapshot.schedule=hourly", "offline=true"]);
    let two = plan(&["etcd.snapshot.schedule=hourly", "offline=true"])
        .with_extra_node_for_tests("worker-1");
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

#[test]
fn one_etcd_member_has_the_flags_it_always_had() {
    let plan = plan(&[]);
    let etcd = argv(&plan, "etcd");
    let expected = [
        "/usr/local/bin/etcd",
        "--name=dev",
        "--data-dir=/s/data/etcd",
        "--listen-client-urls=https://127.0.0.1:2379",
        "--advertise-client-urls=https://127.0.0.1:2379",
        "--listen-peer-urls=https://127.0.0.1:2380",
        "--initial-advertise-peer-urls=https://127.0.0.1:2380",
        "--initial-cluster=dev=https://127.0.0.1:2380",
        "--initial-cluster-state=new",
        "--client-cert-auth=true",
        "--trusted-ca-file=/s/pki/etcd/ca.crt",
        "--cert-file=/s/pki/etcd/server.crt",
        "--key-file=/s/pki/etcd/server.key",
        "--peer-client-cert-auth=true",
        "--peer-trusted-ca-file=/s/pki/etcd/ca.crt",
        "--peer-cert-file=/s/pki/etcd/peer.crt",
        "--peer-key-file=/s/pki/etcd/peer.key",
        "--snapshot-count=10000",
        "--heartbeat-interval=10",
        "--election-timeout=100",
    ];
    assert_eq!(etcd, expected);
    // Another bind address moves the client URLs, not the peer's (loopback whatever the bind).
    let bound = argv(
        &Plan::for_tests("dev", &["network.bindAddress=192.0.2.5", "node.name=n1"]),
        "etcd",
    );
    for f in [
        "--name=n1",
        "--listen-client-urls=https://192.0.2.5:2379",
        "--advertise-client-urls=https://192.0.2.5:2379",
        "--listen-peer-urls=https://127.0.0.1:2380",
        "--initial-cluster=n1=https://127.0.0.1:2380",
    ] {
        assert!(bound.contains(&f.to_string()), "{f}: {bound:?}");
    }
    let apiserver = argv(&plan, "kube-apiserver");
    assert!(apiserver.contains(&"--etcd-servers=https://127.0.0.1:2379".to_string()));
    for c in ["kube-controller-manager", "cloud-controller-manager"] {
        assert!(
            argv(&plan, c).contains(&"--leader-elect=false".to_string()),
            "{c}"
        );
    }
    assert!(!argv(&plan, "kube-scheduler")
        .iter()
        .any(|a| a.starts_with("--leader-elect")));
    let config = scheduler_config(&plan);
    assert!(
        config.contains("leaderElection:\n  leaderElect: false\n"),
        "{config}"
    );
}

/// The scheduler's config file as `gen` renders it.
fn scheduler_config(plan: &Plan) -> String {
    let c = find("kube-scheduler").unwrap();
    let secrets = crate::pki::Secrets::default();
    let cx = FileContext {
        plan,
        component: c,
        secrets: &secrets,
    };
    match (c.files[0].content)(&cx) {
        Ok(Content::Template(t, data)) => crate::render::Renderer::new().render(t, &data).unwrap(),
        _ => panic!("a template"),
    }
}

#[test]
fn several_etcd_members_make_the_topology_flags() {
    let members = [
        ("dev", "127.0.0.1"),
        ("m2", "127.0.0.2"),
        ("m3", "127.0.0.3"),
    ];
    let plan = plan(&["ports.etcdClient=3379", "ports.etcdPeer=3380"])
        .with_etcd_members_for_tests(&members);
    let etcd = argv(&plan, "etcd");
    let value = |argv: &[String], name: &str| -> String {
        let prefix = format!("--{name}=");
        let found: Vec<&str> = argv
            .iter()
            .filter_map(|a| a.strip_prefix(&prefix))
            .collect();
        assert_eq!(found.len(), 1, "{name}: {argv:?}");
        found[0].to_string()
    };
    // Every member in order, each at its peer URL.
    assert_eq!(
        value(&etcd, "initial-cluster"),
        "dev=https://127.0.0.1:3380,m2=https://127.0.0.2:3380,m3=https://127.0.0.3:3380"
    );
    // The unit's own member: the first.
    assert_eq!(value(&etcd, "name"), "dev");
    assert_eq!(value(&etcd, "listen-peer-urls"), "https://127.0.0.1:3380");
    assert_eq!(
        value(&etcd, "initial-advertise-peer-urls"),
        "https://127.0.0.1:3380"
    );
    assert_eq!(
        value(&etcd, "advertise-client-urls"),
        "https://127.0.0.1:3379"
    );
    assert_eq!(value(&etcd, "initial-cluster-state"), "new");
    // Peers: etcd's default ticks, written out.
    assert_eq!(value(&etcd, "heartbeat-interval"), "100");
    assert_eq!(value(&etcd, "election-timeout"), "1000");
    // kube-apiserver knows every member; etcdctl (snapshots) one.
    assert_eq!(
        value(&argv(&plan, "kube-apiserver"), "etcd-servers"),
        "https://127.0.0.1:3379,https://127.0.0.2:3379,https://127.0.0.3:3379"
    );
    assert_eq!(etcd_url(&plan), "https://127.0.0.1:3379");
    // A controller-manager and a scheduler on every member's node: they elect a leader.
    for c in ["kube-controller-manager", "cloud-controller-manager"] {
        assert_eq!(value(&argv(&plan, c), "leader-elect"), "true", "{c}");
    }
    let config = scheduler_config(&plan);
    assert!(
        config.contains("leaderElection:\n  leaderElect: true\n"),
        "{config}"
    );

    // Two members, in the other order: the list follows the plan's.
    let two = Plan::for_tests("dev", &[])
        .with_etcd_members_for_tests(&[("b", "::1"), ("a", "127.0.0.1")]);
    assert_eq!(
        value(&argv(&two, "etcd"), "initial-cluster"),
        "b=https://[::1]:2380,a=https://127.0.0.1:2380"
    );
    // One member given the same way is the plan's own: today's flags.
    let one = Plan::for_tests("dev", &[]).with_etcd_members_for_tests(&[("dev", "127.0.0.1")]);
    assert_eq!(
        argv(&one, "etcd"),
        argv(&Plan::for_tests("dev", &[]), "etcd")
    );
}

#[test]
fn a_per_upstream_component_runs_once_per_cache_with_its_own_port_and_files() {
    let two = plan(&[]).with_extra_node_for_tests("worker-1");
    let caches: Vec<Instance> = instances(&two)
        .into_iter()
        .filter(|i| i.component.name == "registry-cache")
        .collect();
    let names: Vec<(&str, &str)> = caches
        .iter()
        .map(|i| (i.name.as_str(), i.unit.as_str()))
        .collect();
    // Once per cache, not once per node.
    assert_eq!(
        names,
        [
            (
                "registry-cache@docker.io",
                "kubeunit-dev-registry-cache@docker.io.service"
            ),
            (
                "registry-cache@registry.k8s.io",
                "kubeunit-dev-registry-cache@registry.k8s.io.service"
            ),
        ]
    );
    let ports: Vec<u16> = caches
        .iter()
        .flat_map(|i| i.component.listeners(&i.plan))
        .map(|(_, p)| p)
        .collect();
    assert_eq!(ports, [5001, 5002]);
    assert_eq!(
        caches[1].file_path("config/registry-cache/{upstream}/config.yml"),
        "config/registry-cache/registry.k8s.io/config.yml"
    );
    assert_eq!(
        argv(&caches[1].plan, "registry-cache")[2],
        "/s/config/registry-cache/registry.k8s.io/config.yml"
    );
    // Offline: none.
    assert!(!instances(&plan(&["offline=true"]))
        .iter()
        .any(|i| i.component.name == "registry-cache"));
}

#[test]
fn the_components_that_follow_a_version_are_the_ones_an_upgrade_orders() {
    let following: Vec<(&str, &str)> = COMPONENTS
        .iter()
        .filter_map(|c| Some((c.name, c.follows()?)))
        .collect();
    assert_eq!(
        following,
        [
            ("etcd", "etcd"),
            ("kube-apiserver", "kubernetes"),
            ("kube-controller-manager", "kubernetes"),
            ("kube-scheduler", "kubernetes"),
            ("cloud-controller-manager", "kubernetes"),
            ("kubelet", "kubernetes"),
            ("kube-proxy", "kubernetes"),
        ]
    );
}
