//! The entries. Flags are checked against the pinned Kubernetes minors (scripts/versions.env); removed
//! flags of older scripts (--insecure-port, kubelet --network-plugin, ...) must never appear here.

use serde_json::json;

use super::command::feature_gates;
use super::component::{
    Cleanup, Component, Content, EnabledBy, File, FileContext, FileMode, Hook, Port, Probe, Skew,
    StandIn, Timer,
};
use crate::error::FieldError;
use crate::render::Template;
use crate::spec::hosts::OnHosts;
use crate::spec::paths;
use crate::spec::plan::{auto_link_ranges, host_port, EtcdMember};
use crate::spec::profile::{HostRole, Role, StorageProvisioner, AUDIT_LEVELS, CONTROL_PLANE_ROLE};
use crate::spec::Plan;

/// What an entry does not say: a Kubernetes component, started with Type=exec, probed over HTTPS.
const KUBERNETES: Component = Component {
    name: "",
    per_node: false,
    per_upstream: false,
    binary: "",
    binary_of: None,
    needs_root: false,
    required: false,
    stand_in: None,
    notify: false,
    needs: &["kube-apiserver"],
    // A Kubernetes client starts once the API server is ready (/readyz). Started once it listened
    // (READY=1), before its RBAC roles existed, the informers' lists were forbidden and client-go's
    // reflector backed off (0.8 s, then 1.6 s): the scheduler saw the node 2.5 s late.
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
    ports: &[],
    version: |v| &v.kubernetes,
    go_module: "k8s.io/kubernetes",
    skew: None,
    flags: |_| vec![],
    args: |_| vec![],
    environment: &[],
    environment_of: |_| vec![],
    own_user: |_| "",
    pre_start: |_| vec![],
    stop_post: |_| vec![],
    files: &[],
    after_healthy: None,
    data_dirs: &[],
    after_stop: &[],
    connections_ended_on_stop: None,
    validate: |_| vec![],
    host_checks: &[],
    kernel_modules: &[],
    enabled_by: None,
    timer: None,
    on_hosts: OnHosts::Every,
};

/// What runs on the control-plane hosts of an environment across hosts (and etcd on its etcd hosts).
const CONTROL_PLANE: OnHosts = OnHosts::With(HostRole::ControlPlane);

/// An HTTPS health endpoint whose serving certificate the cluster CA signed.
const fn https(port: Port, path: &'static str) -> Option<Probe> {
    Some(Probe {
        https: true,
        port,
        path,
        ca: Some("ca"),
        client: None,
        loopback: false,
        link_host: false,
    })
}

/// A plain-HTTP health endpoint kubeunit binds on loopback (in the node's namespace: on the node's
/// address, where this host reaches it).
const fn plain_http(port: Port) -> Option<Probe> {
    Some(Probe {
        https: false,
        port,
        path: "/healthz",
        ca: None,
        client: None,
        loopback: true,
        link_host: false,
    })
}

const ALWAYS: fn(&Plan) -> bool = |_| true;

/// A config file rendered from a template (0600), whenever its component is enabled.
const fn template(
    path: &'static str,
    content: fn(&FileContext) -> Result<Content, FieldError>,
) -> File {
    File {
        path,
        mode: FileMode::Private,
        when: ALWAYS,
        content,
    }
}

/// The name prefix of the snapshots the etcd-snapshot timer takes (and prunes).
pub const SCHEDULED_SNAPSHOT_PREFIX: &str = "scheduled";

// Config files that flags name too.
const AUDIT_POLICY_FILE: &str = "config/audit-policy.yaml";
const ADMISSION_CONFIG_FILE: &str = "config/admission.yaml";
const ENCRYPTION_CONFIG_FILE: &str = paths::ENCRYPTION_CONFIG;
const SCHEDULER_CONFIG_FILE: &str = "config/scheduler-config.yaml";
const CONTAINERD_CONFIG_FILE: &str = "config/containerd.toml";
const CNI_CONFIG_DIR: &str = "config/cni";
const KUBELET_CONFIG_FILE: &str = "config/kubelet-config.yaml";
const KUBE_PROXY_CONFIG_FILE: &str = "config/kube-proxy-config.yaml";
pub const NODE_NETWORK_SCRIPT: &str = "config/node-network.sh";
/// The node's Node object as the LabelNode hook applies it.
pub const NODE_OBJECT_FILE: &str = "config/node.yaml";
const REGISTRY_CONFIG_FILE: &str = "config/registry.yml";
const HAPROXY_CONFIG_FILE: &str = "config/haproxy.cfg";
/// A registry cache's config (`paths::upstream_file` fills in `{upstream}`).
const REGISTRY_CACHE_CONFIG_FILE: &str = "config/registry-cache/{upstream}/config.yml";
/// Its credential helper (distribution's proxy.exec: docker-credential-helpers' protocol).
const REGISTRY_CACHE_HELPER: &str = "config/registry-cache/{upstream}/credential-helper";
/// The helper's answer, when the upstream has credentials (0600).
/// Its filter (iptables): only the environment's nodes reach it (`configs/registry-cache-filter.sh.hbs`).
const REGISTRY_CACHE_FILTER: &str = "config/registry-cache/{upstream}/filter.sh";
const REGISTRY_CACHE_CREDENTIALS: &str = "config/registry-cache/{upstream}/credentials.json";
/// Its CA directory (SSL_CERT_DIR), when its upstream has a CA of its own.
const REGISTRY_CACHE_CA_DIR: &str = "config/registry-cache/{upstream}/certs";
/// containerd's registry host config (`config_path`): a `NAME/hosts.toml` per registry name.
const REGISTRY_HOSTS_DIR: &str = "config/registry-hosts";

// Each component's templates (files under configs/ and addons/).
const AUDIT_POLICY: Template = Template {
    name: "configs/audit-policy.yaml.hbs",
    text: include_str!("../../configs/audit-policy.yaml.hbs"),
};
const ADMISSION_CONFIG: Template = Template {
    name: "configs/admission.yaml.hbs",
    text: include_str!("../../configs/admission.yaml.hbs"),
};
const ENCRYPTION_CONFIG: Template = Template {
    name: "configs/encryption-config.yaml.hbs",
    text: include_str!("../../configs/encryption-config.yaml.hbs"),
};
const ADDON_RBAC: Template = Template {
    name: "addons/rbac.yaml.hbs",
    text: include_str!("../../addons/rbac.yaml.hbs"),
};
const ADDON_COREDNS: Template = Template {
    name: "addons/coredns.yaml.hbs",
    text: include_str!("../../addons/coredns.yaml.hbs"),
};
const ADDON_STORAGECLASS: Template = Template {
    name: "addons/storageclass.yaml.hbs",
    text: include_str!("../../addons/storageclass.yaml.hbs"),
};
const ADDON_METRICS_SERVER: Template = Template {
    name: "addons/metrics-server.yaml.hbs",
    text: include_str!("../../addons/metrics-server.yaml.hbs"),
};
const ADDON_METALLB: Template = Template {
    name: "addons/metallb.yaml.hbs",
    text: include_str!("../../addons/metallb.yaml.hbs"),
};
const ADDON_TRAEFIK: Template = Template {
    name: "addons/traefik.yaml.hbs",
    text: include_str!("../../addons/traefik.yaml.hbs"),
};
/// Upstream's CRDs as they are (scripts/gateway-api-crds.sh writes and checks them): not a template.
const GATEWAY_API_CRDS: &str = include_str!("../../addons/gateway-api-crds.yaml");

/// Whether the environment has the Gateway API addon: asked for, and the load balancer its
/// Gateways' address comes from is there (off with it, without a node).
fn gateway_on(plan: &Plan) -> bool {
    plan.profile.addons.gateway && plan.load_balancer.is_some()
}
const SCHEDULER_CONFIG: Template = Template {
    name: "configs/scheduler-config.yaml.hbs",
    text: include_str!("../../configs/scheduler-config.yaml.hbs"),
};
const CONTAINERD_CONFIG: Template = Template {
    name: "configs/containerd.toml.hbs",
    text: include_str!("../../configs/containerd.toml.hbs"),
};
const CNI_BRIDGE: Template = Template {
    name: "configs/cni-bridge.conflist.hbs",
    text: include_str!("../../configs/cni-bridge.conflist.hbs"),
};
const KUBELET_CONFIG: Template = Template {
    name: "configs/kubelet-config.yaml.hbs",
    text: include_str!("../../configs/kubelet-config.yaml.hbs"),
};
const JOIN_KUBECONFIG: Template = Template {
    name: "configs/join-kubeconfig.hbs",
    text: include_str!("../../configs/join-kubeconfig.hbs"),
};
const NODE_OBJECT: Template = Template {
    name: "configs/node.yaml.hbs",
    text: include_str!("../../configs/node.yaml.hbs"),
};
const NODE_NETWORK: Template = Template {
    name: "configs/node-network.sh.hbs",
    text: include_str!("../../configs/node-network.sh.hbs"),
};
const REGISTRY_CONFIG: Template = Template {
    name: "configs/registry.yml.hbs",
    text: include_str!("../../configs/registry.yml.hbs"),
};
const REGISTRY_HOSTS: Template = Template {
    name: "configs/registry-hosts.toml.hbs",
    text: include_str!("../../configs/registry-hosts.toml.hbs"),
};
const REGISTRY_CACHE_CONFIG: Template = Template {
    name: "configs/registry-cache.yml.hbs",
    text: include_str!("../../configs/registry-cache.yml.hbs"),
};
const REGISTRY_CACHE_HELPER_SCRIPT: Template = Template {
    name: "configs/registry-cache-credential-helper.sh.hbs",
    text: include_str!("../../configs/registry-cache-credential-helper.sh.hbs"),
};
const REGISTRY_CACHE_FILTER_SCRIPT: Template = Template {
    name: "configs/registry-cache-filter.sh.hbs",
    text: include_str!("../../configs/registry-cache-filter.sh.hbs"),
};
const PULL_THROUGH_HOSTS: Template = Template {
    name: "configs/registry-pull-through-hosts.toml.hbs",
    text: include_str!("../../configs/registry-pull-through-hosts.toml.hbs"),
};
const HAPROXY_CONFIG: Template = Template {
    name: "configs/haproxy.cfg.hbs",
    text: include_str!("../../configs/haproxy.cfg.hbs"),
};
const KUBE_PROXY_CONFIG: Template = Template {
    name: "configs/kube-proxy-config.yaml.hbs",
    text: include_str!("../../configs/kube-proxy-config.yaml.hbs"),
};

/// Every port a component listens on, each in the `ports` of that component's entry. `slot` is its
/// place in `ports:` and in a `ports: auto` block: a new port takes the next (see `Port`).
pub mod port {
    use crate::components::component::Namespace::{self, Host, Node};
    use crate::components::component::Port;

    const fn port(field: &'static str, default: u16, slot: u16, namespace: Namespace) -> Port {
        Port {
            field,
            default,
            slot,
            namespace,
            per_upstream: false,
        }
    }

    // etcd
    pub const ETCD_CLIENT: Port = port("etcdClient", 2379, 0, Host);
    pub const ETCD_PEER: Port = port("etcdPeer", 2380, 1, Host);
    // kube-apiserver
    pub const APISERVER: Port = port("apiserver", 6443, 2, Host);
    // kube-controller-manager
    pub const CONTROLLER_MANAGER: Port = port("controllerManager", 10257, 3, Host);
    // kube-scheduler
    pub const SCHEDULER: Port = port("scheduler", 10259, 4, Host);
    // kubelet
    pub const KUBELET: Port = port("kubelet", 10250, 5, Node);
    pub const KUBELET_HEALTHZ: Port = port("kubeletHealthz", 10248, 6, Node);
    // kube-proxy
    pub const KUBE_PROXY_HEALTHZ: Port = port("kubeProxyHealthz", 10256, 7, Node);
    pub const KUBE_PROXY_METRICS: Port = port("kubeProxyMetrics", 10249, 8, Node);
    // cloud-controller-manager
    pub const CLOUD_CONTROLLER_MANAGER: Port = port("cloudControllerManager", 10258, 9, Host);
    // registry: the node's local OCI registry, on the node's address
    pub const REGISTRY: Port = port("registry", 5000, 10, Node);
    // registry-cache: the first pull-through cache, on the host's end of the node link; each
    // further cache the next port.
    pub const REGISTRY_CACHE: Port = Port {
        per_upstream: true,
        ..port("registryCache", 5001, 11, Host)
    };
}

/// The API server's URL on this host.
pub fn apiserver_url(plan: &Plan) -> String {
    plan.local_url(port::APISERVER.of(plan))
}

/// The API server as the node's components (in the node's network namespace) reach it: at the
/// host's end of the node link.
pub fn node_apiserver_url(plan: &Plan) -> String {
    // Across hosts: a control-plane host's node reaches its own API server at the host's address
    // (its link routes it there); another host's reaches them all through the load balancer at
    // the host's end of its link (haproxy).
    let address = match plan.this_host() {
        Some(h) if plan.here_has(HostRole::ControlPlane) => h.address.into(),
        _ => plan.node().link.host.into(),
    };
    format!("https://{}", host_port(address, port::APISERVER.of(plan)))
}

/// Where kubeunit's own calls on this host (in its network namespace) reach the API servers, to be
/// tried in order: a control-plane host's own, another host's load balancer; a host that joined
/// later dials each control-plane host's address, which that one's certificate names (its load
/// balancer's address is in no API server's certificate: those were issued before it joined).
pub fn api_urls(plan: &Plan) -> Vec<String> {
    if plan.joins() {
        let port = port::APISERVER.of(plan);
        return plan
            .hosts
            .iter()
            .filter(|h| h.roles.contains(&HostRole::ControlPlane))
            .map(|h| format!("https://{}", host_port(h.address.into(), port)))
            .collect();
    }
    if plan.here_has(HostRole::ControlPlane) {
        return vec![apiserver_url(plan)];
    }
    vec![node_apiserver_url(plan)]
}

/// A joined node's kubeconfigs name the `kubernetes` Service's address (see
/// configs/join-kubeconfig.hbs).
fn join_kubeconfig(plan: &Plan, what: &str, user: &str, token: Option<String>) -> Content {
    let cluster = format!("kubeunit-{}", plan.name());
    let pem = plan
        .kubelet_cert_dir()
        .join(crate::spec::join::KUBELET_CLIENT_PEM);
    Content::Template(
        &JOIN_KUBECONFIG,
        json!({
            "env": plan.name(),
            "what": what,
            "node": plan.node().name,
            "cluster": cluster,
            "server": format!("https://{}", host_port(plan.first_service_ip, 443)),
            "ca": plan.path(&paths::cert("ca")),
            "user": user,
            "context": format!("{user}@{cluster}"),
            "token": token,
            "pem": pem,
        }),
    )
}

/// A file of a joining host's `join` (`hosts[i].join.FIELD`, checked by validation), read.
fn join_file(
    plan: &Plan,
    field: &str,
    file: fn(&crate::spec::profile::Join) -> &std::path::Path,
) -> Result<(String, String), FieldError> {
    let (i, join) = crate::spec::join::here(&plan.profile).ok_or_else(|| {
        FieldError::new(
            "host",
            &plan.profile.host,
            "does not join later",
            "give hosts[i].join",
        )
    })?;
    let (field, file) = (format!("hosts[{i}].join.{field}"), file(join));
    let text = std::fs::read_to_string(file).map_err(|e| {
        FieldError::new(
            &field,
            file.display(),
            format!("cannot read it: {e}"),
            "give a readable file",
        )
    })?;
    Ok((field, text))
}

/// A joining host's bootstrap token, from its token file.
fn join_token(plan: &Plan) -> Result<String, FieldError> {
    let (field, text) = join_file(plan, "tokenFile", |j| &j.token_file)?;
    crate::spec::join::Token::parse(&text)
        .map(|t| t.to_string())
        .map_err(|e| {
            FieldError::new(
                field,
                "(its content)",
                e.to_string(),
                "write the token `kubeunit token create` printed into it",
            )
        })
}

/// The client URL of the environment's etcd unit's member (one endpoint, as `etcdctl snapshot
/// save` wants).
pub fn etcd_url(plan: &Plan) -> String {
    etcd_client_url(plan, plan.etcd_member())
}

fn etcd_client_url(plan: &Plan, member: &EtcdMember) -> String {
    format!(
        "https://{}",
        host_port(member.client_address, port::ETCD_CLIENT.of(plan))
    )
}

fn etcd_peer_url(plan: &Plan, member: &EtcdMember) -> String {
    format!(
        "https://{}",
        host_port(member.peer_address, port::ETCD_PEER.of(plan))
    )
}

/// `--initial-cluster`: every member by name at its peer URL, in the plan's order.
fn etcd_initial_cluster(plan: &Plan) -> String {
    let members: Vec<String> = plan
        .etcd_members
        .iter()
        .map(|m| format!("{}={}", m.name, etcd_peer_url(plan, m)))
        .collect();
    members.join(",")
}

/// etcd's Raft ticks for the plan's members: (`--heartbeat-interval`, `--election-timeout`) in ms.
/// Every member gets the same: etcd's tuning guide (https://etcd.io/docs/v3.6/tuning/) says
/// members that differ may disrupt the cluster, so they are written out even where they are
/// etcd's defaults.
fn etcd_ticks(plan: &Plan) -> (u32, u32) {
    if let [_] = plan.etcd_members.as_slice() {
        // One member: it elects itself after the remaining election ticks (about 2 heartbeats,
        // 200 ms at the default 100 ms). Short ticks make it ready sooner; with no peer there is
        // no heartbeat to miss. Measured (bench-peers, 2x4 alternating runs): with etcd's defaults
        // (100/1000) etcd was healthy only 0.6-1.2 s in (7 of 8) and all ready 2.90-3.20 s, against
        // 2.40-2.55 s with these; the cost is idle CPU, 1.1% of a core against 0.3%.
        return (10, 100);
    }
    // Peers: the guide puts the heartbeat near the members' round-trip time (0.5-1.5x) and the
    // election timeout at 10x it or more, and finds its defaults, 100 ms and 1000 ms, right for a
    // local network. Peers on loopback have next to no round trip, but each timeout runs from
    // request to successful response, slow disks included (the guide again), and members on one
    // host share its CPUs and disk: a build beside them holds a heartbeat up for tens of ms, which
    // 10 ms ticks would turn into elections. So peers get the defaults, on loopback too
    // (unmeasured here).
    (100, 1000)
}

/// Whether the controller-manager-like components (controller-manager, scheduler, cloud
/// controller manager) elect a leader: only when more than one of each runs, as in a control plane
/// of several etcd members (stacked, as kubeadm's HA: each member's node runs one of each). One
/// instance skips it and its start-up delay.
fn leader_elect(plan: &Plan) -> bool {
    plan.etcd_members.len() > 1
}

pub const COMPONENTS: &[Component] = &[
    Component {
        name: "etcd",
        on_hosts: OnHosts::With(HostRole::Etcd),
        binary: "etcd",
        required: true,
        stand_in: Some(StandIn {
            field: "datastore.endpoints",
            named: |p| p.datastore.external(),
        }),
        notify: true,
        needs: &[],
        starts_once_up: &[],
        kubernetes: false,
        probe: Some(Probe {
            https: true,
            port: port::ETCD_CLIENT,
            path: "/health",
            ca: Some("etcd/ca"),
            client: Some("etcd/healthcheck-client"),
            loopback: false,
            link_host: false,
        }),
        ports: &[port::ETCD_CLIENT, port::ETCD_PEER],
        data_dirs: &["etcd"],
        // A save (the timer's, or by hand) that `stop` ended mid-write leaves its temporary file.
        after_stop: &[Cleanup::UnfinishedSnapshots],
        own_user: |p| &p.etcd.user,
        host_checks: &[host::own_user_exists],
        version: |v| &v.etcd,
        go_module: "go.etcd.io/etcd/server/v3",
        flags: etcd_flags,
        ..KUBERNETES
    },
    Component {
        name: "kube-apiserver",
        on_hosts: CONTROL_PLANE,
        binary: "kube-apiserver",
        notify: true,
        needs: &["etcd"],
        starts_once_up: &[],
        // It dials etcd until it answers (--storage-initialization-timeout), and sends READY=1 only
        // once it serves: the two start together.
        starts_alongside: &["etcd"],
        validate: datastore_files,
        host_checks: &[host::datastore_reachable],
        probe: https(port::APISERVER, "/readyz"),
        ports: &[port::APISERVER],
        // Go's own GOGC (100), as etcd: with 400, dev held about 160 MiB more at rest (its heap
        // may grow to 5x what it keeps live) for no faster start (benches/memory.rs, alternating).
        // Its loopback client (informers, controllers) and others' watches hold its exit after
        // draining: the idle HTTP/2 connections get golang.org/x/net/http2's fixed 1 s GOAWAY
        // grace (`stop` took 1.2 s instead of about 0.2 s), watches its server's 2 s deadline.
        connections_ended_on_stop: Some(port::APISERVER),
        data_dirs: &["audit"],
        flags: apiserver_flags,
        files: &[
            template(AUDIT_POLICY_FILE, audit_policy),
            File {
                path: ADMISSION_CONFIG_FILE,
                when: admission_configured,
                ..template(ADMISSION_CONFIG_FILE, |cx| {
                    let prof = &cx.plan.profile;
                    Ok(Content::Template(
                        &ADMISSION_CONFIG,
                        json!({
                            "pod_security": prof.apiserver.pod_security,
                            "event_rate_limit": event_rate_limit(prof),
                        }),
                    ))
                })
            },
            File {
                path: ENCRYPTION_CONFIG_FILE,
                mode: FileMode::Secret,
                when: |plan| plan.profile.encryption.enabled,
                content: |cx| {
                    let key = cx.secrets.encryption_key.as_deref().unwrap_or_default();
                    Ok(Content::Template(&ENCRYPTION_CONFIG, json!({ "key": key })))
                },
            },
            // Applied by the ApplyAddons hook below.
            template("addons/00-rbac.yaml", |cx| {
                let ccm = cx.plan.enabled("cloud-controller-manager");
                Ok(Content::Template(
                    &ADDON_RBAC,
                    json!({
                        "cloud_controller_manager": ccm,
                        "join": !cx.plan.hosts.is_empty(),
                        "join_group": crate::spec::join::GROUP,
                    }),
                ))
            }),
            File {
                path: "addons/10-coredns.yaml",
                mode: FileMode::Private,
                when: |plan| plan.profile.addons.coredns,
                content: |cx| {
                    let plan = cx.plan;
                    Ok(Content::Template(
                        &ADDON_COREDNS,
                        json!({
                            "dns_ip": plan.dns_ip.to_string(),
                            "dns_domain": plan.profile.network.dns_domain,
                            "image": plan.profile.addons.coredns_image,
                            "forward": plan.coredns_forward,
                        }),
                    ))
                },
            },
            File {
                path: "addons/20-storageclass.yaml",
                mode: FileMode::Private,
                when: |plan| plan.profile.addons.default_storage_class,
                content: |cx| {
                    let addons = &cx.plan.profile.addons;
                    Ok(Content::Template(
                        &ADDON_STORAGECLASS,
                        json!({
                            "local_path": addons.storage_provisioner == StorageProvisioner::LocalPath,
                            "image": addons.local_path_image,
                            "helper_image": addons.local_path_helper_image,
                            "config_json": local_path_config(cx.plan),
                        }),
                    ))
                },
            },
            File {
                path: "addons/30-metrics-server.yaml",
                mode: FileMode::Private,
                when: |plan| plan.profile.addons.metrics_server,
                content: |cx| {
                    Ok(Content::Template(
                        &ADDON_METRICS_SERVER,
                        json!({ "image": cx.plan.profile.addons.metrics_server_image }),
                    ))
                },
            },
            File {
                path: "addons/40-metallb.yaml",
                mode: FileMode::Private,
                when: |plan| plan.load_balancer.is_some(),
                content: |cx| {
                    let addons = &cx.plan.profile.addons;
                    let pool = cx.plan.load_balancer.as_ref().map(|lb| lb.pool.to_string());
                    Ok(Content::Template(
                        &ADDON_METALLB,
                        json!({
                            "controller_image": addons.metallb_controller_image,
                            "speaker_image": addons.metallb_speaker_image,
                            "pool": pool,
                        }),
                    ))
                },
            },
            File {
                path: "addons/50-gateway-api-crds.yaml",
                mode: FileMode::Private,
                when: gateway_on,
                content: |_| Ok(Content::Verbatim(GATEWAY_API_CRDS.to_string())),
            },
            File {
                path: "addons/51-traefik.yaml",
                mode: FileMode::Private,
                when: gateway_on,
                content: |cx| {
                    Ok(Content::Template(
                        &ADDON_TRAEFIK,
                        json!({ "image": cx.plan.profile.addons.traefik_image }),
                    ))
                },
            },
        ],
        after_healthy: Some(Hook::ApplyAddons),
        // Between API servers: "the newest and oldest kube-apiserver instances must be within one
        // minor version".
        skew: Some(Skew { older: 1, newer: 1 }),
        ..KUBERNETES
    },
    Component {
        name: "kube-controller-manager",
        on_hosts: CONTROL_PLANE,
        binary: "kube-controller-manager",
        probe: https(port::CONTROLLER_MANAGER, "/healthz"),
        ports: &[port::CONTROLLER_MANAGER],
        // It asks the API server's /healthz itself (once a second) before its informers start:
        // started once the API server listens, its own start-up overlaps the API server's.
        starts_once_up: &["kube-apiserver"],
        flags: controller_manager_flags,
        skew: Some(Skew { older: 1, newer: 0 }),
        ..KUBERNETES
    },
    Component {
        name: "kube-scheduler",
        on_hosts: CONTROL_PLANE,
        binary: "kube-scheduler",
        probe: https(port::SCHEDULER, "/healthz"),
        ports: &[port::SCHEDULER],
        flags: scheduler_flags,
        files: &[template(SCHEDULER_CONFIG_FILE, |cx| {
            let kubeconfig = cx.plan.path(&paths::kubeconfig("scheduler"));
            Ok(Content::Template(
                &SCHEDULER_CONFIG,
                json!({ "kubeconfig": kubeconfig, "leader_elect": leader_elect(cx.plan) }),
            ))
        })],
        skew: Some(Skew { older: 1, newer: 0 }),
        ..KUBERNETES
    },
    Component {
        name: "cloud-controller-manager",
        on_hosts: CONTROL_PLANE,
        binary: "cloud-controller-manager",
        probe: https(port::CLOUD_CONTROLLER_MANAGER, "/healthz"),
        ports: &[port::CLOUD_CONTROLLER_MANAGER],
        flags: cloud_controller_manager_flags,
        validate: |p| {
            let ccm = p.component("cloud-controller-manager");
            if ccm.extra_args.contains_key("cloud-provider") {
                return vec![];
            }
            vec![FieldError::new(
                "components.cloud-controller-manager.extraArgs.cloud-provider",
                "(unset)",
                "the cloud-controller-manager needs to know its provider",
                "set components.cloud-controller-manager.extraArgs.cloud-provider",
            )]
        },
        skew: Some(Skew { older: 1, newer: 0 }),
        ..KUBERNETES
    },
    // The node's own network namespace, linked to the host by a veth pair: what the node's
    // components join.
    Component {
        name: "node-network",
        per_node: true,
        needs_root: true,
        binary: "/bin/sh",
        needs: &[],
        starts_once_up: &[],
        kubernetes: false,
        oneshot: true,
        version: |_| "",
        go_module: "",
        args: |plan| vec![plan.node_file(NODE_NETWORK_SCRIPT), "up".into()],
        // The copy `up` made in /run: a node that `gen` removed from the state dir goes down too.
        stop_post: |plan| {
            vec![vec![
                "/bin/sh".into(),
                node_network_copy(plan).to_string_lossy().into_owned(),
                "down".into(),
            ]]
        },
        validate: node_link_carries_the_cluster_networks,
        host_checks: &[
            host::iproute2,
            host::iptables_for_egress,
            host::link_free,
            host::cluster_routes_free,
        ],
        // Its run dir (the script's copy, the marker; a further node's whole run dir), once its
        // containerd took its own state out of it.
        after_stop: &[Cleanup::RemoveDir(|plan| plan.node().run_dir.clone())],
        files: &[template(NODE_NETWORK_SCRIPT, |cx| {
            let plan = cx.plan;
            let node = plan.node();
            let link = &node.link;
            Ok(Content::Template(
                &NODE_NETWORK,
                json!({
                    "env": plan.name(),
                    "node_name": node.name,
                    "netns": link.netns,
                    "uts": node.uts_path(),
                    "interface": link.interface,
                    "host": link.host.to_string(),
                    "node": link.node.to_string(),
                    "net": link.net.to_string(),
                    "prefix": link.net.prefix_len(),
                    // The namespace's name is the node's on this host (the first node's is the
                    // environment's unit prefix).
                    "tag": format!("{} node link", link.netns),
                    "marker": node.run_dir.join("node-network.masquerade"),
                    "copy": node_network_copy(plan),
                    "pod_cidr": node.pod_cidr.to_string(),
                    "cluster_pod_cidr": plan.pod_cidr.to_string(),
                    "first": plan.node_index == 0,
                    "service_cidr": plan.service_cidr.to_string(),
                    "table": plan.routing_table(),
                    "metric": node.link.metric(),
                    "egress": plan.egress.word(),
                    "allowed": plan.egress.allowed().iter().map(|n| n.to_string()).collect::<Vec<_>>(),
                    "cluster_nets": cluster_nets(plan),
                    // At most 28 bytes (iptables' limit): the interface has 15.
                    "chain": format!("KU-EGRESS-{}", link.interface),
                    "uplinks": crate::spec::plan::uplinks_dir(),
                    "join_api": plan.joins().then(|| json!({
                        "service": plan.first_service_ip.to_string(),
                        "target": host_port(link.host.into(), port::APISERVER.of(plan)),
                    })),
                    "remotes": plan.hosts.iter().enumerate()
                        .filter(|(i, _)| *i != plan.host_index)
                        .map(|(_, h)| json!({
                            "address": h.address.to_string(),
                            "pod_cidr": h.node.pod_cidr.to_string(),
                            "link_net": h.link.net.to_string(),
                        }))
                        .collect::<Vec<_>>(),
                    "v6": plan.ipv6.as_ref().zip(node.ipv6.as_ref()).map(|(v6, n6)| json!({
                        "host": n6.link_host.to_string(),
                        "node": n6.link_node.to_string(),
                        "prefix": n6.link_net.prefix_len(),
                        "pod_cidr": n6.pod_cidr.to_string(),
                        "cluster_pod_cidr": v6.pod_cidr.to_string(),
                        "service_cidr": v6.service_cidr.to_string(),
                        "links": crate::spec::dual_stack::LINK_V6.to_string(),
                        "router": v6.router,
                    })),
                    "lb": plan.load_balancer.as_ref().map(|lb| json!({
                        "segment": lb.segment,
                        "segment_mac": lb.segment_mac,
                        "pool": lb.pool.to_string(),
                        "host": lb.host_address.to_string(),
                        "uplink_address": lb.uplink_address.map(|a| a.to_string()),
                        "hosts": lb.host_segments.iter()
                            .map(|(address, mac)| format!("{address} {mac}"))
                            .collect::<Vec<_>>(),
                        "port": crate::spec::load_balancer::node_port(&link.netns),
                    })),
                }),
            ))
        })],
        ..KUBERNETES
    },
    Component {
        name: "containerd",
        per_node: true,
        needs_root: true,
        binary: "containerd",
        notify: true,
        needs: &["node-network"],
        starts_once_up: &[],
        netns: true,
        uts: true,
        kubernetes: false,
        delegate: true,
        kill_mode: Some("process"),
        data_dirs: &["containerd"],
        version: |_| "",
        go_module: "",
        after_healthy: Some(Hook::ImportImages),
        host_checks: &[
            host::runtime,
            host::cni_plugins,
            host::overlayfs,
            host::images,
            host::nsenter,
        ],
        kernel_modules: &["overlay"],
        // Its shims, pods' network namespaces, rootfs and shm mounts outlive a kill (the CNI
        // bridge and rules are the node namespace's, gone with it).
        after_stop: &[
            Cleanup::Unmount(|plan| {
                vec![
                    plan.node().data_dir.join("containerd"),
                    plan.node().run_dir.join("containerd"),
                ]
            }),
            // Its state: sockets and the files the pods' network namespaces were mounted on.
            Cleanup::RemoveDir(|plan| plan.node().run_dir.join("containerd")),
        ],
        flags: |plan| vec![flag("config", plan.node_file(CONTAINERD_CONFIG_FILE))],
        files: &[
            template(CONTAINERD_CONFIG_FILE, |cx| {
                let plan = cx.plan;
                let prof = &plan.profile;
                let node = plan.node();
                Ok(Content::Template(
                    &CONTAINERD_CONFIG,
                    json!({
                        "env": plan.name(),
                        "root": node.data("containerd/root"),
                        "state": node.run_dir.join("containerd"),
                        "opt": node.data("containerd/opt"),
                        "nri_socket": node.run_dir.join("containerd/nri.sock"),
                        "socket": node.containerd_socket,
                        "cni_bin_dir": prof.containerd.cni_bin_dir,
                        "cni_conf_dir": plan.node_file(CNI_CONFIG_DIR),
                        "runtime": plan.runtime,
                        "sandbox_image": prof.containerd.sandbox_image,
                        "restrict_oom_score_adj": prof.containerd.restrict_oom_score_adj,
                        "registry_hosts": plan
                            .enabled("registry")
                            .then(|| plan.path(REGISTRY_HOSTS_DIR)),
                    }),
                ))
            }),
            template("config/cni/10-kubeunit-bridge.conflist", |cx| {
                let plan = cx.plan;
                let default_route = |net: &str| {
                    if net.contains(':') {
                        "::/0"
                    } else {
                        "0.0.0.0/0"
                    }
                };
                let pod_cidrs = plan.node_pod_cidrs();
                Ok(Content::Template(
                    &CNI_BRIDGE,
                    json!({
                        // host-local keeps its leases in /var/lib/cni/networks/<network>, on
                        // the host: one per node (CNI network names take no `@`).
                        "network": plan.node().cni_network(&plan.unit_prefix()),
                        // The node's namespace has this one bridge.
                        "bridge": "cni0",
                        "ranges": pod_cidrs,
                        "default_routes": pod_cidrs.iter().map(|n| default_route(n)).collect::<Vec<_>>(),
                    }),
                ))
            }),
        ],
        ..KUBERNETES
    },
    // The node's local OCI registry (distribution): containerd pulls every image from it (the
    // registry hosts config below, which containerd's config names), `start` loads it with the
    // images containerd imported, `kubeunit images load` with more.
    Component {
        name: "registry",
        needs_root: true,
        binary: "registry",
        // containerd's images are what it is loaded with.
        needs: &["node-network", "containerd"],
        starts_once_up: &[],
        netns: true,
        kubernetes: false,
        probe: Some(Probe {
            https: false,
            port: port::REGISTRY,
            path: "/v2/",
            ca: None,
            client: None,
            loopback: true,
            link_host: false,
        }),
        ports: &[port::REGISTRY],
        data_dirs: &["registry"],
        version: |_| "",
        go_module: "",
        args: |plan| vec!["serve".into(), plan.path(REGISTRY_CONFIG_FILE)],
        // Its tracing would export to an OTLP collector on localhost by default.
        environment: &[("OTEL_TRACES_EXPORTER", "none")],
        after_healthy: Some(Hook::LoadRegistry),
        files: &[
            template(REGISTRY_CONFIG_FILE, |cx| {
                let plan = cx.plan;
                Ok(Content::Template(
                    &REGISTRY_CONFIG,
                    json!({
                        "env": plan.name(),
                        "root": plan.data("registry"),
                        "addr": host_port(plan.node().link.node.into(), port::REGISTRY.of(plan)),
                    }),
                ))
            }),
            // Every name an image is pulled by goes to this registry: the usual ones by name,
            // any other through `_default`. Offline that is all; online a name with a cache
            // has its own file from its registry-cache instance, `_default` falls back to the
            // name's own registry.
            offline_hosts("config/registry-hosts/registry.k8s.io/hosts.toml"),
            offline_hosts("config/registry-hosts/docker.io/hosts.toml"),
            template(
                "config/registry-hosts/kubeunit.local/hosts.toml",
                registry_hosts,
            ),
            template("config/registry-hosts/_default/hosts.toml", |cx| {
                match cx.plan.upstreams.is_empty() {
                    true => registry_hosts(cx),
                    false => Ok(pull_through_hosts(cx.plan, None)),
                }
            }),
        ],
        ..KUBERNETES
    },
    // A pull-through cache of one upstream registry per registry name (`spec::registries`):
    // distribution in proxy mode, which pulls an image once and keeps it (no expiry), so that the
    // next start, or another node, gets it without going out. It runs in this host's network
    // namespace, on the host's end of the first node's link, where every node reaches it: its
    // pulls are this host's own, by this host's routes, DNS and proxies, and need no forwarding of
    // the node's packets (network.egress). Each has its own config, port and storage.
    Component {
        name: "registry-cache",
        per_upstream: true,
        // Not needs_root: it binds a port above 1024 on an address node-network (which needs
        // root) makes.
        binary: "registry",
        binary_of: Some("registry"),
        // It binds the host's end of the node link.
        needs: &["node-network"],
        starts_once_up: &[],
        kubernetes: false,
        enabled_by: Some(EnabledBy {
            field: "registries",
            when: |p| !crate::spec::registries::upstreams(p).is_empty(),
        }),
        probe: Some(Probe {
            https: false,
            port: port::REGISTRY_CACHE,
            path: "/v2/",
            ca: None,
            client: None,
            loopback: false,
            link_host: true,
        }),
        ports: &[port::REGISTRY_CACHE],
        data_dirs: &["registry-cache"],
        version: |_| "",
        go_module: "",
        args: |plan| vec!["serve".into(), cache_file(plan, REGISTRY_CACHE_CONFIG_FILE)],
        // It pulls with the environment's credentials for whoever asks: only the nodes may.
        pre_start: |plan| vec![registry_cache_filter(plan, "up")],
        stop_post: |plan| vec![registry_cache_filter(plan, "down")],
        host_checks: &[host::iptables_for_caches],
        environment: &[("OTEL_TRACES_EXPORTER", "none")],
        // Go trusts the certificates of every file in SSL_CERT_DIR besides the system's bundle:
        // the upstream's CA, copied into the state dir (reproducible, unlike the bundle).
        environment_of: |plan| match plan.upstream().and_then(|u| u.ca_file.as_ref()) {
            Some(_) => vec![(
                "SSL_CERT_DIR".into(),
                cache_file(plan, REGISTRY_CACHE_CA_DIR),
            )],
            None => vec![],
        },
        files: &[
            template(REGISTRY_CACHE_CONFIG_FILE, registry_cache_config),
            template(REGISTRY_CACHE_FILTER, |cx| {
                let plan = cx.plan;
                let first = &plan.nodes[0].link;
                let port = port::REGISTRY_CACHE.of(plan);
                let name = plan.upstream().map_or("", |u| u.name.as_str());
                Ok(Content::Template(
                    &REGISTRY_CACHE_FILTER_SCRIPT,
                    json!({
                        "env": plan.name(),
                        "name": name,
                        "host": first.host.to_string(),
                        "port": port,
                        // At most 28 bytes (iptables' limit): the interface has 15, the port 5.
                        "chain": format!("KU-RC-{}-{port}", first.interface),
                        // The environment's prefix in it: its leftovers are found by that.
                        "tag": format!("{} registry cache {name}", first.netns),
                        "nodes": plan.nodes.iter().map(|n| n.link.node.to_string()).collect::<Vec<_>>(),
                    }),
                ))
            }),
            // Its credentials come from this helper (proxy.exec), not from the config: with
            // proxy.username distribution asks the upstream at start-up and dies when it does not
            // answer, so a cache whose upstream is away could not serve what it holds.
            File {
                path: REGISTRY_CACHE_HELPER,
                mode: FileMode::Executable,
                when: ALWAYS,
                content: |cx| {
                    let credentials = cache_has_auth(cx.plan)
                        .then(|| cache_file(cx.plan, REGISTRY_CACHE_CREDENTIALS));
                    Ok(Content::Template(
                        &REGISTRY_CACHE_HELPER_SCRIPT,
                        json!({ "env": cx.plan.name(), "credentials": credentials }),
                    ))
                },
            },
            File {
                path: REGISTRY_CACHE_CREDENTIALS,
                mode: FileMode::Secret,
                when: cache_has_auth,
                content: |cx| {
                    let auth = cx.plan.upstream().and_then(|u| u.auth.as_ref());
                    let username = auth.map_or("", |a| a.username.as_str());
                    let password = auth.map(|a| upstream_password(cx.plan, a)).transpose()?;
                    let json = json!({ "Username": username, "Secret": password });
                    Ok(Content::Verbatim(format!("{json}\n")))
                },
            },
            // What profile.yaml names as the password's file (`spec::registries::recorded`).
            File {
                path: paths::REGISTRY_CACHE_PASSWORD,
                mode: FileMode::Secret,
                when: cache_has_auth,
                content: |cx| {
                    let auth = cx.plan.upstream().and_then(|u| u.auth.as_ref());
                    let password = auth.map(|a| upstream_password(cx.plan, a)).transpose()?;
                    Ok(Content::Verbatim(password.unwrap_or_default()))
                },
            },
            File {
                path: "config/registry-cache/{upstream}/certs/ca.crt",
                mode: FileMode::Public,
                when: |plan| plan.upstream().is_some_and(|u| u.ca_file.is_some()),
                content: |cx| {
                    let file = cx.plan.upstream().and_then(|u| u.ca_file.clone());
                    let file = file.unwrap_or_default();
                    std::fs::read_to_string(&file)
                        .map(Content::Verbatim)
                        .map_err(|e| upstream_field_error(cx.plan, "tls.caFile", &file, e))
                },
            },
            template("config/registry-hosts/{upstream}/hosts.toml", |cx| {
                Ok(pull_through_hosts(cx.plan, cx.plan.upstream()))
            }),
        ],
        ..KUBERNETES
    },
    Component {
        name: "kubelet",
        per_node: true,
        needs_root: true,
        binary: "kubelet",
        notify: true,
        needs: &["kube-apiserver", "node-network"],
        netns: true,
        after_if_enabled: &["containerd", "haproxy"],
        gates_in_config: true,
        delegate: true,
        probe: plain_http(port::KUBELET_HEALTHZ),
        ports: &[port::KUBELET, port::KUBELET_HEALTHZ],
        // local-path: the node's volumes (local-path-provisioner's helper pods make them there).
        data_dirs: &["kubelet", "pod-logs", "local-path"],
        flags: kubelet_flags,
        pre_start: |plan| vec![pods_cgroup_controllers(plan)],
        host_checks: &[host::cgroups_writable, host::proc_sys_writable, host::kmsg],
        // Pod volumes (tmpfs for secrets and tokens) stay mounted after a kill, and the pods'
        // cgroups systemd does not manage stay too; so do its links to the pod logs in the one
        // directory it cannot be told (log collectors read it).
        after_stop: &[
            Cleanup::Unmount(|plan| vec![plan.node().data_dir.join("kubelet")]),
            Cleanup::LinksInto("/var/log/containers", |plan| {
                plan.node().data_dir.join("pod-logs")
            }),
            Cleanup::CgroupDirs(|plan| plan.node().pods_cgroup.clone()),
        ],
        files: &[
            template(KUBELET_CONFIG_FILE, |cx| {
                let plan = cx.plan;
                let prof = &plan.profile;
                // The kubelet's own check: pod log paths must be ASCII.
                let pod_logs = plan.node().data("pod-logs");
                if !pod_logs.is_ascii() {
                    return Err(FieldError::new(
                    "dataDir",
                    plan.node().data_dir.display(),
                    "holds non-ASCII characters, which the kubelet refuses in its pod log directory",
                    "use an ASCII path for the state dir or dataDir",
                ));
                }
                Ok(Content::Template(
                    &KUBELET_CONFIG,
                    json!({
                        "address": plan.node().link.node.to_string(),
                        "pod_logs_dir": pod_logs,
                        "port": port::KUBELET.of(plan),
                        "healthz_address": plan.node().link.node.to_string(),
                        "healthz_port": port::KUBELET_HEALTHZ.of(plan),
                        // The node's own serving certificate (a per-node row of the certificate table).
                        "tls_cert": (!plan.joins()).then(|| plan.node_file(&paths::cert("kubelet"))),
                        "tls_key": (!plan.joins()).then(|| plan.node_file(&paths::key("kubelet"))),
                        "client_ca": plan.path(&paths::cert("ca")),
                        "dns_domain": prof.network.dns_domain,
                        "dns_ip": plan.dns_ip.to_string(),
                        "runtime_endpoint": format!("unix://{}", plan.node().containerd_socket.display()),
                        "cgroup_root": plan.node().pods_cgroup_root,
                        "taints": plan.node().taints.iter().map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect})).collect::<Vec<_>>(),
                        "feature_gates": feature_gates(plan, cx.component),
                    }),
                ))
            }),
            // Applied by the LabelNode hook below.
            template(NODE_OBJECT_FILE, |cx| {
                let plan = cx.plan;
                let node = plan.node();
                let mut labels = node.labels.clone();
                if node.role == Role::ControlPlane {
                    labels.insert(CONTROL_PLANE_ROLE.into(), String::new());
                }
                Ok(Content::Template(
                    &NODE_OBJECT,
                    json!({
                        "env": plan.name(),
                        "name": node.name,
                        "labels": labels,
                        "pod_cidr": node.pod_cidr.to_string(),
                        "pod_cidrs": cx.plan.node_pod_cidrs(),
                    }),
                ))
            }),
            // A host that joins later: the cluster CA's certificate it was given, its token, and
            // the bootstrap kubeconfig its kubelet asks for its certificates with.
            File {
                path: "pki/ca.crt",
                mode: FileMode::Public,
                when: Plan::joins,
                content: |cx| {
                    Ok(Content::Verbatim(
                        join_file(cx.plan, "caFile", |j| &j.ca_file)?.1,
                    ))
                },
            },
            File {
                path: paths::JOIN_TOKEN,
                mode: FileMode::Secret,
                when: Plan::joins,
                content: |cx| Ok(Content::Verbatim(format!("{}\n", join_token(cx.plan)?))),
            },
            File {
                path: paths::BOOTSTRAP_KUBECONFIG,
                mode: FileMode::Secret,
                when: Plan::joins,
                content: |cx| {
                    let token = join_token(cx.plan)?;
                    Ok(join_kubeconfig(
                        cx.plan,
                        "the kubelet's bootstrap kubeconfig",
                        "kubelet-bootstrap",
                        Some(token),
                    ))
                },
            },
        ],
        after_healthy: Some(Hook::LabelNode),
        skew: Some(Skew { older: 3, newer: 0 }),
        ..KUBERNETES
    },
    Component {
        name: "kube-proxy",
        per_node: true,
        after_if_enabled: &["haproxy"],
        needs_root: true,
        binary: "kube-proxy",
        gates_in_config: true,
        needs: &["kube-apiserver", "node-network"],
        netns: true,
        probe: plain_http(port::KUBE_PROXY_HEALTHZ),
        ports: &[port::KUBE_PROXY_HEALTHZ, port::KUBE_PROXY_METRICS],
        host_checks: &[host::br_netfilter],
        kernel_modules: &["br_netfilter"],
        flags: |plan| {
            vec![
                flag("config", plan.node_file(KUBE_PROXY_CONFIG_FILE)),
                flag("hostname-override", &plan.node().name),
            ]
        },
        // On a host that joined later it runs as its node, with the kubelet's client certificate,
        // which the kubelet writes once it was issued: it bootstraps in the background
        // (rotateCertificates), so its health comes before that.
        pre_start: |plan| match plan.joins() {
            true => vec![vec![
                "/bin/sh".into(),
                "-c".into(),
                "until [ -s \"$1\" ]; do sleep 0.5; done".into(),
                "sh".into(),
                plan.kubelet_cert_dir()
                    .join(crate::spec::join::KUBELET_CLIENT_PEM)
                    .to_string_lossy()
                    .into_owned(),
            ]],
            false => vec![],
        },
        files: &[
            File {
                path: "kubeconfig/kube-proxy.kubeconfig",
                mode: FileMode::Private,
                when: Plan::joins,
                content: |cx| {
                    let user = format!("system:node:{}", cx.plan.node().name);
                    Ok(join_kubeconfig(
                        cx.plan,
                        "kube-proxy's kubeconfig (the node's identity)",
                        &user,
                        None,
                    ))
                },
            },
            template(KUBE_PROXY_CONFIG_FILE, |cx| {
                let plan = cx.plan;
                let node = |port: Port| host_port(plan.node().link.node.into(), port.of(plan));
                Ok(Content::Template(
                    &KUBE_PROXY_CONFIG,
                    json!({
                        "kubeconfig": plan.node_file(&paths::kubeconfig("kube-proxy")),
                        "node_name": plan.node().name,
                        // The cluster's: traffic from any node's pods is the cluster's own.
                        "pod_cidrs": plan.pod_cidrs(),
                        "healthz": node(port::KUBE_PROXY_HEALTHZ),
                        "metrics": node(port::KUBE_PROXY_METRICS),
                        "feature_gates": feature_gates(plan, cx.component),
                    }),
                ))
            }),
        ],
        skew: Some(Skew { older: 3, newer: 0 }),
        ..KUBERNETES
    },
    // Across hosts, the API servers behind one address on every host that runs none, for its
    // node's kubelet and kube-proxy (as kind's load balancer; HAProxy from the distribution, not a
    // proxy of our own): a host that dies is taken out by the health checks.
    Component {
        name: "haproxy",
        needs_root: true,
        binary: "/usr/sbin/haproxy",
        // It binds the host's end of the node link.
        needs: &["node-network"],
        starts_once_up: &[],
        kubernetes: false,
        // -Ws: master-worker mode with sd_notify, as the distribution's unit runs it.
        notify: true,
        version: |_| "",
        go_module: "",
        enabled_by: Some(EnabledBy {
            field: "hosts",
            when: |p| !p.hosts.is_empty(),
        }),
        on_hosts: OnHosts::Without(HostRole::ControlPlane),
        // Its binary is checked as every one is (Debian's package: apt-get install haproxy).
        args: |plan| vec!["-Ws".into(), "-f".into(), plan.path(HAPROXY_CONFIG_FILE)],
        files: &[template(HAPROXY_CONFIG_FILE, |cx| {
            let plan = cx.plan;
            let port = port::APISERVER.of(plan);
            let servers: Vec<serde_json::Value> = plan
                .hosts
                .iter()
                .filter(|h| h.roles.contains(&HostRole::ControlPlane))
                .map(|h| json!({ "name": h.name, "address": host_port(h.address.into(), port) }))
                .collect();
            Ok(Content::Template(
                &HAPROXY_CONFIG,
                json!({
                    "env": plan.name(),
                    "bind": host_port(plan.node().link.host.into(), port),
                    "servers": servers,
                    "ca": plan.path(&paths::cert("ca")),
                }),
            ))
        })],
        ..KUBERNETES
    },
    // Scheduled etcd snapshots: a timer runs `kubeunit snapshot save` (kubeunit from binDir, or
    // components.etcd-snapshot.binary), which keeps the newest `retention` of them.
    Component {
        name: "etcd-snapshot",
        on_hosts: OnHosts::With(HostRole::Etcd),
        binary: "kubeunit",
        needs: &["etcd"],
        starts_once_up: &[],
        kubernetes: false,
        version: |_| "",
        go_module: "",
        enabled_by: Some(EnabledBy {
            field: "etcd.snapshot.schedule",
            when: |p| !p.etcd.snapshot.schedule.is_empty(),
        }),
        timer: Some(Timer {
            on_calendar: |plan| plan.profile.etcd.snapshot.schedule.clone(),
            // A run missed while the environment was stopped is not caught up at its start.
            persistent: false,
        }),
        args: |_| vec!["snapshot".into(), "save".into()],
        flags: |plan| {
            vec![
                flag("state-dir", plan.state_dir.to_string_lossy()),
                flag("prefix", SCHEDULED_SNAPSHOT_PREFIX),
                flag("prune-to", plan.profile.etcd.snapshot.retention.to_string()),
            ]
        },
        ..KUBERNETES
    },
    // Across hosts: routes to the hosts that joined later (from what each published on its Node),
    // and on a control-plane host the approval of their kubelets' serving certificates
    // (`kubeunit hosts sync`), every 10 s: a oneshot, nothing resident. kubeunit is where `hosts
    // seed` and `install --kubeunit` put it (components.hosts-sync.binary: elsewhere).
    Component {
        name: "hosts-sync",
        needs_root: true,
        binary: "/usr/local/bin/kubeunit",
        needs: &["node-network"],
        starts_once_up: &[],
        kubernetes: false,
        version: |_| "",
        go_module: "",
        enabled_by: Some(EnabledBy {
            field: "hosts",
            when: |p| !p.hosts.is_empty(),
        }),
        timer: Some(Timer {
            on_calendar: |plan| plan.profile.hosts_sync.schedule.clone(),
            persistent: false,
        }),
        args: |_| vec!["hosts".into(), "sync".into()],
        flags: |plan| vec![flag("state-dir", plan.state_dir.to_string_lossy())],
        ..KUBERNETES
    },
];

/// What a node needs of its host, with the fix for each.
pub(super) mod host {
    use std::path::Path;

    use crate::spec::Plan;

    type Check = Result<(), (String, String)>;

    fn executable(path: &Path) -> bool {
        crate::spec::host::executable(path).is_ok()
    }

    /// `access(path, W_OK)`: a read-only mount says no even to root.
    fn writable(path: &Path) -> bool {
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
            return false;
        };
        // SAFETY: access with a NUL-terminated path we own.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
    }

    pub fn runtime(plan: &Plan) -> Check {
        if executable(&plan.runtime) {
            return Ok(());
        }
        Err((
            format!("the OCI runtime {} is not an executable file", plan.runtime.display()),
            "install runc there (scripts/build-test-binaries.sh builds it, with seccomp), or set containerd.runtime".into(),
        ))
    }

    pub fn cni_plugins(plan: &Plan) -> Check {
        let dir = &plan.profile.containerd.cni_bin_dir;
        let missing: Vec<&str> = ["bridge", "host-local", "loopback", "portmap"]
            .into_iter()
            .filter(|p| !executable(&dir.join(p)))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err((
            format!("CNI plugins missing in {}: {}", dir.display(), missing.join(", ")),
            "install the CNI plugins there (scripts/build-test-binaries.sh builds them), or set containerd.cniBinDir".into(),
        ))
    }

    pub fn overlayfs(_: &Plan) -> Check {
        let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        if fs
            .lines()
            .any(|l| l.split_whitespace().last() == Some("overlay"))
            || loadable("overlay")
        {
            return Ok(());
        }
        Err((
            "the kernel offers no overlay filesystem (containerd's snapshotter needs it)".into(),
            "load it: modprobe overlay".into(),
        ))
    }

    pub fn images(plan: &Plan) -> Check {
        let unreadable: Vec<String> = plan
            .profile
            .images
            .iter()
            .filter(|p| std::fs::File::open(p).is_err())
            .map(|p| p.display().to_string())
            .collect();
        if unreadable.is_empty() {
            return Ok(());
        }
        Err((
            format!("image archives not readable: {}", unreadable.join(", ")),
            "build them (scripts/build-test-binaries.sh) or fix the paths in images".into(),
        ))
    }

    /// `ip` (iproute2) in one of the directories systemd's default PATH has.
    /// Whether a command is in one of the directories the units' PATH has.
    fn command(name: &str) -> bool {
        let dirs = [
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ];
        dirs.iter().any(|d| executable(&Path::new(d).join(name)))
    }

    pub fn iproute2(_: &Plan) -> Check {
        if command("ip") {
            return Ok(());
        }
        Err((
            "no `ip` command (the node's network namespace and link are made with it)".into(),
            "install iproute2 (apt-get install iproute2)".into(),
        ))
    }

    /// containerd runs in its node's UTS namespace through nsenter (`Component::uts`), which
    /// node-network makes with unshare (both util-linux).
    pub fn nsenter(_: &Plan) -> Check {
        if executable(Path::new(crate::spec::plan::NSENTER)) && command("unshare") {
            return Ok(());
        }
        Err((
            format!(
                "no {} or no `unshare` command (containerd runs in its node's UTS namespace, whose hostname is the node's name)",
                crate::spec::plan::NSENTER
            ),
            "install util-linux (apt-get install util-linux)".into(),
        ))
    }

    /// The user a component runs as (`Component::own_user`: etcd's `etcd.user`) exists, as systemd
    /// looks users up (NSS): otherwise its unit fails with status 217/USER.
    pub fn own_user_exists(plan: &Plan) -> Check {
        let user = &plan.profile.etcd.user;
        if user.is_empty() || user_exists(user) {
            return Ok(());
        }
        Err((
            format!("etcd.user is {user:?}, and this host has no such user"),
            format!(
                "add it ({}), or set etcd.user to \"\" to run etcd as root",
                crate::components::useradd_command(user)
            ),
        ))
    }

    fn user_exists(name: &str) -> bool {
        let Ok(cname) = std::ffi::CString::new(name) else {
            return false;
        };
        // getpwnam_r, not /etc/passwd: systemd resolves User= through NSS.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf = vec![0 as libc::c_char; 16384];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is to a live local of the type getpwnam_r(3) asks, and buf's
        // length is the one passed.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        rc == 0 && !found.is_null()
    }

    /// A registry cache lets only the nodes in, with iptables (it pulls with the environment's
    /// credentials for whoever asks).
    pub fn iptables_for_caches(_plan: &Plan) -> Check {
        if command("iptables") {
            return Ok(());
        }
        Err((
            "the registry caches (registries, online) need the `iptables` command: only the nodes may reach them".into(),
            "install iptables (apt-get install iptables), or set offline: true (no caches)".into(),
        ))
    }

    /// With `network.egress` on or a list, node-network masquerades and filters with iptables.
    pub fn iptables_for_egress(plan: &Plan) -> Check {
        if plan.egress.allowed().is_empty() || command("iptables") {
            return Ok(());
        }
        Err((
            format!(
                "network.egress {} needs the `iptables` command (the node's masquerading and the FORWARD filter that lets in only replies)",
                plan.egress.word()
            ),
            "install iptables (apt-get install iptables), or set network.egress to host or off".into(),
        ))
    }

    /// An external datastore answers on at least one endpoint (TCP; TLS is kube-apiserver's to
    /// judge), so `start` does not wait for a kube-apiserver that cannot become ready.
    pub fn datastore_reachable(plan: &Plan) -> Check {
        use std::net::{TcpStream, ToSocketAddrs};
        let d = &plan.profile.datastore;
        let mut failures = Vec::new();
        for e in &d.endpoints {
            let authority = e.trim_start_matches("https://").trim_end_matches('/');
            let addrs = match authority.to_socket_addrs() {
                Ok(a) => a.collect::<Vec<_>>(),
                Err(err) => {
                    failures.push(format!("{e}: {err}"));
                    continue;
                }
            };
            let timeout = std::time::Duration::from_secs(3);
            let mut last = None;
            for a in &addrs {
                match TcpStream::connect_timeout(a, timeout) {
                    Ok(_) => return Ok(()),
                    Err(err) => last = Some(err),
                }
            }
            match last {
                Some(err) => failures.push(format!("{e}: {err}")),
                None => failures.push(format!("{e}: the name resolves to no address")),
            }
        }
        if failures.is_empty() {
            return Ok(());
        }
        Err((
            format!(
                "no endpoint of the external datastore (datastore.endpoints) answers: {}",
                failures.join("; ")
            ),
            "start that etcd first, or fix datastore.endpoints and run `kubeunit gen` again".into(),
        ))
    }

    /// The link's interface does not exist and no address of this host lies in its network.
    pub fn link_free(plan: &Plan) -> Check {
        let link = &plan.node().link;
        if Path::new("/sys/class/net").join(&link.interface).exists() {
            return Err((
                format!(
                    "the node link's interface {} exists already: an environment of the same name runs under another systemd on this host's network (a container's), or one was killed without its stop",
                    link.interface
                ),
                format!(
                    "stop that environment, or rename this one (kubeunit gen --set name=OTHER); a leftover goes with: ip link del {}",
                    link.interface
                ),
            ));
        }
        let taken: Vec<String> = if_addrs::get_if_addrs()
            .unwrap_or_default()
            .into_iter()
            .filter(|i| match i.ip() {
                std::net::IpAddr::V4(a) => link.net.contains(&a),
                std::net::IpAddr::V6(_) => false,
            })
            .map(|i| format!("{} on {}", i.ip(), i.name))
            .collect();
        if taken.is_empty() {
            return Ok(());
        }
        Err((
            format!(
                "the node link {} is in use on this host: {}",
                link.net,
                taken.join(", ")
            ),
            format!(
                "give this environment another link: kubeunit gen --state-dir {} --set node.link=198.18.X.Y/30 (a free /30)",
                plan.state_dir.display()
            ),
        ))
    }

    /// No route of this host covers a part of the pod or Service network, or lies inside one (the
    /// default route aside): node-network routes both into the node's namespace, and two routes for
    /// one range (another environment's, a LAN's, a VPN's) would send cluster traffic to the wrong
    /// place, or off this machine. A reject route (unreachable, prohibit, blackhole) carries nothing:
    /// it keeps a range local, and the node's more specific routes go before it.
    pub fn cluster_routes_free(plan: &Plan) -> Check {
        /// RTF_REJECT (linux/route.h): the kernel's flag for those.
        const REJECT: u16 = 0x0200;
        let routes: Vec<(ipnet::Ipv4Net, String)> = procfs::net::route()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.flags & REJECT == 0)
            .filter_map(|r| {
                let net = ipnet::Ipv4Net::with_netmask(r.destination, r.mask).ok()?;
                Some((net.trunc(), r.iface))
            })
            .collect();
        if let Some(lb) = &plan.load_balancer {
            if let Some(address) = lb.uplink_address {
                pool_on_the_hosts_network(plan, lb.pool, address, &routes)?;
            }
        }
        let clashes = route_clashes(plan, &routes);
        if clashes.is_empty() {
            return Ok(());
        }
        Err((
            format!(
                "routes of this host overlap the cluster's networks, which the node link must carry alone: {}",
                clashes.join("; ")
            ),
            format!(
                "give this environment ranges no route of this host covers (`ip route` lists them): kubeunit gen --state-dir {} --set network.podCIDR=10.89.0.0/16 --set network.serviceCIDR=10.0.1.0/24, and for addons.loadBalancerPool e.g. --set addons.loadBalancerPool=198.51.100.64/28 (another environment's ranges are taken while it runs)",
                plan.state_dir.display()
            ),
        ))
    }

    /// Across hosts the pool is addresses of the hosts' own network: some route of this host (that
    /// network's) holds both the pool and this host's address, so that the other hosts and that
    /// network's clients reach the pool where MetalLB's speakers answer ARP.
    pub fn pool_on_the_hosts_network(
        plan: &Plan,
        pool: ipnet::Ipv4Net,
        address: std::net::Ipv4Addr,
        routes: &[(ipnet::Ipv4Net, String)],
    ) -> Check {
        if routes
            .iter()
            .any(|(route, _)| holds_both(route, pool, address))
        {
            return Ok(());
        }
        let hosts_net: Vec<String> = routes
            .iter()
            .filter(|(r, _)| r.prefix_len() > 0 && r.contains(&address))
            .map(|(r, iface)| format!("{r} dev {iface}"))
            .collect();
        Err((
            format!(
                "addons.loadBalancerPool {pool} is not on the hosts' network: no route of this host holds it and this host's address {address} ({})",
                match hosts_net.is_empty() {
                    true => "no route holds the address".to_string(),
                    false => format!("that network: {}", hosts_net.join(", ")),
                }
            ),
            format!(
                "name free addresses of the network that holds {address} in the profile (addons.loadBalancerPool), then gen again and import (state dir {})",
                plan.state_dir.display()
            ),
        ))
    }

    /// Whether `route` (not a default route) is a network that holds both the pool and a host's
    /// address: across hosts, the hosts' network.
    fn holds_both(
        route: &ipnet::Ipv4Net,
        pool: ipnet::Ipv4Net,
        address: std::net::Ipv4Addr,
    ) -> bool {
        route.prefix_len() > 0 && route.contains(&address) && route.contains(&pool)
    }

    /// `routes` (network, interface) that overlap the pod or Service network, each named with the
    /// field: the default route and the node link's own routes (a running node) aside.
    pub fn route_clashes(plan: &Plan, routes: &[(ipnet::Ipv4Net, String)]) -> Vec<String> {
        let pool = plan.load_balancer.as_ref();
        let ours = [
            ("network.podCIDR", plan.pod_cidr),
            ("network.serviceCIDR", plan.service_cidr),
        ]
        .into_iter()
        .chain(pool.map(|lb| ("addons.loadBalancerPool", ipnet::IpNet::V4(lb.pool))));
        let mut clashes = Vec::new();
        for (field, net) in ours {
            let ipnet::IpNet::V4(net) = net else { continue };
            for (route, iface) in routes {
                // Across hosts the hosts' network holds the pool (and this host's address).
                let hosts_net = pool.is_some_and(|lb| {
                    lb.pool == net && lb.uplink_address.is_some_and(|a| holds_both(route, net, a))
                });
                // Across hosts, node-network routes the other hosts' pod networks to them.
                let own = hosts_net
                    || plan.nodes.iter().any(|n| &n.link.interface == iface)
                    || pool.is_some_and(|lb| &lb.segment == iface)
                    || plan
                        .hosts
                        .iter()
                        .any(|h| h.node.pod_cidr == ipnet::IpNet::V4(*route));
                if route.prefix_len() == 0 || own {
                    continue;
                }
                if net.contains(&route.network()) || route.contains(&net.network()) {
                    clashes.push(format!("{field} {net} and {route} dev {iface}"));
                }
            }
        }
        clashes
    }

    /// A kernel module the unit of a component will load (`Component::kernel_modules`): root may,
    /// and modprobe knows it (`-n`: a dry run).
    fn loadable(module: &str) -> bool {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return false;
        }
        std::process::Command::new(crate::spec::plan::MODPROBE)
            .args(["-n", "-q", module])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// br_netfilter: bridged pod traffic passes iptables (a Service between pods on one bridge).
    pub fn br_netfilter(_: &Plan) -> Check {
        if Path::new("/proc/sys/net/bridge/bridge-nf-call-iptables").exists()
            || loadable("br_netfilter")
        {
            return Ok(());
        }
        Err((
            "the br_netfilter module is not loaded (kube-proxy's Service rules miss traffic between pods on one bridge)".into(),
            "load it: modprobe br_netfilter".into(),
        ))
    }

    pub fn cgroups_writable(_: &Plan) -> Check {
        let root = Path::new("/sys/fs/cgroup");
        // cgroup v2: the one hierarchy; v1: every controller the kubelet uses.
        let dirs: Vec<&str> = if root.join("cgroup.controllers").exists() {
            vec![""]
        } else {
            vec!["cpu", "memory", "pids", "cpuset", "systemd"]
        };
        let read_only: Vec<String> = dirs
            .iter()
            .map(|d| root.join(d))
            .filter(|d| d.exists() && !writable(d))
            .map(|d| d.display().to_string())
            .collect();
        if read_only.is_empty() {
            return Ok(());
        }
        Err((
            format!("cgroup hierarchies are read-only here: {}", read_only.join(", ")),
            "mount them read-write (in a container: mount -o remount,rw /sys/fs/cgroup and each controller; scripts/container.sh boot --node does)".into(),
        ))
    }

    pub fn proc_sys_writable(_: &Plan) -> Check {
        if writable(Path::new("/proc/sys/kernel/panic")) {
            return Ok(());
        }
        Err((
            "/proc/sys is read-only here (the kubelet sets kernel parameters)".into(),
            "mount it read-write (in a container: mount -o remount,bind,rw /proc/sys)".into(),
        ))
    }

    pub fn kmsg(_: &Plan) -> Check {
        if Path::new("/dev/kmsg").exists() {
            return Ok(());
        }
        Err((
            "/dev/kmsg is missing (the kubelet reads kernel messages for OOM events)".into(),
            "create it (in a container: ln -s /dev/console /dev/kmsg)".into(),
        ))
    }
}

/// A hosts.toml of a name that offline goes to the node's registry alone (`registry_hosts`), and
/// online to its cache (the registry-cache instance's file instead).
const fn offline_hosts(path: &'static str) -> File {
    File {
        path,
        mode: FileMode::Private,
        when: |plan| plan.upstreams.is_empty(),
        content: registry_hosts,
    }
}

/// The node's local registry as the node's containerd reaches it.
fn local_registry_url(plan: &Plan) -> String {
    format!(
        "http://{}",
        host_port(plan.nodes[0].link.node.into(), port::REGISTRY.of(plan))
    )
}

/// Whether the cache `plan` is the view of logs in to its upstream.
fn cache_has_auth(plan: &Plan) -> bool {
    plan.upstream().is_some_and(|u| u.auth.is_some())
}

/// A file of the cache `plan` is the view of: `rel` with `{upstream}` filled in, absolute.
fn cache_file(plan: &Plan, rel: &str) -> String {
    let name = plan.upstream().map_or("", |u| u.name.as_str());
    plan.path(&paths::upstream_file(name, rel))
}

/// The cache's filter script with `action` (`up`, `down`).
fn registry_cache_filter(plan: &Plan, action: &str) -> Vec<String> {
    vec![
        "/bin/sh".into(),
        cache_file(plan, REGISTRY_CACHE_FILTER),
        action.into(),
    ]
}

/// A cache as the nodes' containerd reaches it: on the host's end of the first node's link.
fn cache_url(plan: &Plan) -> String {
    format!(
        "http://{}",
        host_port(
            plan.nodes[0].link.host.into(),
            port::REGISTRY_CACHE.of(plan)
        )
    )
}

/// A hosts.toml that tries the node's local registry first (what `images load` and the profile's
/// images put there win), then `cache`'s (its `server`), or without one (`_default`) the name's own
/// registry.
fn pull_through_hosts(plan: &Plan, cache: Option<&crate::spec::registries::Upstream>) -> Content {
    Content::Template(
        &PULL_THROUGH_HOSTS,
        json!({
            "env": plan.name(),
            "local": local_registry_url(plan),
            "cache": cache.map(|_| cache_url(plan)),
            "name": cache.map(|u| u.name.as_str()),
            "remote": cache.map(|u| u.remote.as_str()),
        }),
    )
}

/// The config of the cache `cx.plan` is the view of: distribution in proxy mode.
fn registry_cache_config(cx: &FileContext) -> Result<Content, FieldError> {
    let plan = cx.plan;
    let Some(u) = plan.upstream() else {
        return Err(FieldError::new(
            "registries",
            "(none)",
            "a registry cache without an upstream",
            "report this as a bug of kubeunit",
        ));
    };
    Ok(Content::Template(
        &REGISTRY_CACHE_CONFIG,
        json!({
            "env": plan.name(),
            "name": u.name,
            "root": plan.data(&format!("registry-cache/{}", u.name)),
            "addr": host_port(plan.nodes[0].link.host.into(), port::REGISTRY_CACHE.of(plan)),
            "remote": u.remote,
            "helper": cache_file(plan, REGISTRY_CACHE_HELPER),
        }),
    ))
}

/// The password of the `auth` of the cache `plan` is the view of, read now from its file when it
/// has one (validation read it a moment ago: this fails only when it went since).
fn upstream_password(
    plan: &Plan,
    auth: &crate::spec::profile::RegistryAuth,
) -> Result<String, FieldError> {
    crate::spec::registries::password(auth)
        .map_err(|e| upstream_field_error(plan, "auth.passwordFile", &auth.password_file, e))
}

/// A file of the cache's `registries.configs` entry that cannot be read.
fn upstream_field_error(
    plan: &Plan,
    field: &str,
    file: &std::path::Path,
    e: std::io::Error,
) -> FieldError {
    let host = plan.upstream().map_or("", |u| u.host.as_str());
    FieldError::new(
        format!("registries.configs.{host}.{field}"),
        file.display(),
        format!("cannot read it: {e}"),
        "give a readable file",
    )
}

/// A hosts.toml of containerd's registry config: the node's registry as the name's only server.
fn registry_hosts(cx: &FileContext) -> Result<Content, FieldError> {
    let plan = cx.plan;
    Ok(Content::Template(
        &REGISTRY_HOSTS,
        json!({
            "env": plan.name(),
            "server": local_registry_url(plan),
        }),
    ))
}

/// The kubelet insists that its cgroup root (`NodePlan::pods_cgroup_root`: below the environment's
/// slice, so that stopping the slice stops every pod) has every controller it manages. On cgroup v1
/// systemd makes the slice only in the controllers it manages (never cpuset): make the rest. On v2
/// systemd never enables hugetlb, which it does not manage, down to a slice (a host whose kubelet's
/// root is `/` has it there): enable each missing one in every ancestor's subtree_control (found on
/// a Debian 12 VM: "cgroup [kubeunit dev] has some missing controllers: hugetlb"). The kubelet names
/// what is still missing.
fn pods_cgroup_controllers(plan: &Plan) -> Vec<String> {
    let slice = plan.node().pods_cgroup.trim_start_matches('/').to_string();
    let mut ancestors = vec!["/sys/fs/cgroup".to_string()];
    let parts: Vec<&str> = slice.split('/').filter(|p| !p.is_empty()).collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        let last = ancestors.last().cloned().unwrap_or_default();
        ancestors.push(format!("{last}/{part}"));
    }
    let script = format!(
        "if [ -e /sys/fs/cgroup/cgroup.controllers ]; then \
           for d in {}; do for c in cpu cpuset hugetlb memory pids; do \
             grep -qw $c $d/cgroup.controllers 2>/dev/null && ! grep -qw $c $d/cgroup.subtree_control && \
               echo +$c >$d/cgroup.subtree_control; done; done; exit 0; fi; \
         for c in /sys/fs/cgroup/*/; do [ -e \"${{c}}cgroup.procs\" ] && mkdir -p \"${{c}}{slice}\"; done; exit 0",
        ancestors.join(" ")
    );
    vec!["/bin/sh".into(), "-c".into(), script]
}

/// The audit policy: one rule at the profile's level, or the policy file the profile names.
fn audit_policy(cx: &FileContext) -> Result<Content, FieldError> {
    let policy = &cx.plan.profile.audit.policy;
    if AUDIT_LEVELS.contains(&policy.as_str()) {
        return Ok(Content::Template(&AUDIT_POLICY, json!({ "level": policy })));
    }
    let text = std::fs::read_to_string(policy).map_err(|e| {
        FieldError::new(
            "audit.policy",
            policy,
            format!("cannot read the policy file: {e}"),
            "give a readable audit Policy file or a level such as Metadata",
        )
    })?;
    audit_policy_problem(&text).map_or(Ok(Content::Verbatim(text)), |why| {
        Err(FieldError::new(
            "audit.policy",
            policy,
            format!("not a Kubernetes audit Policy: {why}"),
            "write apiVersion: audit.k8s.io/v1, kind: Policy and a list of rules, each with a level (None, Metadata, Request, RequestResponse)",
        ))
    })
}

/// What keeps `text` from being an audit Policy kube-apiserver loads, if anything.
pub fn audit_policy_problem(text: &str) -> Option<String> {
    let doc: serde_yaml_ng::Value = match serde_yaml_ng::from_str(text) {
        Ok(v) => v,
        Err(e) => return Some(format!("not YAML: {e}")),
    };
    let field = |name: &str| doc.get(name).and_then(|v| v.as_str());
    if field("apiVersion") != Some("audit.k8s.io/v1") {
        return Some("apiVersion is not audit.k8s.io/v1".into());
    }
    if field("kind") != Some("Policy") {
        return Some("kind is not Policy".into());
    }
    let Some(rules) = doc.get("rules").and_then(|r| r.as_sequence()) else {
        return Some("no list of rules".into());
    };
    if rules.is_empty() {
        return Some("no rules".into());
    }
    for (i, rule) in rules.iter().enumerate() {
        let level = rule.get("level").and_then(|l| l.as_str()).unwrap_or("");
        if !AUDIT_LEVELS.contains(&level) {
            return Some(format!("rule {} has no valid level ({level:?})", i + 1));
        }
    }
    None
}

/// The node link is an IPv4 /30: the routes that take this host's traffic for pods and Services
/// into the node's namespace (node-network.sh) carry IPv4 only.
fn node_link_carries_the_cluster_networks(p: &crate::spec::Profile) -> Vec<FieldError> {
    [
        ("network.podCIDR", &p.network.pod_cidr),
        ("network.serviceCIDR", &p.network.service_cidr),
    ]
    .into_iter()
    .filter(|(_, v)| v.parse::<ipnet::IpNet>().is_ok_and(|n| n.network().is_ipv6()))
    .map(|(field, v)| {
        FieldError::new(
            field,
            v,
            "an IPv6 network, which the node's IPv4 link cannot route (this host reaches pods and Services through it)",
            "use an IPv4 range (e.g. 10.88.0.0/16 for pods, 10.0.0.0/24 for Services), or a profile without a node",
        )
    })
    .collect()
}

/// The cluster's own addresses, which no packet of its nodes sends beyond this host whatever
/// `network.egress` lets out: its pod and Service networks and its nodes' links (the first node's,
/// and the ranges `node.link: auto` picks the others' from). The same for every node: a node that
/// comes or goes changes no other's script.
fn cluster_nets(plan: &Plan) -> Vec<String> {
    let first_link = plan.nodes[0].link.net;
    let auto = auto_link_ranges();
    let picked = auto.iter().any(|r| r.contains(&first_link));
    let links = auto
        .into_iter()
        .chain((!picked).then_some(first_link))
        .map(ipnet::IpNet::V4);
    let nets: Vec<ipnet::IpNet> = [plan.pod_cidr, plan.service_cidr]
        .into_iter()
        .filter(|n| matches!(n, ipnet::IpNet::V4(_)))
        .chain(links)
        .collect();
    // The LoadBalancer pool, unless one of those holds it (an `auto` pool: in the links' range).
    let pool = plan
        .load_balancer
        .as_ref()
        .map(|lb| ipnet::IpNet::V4(lb.pool))
        .filter(|pool| !nets.iter().any(|n| n.contains(pool)));
    nets.into_iter()
        .chain(pool)
        .map(|n| n.to_string())
        .collect()
}

/// Where node-network's `up` copies its script, whose `down` its unit's ExecStopPost= runs.
pub fn node_network_copy(plan: &Plan) -> std::path::PathBuf {
    plan.node().run_dir.join("node-network.sh")
}

fn flag(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_string(), value.into())
}

fn etcd_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let member = plan.etcd_member();
    let client = etcd_client_url(plan, member);
    let peer = etcd_peer_url(plan, member);
    let (heartbeat, election) = etcd_ticks(plan);
    let mut flags = vec![
        flag("name", &member.name),
        flag("data-dir", plan.data("etcd")),
        flag("listen-client-urls", &client),
        flag("advertise-client-urls", &client),
        flag("listen-peer-urls", &peer),
        flag("initial-advertise-peer-urls", &peer),
        flag("initial-cluster", etcd_initial_cluster(plan)),
        flag("initial-cluster-state", "new"),
        flag("client-cert-auth", "true"),
        flag("trusted-ca-file", p(&paths::cert("etcd/ca"))),
        flag("cert-file", p(&paths::cert("etcd/server"))),
        flag("key-file", p(&paths::key("etcd/server"))),
        flag("peer-client-cert-auth", "true"),
        flag("peer-trusted-ca-file", p(&paths::cert("etcd/ca"))),
        flag("peer-cert-file", p(&paths::cert("etcd/peer"))),
        flag("peer-key-file", p(&paths::key("etcd/peer"))),
        flag("snapshot-count", "10000"),
        flag("heartbeat-interval", heartbeat.to_string()),
        flag("election-timeout", election.to_string()),
    ];
    if plan.profile.etcd.unsafe_no_fsync {
        flags.push(flag("unsafe-no-fsync", "true"));
    }
    flags
}

/// kube-apiserver must be able to read an external datastore's files: checked by `gen` (nothing is
/// written when one is missing) and again by `start` on the host that runs it.
fn datastore_files(p: &crate::spec::Profile) -> Vec<FieldError> {
    let d = &p.datastore;
    if !d.external() {
        return vec![];
    }
    [
        ("datastore.caFile", &d.ca_file, "CERTIFICATE"),
        ("datastore.certFile", &d.cert_file, "CERTIFICATE"),
        ("datastore.keyFile", &d.key_file, "PRIVATE KEY"),
    ]
    .into_iter()
    .filter(|(_, path, _)| path.is_absolute())
    .filter_map(|(field, path, label)| {
        pem_file_problem(path, label).map(|why| {
            FieldError::new(
                field,
                path.display(),
                why,
                "point it at the etcd's PEM file, readable by root on the host that runs kube-apiserver",
            )
        })
    })
    .collect()
}

/// Why `path` is not a readable PEM file with a `label` block, if it is not.
fn pem_file_problem(path: &std::path::Path, label: &str) -> Option<String> {
    use std::io::Read;
    // Bounded: a PEM file is small, and the path may name a device or something huge.
    const LIMIT: u64 = 1 << 20;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return Some(format!("cannot read it: {e}")),
    };
    if !meta.is_file() {
        return Some("not a regular file".into());
    }
    let mut text = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(LIMIT).read_to_end(&mut text));
    if let Err(e) = read {
        return Some(format!("cannot read it: {e}"));
    }
    let text = String::from_utf8_lossy(&text);
    let found = text
        .lines()
        .any(|l| l.starts_with("-----BEGIN ") && l.trim_end().ends_with(&format!("{label}-----")));
    (!found).then(|| format!("no PEM {label} block in it"))
}

/// Where kube-apiserver keeps the cluster: the environment's etcd, or the profile's `datastore`.
fn datastore_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let d = &plan.profile.datastore;
    if !d.external() {
        // Every member: kube-apiserver's client fails over among them.
        let servers: Vec<String> = plan
            .etcd_members
            .iter()
            .map(|m| etcd_client_url(plan, m))
            .collect();
        return vec![
            flag("etcd-servers", servers.join(",")),
            flag("etcd-cafile", p(&paths::cert("etcd/ca"))),
            flag("etcd-certfile", p(&paths::cert("apiserver-etcd-client"))),
            flag("etcd-keyfile", p(&paths::key("apiserver-etcd-client"))),
        ];
    }
    let file = |f: &std::path::Path| f.to_string_lossy().into_owned();
    let mut flags = vec![
        flag("etcd-servers", d.endpoints.join(",")),
        flag("etcd-cafile", file(&d.ca_file)),
    ];
    if !d.cert_file.as_os_str().is_empty() {
        flags.push(flag("etcd-certfile", file(&d.cert_file)));
        flags.push(flag("etcd-keyfile", file(&d.key_file)));
    }
    if !d.prefix.is_empty() {
        flags.push(flag("etcd-prefix", &d.prefix));
    }
    flags
}

/// How kube-apiserver ends on SIGTERM.
fn apiserver_shutdown_flags(plan: &Plan) -> Vec<(String, String)> {
    // Once the requests in flight drained, its HTTP server gets 2 s to close its connections, not
    // --request-timeout's 60 s (secure_serving.go's server.Shutdown): the pods' watches held it
    // until systemd's 30 s stop timeout killed it, so each restart and upgrade left the API
    // unanswered for 34 to 38 s. Requests meanwhile get 429 with Retry-After and `Connection:
    // close`, which clients follow.
    let mut flags = vec![flag("shutdown-send-retry-after", "true")];
    let control_plane_hosts = plan
        .hosts
        .iter()
        .filter(|h| h.roles.contains(&HostRole::ControlPlane))
        .count();
    if control_plane_hosts > 1 {
        // Behind the other hosts' HAProxy: /readyz fails at once on SIGTERM while it goes on
        // serving this long, which covers HAProxy's two checks a second apart (haproxy.cfg), so no
        // request reaches it once it stops listening.
        flags.push(flag("shutdown-delay-duration", "3s"));
    }
    flags
}

fn apiserver_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let prof = &plan.profile;
    let mut flags = vec![
        flag("advertise-address", plan.advertise.to_string()),
        flag("bind-address", plan.bind.to_string()),
        flag("secure-port", port::APISERVER.of(plan).to_string()),
        flag("allow-privileged", "true"),
        flag("profiling", "false"),
        // etcd's history compacted each minute, not every 5 (upstream's DefaultCompactInterval): a
        // continue token or a watch's resource version expires 1 to 2 minutes after it was issued
        // (the compactor compacts to the revision it saw one interval before), and etcd keeps less.
        // Upstream's API chunking spec waits for exactly that expiry: 538 s of the conformance
        // run's parallel part with 5 minutes.
        flag("etcd-compaction-interval", "1m"),
        flag(
            "authorization-mode",
            prof.apiserver.authorization_mode.join(","),
        ),
        flag(
            "enable-admission-plugins",
            prof.apiserver.admission_plugins.join(","),
        ),
        flag("client-ca-file", p(&paths::cert("ca"))),
        flag("tls-cert-file", p(&paths::cert("apiserver"))),
        flag("tls-private-key-file", p(&paths::key("apiserver"))),
    ];
    flags.extend(apiserver_shutdown_flags(plan));
    flags.extend(datastore_flags(plan));
    flags.extend([
        flag("kubelet-certificate-authority", p(&paths::cert("ca"))),
        flag(
            "kubelet-client-certificate",
            p(&paths::cert("apiserver-kubelet-client")),
        ),
        flag(
            "kubelet-client-key",
            p(&paths::key("apiserver-kubelet-client")),
        ),
        flag(
            "kubelet-preferred-address-types",
            "InternalIP,ExternalIP,Hostname",
        ),
        flag(
            "proxy-client-cert-file",
            p(&paths::cert("front-proxy-client")),
        ),
        flag(
            "proxy-client-key-file",
            p(&paths::key("front-proxy-client")),
        ),
        flag(
            "requestheader-client-ca-file",
            p(&paths::cert("front-proxy-ca")),
        ),
        flag("requestheader-allowed-names", "front-proxy-client"),
        flag("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        flag("requestheader-group-headers", "X-Remote-Group"),
        flag("requestheader-username-headers", "X-Remote-User"),
        flag(
            "service-account-issuer",
            format!("https://kubernetes.default.svc.{}", prof.network.dns_domain),
        ),
        flag("service-account-key-file", p(paths::SA_PUB)),
        flag("service-account-signing-key-file", p(&paths::key("sa"))),
        flag("service-cluster-ip-range", plan.service_cidrs()),
        flag("audit-policy-file", p(AUDIT_POLICY_FILE)),
        flag("audit-log-path", plan.data("audit/audit.log")),
        // Rotation as the CIS benchmark asks (1.2.17-1.2.19): at most 100 MB a file, 10 old files
        // kept for 30 days at most. The default policy logs metadata alone; this bounds the disk.
        flag("audit-log-maxage", "30"),
        flag("audit-log-maxbackup", "10"),
        flag("audit-log-maxsize", "100"),
        // Projected tokens expire when their pods asked (the kubelet renews them), not a year later
        // (the default stretches them to a year for clients that do not reload; CIS 1.2.30).
        flag("service-account-extend-token-expiration", "false"),
    ]);
    // Across hosts, a host that joins later authenticates with a bootstrap token (spec::join).
    if !plan.hosts.is_empty() {
        flags.push(flag("enable-bootstrap-token-auth", "true"));
    }
    if admission_configured(plan) {
        flags.push(flag(
            "admission-control-config-file",
            p(ADMISSION_CONFIG_FILE),
        ));
    }
    if prof.encryption.enabled {
        flags.push(flag(
            "encryption-provider-config",
            p(ENCRYPTION_CONFIG_FILE),
        ));
    }
    flags
}

/// Whether the EventRateLimit admission plugin is on: it will not start without its configuration.
fn event_rate_limit(p: &crate::spec::Profile) -> bool {
    p.apiserver
        .admission_plugins
        .iter()
        .any(|a| a == "EventRateLimit")
}

/// Whether kube-apiserver gets an admission configuration file: for a Pod Security level, or for
/// EventRateLimit's limits.
fn admission_configured(plan: &Plan) -> bool {
    let p = &plan.profile;
    !p.apiserver.pod_security.is_empty() || event_rate_limit(p)
}

/// Flags every controller-manager-like component shares: its identity, serving cert and client CAs.
fn controller_base(plan: &Plan, identity: &str, port: Port) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let kubeconfig = p(&paths::kubeconfig(identity));
    vec![
        flag("kubeconfig", &kubeconfig),
        flag("authentication-kubeconfig", &kubeconfig),
        flag("authorization-kubeconfig", &kubeconfig),
        // Only kubeunit's health probe and a developer on this host ask these (at `plan.local`): a
        // wildcard bind of the environment (for the API server) stays loopback here (CIS 1.3.7,
        // 1.4.2).
        flag("bind-address", plan.local.to_string()),
        flag("secure-port", port.of(plan).to_string()),
        flag(
            "tls-cert-file",
            p(&paths::cert(&format!("{identity}-server"))),
        ),
        flag(
            "tls-private-key-file",
            p(&paths::key(&format!("{identity}-server"))),
        ),
        flag("client-ca-file", p(&paths::cert("ca"))),
        flag(
            "requestheader-client-ca-file",
            p(&paths::cert("front-proxy-ca")),
        ),
        flag("leader-elect", leader_elect(plan).to_string()),
        flag("profiling", "false"),
    ]
}

fn controller_manager_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let mut flags = controller_base(plan, "controller-manager", port::CONTROLLER_MANAGER);
    flags.extend([
        flag("cluster-name", plan.name()),
        flag("root-ca-file", p(&paths::cert("ca"))),
        flag("service-account-private-key-file", p(&paths::key("sa"))),
        flag("use-service-account-credentials", "true"),
        // Its client's rate limit, not work, set when its controllers began: each controller's
        // client first gets or creates its ServiceAccount and requests a token through one shared
        // client (cmd/kube-controller-manager/app/controllermanager.go, NewDynamicClientBuilder
        // with c.Client; controller-manager/pkg/clientbuilder getOrCreateServiceAccount), about
        // 200 requests at the default 20/s (burst 30). At 100/s (burst 200) the default
        // ServiceAccount came 5 s sooner in benches/time_to_k8s.rs (9.3 s -> 4.2 s).
        flag("kube-api-qps", "100"),
        flag("kube-api-burst", "200"),
        flag("cluster-signing-cert-file", p(&paths::cert("ca"))),
        flag("cluster-signing-key-file", p(&paths::key("ca"))),
        flag("controllers", "*,bootstrapsigner,tokencleaner"),
        flag("service-cluster-ip-range", plan.service_cidrs()),
        flag("cluster-cidr", plan.pod_cidrs()),
        // Each node's share is the profile's (`nodes[].podCIDR`): its CNI range, and its Node's
        // spec.podCIDR, which the kubelet's start hook applies.
        flag("allocate-node-cidrs", "false"),
    ]);
    let addons = &plan.profile.addons;
    if addons.default_storage_class && addons.storage_provisioner == StorageProvisioner::HostPath {
        flags.push(flag("enable-hostpath-provisioner", "true"));
    }
    flags
}

/// local-path-provisioner's config.json: each node's volumes in its own data dir (`<data
/// dir>/local-path`). The nodes of one host share its disk, so each after the first is listed by
/// name; the first node's, and across hosts every host's node (each the first on its host, with
/// the same state dir), is the default path. Every control-plane host renders the same file.
fn local_path_config(plan: &Plan) -> String {
    let dir = |d: &std::path::Path| d.join("local-path").to_string_lossy().into_owned();
    let mut map = vec![json!({
        "node": "DEFAULT_PATH_FOR_NON_LISTED_NODES",
        "paths": [dir(&plan.data_dir)],
    })];
    for node in plan.nodes.iter().skip(1) {
        map.push(json!({ "node": node.name, "paths": [dir(&node.data_dir)] }));
    }
    json!({ "nodePathMap": map }).to_string()
}

fn scheduler_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    // The scheduler takes its client connection and leader election from --config; the serving
    // and delegated-auth flags still apply next to it.
    let mut flags = vec![flag("config", p(SCHEDULER_CONFIG_FILE))];
    flags.extend(
        controller_base(plan, "scheduler", port::SCHEDULER)
            .into_iter()
            // --profiling is ignored next to --config (enableProfiling is in the config file), yet
            // kept with the config's value: the CIS benchmark (1.4.1) reads the flag.
            .filter(|(n, _)| !matches!(n.as_str(), "kubeconfig" | "leader-elect")),
    );
    flags
}

fn cloud_controller_manager_flags(plan: &Plan) -> Vec<(String, String)> {
    let mut flags = controller_base(
        plan,
        "cloud-controller-manager",
        port::CLOUD_CONTROLLER_MANAGER,
    );
    flags.push(flag("cluster-name", plan.name()));
    flags
}

fn kubelet_flags(plan: &Plan) -> Vec<(String, String)> {
    let mut flags = vec![flag("config", plan.node_file(KUBELET_CONFIG_FILE))];
    if plan.joins() {
        // Joined later: it asks for its identity with the token, and writes the kubeconfig and
        // certificates it is issued into its node's data dir (never the state dir, whose files
        // its manifest holds).
        let dir = plan.kubelet_cert_dir();
        flags.extend([
            flag(
                "bootstrap-kubeconfig",
                plan.path(paths::BOOTSTRAP_KUBECONFIG),
            ),
            flag("kubeconfig", plan.node().data("kubelet/kubelet.kubeconfig")),
            flag("cert-dir", dir.to_string_lossy()),
        ]);
    } else {
        // The node's own identity, system:node:<node>.
        flags.push(flag(
            "kubeconfig",
            plan.node_file(&paths::kubeconfig("kubelet")),
        ));
    }
    flags.extend([
        flag("root-dir", plan.node().data("kubelet")),
        flag("hostname-override", &plan.node().name),
        flag("node-ip", plan.node_ips()),
    ]);
    flags
}
