use serde_json::json;

use super::*;
use crate::components::{self, Content, File, Hook};
use crate::pki::{Decision, Entropy};
use crate::render::Template;
use crate::spec::HostFacts;

fn plan(sets: &[&str]) -> Plan {
    Plan::for_tests("dev", sets)
}

fn opts() -> Options {
    Options {
        entropy: Entropy::Seed(1),
        force: false,
    }
}

const FANCY_CONFIG: Template = Template {
    name: "test/fancy.yaml.hbs",
    text: "cluster: {{json name}}\nserver: {{json server}}\n",
};

/// A component as a contributor would add it: one entry, one config file with its template.
const FANCY: Component = Component {
    name: "kube-fancy",
    per_node: false,
    per_upstream: false,
    binary: "kube-fancy",
    binary_of: None,
    needs_root: false,
    required: false,
    stand_in: None,
    notify: false,
    needs: &["kube-apiserver"],
    starts_alongside: &[],
    starts_once_up: &[],
    after_if_enabled: &[],
    kubernetes: true,
    gates_in_config: false,
    delegate: false,
    kill_mode: None,
    probe: None,
    oneshot: false,
    netns: false,
    uts: false,
    ports: &[crate::components::port::CLOUD_CONTROLLER_MANAGER],
    version: |v| &v.kubernetes,
    go_module: "k8s.io/kubernetes",
    skew: None,
    flags: |plan| vec![("config".into(), plan.path("config/fancy.yaml"))],
    args: |_| vec![],
    own_user: |_| "",
    pre_start: |_| vec![],
    stop_post: |_| vec![],
    files: &[File {
        path: "config/fancy.yaml",
        mode: crate::components::FileMode::Public,
        when: |_| true,
        content: |cx| {
            Ok(Content::Template(
                &FANCY_CONFIG,
                json!({ "name": cx.plan.name(), "server": crate::components::apiserver_url(cx.plan) }),
            ))
        },
    }],
    after_healthy: None,
    data_dirs: &[],
    after_stop: &[],
    validate: |_| vec![],
    host_checks: &[],
    kernel_modules: &["overlay"],
    enabled_by: None,
    timer: None,
    on_hosts: crate::spec::hosts::OnHosts::Every,
    environment: &[],
    environment_of: |_| vec![],
    connections_ended_on_stop: None,
};

#[test]
fn a_new_component_is_one_table_entry_and_its_template() {
    let mut table: Vec<Component> = COMPONENTS.to_vec();
    table.push(FANCY);
    let plan = plan(&["components.kube-fancy.enabled=true"]);
    assert_eq!(components::validate(&table, &plan.profile), vec![]);
    assert!(
        !components::validate(COMPONENTS, &plan.profile).is_empty(),
        "the real table does not know it"
    );
    let g = generate_with(
        &table,
        &plan,
        &Previous::load(std::path::Path::new("/nonexistent")).unwrap(),
        &opts(),
    )
    .unwrap();
    let file = String::from_utf8(g.tree["config/fancy.yaml"].bytes.clone()).unwrap();
    assert_eq!(
        file,
        "cluster: \"dev\"\nserver: \"https://127.0.0.1:6443\"\n"
    );
    let unit = String::from_utf8(
        g.tree["units/kubeunit-dev-kube-fancy.service"]
            .bytes
            .clone(),
    )
    .unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/kube-fancy \\\n    --config=/s/config/fancy.yaml"),
        "{unit}"
    );
    assert!(
        unit.contains("Wants=kubeunit-dev-kube-apiserver.service"),
        "{unit}"
    );
    assert!(unit.contains("Type=exec"), "{unit}");
    // Its kernel modules are loaded before it starts, a failure left to the component to name.
    assert!(
        unit.contains("ExecStartPre=-/sbin/modprobe -abq overlay\n"),
        "{unit}"
    );
    // Without the entry enabled, nothing of it is rendered.
    let g = generate_with(
        &table,
        &self::plan(&[]),
        &Previous::load(std::path::Path::new("/nonexistent")).unwrap(),
        &opts(),
    )
    .unwrap();
    assert!(!g.tree.keys().any(|k| k.contains("fancy")));
}

#[test]
fn coredns_forwards_where_the_profile_says_or_nowhere() {
    let empty = Previous::load(std::path::Path::new("/nonexistent")).unwrap();
    let corefile = |sets: &[&str]| {
        let g = generate(&plan(sets), &empty, &opts()).unwrap();
        String::from_utf8(g.tree["addons/10-coredns.yaml"].bytes.clone()).unwrap()
    };
    assert!(corefile(&[]).contains("        forward . /etc/resolv.conf\n"));
    let to = corefile(&["addons.corednsForward=192.0.2.53 192.0.2.54:53"]);
    assert!(
        to.contains("        forward . 192.0.2.53 192.0.2.54:53\n"),
        "{to}"
    );
    let none = corefile(&["addons.corednsForward="]);
    assert!(!none.contains("forward"), "{none}");
    assert!(
        none.contains("        cache 30\n"),
        "the rest stays: {none}"
    );
}

#[test]
fn files_follow_their_component_and_condition() {
    let empty = Previous::load(std::path::Path::new("/nonexistent")).unwrap();
    let g = generate(&plan(&[]), &empty, &opts()).unwrap();
    for f in [
        "config/kubelet-config.yaml",
        "config/containerd.toml",
        "config/encryption-config.yaml",
        "addons/10-coredns.yaml",
        "pki/encryption.key",
    ] {
        assert!(g.tree.contains_key(f), "{f}");
    }
    assert_eq!(g.tree["config/encryption-config.yaml"].mode, 0o600);
    let g = generate(
        &plan(&[
            "components.kubelet.enabled=false",
            "components.kube-proxy.enabled=false",
            "encryption.enabled=false",
            "addons.coredns=false",
        ]),
        &empty,
        &opts(),
    )
    .unwrap();
    for f in [
        "config/kubelet-config.yaml",
        "config/kube-proxy-config.yaml",
        "config/encryption-config.yaml",
        "addons/10-coredns.yaml",
        "pki/encryption.key",
        "pki/kubelet.crt",
        "kubeconfig/kube-proxy.kubeconfig",
    ] {
        assert!(!g.tree.contains_key(f), "{f}");
    }
    assert!(g.tree.contains_key("config/containerd.toml"));
}

#[test]
fn certificate_decisions_on_a_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let p = Plan::new(
        plan(&[]).profile,
        dir.path(),
        &HostFacts::fixed(Some("192.0.2.5")),
    )
    .unwrap();
    let empty = Previous::load(dir.path()).unwrap();
    let g = generate(&p, &empty, &opts()).unwrap();
    assert_eq!(g.count(Decision::Created), g.certs.len());
    let manifest = crate::state::Manifest::new(
        p.name(),
        p.state_dir.clone(),
        &g.tree,
        g.cert_digests.clone(),
        g.inputs.clone(),
        serde_json::Value::Null,
    );
    let root = crate::state::Root::open(dir.path()).unwrap();
    crate::state::write(&root, &empty, &g.tree, &manifest).unwrap();
    let old = Previous::load(dir.path()).unwrap();
    let again = generate(&p, &old, &opts()).unwrap();
    assert_eq!(again.count(Decision::Kept), g.certs.len());
    assert_eq!(again.tree, g.tree);
    // A new SAN reissues the apiserver certificate only.
    let mut profile = p.profile.clone();
    profile.network.extra_sans.push("new.example".into());
    let p2 = Plan::new(profile, dir.path(), &HostFacts::fixed(None));
    // No host address: the advertise address must be explicit now.
    assert!(p2.is_err());
    let mut profile = p.resolved_profile();
    profile.network.extra_sans.push("new.example".into());
    let p2 = Plan::new(profile, dir.path(), &HostFacts::fixed(None)).unwrap();
    let third = generate(&p2, &old, &opts()).unwrap();
    let reissued: Vec<&str> = third
        .certs
        .iter()
        .filter(|(_, d)| *d == Decision::Reissued)
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(reissued, vec!["pki/apiserver.crt"]);
    // Hook data: the API server applies the addons.
    assert_eq!(
        components::find("kube-apiserver").unwrap().after_healthy,
        Some(Hook::ApplyAddons)
    );
}

/// Write `g` as `gen` does (manifest with the renewals) and load it back.
fn write_generated(p: &Plan, old: &Previous, g: &Generated) -> Previous {
    let mut manifest = crate::state::Manifest::new(
        p.name(),
        p.state_dir.clone(),
        &g.tree,
        g.cert_digests.clone(),
        g.inputs.clone(),
        serde_json::Value::Null,
    );
    manifest.renewed = g.renewed.clone();
    let root = crate::state::Root::open(&p.state_dir).unwrap();
    crate::state::write(&root, old, &g.tree, &manifest).unwrap();
    Previous::load(&p.state_dir).unwrap()
}

/// Seconds after 2026-01-01T00:00:00Z.
fn t(secs: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(1_767_225_600 + secs).unwrap()
}

fn text(g: &Generated, rel: &str) -> String {
    String::from_utf8(g.tree[rel].bytes.clone()).unwrap()
}

#[test]
fn a_renewal_reissues_the_named_leaves_from_now_and_later_gens_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let epoch = "2026-01-01T00:00:00Z";
    let profile = plan(&["pki.certValidity=10m", &format!("pki.epoch={epoch}")]).profile;
    let host = HostFacts::fixed(Some("192.0.2.5"));
    let p = Plan::new(profile.clone(), dir.path(), &host).unwrap();
    let empty = Previous::load(dir.path()).unwrap();
    let g = generate(&p, &empty, &opts()).unwrap();
    let old = write_generated(&p, &empty, &g);

    let at = t(7 * 60 + 30) + time::Duration::milliseconds(250);
    let renewal = crate::pki::Renewal {
        names: ["scheduler".to_string(), "apiserver".to_string()].into(),
        at,
    };
    let r = generate_renewing(&p, &old, &opts(), &renewal).unwrap();
    let renewed: Vec<&str> = r
        .certs
        .iter()
        .filter(|(_, d)| *d == Decision::Renewed)
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(renewed, vec!["pki/apiserver.crt", "pki/scheduler.crt"]);
    assert_eq!(r.count(Decision::Kept), r.certs.len() - 2);
    let ca = text(&g, "pki/ca.crt");
    for name in ["apiserver", "scheduler"] {
        let crt = crate::pki::issue::inspect(&text(&r, &paths::cert(name))).unwrap();
        let before = crate::pki::issue::inspect(&text(&g, &paths::cert(name))).unwrap();
        assert_ne!(crt.serial, before.serial, "{name}: a serial of its own");
        assert_eq!(crt.subject, before.subject);
        assert_eq!(crt.not_before, t(7 * 60 + 30));
        assert_eq!(crt.not_after, t(17 * 60 + 30));
        assert!(crate::pki::issue::signed_by(
            &text(&r, &paths::cert(name)),
            &ca
        ));
        // Same key, same CA.
        assert_eq!(r.tree[&paths::key(name)], g.tree[&paths::key(name)]);
        assert_eq!(r.cert_digests[name], g.cert_digests[name]);
    }
    // What changed: the two certificates and the kubeconfig embedding the scheduler's.
    let changed: Vec<&str> = r
        .tree
        .iter()
        .filter(|(rel, a)| g.tree[*rel].bytes != a.bytes)
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert_eq!(
        changed,
        vec![
            "kubeconfig/scheduler.kubeconfig",
            "pki/apiserver.crt",
            "pki/scheduler.crt"
        ]
    );
    assert_eq!(
        r.renewed.keys().collect::<Vec<_>>(),
        vec!["apiserver", "scheduler"]
    );

    // A gen afterwards (same explicit epoch) keeps them, and their record.
    let old = write_generated(&p, &old, &r);
    let again = generate(&p, &old, &opts()).unwrap();
    assert_eq!(again.count(Decision::Kept), again.certs.len());
    assert_eq!(again.tree, r.tree);
    assert_eq!(again.renewed, r.renewed);
    // Another explicit epoch reissues them at it, as every leaf, and forgets the renewal.
    let mut moved = p.resolved_profile();
    moved.pki.epoch = Some("2026-01-01T00:05:00Z".into());
    let p2 = Plan::new(moved, dir.path(), &host).unwrap();
    let third = generate(&p2, &old, &opts()).unwrap();
    assert_eq!(third.count(Decision::Reissued), third.certs.len() - 3);
    assert!(third.renewed.is_empty());
    let crt = crate::pki::issue::inspect(&text(&third, "pki/scheduler.crt")).unwrap();
    assert_eq!(crt.not_before, t(5 * 60));
}

#[test]
fn only_leaves_already_there_are_renewed() {
    let dir = tempfile::tempdir().unwrap();
    let p = Plan::new(
        plan(&[]).profile,
        dir.path(),
        &HostFacts::fixed(Some("192.0.2.5")),
    )
    .unwrap();
    let empty = Previous::load(dir.path()).unwrap();
    // A CA named in a renewal (the CLI refuses it) is kept; nothing there yet is created.
    let renewal = crate::pki::Renewal {
        names: ["ca".to_string(), "admin".to_string()].into(),
        at: time::OffsetDateTime::now_utc(),
    };
    let g = generate_renewing(&p, &empty, &opts(), &renewal).unwrap();
    assert_eq!(g.count(Decision::Created), g.certs.len());
    let old = write_generated(&p, &empty, &g);
    let r = generate_renewing(&p, &old, &opts(), &renewal).unwrap();
    let renewed: Vec<&str> = r
        .certs
        .iter()
        .filter(|(_, d)| *d != Decision::Kept)
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(renewed, vec!["pki/admin.crt"]);
    assert_eq!(r.tree["pki/ca.crt"], g.tree["pki/ca.crt"]);
}

#[test]
fn a_snapshot_schedule_renders_a_oneshot_service_and_its_timer() {
    let empty = Previous::load(std::path::Path::new("/nonexistent")).unwrap();
    let g = generate(&plan(&[]), &empty, &opts()).unwrap();
    assert!(
        !g.tree.keys().any(|k| k.contains("etcd-snapshot")),
        "no schedule, no timer"
    );
    let p = plan(&[
        "etcd.snapshot.schedule=*:0/15",
        "etcd.snapshot.retention=3",
        "components.etcd-snapshot.binary=/opt/kubeunit",
    ]);
    let g = generate(&p, &empty, &opts()).unwrap();
    let unit = |name: &str| String::from_utf8(g.tree[name].bytes.clone()).unwrap();
    let service = unit("units/kubeunit-dev-etcd-snapshot.service");
    assert!(
        service.contains(
            "ExecStart=/opt/kubeunit \\\n    snapshot \\\n    save \\\n    --state-dir=/s \\\n    --prefix=scheduled \\\n    --prune-to=3\n"
        ),
        "{service}"
    );
    assert!(service.contains("Type=oneshot\n"), "{service}");
    assert!(
        service.contains("After=kubeunit-dev-etcd.service\n"),
        "{service}"
    );
    // It never starts etcd, is never kept active (the timer could not start it again) and is
    // not restarted: a failed run shows in `status` until the next one.
    for absent in ["Wants=", "RemainAfterExit=", "Restart="] {
        assert!(!service.contains(absent), "{absent}: {service}");
    }
    let timer = unit("units/kubeunit-dev-etcd-snapshot.timer");
    assert!(
        timer.contains("[Timer]\nOnCalendar=*:0/15\nPersistent=no\n"),
        "{timer}"
    );
    // Both read back as the unit files `start` hands to systemd.
    let parsed = crate::unit::parse(std::path::Path::new("/s/u/x.timer"), &timer).unwrap();
    assert_eq!(
        parsed.get("TimersCalendar"),
        Some(&crate::unit::Value::Calendar(vec![(
            "OnCalendar".into(),
            "*:0/15".into()
        )]))
    );
    crate::unit::parse(std::path::Path::new("/s/u/x.service"), &service).unwrap();
    // The schedule enables it; components.etcd-snapshot.enabled is refused.
    let errs = components::validate(
        COMPONENTS,
        &plan(&["components.etcd-snapshot.enabled=true"]).profile,
    );
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].field, "components.etcd-snapshot.enabled");
    assert!(errs[0].fix.contains("etcd.snapshot.schedule"), "{errs:?}");
}

/// Across hosts, the hosts-sync timer runs when `hostsSync.schedule` says (every 10 s unless set),
/// and a state dir's profile.yaml names the schedule only when it is not the default (state dirs
/// from before it stay byte for byte).
#[test]
fn the_hosts_sync_timer_runs_on_the_profiles_schedule() {
    let empty = Previous::load(std::path::Path::new("/nonexistent")).unwrap();
    let timer_and_profile = |sets: &[&str]| {
        let sets: Vec<&str> = ["host=worker-1"].iter().chain(sets).copied().collect();
        let g = generate(&Plan::for_tests("ha", &sets), &empty, &opts()).unwrap();
        (
            text(&g, "units/kubeunit-ha-hosts-sync.timer"),
            text(&g, "profile.yaml"),
        )
    };
    let (timer, profile) = timer_and_profile(&[]);
    assert!(timer.contains("\nOnCalendar=*:*:0/10\n"), "{timer}");
    assert!(!profile.contains("hostsSync"), "{profile}");
    let (timer, profile) = timer_and_profile(&["hostsSync.schedule=*:0/2"]);
    assert!(timer.contains("\nOnCalendar=*:0/2\n"), "{timer}");
    assert!(
        profile.contains("hostsSync:\n  schedule: '*:0/2'\n"),
        "{profile}"
    );
}

#[test]
fn offline_the_node_pulls_every_image_from_its_own_registry() {
    let empty = Previous::load(std::path::Path::new("/nonexistent")).unwrap();
    let p = plan(&["offline=true"]);
    let g = generate(&p, &empty, &opts()).unwrap();
    let parse = |rel: &str| -> toml::Table {
        text(&g, rel)
            .parse()
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
    };
    let containerd = parse("config/containerd.toml");
    let registry_config = &containerd["plugins"]["io.containerd.cri.v1.images"]["registry"];
    assert_eq!(
        registry_config["config_path"].as_str(),
        Some("/s/config/registry-hosts")
    );
    // containerd's hosts.go: `server` is the last host tried, after any [host] table; with no
    // [host] it is the only one. A file it cannot parse would fall back to the upstream registry.
    let server = format!("http://{}:5000", p.node().link.node);
    let names: Vec<&str> = g
        .tree
        .keys()
        .filter_map(|k| k.strip_prefix("config/registry-hosts/"))
        .collect();
    assert_eq!(
        names,
        [
            "_default/hosts.toml",
            "docker.io/hosts.toml",
            "kubeunit.local/hosts.toml",
            "registry.k8s.io/hosts.toml"
        ]
    );
    for name in names {
        let hosts = parse(&format!("config/registry-hosts/{name}"));
        assert_eq!(hosts.len(), 1, "{name}: {hosts:?}");
        assert_eq!(hosts["server"].as_str(), Some(server.as_str()), "{name}");
    }
    // The registry itself: on the node's address, its storage in the data dir (`destroy` goes).
    let config: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text(&g, "config/registry.yml")).unwrap();
    assert_eq!(
        config["http"]["addr"].as_str(),
        Some(format!("{}:5000", p.node().link.node).as_str())
    );
    assert_eq!(
        config["storage"]["filesystem"]["rootdirectory"].as_str(),
        Some("/s/data/registry")
    );
    let registry = components::find("registry").unwrap();
    assert_eq!(registry.data_dirs, ["registry"]);
    assert!(registry.netns);
    assert_eq!(registry.after_healthy, Some(Hook::LoadRegistry));
    // Without it, containerd's config names no hosts dir and nothing of it is written.
    let g = generate(
        &plan(&["components.registry.enabled=false"]),
        &empty,
        &opts(),
    )
    .unwrap();
    assert!(!text(&g, "config/containerd.toml").contains("config_path"));
    assert!(
        !g.tree.keys().any(|k| k.contains("registry")),
        "{:?}",
        g.tree.keys()
    );
}

#[test]
fn a_second_node_adds_its_own_files_and_units_and_changes_none_of_the_first() {
    let empty = Previous::load(std::path::Path::new("/nonexistent")).unwrap();
    let one = generate(&plan(&[]), &empty, &opts()).unwrap();
    let two_plan = plan(&[]).with_extra_node_for_tests("worker-1");
    let two = generate(&two_plan, &empty, &opts()).unwrap();
    // Everything of one node, byte for byte, but the API server's certificate (the second node
    // reaches it at the host's end of its own link, one SAN more), the profile the state dir
    // records (one node more), local-path-provisioner's config (the new node's volumes in its
    // own data dir) and the registry caches' filters (the new node let in).
    for (rel, a) in &one.tree {
        let b = two.tree.get(rel).unwrap_or_else(|| panic!("{rel} is gone"));
        if rel == "addons/20-storageclass.yaml" {
            let want = r#"{"node":"worker-1","paths":["/s/data/nodes/worker-1/local-path"]}"#;
            assert!(!text(&one, rel).contains(want), "{rel}");
            assert!(
                text(&two, rel).contains(want),
                "{rel}:\n{}",
                text(&two, rel)
            );
            continue;
        }
        if rel == "pki/apiserver.crt" || rel == "profile.yaml" {
            assert!(a.bytes != b.bytes && a.mode == b.mode, "{rel}");
            continue;
        }
        // Each registry cache's filter lets the new node's address in.
        if rel.starts_with("config/registry-cache/") && rel.ends_with("/filter.sh") {
            let node = two_plan.nodes[1].link.node.to_string();
            assert!(!text(&one, rel).contains(&node), "{rel}");
            assert!(text(&two, rel).contains(&node), "{rel}");
            continue;
        }
        assert!(a.bytes == b.bytes && a.mode == b.mode, "{rel} changed");
    }
    let (_, _, before) = subject_and_sans(&text(&one, "pki/apiserver.crt"));
    let (_, _, after) = subject_and_sans(&text(&two, "pki/apiserver.crt"));
    let second_host = two_plan.nodes[1].link.host.to_string();
    assert_eq!(after.len(), before.len() + 1);
    assert!(after.contains(&second_host) && !before.contains(&second_host));
    assert!(before.iter().all(|s| after.contains(s)));
    // And exactly the second node's config files and units more.
    let added: Vec<&str> = two
        .tree
        .keys()
        .filter(|k| !one.tree.contains_key(*k))
        .map(String::as_str)
        .collect();
    assert_eq!(
        added,
        [
            "nodes/worker-1/config/cni/10-kubeunit-bridge.conflist",
            "nodes/worker-1/config/containerd.toml",
            "nodes/worker-1/config/kube-proxy-config.yaml",
            "nodes/worker-1/config/kubelet-config.yaml",
            "nodes/worker-1/config/node-network.sh",
            "nodes/worker-1/config/node.yaml",
            "nodes/worker-1/kubeconfig/kube-proxy.kubeconfig",
            "nodes/worker-1/kubeconfig/kubelet.kubeconfig",
            "nodes/worker-1/pki/kube-proxy.crt",
            "nodes/worker-1/pki/kube-proxy.key",
            "nodes/worker-1/pki/kubelet-client.crt",
            "nodes/worker-1/pki/kubelet-client.key",
            "nodes/worker-1/pki/kubelet.crt",
            "nodes/worker-1/pki/kubelet.key",
            "units/kubeunit-dev-containerd@worker-1.service",
            "units/kubeunit-dev-kube-proxy@worker-1.service",
            "units/kubeunit-dev-kubelet@worker-1.service",
            "units/kubeunit-dev-node-network@worker-1.service",
        ]
    );
    let node = &two_plan.nodes[1];
    let ip = node.link.node.to_string();
    let kubelet = text(&two, "nodes/worker-1/config/kubelet-config.yaml");
    for line in [
        format!("address: \"{ip}\""),
        format!("healthzBindAddress: \"{ip}\""),
        "cgroupRoot: \"/kubeunit/dev/node_worker_1\"".to_string(),
        "containerRuntimeEndpoint: \"unix:///run/kubeunit/dev/nodes/worker-1/containerd/containerd.sock\"".to_string(),
        "podLogsDir: \"/s/data/nodes/worker-1/pod-logs\"".to_string(),
    ] {
        assert!(kubelet.lines().any(|l| l == line), "{line}:\n{kubelet}");
    }
    let proxy = text(&two, "nodes/worker-1/config/kube-proxy-config.yaml");
    assert!(
        proxy.contains("hostnameOverride: \"worker-1\"") && proxy.contains(&format!("\"{ip}:")),
        "{proxy}"
    );
    let containerd: toml::Table = text(&two, "nodes/worker-1/config/containerd.toml")
        .parse()
        .unwrap();
    assert_eq!(
        containerd["grpc"]["address"].as_str(),
        Some("/run/kubeunit/dev/nodes/worker-1/containerd/containerd.sock")
    );
    assert_eq!(
        containerd["root"].as_str(),
        Some("/s/data/nodes/worker-1/containerd/root")
    );
    assert_eq!(
        containerd["state"].as_str(),
        Some("/run/kubeunit/dev/nodes/worker-1/containerd")
    );
    let network = text(&two, "nodes/worker-1/config/node-network.sh");
    for line in [
        "ns=\"kubeunit-dev@worker-1\"".to_string(),
        format!("link=\"{}\"", node.link.interface),
        format!("node=\"{ip}\""),
        "marker=\"/run/kubeunit/dev/nodes/worker-1/node-network.masquerade\"".to_string(),
    ] {
        assert!(network.lines().any(|l| l == line), "{line}:\n{network}");
    }
    let unit = text(&two, "units/kubeunit-dev-kubelet@worker-1.service");
    for line in [
        "Description=kubeunit dev: kubelet@worker-1",
        "Wants=kubeunit-dev-kube-apiserver.service",
        "Wants=kubeunit-dev-node-network@worker-1.service",
        "NetworkNamespacePath=/run/netns/kubeunit-dev@worker-1",
        "SyslogIdentifier=kubeunit-dev-kubelet@worker-1",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line}:\n{unit}");
    }
    assert!(
        unit.contains("After=kubeunit-dev-kube-apiserver.service kubeunit-dev-node-network@worker-1.service kubeunit-dev-containerd@worker-1.service"),
        "{unit}"
    );
    let network_unit = text(&two, "units/kubeunit-dev-node-network@worker-1.service");
    assert!(
        network_unit.contains("ExecStart=/bin/sh \\\n    /s/nodes/worker-1/config/node-network.sh"),
        "{network_unit}"
    );
}

/// CN, O and SANs (DNS names and IPs as text) of a certificate PEM.
fn subject_and_sans(pem: &str) -> (String, Vec<String>, Vec<String>) {
    use x509_parser::extensions::GeneralName;
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let text = |a: &x509_parser::x509::AttributeTypeAndValue| a.as_str().unwrap().to_string();
    let cn = cert
        .subject()
        .iter_common_name()
        .map(text)
        .collect::<Vec<_>>();
    let orgs = cert.subject().iter_organization().map(text).collect();
    let sans = cert
        .subject_alternative_name()
        .unwrap()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .map(|n| match n {
                    GeneralName::DNSName(d) => d.to_string(),
                    GeneralName::IPAddress(b) => match b.len() {
                        4 => std::net::IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()).to_string(),
                        _ => std::net::IpAddr::from(<[u8; 16]>::try_from(*b).unwrap()).to_string(),
                    },
                    other => panic!("unexpected SAN {other:?}"),
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(cn.len(), 1, "one CN");
    (cn[0].clone(), orgs, sans)
}

#[test]
fn each_node_has_its_own_kubelet_identity_serving_certificate_and_kubeconfigs() {
    let empty = Previous::load(std::path::Path::new("/nonexistent")).unwrap();
    let two_plan = plan(&[]).with_extra_node_for_tests("worker-1");
    let two = generate(&two_plan, &empty, &opts()).unwrap();
    let (first, second) = (&two_plan.nodes[0], &two_plan.nodes[1]);
    let ip = second.link.node.to_string();

    // The second node's kubelet: system:node:worker-1 in system:nodes, serving as worker-1 at its
    // end of its link, nothing of the first node's.
    let (cn, orgs, _) = subject_and_sans(&text(&two, "nodes/worker-1/pki/kubelet-client.crt"));
    assert_eq!(
        (cn.as_str(), orgs),
        ("system:node:worker-1", vec!["system:nodes".to_string()])
    );
    let (cn, orgs, sans) = subject_and_sans(&text(&two, "nodes/worker-1/pki/kubelet.crt"));
    assert_eq!(
        (cn.as_str(), orgs),
        ("system:node:worker-1", vec!["system:nodes".to_string()])
    );
    assert_eq!(
        sans,
        ["localhost", "worker-1", "127.0.0.1", "::1", ip.as_str()]
    );
    assert!(!sans.contains(&first.name) && !sans.contains(&first.link.node.to_string()));
    // The first node's, as they were.
    let (cn, _, sans) = subject_and_sans(&text(&two, "pki/kubelet.crt"));
    assert_eq!(cn, "system:node:dev");
    assert!(sans.contains(&first.link.node.to_string()) && !sans.contains(&ip));
    // kube-proxy: one identity for every node, a key and a kubeconfig each.
    let (cn, orgs, _) = subject_and_sans(&text(&two, "nodes/worker-1/pki/kube-proxy.crt"));
    assert_eq!((cn.as_str(), orgs.len()), ("system:kube-proxy", 0));

    // Signed by the cluster CA; keys private, certificates public; own keys (seeded by name).
    let ca = text(&two, "pki/ca.crt");
    for name in ["kubelet", "kubelet-client", "kube-proxy"] {
        let crt = format!("nodes/worker-1/pki/{name}.crt");
        let key = format!("nodes/worker-1/pki/{name}.key");
        assert!(
            crate::pki::issue::signed_by(&text(&two, &crt), &ca),
            "{crt}"
        );
        assert_eq!(two.tree[&crt].mode, crate::state::MODE_PUBLIC, "{crt}");
        assert_eq!(two.tree[&key].mode, 0o600, "{key}");
        assert_ne!(
            two.tree[&key].bytes,
            two.tree[&paths::key(name)].bytes,
            "{key}"
        );
        assert!(two.cert_digests.contains_key(&format!("{name}@worker-1")));
    }
    for rel in [
        "nodes/worker-1/kubeconfig/kubelet.kubeconfig",
        "nodes/worker-1/kubeconfig/kube-proxy.kubeconfig",
    ] {
        assert_eq!(two.tree[rel].mode, 0o600, "{rel}");
    }
    // Same profile and seed, same bytes; the first node's keys are the one-node render's.
    assert_eq!(generate(&two_plan, &empty, &opts()).unwrap().tree, two.tree);
    let one = generate(&plan(&[]), &empty, &opts()).unwrap();
    for name in ["kubelet", "kubelet-client", "kube-proxy"] {
        assert_eq!(one.tree[&paths::key(name)], two.tree[&paths::key(name)]);
    }

    // Its kubeconfigs: its own client certificate, the API server at its end of its link.
    let kubeconfig: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text(&two, "nodes/worker-1/kubeconfig/kubelet.kubeconfig"))
            .unwrap();
    let user = &kubeconfig["users"][0]["user"];
    let embedded = |field: &str| {
        use base64::Engine;
        let b64 = user[field].as_str().unwrap();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(
        embedded("client-certificate-data"),
        text(&two, "nodes/worker-1/pki/kubelet-client.crt")
    );
    assert_eq!(
        embedded("client-key-data"),
        text(&two, "nodes/worker-1/pki/kubelet-client.key")
    );
    assert_eq!(
        kubeconfig["users"][0]["name"].as_str(),
        Some("system:node:worker-1")
    );
    let server = format!("https://{}:6443", second.link.host);
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"].as_str(),
        Some(server.as_str())
    );
    assert!(text(&two, "nodes/worker-1/kubeconfig/kube-proxy.kubeconfig").contains(&server));
    // ... which the API server's certificate names.
    let (_, _, apiserver) = subject_and_sans(&text(&two, "pki/apiserver.crt"));
    assert!(apiserver.contains(&second.link.host.to_string()));
    assert!(!text(&two, "kubeconfig/kubelet.kubeconfig").contains(&server));

    // The second kubelet's and kube-proxy's config files name their node's files.
    let kubelet = text(&two, "nodes/worker-1/config/kubelet-config.yaml");
    for line in [
        "tlsCertFile: \"/s/nodes/worker-1/pki/kubelet.crt\"",
        "tlsPrivateKeyFile: \"/s/nodes/worker-1/pki/kubelet.key\"",
    ] {
        assert!(
            kubelet.lines().any(|l| l.trim() == line),
            "{line}:\n{kubelet}"
        );
    }
    assert!(
        kubelet.contains("clientCAFile: \"/s/pki/ca.crt\""),
        "{kubelet}"
    );
    let proxy = text(&two, "nodes/worker-1/config/kube-proxy-config.yaml");
    assert!(
        proxy.contains("\"/s/nodes/worker-1/kubeconfig/kube-proxy.kubeconfig\""),
        "{proxy}"
    );
    let unit = text(&two, "units/kubeunit-dev-kubelet@worker-1.service");
    assert!(
        unit.contains("--kubeconfig=/s/nodes/worker-1/kubeconfig/kubelet.kubeconfig"),
        "{unit}"
    );
}

#[test]
fn a_further_nodes_certificates_are_kept_reissued_and_renewed_on_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostFacts::fixed(Some("192.0.2.5"));
    let p = Plan::new(plan(&[]).profile, dir.path(), &host)
        .unwrap()
        .with_extra_node_for_tests("worker-1");
    let empty = Previous::load(dir.path()).unwrap();
    let g = generate(&p, &empty, &opts()).unwrap();
    let old = write_generated(&p, &empty, &g);
    // A re-run keeps all of them, the further node's too.
    let again = generate(&p, &old, &opts()).unwrap();
    assert_eq!(again.count(Decision::Kept), again.certs.len());
    assert_eq!(again.tree, g.tree);
    // A renewal of the second node's identity renews it and rewrites its kubeconfig, nothing else.
    let renewal = crate::pki::Renewal {
        names: ["kubelet-client@worker-1".to_string()].into(),
        at: time::OffsetDateTime::now_utc(),
    };
    let r = generate_renewing(&p, &old, &opts(), &renewal).unwrap();
    let changed: Vec<&str> = r
        .tree
        .iter()
        .filter(|(rel, a)| g.tree[*rel].bytes != a.bytes)
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert_eq!(
        changed,
        [
            "nodes/worker-1/kubeconfig/kubelet.kubeconfig",
            "nodes/worker-1/pki/kubelet-client.crt"
        ]
    );
    assert_eq!(
        r.renewed.keys().collect::<Vec<_>>(),
        ["kubelet-client@worker-1"]
    );
    // An altered certificate of the second node is reissued, the first's kept.
    std::fs::write(
        dir.path().join("nodes/worker-1/pki/kubelet.crt"),
        text(&g, "pki/kubelet.crt"),
    )
    .unwrap();
    let old = Previous::load(dir.path()).unwrap();
    let fixed = generate(&p, &old, &opts()).unwrap();
    let reissued: Vec<&str> = fixed
        .certs
        .iter()
        .filter(|(_, d)| *d != Decision::Kept)
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(reissued, ["nodes/worker-1/pki/kubelet.crt"]);
    assert_eq!(fixed.tree, g.tree, "the same certificate again");
}
