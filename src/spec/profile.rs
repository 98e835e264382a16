//! The profile schema: every key a user can set, as `profiles/base.yaml` lists them with their
//! defaults. Loading (`extends:`, `--set`) is in `load` and `set`, checks in `validate`, resolution
//! into concrete values in `plan`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Built-in profiles, embedded so the binary is self-contained.
pub const BUILTIN: &[(&str, &str)] = &[
    ("base", include_str!("../../profiles/base.yaml")),
    ("dev", include_str!("../../profiles/dev.yaml")),
    ("apps", include_str!("../../profiles/apps.yaml")),
    (
        "control-plane",
        include_str!("../../profiles/control-plane.yaml"),
    ),
    ("ci", include_str!("../../profiles/ci.yaml")),
    ("multi", include_str!("../../profiles/multi.yaml")),
    ("ha", include_str!("../../profiles/ha.yaml")),
    ("envtest", include_str!("../../profiles/envtest.yaml")),
    ("cis", include_str!("../../profiles/cis.yaml")),
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// Environment name: unit names, slice, cluster name. Lowercase letters, digits and dashes.
    pub name: String,
    /// What tells this environment's units apart from those of another state dir with the same
    /// name (`kubeunit-NAME_INSTANCE-etcd.service`). `auto`: none in the name's default state dir
    /// (`/var/lib/kubeunit/NAME`, rootless `$XDG_STATE_HOME/kubeunit/NAME`), elsewhere a short hash
    /// of the state dir's path; `""`: none. `gen` records what it resolved in `profile.yaml`
    /// (where a missing key means none, as state dirs of older versions have it).
    #[serde(default = "auto", skip_serializing_if = "String::is_empty")]
    pub instance: String,
    /// Where component binaries live unless a component names an absolute `binary`. Empty: the
    /// release binaries `kubeunit fetch` keeps in the user's cache (`gen` fills in their paths).
    #[serde(default)]
    pub bin_dir: PathBuf,
    /// Runs under a user's own systemd manager (`--user`): no component that needs root (a node),
    /// and unit files without what only the system manager may set (LimitNOFILE= above the user's).
    #[serde(default)]
    pub rootless: bool,
    /// Nothing leaves this machine: `network.egress` is `off` and CoreDNS forwards no name
    /// (`addons.corednsForward` ""), whatever they say. `KUBEUNIT_OFFLINE=1` sets it for a `gen`;
    /// the state dir's `profile.yaml` records it with what it forced.
    #[serde(default)]
    pub offline: bool,
    /// Runtime data (etcd data, audit log, kubelet root). Empty: `<state dir>/data`.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    pub node: Node,
    /// The nodes: how many (`nodes: 3`), or each one (kind's `nodes:`). The first is `node`'s.
    #[serde(default)]
    pub nodes: Nodes,
    /// The hosts (VMs) of an environment across hosts: each with its name, address and roles. Empty:
    /// everything runs on this one host. `gen --out DIR` renders one state dir per host, `DIR/NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostEntry>,
    /// Which of `hosts` a state dir is: `gen` writes it into each host's `profile.yaml`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// When every host runs `kubeunit hosts sync` (across hosts; the `hosts-sync` timer).
    #[serde(default, skip_serializing_if = "HostsSync::is_default")]
    pub hosts_sync: HostsSync,
    pub network: Network,
    pub ports: PortSpec,
    pub pki: Pki,
    /// Feature gates for every Kubernetes component.
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    pub components: BTreeMap<String, ComponentSettings>,
    pub audit: Audit,
    pub apiserver: Apiserver,
    pub etcd: Etcd,
    /// An existing etcd kube-apiserver uses instead of the environment's own.
    #[serde(default)]
    pub datastore: Datastore,
    pub logging: Logging,
    pub encryption: Encryption,
    pub containerd: Containerd,
    pub addons: Addons,
    /// A kubeconfig outside the state dir that `start` merges the admin identity into.
    #[serde(default)]
    pub kubeconfig: KubeconfigOutput,
    /// Image archives (docker-archive or OCI tar) `start` imports into containerd before the kubelet
    /// starts, so pods run without a registry. Absolute paths; `gen` records their digests.
    #[serde(default)]
    pub images: Vec<PathBuf>,
    /// Versions `start` insists on (from the binary's Go build info when it names the release, else
    /// `BINARY --version`); empty: any.
    #[serde(default)]
    pub versions: Versions,
    /// Where `kubeunit fetch` downloads release binaries from.
    #[serde(default, skip_serializing_if = "Fetch::is_empty")]
    pub fetch: Fetch,
    /// Where the node's image pulls go beyond its local registry (k3s's `registries.yaml`):
    /// `spec::registries` checks it and resolves each registry name's pull-through cache.
    #[serde(default, skip_serializing_if = "Registries::is_empty")]
    pub registries: Registries,
}

/// `registries:`, in the shape of k3s's `registries.yaml`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registries {
    /// Registry name (`docker.io`) -> where its cache pulls from.
    #[serde(default)]
    pub mirrors: BTreeMap<String, Mirror>,
    /// Upstream host (`registry-1.docker.io`, `mirror.example:5000`) -> credentials and CA.
    #[serde(default)]
    pub configs: BTreeMap<String, RegistryConfig>,
}

impl Registries {
    pub fn is_empty(&self) -> bool {
        self.mirrors.is_empty() && self.configs.is_empty()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mirror {
    /// URLs of the upstream; the name's cache proxies the first. Empty: the name's own registry.
    #[serde(default)]
    pub endpoint: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<RegistryAuth>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RegistryTls>,
    /// Send `auth` over plain http:// all the same (an upstream on a network you trust): without
    /// it an http:// endpoint of this host with credentials is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_cleartext: bool,
}

/// Credentials for an upstream. The password is a secret: `gen` writes it into a 0600 file of
/// the state dir and `profile.yaml` names that file (`passwordFile`), never the password.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryAuth {
    #[serde(default)]
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub password: String,
    /// A file holding the password (read at `gen`; a trailing newline is not part of it).
    #[serde(default, skip_serializing_if = "is_empty_path")]
    pub password_file: PathBuf,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryTls {
    /// A PEM file of the CA certificates the upstream's serving certificate chains to.
    #[serde(default)]
    pub ca_file: PathBuf,
}

fn is_empty_path(p: &std::path::Path) -> bool {
    p.as_os_str().is_empty()
}

/// `fetch:`: mirrors of the release downloads, by source (`kubernetes`, `etcd`, ...), and where
/// their checksum files come from when not from the release page.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fetch {
    /// Source name -> base URL laid out as the source's release downloads.
    #[serde(default)]
    pub mirrors: BTreeMap<String, String>,
    /// Source name -> base URL of checksum files the user trusts, laid out as the release page
    /// (a mirror is only a location: its checksum files are not taken unless named here).
    #[serde(default)]
    pub checksums: BTreeMap<String, String>,
}

impl Fetch {
    pub fn is_empty(&self) -> bool {
        self.mirrors.is_empty() && self.checksums.is_empty()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Versions {
    /// e.g. `v1.36.3`, or a prefix such as `v1.36`.
    #[serde(default)]
    pub kubernetes: String,
    /// e.g. `3.6.16`.
    #[serde(default)]
    pub etcd: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Node {
    /// Node name (kubelet, kube-proxy, certificates). Empty: the environment name.
    #[serde(default)]
    pub name: String,
    /// The /30 that links the node's own network namespace to this host: the host's end gets its
    /// first address, the node its second. `auto`: one of 198.18.0.0/15 picked by the environment's
    /// name.
    #[serde(default = "auto")]
    pub link: String,
}

fn auto() -> String {
    "auto".into()
}

/// `nodes:`: a count, or a list like kind's. With a count the first node is the control plane's
/// (`node.name`, else the environment's name) and the others are workers named `worker-1`,
/// `worker-2`, ...; `entries` spells a count out as that list.
#[derive(Debug, Clone, PartialEq)]
pub enum Nodes {
    Count(u32),
    List(Vec<NodeEntry>),
}

impl Default for Nodes {
    fn default() -> Nodes {
        Nodes::Count(1)
    }
}

/// One node of `nodes:`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeEntry {
    /// The Node's name. Empty: `node.name` (else the environment's name) for the first,
    /// `worker-N` (the N-th worker) for another.
    #[serde(default)]
    pub name: String,
    /// `control-plane` (labelled node-role.kubernetes.io/control-plane, as kubeadm does) or
    /// `worker`. Unset: the first node is the control plane's, the others are workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Labels of the Node object (kubeunit applies them with the admin identity, as kubeadm does
    /// the role's: the kubelet may not set `node-role.kubernetes.io/*`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints, as `kubectl taint` writes them: `key[=value]:Effect`. Unset: a control-plane node
    /// is tainted `node-role.kubernetes.io/control-plane:NoSchedule` when there are workers (as
    /// kubeadm and kind do), no other node is; `[]`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<String>>,
    /// Its share of `network.podCIDR` (the Node's spec.podCIDR and its CNI range). Empty: the
    /// first free /24 (the whole range when smaller), in node order; `gen` records it, so that a
    /// node keeps its range when others come or go.
    #[serde(default, rename = "podCIDR")]
    pub pod_cidr: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ControlPlane,
    Worker,
}

/// One host of `hosts:`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostEntry {
    /// Its name: its node's name, its etcd member's, and its state dir's under `gen --out`.
    #[serde(default)]
    pub name: String,
    /// The IPv4 address the other hosts reach it at (its etcd peers, API server, pods and node),
    /// or a DNS name `gen` resolves to it (`spec::resolve`).
    #[serde(default)]
    pub address: String,
    /// What `address`, a DNS name, resolved to: `gen` looks the name up each time and records
    /// the answer here in `profile.yaml`, which `start` and the other commands use (they look
    /// nothing up). `gen --hermetic`, which looks nothing up, takes it as given. Empty for an
    /// address written as such.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resolved_address: String,
    /// What runs on it: `etcd` and `control-plane` (together: etcd is stacked, as kubeadm's
    /// default HA topology), `worker`. Every host runs a node.
    #[serde(default)]
    pub roles: Vec<HostRole>,
    /// It joins the running environment later, with a bootstrap token (`spec::join`): a worker
    /// whose state dir holds no certificate of its own, and which the other hosts' dirs do not
    /// name (they route to it once it joined: `kubeunit hosts sync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<Join>,
}

/// `hostsSync`: across hosts, when `kubeunit hosts sync` runs on every host (routes to the hosts
/// that joined later, their kubelets' serving certificates approved).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostsSync {
    /// A systemd calendar expression (`OnCalendar=`). A joining host waits for a run for its routes
    /// and its serving certificate; each run costs a process start, a Nodes list and
    /// node-network.sh, which an emulated (TCG) VM feels.
    #[serde(default = "default_hosts_sync_schedule")]
    pub schedule: String,
}

fn default_hosts_sync_schedule() -> String {
    "*:*:0/10".into()
}

impl Default for HostsSync {
    fn default() -> HostsSync {
        HostsSync {
            schedule: default_hosts_sync_schedule(),
        }
    }
}

impl HostsSync {
    /// Left out of `profile.yaml` when default, as state dirs before it had it.
    pub fn is_default(&self) -> bool {
        *self == HostsSync::default()
    }
}

/// `hosts[i].join`: how a host that joins later authenticates.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Join {
    /// A file holding a bootstrap token (`kubeunit token create` prints one): absolute. The
    /// state dir's profile.yaml names the state dir's own copy (0600), never the token.
    #[serde(default)]
    pub token_file: PathBuf,
    /// The cluster CA's certificate (a control-plane host's `pki/ca.crt`), which its kubelet
    /// trusts the API servers by: a token alone proves nothing of the servers it reaches.
    #[serde(default)]
    pub ca_file: PathBuf,
}

impl HostEntry {
    /// The DNS name its address is given as; `None` for an IPv4 address (or for what is neither,
    /// which validation refuses).
    pub fn dns_name(&self) -> Option<&str> {
        (self.address.parse::<std::net::Ipv4Addr>().is_err()).then_some(self.address.as_str())
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum HostRole {
    Etcd,
    ControlPlane,
    Worker,
}

impl HostRole {
    pub fn as_str(self) -> &'static str {
        match self {
            HostRole::Etcd => "etcd",
            HostRole::ControlPlane => "control-plane",
            HostRole::Worker => "worker",
        }
    }
}

/// The label and taint of a control-plane node (kubeadm's `node-role.kubernetes.io/control-plane`).
pub const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";

impl Nodes {
    /// How many nodes.
    pub fn count(&self) -> usize {
        match self {
            Nodes::Count(n) => *n as usize,
            Nodes::List(l) => l.len(),
        }
    }

    /// Every node, each with its name, role and taints resolved (`first_name`: the first node's
    /// name when it names none). Its pod network stays as written (`Plan` assigns the empty ones).
    pub fn entries(&self, first_name: &str) -> Vec<NodeEntry> {
        let written: Vec<NodeEntry> = match self {
            Nodes::Count(n) => (0..*n).map(|_| NodeEntry::default()).collect(),
            Nodes::List(l) => l.clone(),
        };
        let roles: Vec<Role> = written
            .iter()
            .enumerate()
            .map(|(i, e)| {
                e.role.unwrap_or(if i == 0 {
                    Role::ControlPlane
                } else {
                    Role::Worker
                })
            })
            .collect();
        let has_workers = roles.contains(&Role::Worker);
        let mut workers = 0;
        written
            .into_iter()
            .zip(roles)
            .enumerate()
            .map(|(i, (e, role))| {
                if role == Role::Worker {
                    workers += 1;
                }
                let name = match (&e.name, i, role) {
                    (n, _, _) if !n.is_empty() => n.clone(),
                    (_, 0, _) => first_name.to_string(),
                    (_, _, Role::Worker) => format!("worker-{workers}"),
                    (_, _, Role::ControlPlane) => format!("control-plane-{}", i + 1),
                };
                let taints = e.taints.clone().unwrap_or_else(|| {
                    if role == Role::ControlPlane && has_workers {
                        vec![format!("{CONTROL_PLANE_ROLE}:NoSchedule")]
                    } else {
                        vec![]
                    }
                });
                NodeEntry {
                    name,
                    role: Some(role),
                    labels: e.labels,
                    taints: Some(taints),
                    pod_cidr: e.pod_cidr,
                }
            })
            .collect()
    }
}

impl Serialize for Nodes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Nodes::Count(n) => s.serialize_u32(*n),
            Nodes::List(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Nodes {
    // By hand, not `untagged`: a wrong field of an entry keeps its path (`nodes[1].role`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Nodes, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Nodes;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a number of nodes, or a list of nodes ({name, role, labels, taints, podCIDR})",
                )
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Nodes, E> {
                u32::try_from(v)
                    .map(Nodes::Count)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Nodes, E> {
                u32::try_from(v)
                    .map(Nodes::Count)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Nodes, A::Error> {
                Vec::<NodeEntry>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(Nodes::List)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Network {
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: String,
    #[serde(rename = "podCIDR")]
    pub pod_cidr: String,
    pub dns_domain: String,
    /// Cluster DNS service IP. Empty: the 10th address of the service CIDR.
    #[serde(default, rename = "dnsIP")]
    pub dns_ip: String,
    /// Address published in the `kubernetes` Service. Empty: the bind address when it is not
    /// loopback or unspecified, else this host's first global address of the service CIDR's family.
    #[serde(default)]
    pub advertise_address: String,
    pub bind_address: String,
    #[serde(default, rename = "extraSANs")]
    pub extra_sans: Vec<String>,
    /// Where the node and its pods reach beyond this host (`spec::egress`).
    #[serde(default)]
    pub egress: EgressSpec,
    /// `ipv4`, or `dual`: pods and Services get an IPv6 address too (`spec::dual_stack`), from
    /// the two ranges below.
    #[serde(default)]
    pub ip_family: IpFamily,
    #[serde(default = "default_pod_cidr_v6", rename = "podCIDRv6")]
    pub pod_cidr_v6: String,
    #[serde(default = "default_service_cidr_v6", rename = "serviceCIDRv6")]
    pub service_cidr_v6: String,
}

/// `network.ipFamily`, as kind names it.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IpFamily {
    #[default]
    Ipv4,
    Ipv6,
    Dual,
}

// The defaults of the fields a profile recorded before they existed (base.yaml has them too).
fn default_pod_cidr_v6() -> String {
    "fd00:10:88::/56".into()
}
fn default_service_cidr_v6() -> String {
    "fd00:10:96::/112".into()
}

/// `network.egress` as written: a word (`host`, `on`, `off`) or a list of CIDRs, each checked by
/// `spec::egress`, which resolves it.
#[derive(Debug, Clone, PartialEq)]
pub enum EgressSpec {
    Word(String),
    Only(Vec<String>),
}

impl Default for EgressSpec {
    fn default() -> EgressSpec {
        EgressSpec::Word("host".into())
    }
}

impl Serialize for EgressSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            EgressSpec::Word(w) => s.serialize_str(w),
            EgressSpec::Only(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for EgressSpec {
    // By hand, not `untagged`: a wrong entry of the list keeps its path (`network.egress[1]`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<EgressSpec, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = EgressSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("host, on, off, or a list of CIDRs ([203.0.113.0/24])")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<EgressSpec, E> {
                Ok(EgressSpec::Word(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<EgressSpec, A::Error> {
                Vec::<String>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(EgressSpec::Only)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `ports:` as numbers: each port by its field name (`etcdClient`), in the order the profile lists
/// them (`profiles/base.yaml`'s, which is the component table's). Which fields there are is the
/// component table's to say: every component declares its own ports (`components::Port`), and
/// `components::validate` reports a field no component declares, or one missing. Nothing here names
/// a port.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ports(Vec<(String, u16)>);

/// `ports:`: every port by name, or `auto`, which `gen` turns into free ports of this host once
/// and records in the state dir's `profile.yaml` (see `spec::auto`).
#[derive(Debug, Clone, PartialEq)]
pub enum PortSpec {
    Auto,
    Fixed(Ports),
}

impl PortSpec {
    /// The ports, unless they are still `auto`.
    pub fn fixed(&self) -> Option<&Ports> {
        match self {
            PortSpec::Auto => None,
            PortSpec::Fixed(p) => Some(p),
        }
    }
}

impl Serialize for PortSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PortSpec::Auto => s.serialize_str("auto"),
            PortSpec::Fixed(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for PortSpec {
    // By hand, not `untagged`: a wrong port keeps its path (`ports.apiserver`) in the error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PortSpec, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = PortSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("`auto` or a mapping of ports (etcdClient: 2379, ...)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PortSpec, E> {
                if v == "auto" {
                    Ok(PortSpec::Auto)
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Str(v), &self))
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<PortSpec, A::Error> {
                Ports::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(PortSpec::Fixed)
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Ports {
    /// Ports of (field, port) pairs, in that order.
    pub fn from_fields<'a>(ports: impl IntoIterator<Item = (&'a str, u16)>) -> Ports {
        Ports(ports.into_iter().map(|(f, p)| (f.to_string(), p)).collect())
    }

    /// (field name, port) for every port, in the profile's order.
    pub fn all(&self) -> Vec<(&str, u16)> {
        self.0.iter().map(|(f, p)| (f.as_str(), *p)).collect()
    }

    /// The port of a `ports.*` field by its name (`etcdClient`).
    pub fn get(&self, field: &str) -> Option<u16> {
        self.0.iter().find(|(f, _)| f == field).map(|(_, p)| *p)
    }

    /// The same ports with `fields` first, in that order (those it names that are here), then any
    /// other as it was: the order `profile.yaml` records, whatever order a profile wrote.
    pub fn ordered(&self, fields: &[&str]) -> Ports {
        let known = fields.iter().filter_map(|f| self.get(f).map(|p| (*f, p)));
        let other = self.all().into_iter().filter(|(f, _)| !fields.contains(f));
        Ports::from_fields(known.chain(other))
    }
}

impl Serialize for Ports {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(f, p)| (f, p)))
    }
}

impl<'de> Deserialize<'de> for Ports {
    // A mapping of any field names (the component table checks them); each value is a port, and
    // a wrong one keeps its path (`ports.apiserver`) through the map access.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ports, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Ports;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of ports (etcdClient: 2379, ...)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ports, A::Error> {
                let mut ports: Vec<(String, u16)> = Vec::new();
                while let Some(field) = map.next_key::<String>()? {
                    let port: u16 = map.next_value()?;
                    if ports.iter().any(|(f, _)| *f == field) {
                        return Err(serde::de::Error::custom(format!(
                            "duplicate field `{field}`"
                        )));
                    }
                    ports.push((field, port));
                }
                Ok(Ports(ports))
            }
        }
        d.deserialize_map(Visitor)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum Algorithm {
    #[serde(rename = "ecdsa-p256")]
    EcdsaP256,
    #[serde(rename = "rsa-2048")]
    Rsa2048,
}

impl Algorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::EcdsaP256 => "ecdsa-p256",
            Algorithm::Rsa2048 => "rsa-2048",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pki {
    pub algorithm: Algorithm,
    /// Durations such as `3650d`, `8760h`.
    pub ca_validity: String,
    pub cert_validity: String,
    /// Start of validity (RFC 3339 or Unix seconds). Empty: `SOURCE_DATE_EPOCH`, else the start of today (UTC).
    #[serde(default)]
    pub epoch: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentSettings {
    #[serde(default)]
    pub enabled: bool,
    /// Binary name (looked up in binDir) or absolute path. Empty: the component's usual binary name.
    #[serde(default)]
    pub binary: String,
    /// Arguments before the flags, e.g. `[kube-apiserver]` for a hyperkube-style binary.
    #[serde(default)]
    pub binary_args: Vec<String>,
    /// Flags without leading dashes; they replace kubeunit's value of the same flag. `null` removes it.
    #[serde(default)]
    pub extra_args: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    /// Environment for the process, written to a 0600 file (never into the unit).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Audit {
    /// `None`, `Metadata`, `Request`, `RequestResponse`, or a path to an audit Policy file.
    pub policy: String,
}

pub const AUDIT_LEVELS: &[&str] = &["None", "Metadata", "Request", "RequestResponse"];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Apiserver {
    pub admission_plugins: Vec<String>,
    pub authorization_mode: Vec<String>,
    /// The Pod Security Standard enforced in every namespace without a level of its own (the
    /// PodSecurity admission plugin's defaults), kube-system exempt. Empty: Kubernetes' default
    /// (privileged).
    #[serde(default)]
    pub pod_security: String,
}

/// The Pod Security Standards' levels (`apiserver.podSecurity`).
pub const POD_SECURITY_LEVELS: &[&str] = &["privileged", "baseline", "restricted"];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Etcd {
    /// Skip fsync: fast and unsafe, for throwaway CI clusters.
    #[serde(default)]
    pub unsafe_no_fsync: bool,
    /// The user etcd runs as (its data dir that user's, its keys through systemd's credentials);
    /// the host must have it. Empty: root.
    #[serde(default)]
    pub user: String,
    /// Snapshots of etcd's keyspace: `kubeunit snapshot save/list/restore`, and on a schedule.
    #[serde(default)]
    pub snapshot: Snapshot,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Snapshot {
    /// When to take one, as a systemd calendar expression (`OnCalendar=`, e.g. `hourly`,
    /// `*:0/15`). Empty: no scheduled snapshots (no `etcd-snapshot` timer).
    #[serde(default)]
    pub schedule: String,
    /// How many scheduled snapshots to keep; older ones are deleted after each new one.
    #[serde(default = "default_retention")]
    pub retention: u32,
    /// Where snapshots go. Empty: `<dataDir>/snapshots`.
    #[serde(default)]
    pub dir: PathBuf,
    /// etcdctl (takes a snapshot from the running etcd). Empty: `etcdctl` next to etcd's binary.
    #[serde(default)]
    pub etcdctl: PathBuf,
    /// etcdutl (checks and restores snapshot files). Empty: `etcdutl` next to etcd's binary.
    #[serde(default)]
    pub etcdutl: PathBuf,
}

fn default_retention() -> u32 {
    5
}

impl Default for Snapshot {
    fn default() -> Snapshot {
        Snapshot {
            schedule: String::new(),
            retention: default_retention(),
            dir: PathBuf::new(),
            etcdctl: PathBuf::new(),
            etcdutl: PathBuf::new(),
        }
    }
}

/// An etcd outside the environment (k3s's datastore-endpoint and -cafile/-certfile/-keyfile). The
/// files are read where kube-apiserver runs, from where they are: they belong to that etcd, not to
/// the environment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Datastore {
    /// Client URLs (`https://host:port`). Empty: the environment runs its own etcd.
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// CA that verifies the etcd servers' certificates.
    #[serde(default)]
    pub ca_file: PathBuf,
    /// Client certificate and key kube-apiserver presents (both or neither).
    #[serde(default)]
    pub cert_file: PathBuf,
    #[serde(default)]
    pub key_file: PathBuf,
    /// Key prefix of the cluster's objects. Empty: kube-apiserver's `/registry`. Two clusters
    /// sharing one etcd need prefixes of their own.
    #[serde(default)]
    pub prefix: String,
}

impl Datastore {
    pub fn external(&self) -> bool {
        !self.endpoints.is_empty()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Logging {
    pub verbosity: u8,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Encryption {
    pub enabled: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Containerd {
    /// containerd's gRPC socket, used by the kubelet and by kubeunit's own containerd unit. Empty:
    /// `/run/kubeunit/<name>/containerd/containerd.sock`, so environments never share one.
    #[serde(default)]
    pub socket: PathBuf,
    /// Directory of CNI plugin binaries (bridge, host-local, loopback, portmap).
    pub cni_bin_dir: PathBuf,
    /// The OCI runtime binary (runc). Empty: `runc` in binDir.
    #[serde(default)]
    pub runtime: PathBuf,
    /// The pause image pods' sandboxes run; import it (`images`) so containerd never pulls it.
    #[serde(default)]
    pub sandbox_image: String,
    /// Keep containers from lowering their OOM score below containerd's: needed where the host (or the
    /// container kubeunit runs in) lacks CAP_SYS_RESOURCE, harmless elsewhere.
    #[serde(default, rename = "restrictOOMScoreAdj")]
    pub restrict_oom_score_adj: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Addons {
    pub coredns: bool,
    pub coredns_image: String,
    /// Where CoreDNS sends the names outside the cluster: a resolv.conf path or addresses, as its
    /// `forward` plugin takes them. Empty: nowhere (it answers for the cluster only, and nothing it
    /// is asked leaves this machine).
    pub coredns_forward: String,
    /// A default StorageClass `standard`, its volumes made by `storage_provisioner`.
    pub default_storage_class: bool,
    pub storage_provisioner: StorageProvisioner,
    /// local-path-provisioner's image, and its helper pods' (a busybox: mkdir and rm of a volume).
    pub local_path_image: String,
    pub local_path_helper_image: String,
    /// metrics-server: the resource metrics API (`kubectl top`, HorizontalPodAutoscalers).
    pub metrics_server: bool,
    pub metrics_server_image: String,
    /// LoadBalancer Services (MetalLB, layer 2: `spec::load_balancer`), their addresses from
    /// `load_balancer_pool`: `auto` or an IPv4 network.
    pub load_balancer: bool,
    pub load_balancer_pool: String,
    pub metallb_controller_image: String,
    pub metallb_speaker_image: String,
    /// The Gateway API: its standard CRDs and Traefik as the implementation (GatewayClass
    /// `traefik`), each Gateway at the address of Traefik's LoadBalancer Service.
    pub gateway: bool,
    pub traefik_image: String,
}

/// Who provisions the default StorageClass's volumes (`addons.storageProvisioner`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum StorageProvisioner {
    /// rancher's local-path-provisioner: each volume a directory in the data dir of its pod's node.
    LocalPath,
    /// kube-controller-manager's in-tree hostPath provisioner: one node only (its flag help says
    /// it "won't work in a multi-node cluster").
    HostPath,
}

/// k3s's write-kubeconfig and write-kubeconfig-mode: the admin identity merged into a kubeconfig of
/// the user's (context: the environment's name) by `start`, removed again by `destroy --all`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeconfigOutput {
    /// Absolute path, e.g. /root/.kube/config. Empty: only `<state dir>/kubeconfig/admin.kubeconfig`.
    #[serde(default)]
    pub write: PathBuf,
    /// Octal mode such as "0600". Empty: the file's own, 0600 for a new file.
    #[serde(default)]
    pub mode: String,
}

/// A file mode as people write it: octal, with or without a leading 0 or 0o (`0640`, `640`).
pub fn parse_mode(s: &str) -> Option<u32> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    u32::from_str_radix(digits, 8).ok().filter(|m| *m <= 0o777)
}

impl Profile {
    /// Settings of a component; a component the profile does not mention is disabled.
    pub fn component(&self, name: &str) -> ComponentSettings {
        self.components.get(name).cloned().unwrap_or_default()
    }

    /// Canonical YAML of the profile (the resolved one is written to the state dir as `profile.yaml`).
    pub fn to_yaml(&self) -> String {
        // Serializing plain structs, strings, maps and numbers into a String cannot fail.
        serde_yaml_ng::to_string(self).unwrap_or_default()
    }
}

/// A point in time as profiles write it: RFC 3339, or Unix seconds.
pub fn parse_epoch(s: &str) -> Option<time::OffsetDateTime> {
    if let Ok(secs) = s.trim().parse::<i64>() {
        return time::OffsetDateTime::from_unix_timestamp(secs).ok();
    }
    time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339).ok()
}
