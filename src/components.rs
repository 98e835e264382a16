//! The component table: everything kubeunit knows about each component, in one entry each — binary,
//! start type, dependencies, health probe and flags. Table order is start order.
//!
//! Flags are checked against the pinned Kubernetes minors (scripts/versions.env); removed flags of older
//! scripts (--insecure-port, kubelet --network-plugin, ...) must never appear here.
//! Certificates and kubeconfigs are listed in `pki::cert_specs`, config files in `render`.

use crate::plan::{host_port, Plan};
use crate::profile::{Ports, Versions};

pub struct Component {
    /// Profile key and unit suffix: `kubeunit-<env>-<name>.service`.
    pub name: &'static str,
    /// Default binary name inside binDir.
    pub binary: &'static str,
    /// Every environment has it.
    pub required: bool,
    /// Sends sd_notify READY=1 (Type=notify); otherwise Type=exec plus the health probe.
    pub notify: bool,
    /// Components it needs: a profile enabling this one must enable them, `start` waits until they are
    /// healthy, and the unit gets Wants= + After= on them. Not Requires=: systemd would stop the
    /// dependent (for good) whenever the dependency crashes and is restarted.
    pub needs: &'static [&'static str],
    /// Ordering only, when that component is enabled (e.g. kubelet after a kubeunit-managed containerd).
    pub after_if_enabled: &'static [&'static str],
    /// A Kubernetes component: gets the profile's global featureGates and `--v`.
    pub kubernetes: bool,
    /// Feature gates go into the component's config file instead of `--feature-gates`.
    pub gates_in_config: bool,
    /// Manages cgroups below its own (Delegate=yes).
    pub delegate: bool,
    /// KillMode= other than systemd's default (containerd must leave shims running).
    pub kill_mode: Option<&'static str>,
    /// How `start` and `status` tell it is healthy.
    pub probe: Option<Probe>,
    /// TCP ports it listens on (checked free before `start`, and free again after `stop`).
    pub ports: fn(&Ports) -> Vec<u16>,
    /// The version its binary must report (`--version`), from the profile's `versions`.
    pub version: fn(&Versions) -> &str,
    /// Flags kubeunit sets (name without dashes, value); profile extraArgs override by name.
    pub flags: fn(&Plan) -> Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub https: bool,
    pub port: fn(&Ports) -> u16,
    pub path: &'static str,
    /// CA (pki name) that verifies the serving certificate.
    pub ca: Option<&'static str>,
    /// Client certificate (pki name) to present.
    pub client: Option<&'static str>,
    /// Host to connect to: the plan's local address, or loopback (for listeners kubeunit always binds there).
    pub loopback: bool,
}

/// What an entry does not say: a Kubernetes component, started with Type=exec, probed over HTTPS.
const KUBERNETES: Component = Component {
    name: "",
    binary: "",
    required: false,
    notify: false,
    needs: &["kube-apiserver"],
    after_if_enabled: &[],
    kubernetes: true,
    gates_in_config: false,
    delegate: false,
    kill_mode: None,
    probe: None,
    ports: |_| vec![],
    version: |v| &v.kubernetes,
    flags: |_| vec![],
};

/// An HTTPS health endpoint whose serving certificate the cluster CA signed.
const fn https(port: fn(&Ports) -> u16, path: &'static str) -> Option<Probe> {
    Some(Probe {
        https: true,
        port,
        path,
        ca: Some("ca"),
        client: None,
        loopback: false,
    })
}

/// A plain-HTTP health endpoint kubeunit always binds on loopback.
const fn loopback_http(port: fn(&Ports) -> u16) -> Option<Probe> {
    Some(Probe {
        https: false,
        port,
        path: "/healthz",
        ca: None,
        client: None,
        loopback: true,
    })
}

pub const COMPONENTS: &[Component] = &[
    Component {
        name: "etcd",
        binary: "etcd",
        required: true,
        notify: true,
        needs: &[],
        kubernetes: false,
        probe: Some(Probe {
            https: true,
            port: |p| p.etcd_client,
            path: "/health",
            ca: Some("etcd/ca"),
            client: Some("etcd/healthcheck-client"),
            loopback: false,
        }),
        ports: |p| vec![p.etcd_client, p.etcd_peer],
        version: |v| &v.etcd,
        flags: etcd_flags,
        ..KUBERNETES
    },
    Component {
        name: "kube-apiserver",
        binary: "kube-apiserver",
        notify: true,
        needs: &["etcd"],
        probe: https(|p| p.apiserver, "/readyz"),
        ports: |p| vec![p.apiserver],
        flags: apiserver_flags,
        ..KUBERNETES
    },
    Component {
        name: "kube-controller-manager",
        binary: "kube-controller-manager",
        probe: https(|p| p.controller_manager, "/healthz"),
        ports: |p| vec![p.controller_manager],
        flags: controller_manager_flags,
        ..KUBERNETES
    },
    Component {
        name: "kube-scheduler",
        binary: "kube-scheduler",
        probe: https(|p| p.scheduler, "/healthz"),
        ports: |p| vec![p.scheduler],
        flags: scheduler_flags,
        ..KUBERNETES
    },
    Component {
        name: "cloud-controller-manager",
        binary: "cloud-controller-manager",
        probe: https(|p| p.cloud_controller_manager, "/healthz"),
        ports: |p| vec![p.cloud_controller_manager],
        flags: cloud_controller_manager_flags,
        ..KUBERNETES
    },
    Component {
        name: "containerd",
        binary: "containerd",
        notify: true,
        needs: &[],
        kubernetes: false,
        delegate: true,
        kill_mode: Some("process"),
        version: |_| "",
        flags: |plan| vec![flag("config", plan.path("config/containerd.toml"))],
        ..KUBERNETES
    },
    Component {
        name: "kubelet",
        binary: "kubelet",
        notify: true,
        after_if_enabled: &["containerd"],
        gates_in_config: true,
        delegate: true,
        probe: loopback_http(|p| p.kubelet_healthz),
        ports: |p| vec![p.kubelet, p.kubelet_healthz],
        flags: kubelet_flags,
        ..KUBERNETES
    },
    Component {
        name: "kube-proxy",
        binary: "kube-proxy",
        gates_in_config: true,
        probe: loopback_http(|p| p.kube_proxy_healthz),
        ports: |p| vec![p.kube_proxy_healthz, p.kube_proxy_metrics],
        flags: |plan| {
            vec![
                flag("config", plan.path("config/kube-proxy-config.yaml")),
                flag("hostname-override", &plan.node_name),
            ]
        },
        ..KUBERNETES
    },
];

pub fn find(name: &str) -> Option<&'static Component> {
    COMPONENTS.iter().find(|c| c.name == name)
}

/// (component, dependency) pairs a profile must satisfy.
pub fn requirements() -> impl Iterator<Item = (&'static str, &'static str)> {
    COMPONENTS
        .iter()
        .flat_map(|c| c.needs.iter().map(move |d| (c.name, *d)))
}

fn flag(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_string(), value.into())
}

fn etcd_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let ports = &plan.profile.ports;
    // The peer listener serves no one else on a single host: keep it on loopback whatever the bind.
    let peer = format!("https://{}", host_port(loopback(plan), ports.etcd_peer));
    let mut flags = vec![
        flag("name", &plan.node_name),
        flag("data-dir", plan.data("etcd")),
        flag("listen-client-urls", plan.local_url(ports.etcd_client)),
        flag("advertise-client-urls", plan.etcd_url()),
        flag("listen-peer-urls", &peer),
        flag("initial-advertise-peer-urls", &peer),
        flag("initial-cluster", format!("{}={peer}", plan.node_name)),
        flag("initial-cluster-state", "new"),
        flag("client-cert-auth", "true"),
        flag("trusted-ca-file", p("pki/etcd/ca.crt")),
        flag("cert-file", p("pki/etcd/server.crt")),
        flag("key-file", p("pki/etcd/server.key")),
        flag("peer-client-cert-auth", "true"),
        flag("peer-trusted-ca-file", p("pki/etcd/ca.crt")),
        flag("peer-cert-file", p("pki/etcd/peer.crt")),
        flag("peer-key-file", p("pki/etcd/peer.key")),
        flag("snapshot-count", "10000"),
    ];
    if plan.profile.etcd.unsafe_no_fsync {
        flags.push(flag("unsafe-no-fsync", "true"));
    }
    flags
}

fn loopback(plan: &Plan) -> std::net::IpAddr {
    if plan.local.is_ipv6() {
        std::net::Ipv6Addr::LOCALHOST.into()
    } else {
        std::net::Ipv4Addr::LOCALHOST.into()
    }
}

fn apiserver_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let prof = &plan.profile;
    let mut flags = vec![
        flag("advertise-address", plan.advertise.to_string()),
        flag("bind-address", plan.bind.to_string()),
        flag("secure-port", prof.ports.apiserver.to_string()),
        flag("allow-privileged", "true"),
        flag(
            "authorization-mode",
            prof.apiserver.authorization_mode.join(","),
        ),
        flag(
            "enable-admission-plugins",
            prof.apiserver.admission_plugins.join(","),
        ),
        flag("client-ca-file", p("pki/ca.crt")),
        flag("tls-cert-file", p("pki/apiserver.crt")),
        flag("tls-private-key-file", p("pki/apiserver.key")),
        flag("etcd-servers", plan.etcd_url()),
        flag("etcd-cafile", p("pki/etcd/ca.crt")),
        flag("etcd-certfile", p("pki/apiserver-etcd-client.crt")),
        flag("etcd-keyfile", p("pki/apiserver-etcd-client.key")),
        flag("kubelet-certificate-authority", p("pki/ca.crt")),
        flag(
            "kubelet-client-certificate",
            p("pki/apiserver-kubelet-client.crt"),
        ),
        flag("kubelet-client-key", p("pki/apiserver-kubelet-client.key")),
        flag(
            "kubelet-preferred-address-types",
            "InternalIP,ExternalIP,Hostname",
        ),
        flag("proxy-client-cert-file", p("pki/front-proxy-client.crt")),
        flag("proxy-client-key-file", p("pki/front-proxy-client.key")),
        flag("requestheader-client-ca-file", p("pki/front-proxy-ca.crt")),
        flag("requestheader-allowed-names", "front-proxy-client"),
        flag("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        flag("requestheader-group-headers", "X-Remote-Group"),
        flag("requestheader-username-headers", "X-Remote-User"),
        flag(
            "service-account-issuer",
            format!("https://kubernetes.default.svc.{}", prof.network.dns_domain),
        ),
        flag("service-account-key-file", p("pki/sa.pub")),
        flag("service-account-signing-key-file", p("pki/sa.key")),
        flag("service-cluster-ip-range", plan.service_cidr.to_string()),
        flag("audit-policy-file", p("config/audit-policy.yaml")),
        flag("audit-log-path", plan.data("audit/audit.log")),
        flag("audit-log-maxsize", "100"),
        flag("audit-log-maxbackup", "3"),
    ];
    if prof.encryption.enabled {
        flags.push(flag(
            "encryption-provider-config",
            p("config/encryption-config.yaml"),
        ));
    }
    flags
}

/// Flags every controller-manager-like component shares: its identity, serving cert and client CAs.
fn controller_base(plan: &Plan, identity: &str, port: u16) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let kubeconfig = p(&format!("kubeconfig/{identity}.kubeconfig"));
    vec![
        flag("kubeconfig", &kubeconfig),
        flag("authentication-kubeconfig", &kubeconfig),
        flag("authorization-kubeconfig", &kubeconfig),
        flag("bind-address", plan.bind.to_string()),
        flag("secure-port", port.to_string()),
        flag("tls-cert-file", p(&format!("pki/{identity}-server.crt"))),
        flag(
            "tls-private-key-file",
            p(&format!("pki/{identity}-server.key")),
        ),
        flag("client-ca-file", p("pki/ca.crt")),
        flag("requestheader-client-ca-file", p("pki/front-proxy-ca.crt")),
        // One instance per environment: skip leader election and its start-up delay.
        flag("leader-elect", "false"),
    ]
}

fn controller_manager_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    let mut flags = controller_base(
        plan,
        "controller-manager",
        plan.profile.ports.controller_manager,
    );
    flags.extend([
        flag("cluster-name", plan.name()),
        flag("root-ca-file", p("pki/ca.crt")),
        flag("service-account-private-key-file", p("pki/sa.key")),
        flag("use-service-account-credentials", "true"),
        flag("cluster-signing-cert-file", p("pki/ca.crt")),
        flag("cluster-signing-key-file", p("pki/ca.key")),
        flag("controllers", "*,bootstrapsigner,tokencleaner"),
        flag("service-cluster-ip-range", plan.service_cidr.to_string()),
        flag("cluster-cidr", plan.pod_cidr.to_string()),
        flag("allocate-node-cidrs", "true"),
    ]);
    if plan.profile.addons.default_storage_class {
        flags.push(flag("enable-hostpath-provisioner", "true"));
    }
    flags
}

fn scheduler_flags(plan: &Plan) -> Vec<(String, String)> {
    let p = |r: &str| plan.path(r);
    // The scheduler takes its client connection and leader election from --config; the serving
    // and delegated-auth flags still apply next to it.
    let mut flags = vec![flag("config", p("config/scheduler-config.yaml"))];
    flags.extend(
        controller_base(plan, "scheduler", plan.profile.ports.scheduler)
            .into_iter()
            .filter(|(n, _)| n != "kubeconfig" && n != "leader-elect"),
    );
    flags
}

fn cloud_controller_manager_flags(plan: &Plan) -> Vec<(String, String)> {
    let mut flags = controller_base(
        plan,
        "cloud-controller-manager",
        plan.profile.ports.cloud_controller_manager,
    );
    flags.push(flag("cluster-name", plan.name()));
    flags
}

fn kubelet_flags(plan: &Plan) -> Vec<(String, String)> {
    vec![
        flag("config", plan.path("config/kubelet-config.yaml")),
        flag("kubeconfig", plan.path("kubeconfig/kubelet.kubeconfig")),
        flag("root-dir", plan.data("kubelet")),
        flag("hostname-override", &plan.node_name),
        flag("node-ip", plan.advertise.to_string()),
    ]
}
