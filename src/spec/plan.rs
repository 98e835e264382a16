//! The plan: a validated profile resolved into concrete addresses, paths, names and dates. It is a
//! pure function of the profile, the state dir and the host facts. Resolved values live in the plan's
//! own fields; `profile` is what the user wrote (validated), and `resolved_profile` is what the state
//! dir records, so that `start` on another machine sees the same addresses and names.
//!
//! `Plan` is the cluster's part (its name, networks, Service IPs, the API server's addresses, dates,
//! ports, etcd's members); each node's own values (its name, link, pod network, containerd,
//! directories, unit instance) are a `NodePlan` in `nodes`. A plan is also a view of one node
//! (`node()`, `on_node`): a per-node component's instance is rendered and run with its node's.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use time::OffsetDateTime;

use super::egress::Egress;
use super::host::HostFacts;
use super::nodes::{ResolvedNode, Taint};
use super::paths;
use super::profile::{parse_epoch, HostRole, Network, PortSpec, Ports, Profile, Role};
use crate::error::{Error, FieldError};

#[derive(Debug, Clone)]
pub struct Plan {
    pub profile: Profile,
    pub state_dir: PathBuf,
    /// What sets this environment's units apart from another state dir's of the same name
    /// (`instance`); empty: nothing, the units are `kubeunit-NAME-*`.
    pub instance: String,
    /// The ports (`ports`, never `auto` here: `gen` resolves that before planning), by field.
    /// Which is whose is the component table's: `components::Port::of` reads one, and the URLs
    /// of the API server and etcd are made there.
    pub ports: Ports,
    pub data_dir: PathBuf,
    pub service_cidr: IpNet,
    /// The `kubernetes` Service ClusterIP: the first address of the service CIDR.
    pub first_service_ip: IpAddr,
    pub dns_ip: IpAddr,
    /// The cluster's pod network (`network.podCIDR`); each node's is `NodePlan::pod_cidr`.
    pub pod_cidr: IpNet,
    pub bind: IpAddr,
    pub advertise: IpAddr,
    /// Address clients on this host use to reach our listeners (the bind address, or loopback for a
    /// wildcard bind).
    pub local: IpAddr,
    pub epoch: OffsetDateTime,
    pub ca_validity: Duration,
    pub cert_validity: Duration,
    /// The OCI runtime binary containerd runs (runc).
    pub runtime: PathBuf,
    /// Where etcd snapshots go (`etcd.snapshot.dir`, else `<dataDir>/snapshots`).
    pub snapshot_dir: PathBuf,
    /// The nodes (`node`): one, whose name also names the etcd member. Its namespace, link and
    /// containerd exist only when the profile enables the node's components.
    pub nodes: Vec<NodePlan>,
    /// The node `node()` is: 0 in the plan `new` makes; a per-node component's instance sees the
    /// plan of its own node (`on_node`).
    pub node_index: usize,
    /// The registry names' pull-through caches (`spec::registries`): none offline.
    pub upstreams: Vec<super::registries::Upstream>,
    /// The cache `upstream()` is, in a per-upstream component's view (`on_upstream`).
    pub upstream_index: Option<usize>,
    /// The members of the environment's own etcd cluster (none of them runs with an external
    /// `datastore`): one, named after the first node. What depends on the topology (etcd's
    /// `--initial-cluster` and ticks, kube-apiserver's `--etcd-servers`, leader election) is made
    /// from this list, never for one member.
    pub etcd_members: Vec<EtcdMember>,
    /// The hosts of an environment across hosts (`hosts:`), in order; empty on one host. This
    /// plan is the view of `hosts[host_index]` (`Profile::host`): `nodes` is that host's one node.
    pub hosts: Vec<HostPlan>,
    pub host_index: usize,
    /// Where the nodes and their pods reach beyond this host (`network.egress`; `Off` when
    /// `offline`).
    pub egress: Egress,
    /// Where CoreDNS sends names outside the cluster (`addons.corednsForward`; none when
    /// `offline`).
    pub coredns_forward: String,
    /// LoadBalancer Services' pool and segment (`addons.loadBalancer`), if on.
    pub load_balancer: Option<super::load_balancer::LoadBalancer>,
    /// The IPv6 networks of a dual-stack environment (`network.ipFamily: dual`), if it is one.
    pub ipv6: Option<super::dual_stack::Ipv6Nets>,
}

/// A host of an environment across hosts, as every host's plan sees it: where the others reach
/// it, its node's pod network and link (the node's address is its InternalIP, which the API
/// servers reach the kubelet at), routed through its address.
#[derive(Debug, Clone, PartialEq)]
pub struct HostPlan {
    pub name: String,
    /// Its address (a DNS name's as resolved: `spec::resolve`).
    pub address: std::net::Ipv4Addr,
    /// The DNS name its address was given as, if it was: its certificates name it too.
    pub dns_name: Option<String>,
    pub roles: Vec<HostRole>,
    /// Its node, as `nodes:` resolves it (its pod network among the rest).
    pub node: ResolvedNode,
    pub link: NodeLink,
}

/// A member of the environment's etcd cluster: where its peers and its clients reach it. The ports
/// are etcd's (`ports.etcdPeer`, `ports.etcdClient`): the members of one host differ by address.
#[derive(Debug, Clone, PartialEq)]
pub struct EtcdMember {
    /// Its `--name`, and its key in `--initial-cluster`.
    pub name: String,
    /// The host of its peer URL.
    pub peer_address: IpAddr,
    /// The host of its client URL (kube-apiserver, etcdctl).
    pub client_address: IpAddr,
}

/// What one node of the environment has of its own. Every name of a node's (its units, network
/// namespace, link, directories, pod cgroups) is made here: the first node's are the environment's
/// own, as they were before there could be several; another node's carry its name.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePlan {
    /// The Node object's name (`node.name`, else the environment's).
    pub name: String,
    /// The veth pair between this host and the node's network namespace.
    pub link: NodeLink,
    /// The node's pod network (`nodes[].podCIDR`): its Node's spec.podCIDR and its CNI range.
    pub pod_cidr: IpNet,
    /// control-plane or worker: the Node's `node-role.kubernetes.io/*` label.
    pub role: Role,
    /// The Node's labels and taints (`nodes[]`), which `start` applies with the admin identity.
    pub labels: std::collections::BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Its IPv6 addresses and pod network, in a dual-stack environment (`Plan::new` writes them).
    pub ipv6: Option<super::dual_stack::NodeIpv6>,
    /// The slice its units run in: the environment's on the first node, a slice of its own below
    /// it on another (`kubeunit-<host name>-node_<node>.slice`), which is also its kubelet's
    /// cgroup root: it exists while the node's units run, and stopping it stops the node.
    pub slice: String,
    /// containerd's socket (each environment its own unless the profile names one).
    pub containerd_socket: PathBuf,
    /// Its runtime state in /run (containerd's state, the link's marker): the environment's run
    /// dir on the first node, `<run dir>/nodes/<name>` on another.
    pub run_dir: PathBuf,
    /// Its runtime data (containerd's images, the kubelet's pods): the environment's data dir on
    /// the first node, `<data dir>/nodes/<name>` on another.
    pub data_dir: PathBuf,
    /// The kubelet's cgroup root, as its systemd driver takes it (`/kubeunit/dev`: the slice
    /// `kubeunit-dev.slice`); the kubelet puts its pods in `<that slice>-kubepods.slice`.
    pub pods_cgroup_root: String,
    /// The cgroup path of that root (cgroupfs style: `/kubeunit.slice/...`).
    pub pods_cgroup: String,
    /// The slice every pod of the node is in, below the environment's (`stop` kills it).
    pub pods_slice: String,
    /// systemd's instance string of its units (`kubelet@<name>`), and the directory of its config
    /// files in the state dir (`nodes/<name>`): none on the first node.
    instance: Option<String>,
}

impl NodePlan {
    /// Node `index` of the environment named `host_name` on this host (`Plan::host_name`), as
    /// `nodes:` resolves it. The first node (index 0) takes the profile's `node.link` and
    /// `containerd.socket`, and the environment's own names; another is `further`.
    fn new(
        profile: &Profile,
        host_name: &str,
        data_dir: &Path,
        index: usize,
        node: ResolvedNode,
    ) -> Result<NodePlan, Error> {
        if index > 0 {
            return NodePlan::further(host_name, data_dir, node);
        }
        let env_run_dir = run_dir(host_name);
        let env_prefix = format!("kubeunit-{host_name}");
        let containerd_socket = match &profile.containerd.socket {
            s if s.as_os_str().is_empty() => env_run_dir.join(CONTAINERD_SOCKET),
            s => s.clone(),
        };
        Ok(NodePlan {
            link: NodeLink::new(&profile.node.link, host_name, false)?,
            pod_cidr: node.pod_cidr,
            role: node.role,
            labels: node.labels,
            taints: node.taints,
            ipv6: None,
            slice: format!("{env_prefix}.slice"),
            containerd_socket,
            run_dir: env_run_dir,
            data_dir: data_dir.to_path_buf(),
            pods_cgroup_root: pods_root(host_name),
            pods_cgroup: slice_cgroup(&env_prefix),
            pods_slice: format!("{env_prefix}-kubepods.slice"),
            instance: None,
            name: node.name,
        })
    }

    /// A node after the first, by its name alone (no index: `start` takes down a node the profile
    /// no longer has by the name it had). It picks its link by its name and has its containerd
    /// below its run dir.
    fn further(host_name: &str, data_dir: &Path, node: ResolvedNode) -> Result<NodePlan, Error> {
        let name = node.name;
        // `<host name>@<node>` is this node's name on the host, as the host name is the first's.
        let on_host = format!("{host_name}@{name}");
        let run_dir = run_dir(host_name).join(NODES).join(&name);
        // Its units run in a slice of its own, which is its kubelet's cgroup root: the kubelet
        // refuses a root that does not exist, and a slice exists while a unit runs in it (the
        // kubelet's own). systemd nests slices by dashes, so the node name's go to underscores
        // (which node names never have); its pods are in `<that slice>-kubepods.slice`.
        let part = format!("node_{}", name.replace('-', "_"));
        let slice_prefix = format!("kubeunit-{host_name}-{part}");
        Ok(NodePlan {
            link: NodeLink::new("auto", &on_host, true)?,
            pod_cidr: node.pod_cidr,
            role: node.role,
            labels: node.labels,
            taints: node.taints,
            ipv6: None,
            slice: format!("{slice_prefix}.slice"),
            containerd_socket: run_dir.join(CONTAINERD_SOCKET),
            run_dir,
            data_dir: data_dir.join(NODES).join(&name),
            pods_cgroup_root: format!("{}/{part}", pods_root(host_name)),
            pods_cgroup: slice_cgroup(&slice_prefix),
            pods_slice: format!("{slice_prefix}-kubepods.slice"),
            instance: Some(name.clone()),
            name,
        })
    }

    /// The node's UTS namespace, bound on a file of its run dir (node-network makes it, with the
    /// node's name as its hostname).
    pub fn uts_path(&self) -> PathBuf {
        self.run_dir.join("uts")
    }

    /// `what` as a name of this node's own: `what` on the first node, `what@<node>` (systemd's
    /// instance syntax) on another. Units, `kubeunit` command arguments and reports use it.
    pub fn qualified(&self, what: &str) -> String {
        match &self.instance {
            None => what.to_string(),
            Some(node) => format!("{what}@{node}"),
        }
    }

    /// A node's config file in the state dir, by its path on the first node (`config/x.yaml`):
    /// that path on the first node, `nodes/<node>/config/x.yaml` on another.
    pub fn file(&self, rel: &str) -> String {
        match &self.instance {
            None => rel.to_string(),
            Some(node) => paths::node_file(node, rel),
        }
    }

    /// Its CNI network's name (host-local keeps its leases in /var/lib/cni/networks/<it>): the
    /// environment's unit prefix on the first node, `<prefix>.<node>` on another (CNI network
    /// names take no `@`).
    pub fn cni_network(&self, unit_prefix: &str) -> String {
        match &self.instance {
            None => unit_prefix.to_string(),
            Some(node) => format!("{unit_prefix}.{node}"),
        }
    }

    /// Its runtime data dir's `rel`, as a string for flags and configs.
    pub fn data(&self, rel: &str) -> String {
        self.data_dir.join(rel).to_string_lossy().into_owned()
    }
}

/// containerd's socket in a node's run dir, unless the profile names one.
const CONTAINERD_SOCKET: &str = "containerd/containerd.sock";
/// The directory of the nodes after the first, in the run dir and the data dir.
const NODES: &str = "nodes";

/// Where `node.link: auto` picks a node's /30 (and a further node's always): RFC 2544's
/// benchmarking range, never routed, rarely used.
pub const AUTO_LINKS: ipnet::Ipv4Net =
    match ipnet::Ipv4Net::new(std::net::Ipv4Addr::new(198, 18, 0, 0), 15) {
        Ok(n) => n,
        Err(_) => panic!("198.18.0.0/15"),
    };

/// The node's network namespace and its link to this host (`node.link`).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLink {
    pub net: ipnet::Ipv4Net,
    /// The host's end: the address the node reaches the API server at.
    pub host: std::net::Ipv4Addr,
    /// The node's end: its InternalIP, where its kubelet and kube-proxy listen.
    pub node: std::net::Ipv4Addr,
    /// The host's end of the veth pair (the node's end is `eth0` in the namespace).
    pub interface: String,
    /// `ip netns` name: /run/netns/<netns>.
    pub netns: String,
}

/// A /24 of 198.18.0.0/15 that no `node.link: auto` takes: the simulated internet of the tests
/// (tests/it/common/internet.rs) lives there, next to environments whose links are picked.
pub const SIMULATED_INTERNET: &str = "198.19.255.0/24";

/// Every network `node.link: auto` may pick a /30 of: AUTO_LINKS but SIMULATED_INTERNET, as the
/// fewest CIDRs.
pub fn auto_link_ranges() -> Vec<ipnet::Ipv4Net> {
    fn without(net: ipnet::Ipv4Net, hole: ipnet::Ipv4Net) -> Vec<ipnet::Ipv4Net> {
        if !net.contains(&hole) {
            return vec![net];
        }
        if net == hole {
            return vec![];
        }
        net.subnets(net.prefix_len() + 1)
            .into_iter()
            .flatten()
            .flat_map(|half| without(half, hole))
            .collect()
    }
    match SIMULATED_INTERNET.parse() {
        Ok(hole) => without(AUTO_LINKS, hole),
        Err(_) => vec![AUTO_LINKS],
    }
}

impl NodeLink {
    /// `spec`: `auto` or a /30 (`node.link`); `on_host`: the node's name on this host (the
    /// environment's `Plan::host_name` for the first node). `hashed`: the interface is always
    /// named by the hash of `on_host` (a further node's name would not fit).
    fn new(spec: &str, on_host: &str, hashed: bool) -> Result<NodeLink, Error> {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(on_host.as_bytes());
        let net = if spec == "auto" {
            // One of the 32768 /30s of AUTO_LINKS, but not in its last /24: the tests' simulated
            // internet is there (SIMULATED_INTERNET).
            let mut block = u32::from(u16::from_be_bytes([digest[0], digest[1]]) & 0x7fff);
            if block >= 0x7fc0 {
                block ^= 0x4000;
            }
            let base = u32::from(AUTO_LINKS.network());
            ipnet::Ipv4Net::new((base + block * 4).into(), 30)
                .map_err(|e| Error::Internal(format!("node link: {e}")))?
        } else {
            spec.parse()
                .map_err(|_| Error::Internal("unvalidated profile field node.link".into()))?
        };
        let first = u32::from(net.network());
        // Interface names have at most 15 bytes: a long environment name becomes a hash of it.
        let short = format!("ku-{on_host}");
        let interface = if short.len() <= 15 && !hashed {
            short
        } else {
            format!("ku-{}", &hex::encode(digest)[..12])
        };
        Ok(NodeLink {
            net,
            host: (first + 1).into(),
            node: (first + 2).into(),
            interface,
            netns: format!("kubeunit-{on_host}"),
        })
    }

    /// The link of host `host`'s node in an environment across hosts: the environment's names (each
    /// host has one node), and a network picked by the host's name, so that the hosts' nodes have
    /// addresses of their own.
    fn of_host(host_name: &str, host: &str) -> Result<NodeLink, Error> {
        let picked = NodeLink::new("auto", &format!("{host_name}@{host}"), true)?;
        Ok(NodeLink {
            net: picked.net,
            host: picked.host,
            node: picked.node,
            ..NodeLink::new("auto", host_name, false)?
        })
    }

    /// The metric of this node's catch-all route in the environment's routing table
    /// (`Plan::routing_table`): one of its own, by the hash of its namespace's name.
    pub fn metric(&self) -> u32 {
        use sha2::Digest;
        let d = sha2::Sha256::digest(self.netns.as_bytes());
        1 + u32::from(u16::from_be_bytes([d[0], d[1]]))
    }

    /// Where `ip netns` mounts the namespace (units join it with NetworkNamespacePath=).
    pub fn netns_path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.netns)
    }
}

/// util-linux's nsenter, which puts a component in its node's UTS namespace
/// (`Component::uts`): an absolute path, as a transient unit's ExecStart= must be.
pub const NSENTER: &str = "/usr/bin/nsenter";

/// kmod's modprobe, which loads a component's kernel modules (`Component::kernel_modules`) in its
/// unit: where every distribution with a /sbin has it (merged /usr too). The unit's line is
/// `-`-prefixed, so a host without it (NixOS loads modules by its configuration) goes on.
pub const MODPROBE: &str = "/sbin/modprobe";

impl Plan {
    /// Resolve a validated profile. `state_dir` must be absolute (see `host::absolute`).
    pub fn new(profile: Profile, state_dir: &Path, host: &HostFacts) -> Result<Plan, Error> {
        if !state_dir.is_absolute() {
            return Err(Error::Internal(format!(
                "plan for a relative state dir {}",
                state_dir.display()
            )));
        }
        let instance = if profile.instance == "auto" {
            super::auto::instance(&profile.name, state_dir, host.state_home.as_deref())
        } else {
            profile.instance.clone()
        };
        let ports = fixed_ports(&profile, state_dir)?;
        // The profile was validated; parse failures below cannot happen, but are not unwrapped either.
        let networks = Networks::of(&profile.network)?;
        let data_dir = match &profile.data_dir {
            Some(d) if !d.as_os_str().is_empty() => d.clone(),
            _ => state_dir.join(paths::DATA),
        };
        let epoch = epoch(&profile, host)?;
        let dur = |s: &str| humantime::parse_duration(s).map_err(|_| unvalidated("pki validity"));
        let ca_validity = dur(&profile.pki.ca_validity)?;
        let cert_validity = dur(&profile.pki.cert_validity)?;
        let runtime = match &profile.containerd.runtime {
            r if r.as_os_str().is_empty() => profile.bin_dir.join("runc"),
            r => r.clone(),
        };
        let resolved = super::nodes::resolve(&profile).map_err(profile_errors)?;
        let host_name = host_name(&profile.name, &instance);
        let hosts = host_plans(&profile, &host_name, &resolved, &host.host_addresses)?;
        // Each host sees the hosts given their certificates, and itself (`spec::join`).
        let (profile, hosts, resolved) = super::join::seen_from(profile, hosts, resolved);
        // Across hosts each host advertises its own inventory address, which `gen --hermetic`
        // has without reading this machine's interfaces.
        let own_address = match hosts.iter().find(|h| h.name == profile.host) {
            Some(h) => Some(IpAddr::V4(h.address)),
            None => host.address(networks.service_cidr.network().is_ipv6()),
        };
        let listeners = Listeners::of(&profile.network, own_address)?;
        let mut topology = if hosts.is_empty() {
            Topology::one_host(&profile, &host_name, &data_dir, resolved, listeners)?
        } else {
            Topology::across_hosts(
                &profile, &host_name, &data_dir, &hosts, &resolved, listeners,
            )?
        };
        let snapshot_dir = match &profile.etcd.snapshot.dir {
            d if d.as_os_str().is_empty() => data_dir.join(paths::SNAPSHOTS),
            d => d.clone(),
        };
        let egress = Egress::of(&profile)?;
        let addresses: Vec<std::net::Ipv4Addr> = hosts.iter().map(|h| h.address).collect();
        let load_balancer =
            super::load_balancer::LoadBalancer::of(&profile, &host_name, &addresses)?;
        let ipv6 = super::dual_stack::Ipv6Nets::of(&profile, &host_name)?;
        if let Some(v6) = &ipv6 {
            for node in &mut topology.nodes {
                node.ipv6 = Some(v6.node(networks.pod_cidr, node.pod_cidr, node.link.net)?);
            }
        }
        // Offline: no name leaves this machine either.
        let coredns_forward = match profile.offline {
            true => String::new(),
            false => profile.addons.coredns_forward.clone(),
        };
        Ok(Plan {
            egress,
            coredns_forward,
            load_balancer,
            ipv6,
            instance,
            ports,
            snapshot_dir,
            nodes: topology.nodes,
            node_index: 0,
            upstreams: super::registries::upstreams(&profile),
            upstream_index: None,
            etcd_members: topology.etcd_members,
            hosts,
            host_index: topology.host_index,
            state_dir: state_dir.to_path_buf(),
            data_dir,
            service_cidr: networks.service_cidr,
            first_service_ip: networks.first_service_ip,
            dns_ip: networks.dns_ip,
            pod_cidr: networks.pod_cidr,
            bind: topology.listeners.bind,
            advertise: topology.listeners.advertise,
            local: topology.listeners.local,
            epoch,
            ca_validity,
            cert_validity,
            runtime,
            profile,
        })
    }

    /// The profile with every value this plan resolved written in (the state dir's `profile.yaml`).
    pub fn resolved_profile(&self) -> Profile {
        let mut p = self.profile.clone();
        p.instance = self.instance.clone();
        p.ports = PortSpec::Fixed(self.ports.clone());
        p.network.advertise_address = self.advertise.to_string();
        p.network.dns_ip = self.dns_ip.to_string();
        // The profile's `node` is the first node, whichever node's view this plan is.
        let first = &self.nodes[0];
        if self.hosts.is_empty() {
            p.node.name = first.name.clone();
            p.node.link = first.link.net.to_string();
        }
        p.data_dir = Some(self.data_dir.clone());
        p.containerd.socket = first.containerd_socket.clone();
        p.containerd.runtime = self.runtime.clone();
        p.etcd.snapshot.dir = self.snapshot_dir.clone();
        p.registries = super::registries::recorded(&p.registries, &self.upstreams, |name| {
            self.state_dir
                .join(paths::upstream_file(name, paths::REGISTRY_CACHE_PASSWORD))
        });
        // A joining host's token: the state dir's own copy (0600), never the token itself.
        for h in &mut p.hosts {
            if let Some(join) = &mut h.join {
                join.token_file = self.state_dir.join(paths::JOIN_TOKEN);
                join.ca_file = self.state_dir.join(paths::cert("ca"));
            }
        }
        p.network.egress = self.egress.spec();
        p.addons.coredns_forward = self.coredns_forward.clone();
        // The pool in use (when the addon is off: the one it would get).
        p.addons.load_balancer_pool = match &self.load_balancer {
            Some(lb) => lb.pool.to_string(),
            None if p.addons.load_balancer_pool == "auto" => {
                super::load_balancer::auto_pool(&self.host_name()).to_string()
            }
            None => p.addons.load_balancer_pool.clone(),
        };
        // Across hosts: every host's node, not this host's alone.
        let nodes: Vec<ResolvedNode> = if self.hosts.is_empty() {
            self.nodes
                .iter()
                .map(|n| ResolvedNode {
                    name: n.name.clone(),
                    role: n.role,
                    labels: n.labels.clone(),
                    taints: n.taints.clone(),
                    pod_cidr: n.pod_cidr,
                })
                .collect()
        } else {
            self.hosts.iter().map(|h| h.node.clone()).collect()
        };
        p.nodes = super::profile::Nodes::List(super::nodes::recorded(&nodes));
        // What each DNS name resolved to, for `start` (which looks nothing up) and `gen --check`.
        for (entry, h) in p.hosts.iter_mut().zip(&self.hosts) {
            if h.dns_name.is_some() {
                entry.resolved_address = h.address.to_string();
            }
        }
        p
    }

    /// The host this plan is the view of, in an environment across hosts.
    pub fn this_host(&self) -> Option<&HostPlan> {
        self.hosts.get(self.host_index)
    }

    /// Whether this plan's host has `role`: every role on one host.
    pub fn here_has(&self, role: HostRole) -> bool {
        self.this_host().is_none_or(|h| h.roles.contains(&role))
    }

    /// Whether this host joins later by token (`spec::join`): its node has no certificate of
    /// its own in the state dir; its kubelet asks for them.
    pub fn joins(&self) -> bool {
        super::join::joins_here(&self.profile)
    }

    /// Where a joining host's kubelet keeps what it is issued (`--cert-dir`): in its node's data
    /// dir, which the state dir's manifest does not cover.
    pub fn kubelet_cert_dir(&self) -> PathBuf {
        self.node().data_dir.join("kubelet").join("pki")
    }

    /// The service networks as kube-apiserver and kube-controller-manager take them: the IPv4
    /// one, and the IPv6 one after a comma in a dual-stack environment.
    pub fn service_cidrs(&self) -> String {
        match &self.ipv6 {
            Some(v6) => format!("{},{}", self.service_cidr, v6.service_cidr),
            None => self.service_cidr.to_string(),
        }
    }

    /// The cluster's pod networks, as `service_cidrs` lists them.
    pub fn pod_cidrs(&self) -> String {
        match &self.ipv6 {
            Some(v6) => format!("{},{}", self.pod_cidr, v6.pod_cidr),
            None => self.pod_cidr.to_string(),
        }
    }

    /// This node's pod networks: its share of each family's.
    pub fn node_pod_cidrs(&self) -> Vec<String> {
        let mut nets = vec![self.node().pod_cidr.to_string()];
        nets.extend(self.node().ipv6.as_ref().map(|v6| v6.pod_cidr.to_string()));
        nets
    }

    /// The node's addresses, as the kubelet's --node-ip takes them.
    pub fn node_ips(&self) -> String {
        match &self.node().ipv6 {
            Some(v6) => format!("{},{}", self.node().link.node, v6.link_node),
            None => self.node().link.node.to_string(),
        }
    }

    /// The node this plan is the view of: the first, unless it is a per-node component's view of
    /// another (`on_node`). Cluster components see the first node.
    pub fn node(&self) -> &NodePlan {
        &self.nodes[self.node_index]
    }

    /// This plan as node `index` sees it: `node()` is that node, everything else the same. A
    /// per-node component's instance on that node is rendered and run with it.
    pub fn on_node(&self, index: usize) -> Plan {
        assert!(
            index < self.nodes.len(),
            "node {index} of a plan with {} nodes",
            self.nodes.len()
        );
        Plan {
            node_index: index,
            ..self.clone()
        }
    }

    /// This plan as the cache of upstream `index` sees it (a per-upstream component's instance):
    /// `upstream()` is that one, the node the first.
    pub fn on_upstream(&self, index: usize) -> Plan {
        assert!(
            index < self.upstreams.len(),
            "upstream {index} of a plan with {} upstreams",
            self.upstreams.len()
        );
        Plan {
            node_index: 0,
            upstream_index: Some(index),
            ..self.clone()
        }
    }

    /// The cache this plan is the view of, in a per-upstream component's instance.
    pub fn upstream(&self) -> Option<&super::registries::Upstream> {
        self.upstreams.get(self.upstream_index?)
    }

    /// The view of a node this plan no longer has, named `name` (a later `gen` removed it): its
    /// names and directories as the plan had them, to take it down by (`run::departed`). Its
    /// role, labels and pod network are not known any more, nor needed: a worker with none, in
    /// the cluster's pod network. `None` for a name no further node can have had.
    pub fn departed(&self, name: &str) -> Option<Plan> {
        if !super::names::is_subdomain(name)
            || name.len() > 63
            || self.nodes.iter().any(|n| n.name == name)
        {
            return None;
        }
        let node = NodePlan::further(
            &self.host_name(),
            &self.data_dir,
            ResolvedNode {
                name: name.to_string(),
                role: Role::Worker,
                labels: Default::default(),
                taints: vec![],
                pod_cidr: self.pod_cidr,
            },
        )
        .ok()?;
        let mut plan = self.clone();
        plan.nodes.push(node);
        plan.node_index = plan.nodes.len() - 1;
        Some(plan)
    }

    /// Where the runtime data of the nodes after the first is (`<dataDir>/nodes/<node>`).
    pub fn further_nodes_data_dir(&self) -> PathBuf {
        self.data_dir.join(NODES)
    }

    /// A config file of the plan's node (`NodePlan::file`): its absolute path, as `path` gives it.
    /// A per-node component names its own files with it, a cluster component's files with `path`.
    pub fn node_file(&self, rel: &str) -> String {
        self.path(&self.node().file(rel))
    }

    /// The routing table of what comes in on the environment's node links (node-network.sh): one
    /// of 0x4b550000-0x4b55ffff ("KU"), by the hash of the host name.
    pub fn routing_table(&self) -> u32 {
        use sha2::Digest;
        let d = sha2::Sha256::digest(self.host_name().as_bytes());
        0x4b55_0000 | u32::from(u16::from_be_bytes([d[0], d[1]]))
    }

    /// Runtime state of this environment that lives in /run (containerd's state, sockets).
    pub fn run_dir(&self) -> PathBuf {
        run_dir(&self.host_name())
    }

    /// The environment's name: its cluster, kubeconfig contexts, `--env`.
    pub fn name(&self) -> &str {
        &self.profile.name
    }

    /// The environment's name among everything of this host that environments must not share
    /// (systemd units, network namespace, /run): `NAME`, or `NAME_INSTANCE` when the state dir
    /// has an instance. An underscore, not a dash: see `slice_cgroup`.
    pub fn host_name(&self) -> String {
        host_name(&self.profile.name, &self.instance)
    }

    /// `kubeunit-<host name>`: what every unit name of the environment starts with. The one
    /// place unit names are made: services, timers, the slice, the target, debug and hook units,
    /// the kubelet's pod slice.
    pub fn unit_prefix(&self) -> String {
        format!("kubeunit-{}", self.host_name())
    }

    /// `kubeunit-<host name>-<what>.<kind>`: a unit of the environment's own.
    pub fn unit_of(&self, what: &str, kind: &str) -> String {
        format!("{}-{what}.{kind}", self.unit_prefix())
    }

    /// `kubeunit-<host name>.slice`: every unit of the environment lives in it.
    pub fn slice_name(&self) -> String {
        format!("{}.slice", self.unit_prefix())
    }

    /// The slice's cgroup path: systemd nests slices by the dashes of their names
    /// (`kubeunit-a-b.slice` lives in `kubeunit.slice/kubeunit-a.slice`). An instance joins with
    /// an underscore, so `kubeunit-a_1f2e.slice` is the sibling of `kubeunit-a.slice`, not its
    /// child (stopping one environment's slice would stop the other's).
    pub fn slice_cgroup(&self) -> String {
        slice_cgroup(&self.unit_prefix())
    }

    /// The target an installed environment (`kubeunit install`) starts at boot.
    pub fn target_name(&self) -> String {
        format!("{}.target", self.unit_prefix())
    }

    pub fn unit_name(&self, component: &str) -> String {
        self.unit_of(component, "service")
    }

    /// `unit_of` for a unit of the plan's node: `kubeunit-<host name>-<what>@<node>.<kind>` on a
    /// node other than the first (`NodePlan::qualified`), `unit_of` on the first.
    pub fn node_unit_of(&self, what: &str, kind: &str) -> String {
        self.unit_of(&self.node().qualified(what), kind)
    }

    /// The timer of a component that runs on a schedule: `kubeunit-<env>-<component>.timer`.
    pub fn timer_name(&self, component: &str) -> String {
        self.unit_of(component, "timer")
    }

    /// Whether a component the profile switches on with `components.NAME.enabled` is on (one that
    /// another setting enables, `enabled_by` in the component table, is not asked about here).
    pub fn enabled(&self, component: &str) -> bool {
        self.profile.component(component).enabled
    }

    /// Absolute path of a file in the state dir, as a string for flags and configs.
    pub fn path(&self, rel: &str) -> String {
        self.state_dir.join(rel).to_string_lossy().into_owned()
    }

    pub fn data(&self, rel: &str) -> String {
        self.data_dir.join(rel).to_string_lossy().into_owned()
    }

    /// `https://<local address>:<port>` with IPv6 brackets.
    pub fn local_url(&self, port: u16) -> String {
        format!("https://{}", host_port(self.local, port))
    }

    /// A built-in profile with `--set` values, planned for `/s` on fixed host facts (unit tests),
    /// with the short unit names of a default state dir unless the sets name an instance.
    #[cfg(test)]
    pub fn for_tests(profile: &str, sets: &[&str]) -> Plan {
        Plan::for_tests_on(profile, sets, &HostFacts::fixed(Some("192.0.2.5")))
    }

    /// `for_tests` on other host facts (DNS names looked up, for one).
    #[cfg(test)]
    pub fn for_tests_on(profile: &str, sets: &[&str], facts: &HostFacts) -> Plan {
        // Directories gen would fill in (`pipeline::binaries`), before the test's own.
        let sets: Vec<String> = [
            "instance=",
            "binDir=/usr/local/bin",
            "containerd.cniBinDir=/opt/cni/bin",
        ]
        .into_iter()
        .chain(sets.iter().copied())
        .map(String::from)
        .collect();
        let (_, p) = super::load::layered(profile, &sets).unwrap_or_else(|e| panic!("{e}"));
        Plan::new(p, Path::new("/s"), facts).unwrap_or_else(|e| panic!("{e}"))
    }

    /// This plan with one more node, a worker named `name` (unit tests), planned again; the nodes
    /// it had keep their resolved values (a control plane alone stays untainted).
    #[cfg(test)]
    pub fn with_extra_node_for_tests(self, name: &str) -> Plan {
        use super::profile::{NodeEntry, Nodes};
        let mut p = self.profile.clone();
        let mut entries = p.nodes.entries(&super::nodes::first_name(&p));
        entries.push(NodeEntry {
            name: name.into(),
            ..NodeEntry::default()
        });
        p.nodes = Nodes::List(entries);
        Plan::new(p, &self.state_dir, &HostFacts::fixed(Some("192.0.2.5")))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The etcd member the environment's etcd unit is: this host's across hosts, else the first
    /// (one unit per environment on one host).
    pub fn etcd_member(&self) -> &EtcdMember {
        // Across hosts, this host's own member.
        self.this_host()
            .and_then(|h| self.etcd_members.iter().find(|m| m.name == h.name))
            .unwrap_or(&self.etcd_members[0])
    }

    /// This plan with the etcd members `members`, (name, address) each, peers and clients at that
    /// address (unit tests: profiles cannot name more members yet).
    #[cfg(test)]
    pub fn with_etcd_members_for_tests(mut self, members: &[(&str, &str)]) -> Plan {
        assert!(!members.is_empty(), "an etcd cluster has a member");
        self.etcd_members = members
            .iter()
            .map(|(name, address)| {
                let address: IpAddr = address.parse().unwrap_or_else(|e| panic!("{address}: {e}"));
                EtcdMember {
                    name: name.to_string(),
                    peer_address: address,
                    client_address: address,
                }
            })
            .collect();
        self
    }
}

/// Where the environments' runtime state is (gone with a reboot, as /run is).
const RUN_ROOT: &str = "/run/kubeunit";

/// `/run/kubeunit/<host name>`: an environment's runtime state.
fn run_dir(host_name: &str) -> PathBuf {
    Path::new(RUN_ROOT).join(host_name)
}

/// Where the node links of every environment here hold the forwarding of this host's uplinks
/// (node-network.sh): one for all, beside theirs (no environment's name has a dot).
pub fn uplinks_dir() -> PathBuf {
    Path::new(RUN_ROOT).join("uplinks.d")
}

/// The environment's pod slice as the kubelet's systemd driver names it: `/kubeunit/a/b` for
/// `kubeunit.slice/kubeunit-a.slice/kubeunit-a-b.slice`.
fn pods_root(host_name: &str) -> String {
    format!("/kubeunit/{}", host_name.replace('-', "/"))
}

/// The cgroup path of slice `name` (without `.slice`): systemd nests slices by the dashes of their
/// names (see `Plan::slice_cgroup`).
fn slice_cgroup(name: &str) -> String {
    let mut path = String::new();
    for (i, _) in name.match_indices('-').chain([(name.len(), "")]) {
        path.push('/');
        path.push_str(&name[..i]);
        path.push_str(".slice");
    }
    path
}

/// A profile field that validation should have refused, found wrong while planning.
fn unvalidated(field: &str) -> Error {
    Error::Internal(format!("unvalidated profile field {field}"))
}

/// Field errors found while planning, reported as the profile's.
fn profile_errors(errors: Vec<FieldError>) -> Error {
    Error::fields("profile", errors)
}

/// The profile's ports: `gen` resolves `auto` before planning, so a plan never picks them.
fn fixed_ports(profile: &Profile, state_dir: &Path) -> Result<Ports, Error> {
    match &profile.ports {
        PortSpec::Fixed(p) => Ok(p.clone()),
        PortSpec::Auto => Err(Error::field(
            "profile",
            FieldError::new(
                "ports",
                "auto",
                "not resolved: `kubeunit gen` picks free ports for `auto` and records them in the state dir's profile.yaml",
                format!(
                    "run `kubeunit gen --state-dir {}` (keeps the ports it recorded), or name the ports",
                    state_dir.display()
                ),
            ),
        )),
    }
}

/// The epoch certificates start at: `pki.epoch`, else the host's (SOURCE_DATE_EPOCH or the
/// clock), which validation has not seen, so it is checked here.
fn epoch(profile: &Profile, host: &HostFacts) -> Result<OffsetDateTime, Error> {
    let explicit = profile
        .pki
        .epoch
        .as_deref()
        .filter(|s| !s.is_empty())
        .and_then(parse_epoch);
    let epoch = explicit.unwrap_or(host.epoch);
    if explicit.is_none() {
        // SOURCE_DATE_EPOCH (or the clock) must leave room for the validity too.
        let errs = validity_errors(profile, epoch, "SOURCE_DATE_EPOCH");
        if !errs.is_empty() {
            return Err(profile_errors(errs));
        }
    }
    Ok(epoch)
}

/// The cluster's networks and the Service IPs in them.
struct Networks {
    service_cidr: IpNet,
    pod_cidr: IpNet,
    first_service_ip: IpAddr,
    dns_ip: IpAddr,
}

impl Networks {
    /// `network:`'s CIDRs, the `kubernetes` Service's IP (the first of the service CIDR) and the
    /// DNS Service's (`dnsIP`, else the tenth).
    fn of(net: &Network) -> Result<Networks, Error> {
        let service_cidr: IpNet = net
            .service_cidr
            .parse()
            .map_err(|_| unvalidated("serviceCIDR"))?;
        let pod_cidr: IpNet = net.pod_cidr.parse().map_err(|_| unvalidated("podCIDR"))?;
        let first_service_ip = nth_address(&service_cidr, 1);
        let dns_ip = if net.dns_ip.is_empty() {
            nth_address(&service_cidr, 10)
        } else {
            net.dns_ip.parse().map_err(|_| unvalidated("dnsIP"))?
        };
        Ok(Networks {
            service_cidr,
            pod_cidr,
            first_service_ip,
            dns_ip,
        })
    }
}

/// Where the environment's listeners bind, where clients on this host reach them, and the address
/// the API server advertises (`Plan`'s fields of those names).
#[derive(Debug, Clone, Copy)]
struct Listeners {
    bind: IpAddr,
    local: IpAddr,
    advertise: IpAddr,
}

impl Listeners {
    /// As `network:` names them. The advertised address defaults to the bind address, else to
    /// the host's own (`own_address`, of the service CIDR's family): never loopback.
    fn of(net: &Network, own_address: Option<IpAddr>) -> Result<Listeners, Error> {
        let bind: IpAddr = net
            .bind_address
            .parse()
            .map_err(|_| unvalidated("bindAddress"))?;
        let local = if bind.is_unspecified() {
            loopback_of(&bind)
        } else {
            bind
        };
        let advertise = if !net.advertise_address.is_empty() {
            net.advertise_address
                .parse()
                .map_err(|_| unvalidated("advertiseAddress"))?
        } else if !bind.is_unspecified() && !bind.is_loopback() {
            bind
        } else {
            own_address.ok_or_else(|| {
                Error::field(
                    "profile",
                    FieldError::new(
                        "network.advertiseAddress",
                        "\"\"",
                        "empty, and no host address to default to (this host has no global one, or `gen --hermetic` reads none)",
                        "set network.advertiseAddress to this host's address (kube-apiserver rejects loopback \
                         addresses in the `kubernetes` Service endpoints)",
                    ),
                )
            })?
        };
        Ok(Listeners {
            bind,
            local,
            advertise,
        })
    }
}

/// What the plan's view of the environment's layout is: its nodes, the etcd members, which host
/// it is, and its listeners there.
struct Topology {
    nodes: Vec<NodePlan>,
    etcd_members: Vec<EtcdMember>,
    host_index: usize,
    listeners: Listeners,
}

impl Topology {
    /// On one host: every node of `resolved`, and one etcd member named after the first.
    fn one_host(
        profile: &Profile,
        host_name: &str,
        data_dir: &Path,
        resolved: Vec<ResolvedNode>,
        listeners: Listeners,
    ) -> Result<Topology, Error> {
        let etcd = EtcdMember {
            name: resolved[0].name.clone(),
            // Its peer listener serves no one else on a single host: on loopback whatever the
            // bind. Its clients (kube-apiserver, etcdctl) are on this host too.
            peer_address: loopback_of(&listeners.local),
            client_address: listeners.local,
        };
        let nodes = resolved
            .into_iter()
            .enumerate()
            .map(|(i, n)| NodePlan::new(profile, host_name, data_dir, i, n))
            .collect::<Result<Vec<_>, Error>>()?;
        links_apart(&nodes)?;
        Ok(Topology {
            nodes,
            etcd_members: vec![etcd],
            host_index: 0,
            listeners,
        })
    }

    /// One host's view of an environment across hosts (`profile.host`): its node, the etcd
    /// members of every etcd host, its listeners on its address (every address when the profile
    /// binds them all), which it also advertises.
    fn across_hosts(
        profile: &Profile,
        host_name: &str,
        data_dir: &Path,
        hosts: &[HostPlan],
        resolved: &[ResolvedNode],
        listeners: Listeners,
    ) -> Result<Topology, Error> {
        let index = hosts.iter().position(|h| h.name == profile.host).ok_or_else(|| {
            Error::field(
                "profile",
                FieldError::new(
                    "host",
                    format!("{:?}", profile.host),
                    "a profile with hosts is planned for one of them",
                    "generate with `kubeunit gen --out DIR`, which renders a state dir per host (DIR/HOST)",
                ),
            )
        })?;
        let here = &hosts[index];
        let mut node = NodePlan::new(profile, host_name, data_dir, 0, resolved[index].clone())?;
        node.link = here.link.clone();
        let etcd_members = hosts
            .iter()
            .filter(|h| h.roles.contains(&HostRole::Etcd))
            .map(|h| EtcdMember {
                name: h.name.clone(),
                peer_address: IpAddr::V4(h.address),
                client_address: IpAddr::V4(h.address),
            })
            .collect();
        let address = IpAddr::V4(here.address);
        let bind = listeners.bind;
        let (bind, local) = if bind.is_unspecified() {
            (bind, loopback_of(&bind))
        } else {
            (address, address)
        };
        Ok(Topology {
            nodes: vec![node],
            etcd_members,
            host_index: index,
            listeners: Listeners {
                bind,
                local,
                advertise: address,
            },
        })
    }
}

/// Two nodes of one environment never share a link: a further node's is picked by the hash of its
/// name, which can meet another's (1 in 32768 a pair).
fn links_apart(nodes: &[NodePlan]) -> Result<(), Error> {
    for (i, a) in nodes.iter().enumerate() {
        if let Some(b) = nodes[..i].iter().find(|b| b.link.net == a.link.net) {
            return Err(Error::field(
                "profile",
                FieldError::new(
                    "nodes",
                    format!("{:?} and {:?}", b.name, a.name),
                    format!("these nodes' links are both {}", a.link.net),
                    format!("rename node {:?} (its link is picked by its name)", a.name),
                ),
            ));
        }
    }
    Ok(())
}

/// The hosts of `profile` (none on one host), each with its address (a DNS name's from
/// `looked_up`, else as the profile records it: `resolve::addresses`), its node's pod network
/// (`resolved`, a node per host in host order) and link; no two links meet, nor a link a host's
/// address.
fn host_plans(
    profile: &Profile,
    host_name: &str,
    resolved: &[ResolvedNode],
    looked_up: &std::collections::BTreeMap<String, std::net::Ipv4Addr>,
) -> Result<Vec<HostPlan>, Error> {
    let addresses = super::resolve::addresses(profile, looked_up)?;
    let mut hosts = Vec::new();
    for ((h, node), address) in profile.hosts.iter().zip(resolved).zip(addresses) {
        hosts.push(HostPlan {
            name: h.name.clone(),
            address,
            dns_name: h.dns_name().map(String::from),
            roles: h.roles.clone(),
            node: node.clone(),
            link: NodeLink::of_host(host_name, &h.name)?,
        });
    }
    for (i, a) in hosts.iter().enumerate() {
        let clash = hosts[..i]
            .iter()
            .find(|b| b.link.net == a.link.net)
            .map(|b| {
                format!(
                    "the links of hosts {:?} and {:?} are both {}",
                    b.name, a.name, a.link.net
                )
            })
            .or_else(|| {
                hosts
                    .iter()
                    .find(|b| a.link.net.contains(&b.address))
                    .map(|b| {
                        format!(
                            "host {:?}'s address {} is in host {:?}'s node link {}",
                            b.name, b.address, a.name, a.link.net
                        )
                    })
            });
        if let Some(why) = clash {
            return Err(Error::field(
                "profile",
                FieldError::new(
                    format!("hosts[{i}].name"),
                    format!("{:?}", a.name),
                    why,
                    format!(
                        "rename host {:?} (its node's link is picked by its name)",
                        a.name
                    ),
                ),
            ));
        }
    }
    Ok(hosts)
}

/// See `Plan::host_name`.
fn host_name(name: &str, instance: &str) -> String {
    if instance.is_empty() {
        name.to_string()
    } else {
        format!("{name}_{instance}")
    }
}

/// The last instant an X.509 certificate can name (GeneralizedTime has four-digit years).
pub const LAST_X509_TIME: OffsetDateTime =
    match OffsetDateTime::from_unix_timestamp(253_402_300_799) {
        Ok(t) => t,
        Err(_) => panic!("9999-12-31T23:59:59Z is a valid time"),
    };

/// Why certificates starting at `epoch` cannot be issued with the profile's validities: an epoch
/// before 1970, or a validity that ends after 9999-12-31. `epoch_field` names where the epoch came
/// from (`pki.epoch`, `SOURCE_DATE_EPOCH`).
pub fn validity_errors(p: &Profile, epoch: OffsetDateTime, epoch_field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if epoch < OffsetDateTime::UNIX_EPOCH || epoch > LAST_X509_TIME {
        errs.push(FieldError::new(
            epoch_field,
            epoch.unix_timestamp(),
            "outside 1970-01-01 .. 9999-12-31",
            "use a time such as 2026-01-01T00:00:00Z",
        ));
        return errs;
    }
    for (field, v) in [
        ("pki.caValidity", &p.pki.ca_validity),
        ("pki.certValidity", &p.pki.cert_validity),
    ] {
        let Ok(d) = humantime::parse_duration(v) else {
            continue; // reported by the profile checks
        };
        let end = time::Duration::try_from(d)
            .ok()
            .and_then(|d| epoch.checked_add(d));
        if end.is_none_or(|end| end > LAST_X509_TIME) {
            errs.push(FieldError::new(
                field,
                v,
                format!(
                    "starting at {epoch_field} ({}) it ends after 9999-12-31, the last date a certificate can carry",
                    epoch.date()
                ),
                "use a shorter validity, e.g. 3650d",
            ));
        }
    }
    errs
}

pub fn host_port(ip: IpAddr, port: u16) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    }
}

fn loopback_of(ip: &IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    }
}

/// The n-th address of a network (n = 1 is the first host address).
pub fn nth_address(net: &IpNet, n: u128) -> IpAddr {
    match net.network() {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a).wrapping_add(n as u32)).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a).wrapping_add(n)).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn facts() -> HostFacts {
        HostFacts::fixed(Some("192.0.2.5"))
    }

    #[test]
    fn plan_is_a_function_of_profile_state_dir_and_host_facts() {
        let (_, p) = load::layered("control-plane", &[]).unwrap();
        let plan = Plan::new(p.clone(), Path::new("/s"), &facts()).unwrap();
        assert_eq!(
            plan.advertise.to_string(),
            "192.0.2.5",
            "from the host facts"
        );
        assert_eq!(plan.dns_ip.to_string(), "10.0.0.10");
        assert_eq!(plan.data_dir, Path::new("/s/data"));
        assert_eq!(plan.epoch, OffsetDateTime::UNIX_EPOCH);
        assert_eq!(plan.profile, p, "the input profile is not rewritten");
        let resolved = plan.resolved_profile();
        assert_eq!(resolved.network.advertise_address, "192.0.2.5");
        assert_eq!(resolved.node.name, "control-plane");
        // A resolved profile resolves to itself, whatever the host.
        let other = HostFacts {
            address_v4: None,
            ..facts()
        };
        let again = Plan::new(resolved.clone(), Path::new("/s"), &other).unwrap();
        assert_eq!(again.resolved_profile(), resolved);
        // No address to default to: the field and the fix are named.
        let e = Plan::new(p, Path::new("/s"), &other).unwrap_err();
        assert!(e.to_string().contains("network.advertiseAddress"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn the_etcd_cluster_is_one_member_named_after_the_first_node() {
        let plan = Plan::for_tests("control-plane", &["node.name=n1"]);
        assert_eq!(
            plan.etcd_members,
            vec![EtcdMember {
                name: "n1".into(),
                peer_address: "127.0.0.1".parse().unwrap(),
                client_address: "127.0.0.1".parse().unwrap(),
            }]
        );
        assert_eq!(plan.etcd_member(), &plan.etcd_members[0]);
        // Clients at the bind address, peers on loopback whatever the bind.
        let bound = Plan::for_tests("control-plane", &["network.bindAddress=192.0.2.5"]);
        let member = bound.etcd_member();
        assert_eq!(member.name, "control-plane");
        assert_eq!(member.client_address.to_string(), "192.0.2.5");
        assert_eq!(member.peer_address.to_string(), "127.0.0.1");
        let v6 = Plan::for_tests(
            "control-plane",
            &[
                "network.bindAddress=::",
                "network.serviceCIDR=fd00:10::/108",
                "network.podCIDR=fd00:88::/64",
                "network.advertiseAddress=2001:db8::5",
            ],
        );
        assert_eq!(v6.etcd_member().peer_address.to_string(), "::1");
        assert_eq!(v6.etcd_member().client_address.to_string(), "::1");
        // Another node's view has the same cluster.
        let two = Plan::for_tests("dev", &[]).with_extra_node_for_tests("worker-1");
        assert_eq!(two.on_node(1).etcd_members, two.etcd_members);
    }

    #[test]
    fn units_are_named_per_state_dir_with_short_names_in_the_default_one() {
        let (_, p) = load::layered("control-plane", &[]).unwrap();
        let plan = |dir: &str| Plan::new(p.clone(), Path::new(dir), &facts()).unwrap();
        let default = plan("/var/lib/kubeunit/control-plane");
        assert_eq!(default.instance, "");
        assert_eq!(
            default.unit_name("etcd"),
            "kubeunit-control-plane-etcd.service"
        );
        assert_eq!(
            default.timer_name("etcd-snapshot"),
            "kubeunit-control-plane-etcd-snapshot.timer"
        );
        assert_eq!(default.slice_name(), "kubeunit-control-plane.slice");
        assert_eq!(default.target_name(), "kubeunit-control-plane.target");
        assert_eq!(
            default.slice_cgroup(),
            "/kubeunit.slice/kubeunit-control.slice/kubeunit-control-plane.slice"
        );
        assert_eq!(default.run_dir(), Path::new("/run/kubeunit/control-plane"));
        assert_eq!(default.node().link.netns, "kubeunit-control-plane");
        // Elsewhere: the state dir's instance in every name, and the slice beside the default
        // one's, not inside it (its stop would stop this one).
        let (a, b) = (plan("/a"), plan("/b"));
        assert_ne!(a.instance, b.instance);
        let i = &a.instance;
        assert_eq!(
            a.unit_name("etcd"),
            format!("kubeunit-control-plane_{i}-etcd.service")
        );
        assert_eq!(a.slice_name(), format!("kubeunit-control-plane_{i}.slice"));
        assert_eq!(
            a.target_name(),
            format!("kubeunit-control-plane_{i}.target")
        );
        assert_eq!(
            a.slice_cgroup(),
            format!("/kubeunit.slice/kubeunit-control.slice/kubeunit-control-plane_{i}.slice")
        );
        assert_eq!(
            a.unit_of("kubepods", "slice"),
            format!("kubeunit-control-plane_{i}-kubepods.slice")
        );
        assert_eq!(
            a.run_dir(),
            Path::new(&format!("/run/kubeunit/control-plane_{i}"))
        );
        assert_ne!(
            a.node().link,
            b.node().link,
            "a network namespace and link each"
        );
        assert_ne!(a.node().containerd_socket, b.node().containerd_socket);
        // Names that are the environment's, not the host's, stay.
        assert_eq!(
            (a.name(), a.node().name.as_str()),
            ("control-plane", "control-plane")
        );
        // profile.yaml records the instance, and leaves out none (as older versions wrote it).
        let resolved = a.resolved_profile();
        assert_eq!(&resolved.instance, i);
        assert!(resolved.to_yaml().contains(&format!("instance: {i}")));
        assert!(!default.resolved_profile().to_yaml().contains("instance"));
        let read = |p: &Profile| {
            load::resolved(Path::new("/x/profile.yaml"), &p.to_yaml())
                .unwrap()
                .1
        };
        assert_eq!(read(&resolved).instance, *i);
        assert_eq!(read(&default.resolved_profile()).instance, "");
        // A recorded instance (or none) is kept wherever the state dir is planned.
        assert_eq!(
            Plan::new(read(&default.resolved_profile()), Path::new("/c"), &facts())
                .unwrap()
                .instance,
            ""
        );
        assert_eq!(
            Plan::new(read(&resolved), Path::new("/c"), &facts())
                .unwrap()
                .instance,
            *i
        );
        // A rootless user's default dir is short too; with no known home, nothing is.
        let home = HostFacts {
            state_home: Some("/home/u/.local/state/kubeunit".into()),
            ..facts()
        };
        let user = Plan::new(
            p.clone(),
            Path::new("/home/u/.local/state/kubeunit/control-plane"),
            &home,
        );
        assert_eq!(user.unwrap().instance, "");
        let nowhere = HostFacts {
            state_home: None,
            ..facts()
        };
        let d = Plan::new(
            p.clone(),
            Path::new("/var/lib/kubeunit/control-plane"),
            &nowhere,
        );
        assert_ne!(d.unwrap().instance, "");
        // An explicit one, or none.
        assert_eq!(
            Plan::for_tests("control-plane", &["instance=x1"]).unit_name("etcd"),
            "kubeunit-control-plane_x1-etcd.service"
        );
        assert_eq!(
            Plan::for_tests("control-plane", &[]).unit_name("etcd"),
            "kubeunit-control-plane-etcd.service"
        );
    }

    /// The `ports:` fields base.yaml lists.
    fn base_port_fields() -> Vec<String> {
        let (_, p) = load::layered("base", &[]).unwrap();
        let ports = p.ports.fixed().cloned().unwrap_or_default();
        ports.all().iter().map(|(f, _)| f.to_string()).collect()
    }

    #[test]
    fn ports_auto_must_be_resolved_before_planning() {
        let (_, p) = load::layered("control-plane", &["ports=auto".to_string()]).unwrap();
        assert_eq!(p.ports, PortSpec::Auto);
        let e = Plan::new(p, Path::new("/s"), &facts()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("ports") && msg.contains("kubeunit gen"),
            "{msg}"
        );
        assert_eq!(e.exit_code(), 2);
        // A resolved profile records numbers: it plans as it is.
        let mut p = load::layered("control-plane", &["ports=auto".to_string()])
            .unwrap()
            .1;
        let fields: Vec<String> = base_port_fields();
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        let ports = crate::spec::auto::port_block(Path::new("/s"), &fields, |_| true).unwrap();
        p.ports = PortSpec::Fixed(ports.clone());
        let plan = Plan::new(p, Path::new("/s"), &facts()).unwrap();
        assert_eq!(plan.ports, ports);
        let apiserver = ports.get("apiserver").unwrap();
        assert_eq!(
            plan.local_url(apiserver),
            format!("https://127.0.0.1:{apiserver}")
        );
        let yaml = plan.resolved_profile().to_yaml();
        assert!(yaml.contains(&format!("apiserver: {apiserver}")), "{yaml}");
        assert!(!yaml.contains("auto"), "{yaml}");
    }

    #[test]
    fn no_picked_node_link_is_in_the_simulated_internets_range() {
        let sim: ipnet::Ipv4Net = SIMULATED_INTERNET.parse().unwrap();
        // 3000 names cover each of the last /24's 64 blocks about 6 times.
        for i in 0..3000 {
            let link = NodeLink::new("auto", &format!("env-{i}"), false).unwrap();
            assert!(!sim.contains(&link.net), "env-{i}: {}", link.net);
            assert!(auto_link_ranges().iter().any(|r| r.contains(&link.net)));
        }
        // The ranges are AUTO_LINKS but that /24, nothing more and nothing less.
        let ranges = auto_link_ranges();
        assert!(ranges.iter().all(|r| !r.contains(&sim) && !sim.contains(r)));
        let size: u64 = ranges.iter().map(|r| 1u64 << (32 - r.prefix_len())).sum();
        assert_eq!(size, (1 << 17) - 256, "{ranges:?}");
    }

    #[test]
    fn the_node_link_is_picked_by_name_or_given() {
        let dev = Plan::for_tests("dev", &[]).node().link.clone();
        assert_eq!(
            dev,
            Plan::for_tests("dev", &[]).node().link,
            "a function of the name"
        );
        let base: ipnet::Ipv4Net = "198.18.0.0/15".parse().unwrap();
        assert!(base.contains(&dev.net) && dev.net.prefix_len() == 30);
        assert_eq!(u32::from(dev.host), u32::from(dev.net.network()) + 1);
        assert_eq!(u32::from(dev.node), u32::from(dev.net.network()) + 2);
        assert_eq!(
            (dev.interface.as_str(), dev.netns.as_str()),
            ("ku-dev", "kubeunit-dev")
        );
        assert_eq!(dev.netns_path(), Path::new("/run/netns/kubeunit-dev"));
        let other = Plan::for_tests("dev", &["name=other"]).node().link.clone();
        assert_ne!(dev.net, other.net, "another name, another link");
        // Interface names have at most 15 bytes.
        let long = Plan::for_tests("dev", &["name=a-rather-long-environment-name"])
            .node()
            .link
            .clone();
        assert_eq!(long.interface.len(), 15);
        assert!(long.interface.starts_with("ku-"));
        let given = Plan::for_tests("dev", &["node.link=10.200.0.8/30"]);
        assert_eq!(given.node().link.host.to_string(), "10.200.0.9");
        assert_eq!(given.node().link.node.to_string(), "10.200.0.10");
        assert_eq!(given.resolved_profile().node.link, "10.200.0.8/30");
        assert_eq!(
            Plan::for_tests("dev", &[]).resolved_profile().node.link,
            dev.net.to_string(),
            "profile.yaml records the picked link"
        );
    }

    #[test]
    fn the_first_node_keeps_the_environments_names_and_another_has_its_own() {
        use sha2::Digest;
        let one = Plan::for_tests("dev", &[]);
        let two = Plan::for_tests("dev", &[]).with_extra_node_for_tests("worker-1");
        assert_eq!(two.nodes.len(), 2);
        // The first node: exactly the one-node plan's, and its names the environment's.
        assert_eq!(two.nodes[0], one.nodes[0]);
        let first = &two.nodes[0];
        assert_eq!(first.name, "dev");
        assert_eq!(
            (first.link.netns.as_str(), first.link.interface.as_str()),
            ("kubeunit-dev", "ku-dev")
        );
        assert_eq!(first.run_dir, Path::new("/run/kubeunit/dev"));
        assert_eq!(
            first.containerd_socket,
            Path::new("/run/kubeunit/dev/containerd/containerd.sock")
        );
        assert_eq!(first.data_dir, Path::new("/s/data"));
        assert_eq!(first.qualified("kubelet"), "kubelet");
        assert_eq!(
            first.file("config/kubelet-config.yaml"),
            "config/kubelet-config.yaml"
        );
        assert_eq!(first.pods_cgroup_root, "/kubeunit/dev");
        assert_eq!(first.pods_cgroup, two.slice_cgroup());
        assert_eq!(first.pods_slice, "kubeunit-dev-kubepods.slice");
        assert_eq!(
            two.node_unit_of("kubelet", "service"),
            "kubeunit-dev-kubelet.service"
        );
        assert_eq!(
            two.node_file("config/kubelet-config.yaml"),
            "/s/config/kubelet-config.yaml"
        );

        // The second: every name its own, made of `<host name>@<node>`.
        let second = &two.nodes[1];
        assert_eq!(second.name, "worker-1");
        assert_eq!(second.link.netns, "kubeunit-dev@worker-1");
        assert_eq!(
            second.link.netns_path(),
            Path::new("/run/netns/kubeunit-dev@worker-1")
        );
        let digest = sha2::Sha256::digest(b"dev@worker-1");
        assert_eq!(
            second.link.interface,
            format!("ku-{}", &hex::encode(digest)[..12])
        );
        assert_eq!(second.link.interface.len(), 15);
        let block = u32::from(u16::from_be_bytes([digest[0], digest[1]]) & 0x7fff);
        let net: ipnet::Ipv4Net = format!(
            "{}/30",
            std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0)) + block * 4)
        )
        .parse()
        .unwrap();
        assert_eq!(second.link.net, net, "picked by the hash of dev@worker-1");
        assert_eq!(u32::from(second.link.host), u32::from(net.network()) + 1);
        assert_eq!(u32::from(second.link.node), u32::from(net.network()) + 2);
        assert_ne!(second.link.net, first.link.net);
        assert_eq!(
            second.run_dir,
            Path::new("/run/kubeunit/dev/nodes/worker-1")
        );
        assert_eq!(
            second.containerd_socket,
            Path::new("/run/kubeunit/dev/nodes/worker-1/containerd/containerd.sock")
        );
        assert_eq!(second.data_dir, Path::new("/s/data/nodes/worker-1"));
        assert_eq!(second.data("kubelet"), "/s/data/nodes/worker-1/kubelet");
        assert_eq!(second.qualified("kubelet"), "kubelet@worker-1");
        assert_eq!(
            second.file("config/kubelet-config.yaml"),
            "nodes/worker-1/config/kubelet-config.yaml"
        );
        // Its units and pods: a slice of its own below the environment's, by its name (dashes
        // to underscores: systemd would nest them), which is its kubelet's cgroup root.
        assert_eq!(first.slice, "kubeunit-dev.slice");
        assert_eq!(second.slice, "kubeunit-dev-node_worker_1.slice");
        assert_eq!(second.pods_cgroup_root, "/kubeunit/dev/node_worker_1");
        assert_eq!(
            second.pods_slice,
            "kubeunit-dev-node_worker_1-kubepods.slice"
        );
        assert_eq!(
            second.pods_cgroup,
            "/kubeunit.slice/kubeunit-dev.slice/kubeunit-dev-node_worker_1.slice"
        );
        // Its own pod network, a CNI network of its own.
        assert_eq!(first.pod_cidr.to_string(), "10.88.0.0/24");
        assert_eq!(second.pod_cidr.to_string(), "10.88.1.0/24");
        assert_eq!(first.cni_network("kubeunit-dev"), "kubeunit-dev");
        assert_eq!(second.cni_network("kubeunit-dev"), "kubeunit-dev.worker-1");
        assert_ne!(first.link.metric(), second.link.metric());

        // Its view: its node, its units, its files; the cluster's names and profile as they are.
        let view = two.on_node(1);
        assert_eq!(view.node(), second);
        assert_eq!(
            view.node_unit_of("kubelet", "service"),
            "kubeunit-dev-kubelet@worker-1.service"
        );
        assert_eq!(
            view.node_unit_of("kubelet-debug", "service"),
            "kubeunit-dev-kubelet-debug@worker-1.service"
        );
        assert_eq!(
            view.node_file("config/kubelet-config.yaml"),
            "/s/nodes/worker-1/config/kubelet-config.yaml"
        );
        assert_eq!(view.ports, two.ports);
        assert_eq!(view.unit_name("etcd"), "kubeunit-dev-etcd.service");
        assert_eq!(view.slice_name(), two.slice_name());
        assert_eq!(view.resolved_profile(), two.resolved_profile());
        assert_eq!(
            view.resolved_profile().node,
            one.resolved_profile().node,
            "the first node's settings as they were"
        );
        assert_eq!(two.on_node(0).node(), first);

        // A link the profile gives is the first node's; another node picks its own.
        let given = Plan::for_tests("dev", &["node.link=10.200.0.8/30"])
            .with_extra_node_for_tests("worker-1");
        assert_eq!(given.nodes[0].link.net.to_string(), "10.200.0.8/30");
        assert_eq!(given.nodes[1].link.net, net);
        // An instance is in the host name, so in every name of another node too.
        let x1 = Plan::for_tests("dev", &["instance=x1"]).with_extra_node_for_tests("worker-1");
        assert_eq!(x1.nodes[1].link.netns, "kubeunit-dev_x1@worker-1");
        assert_eq!(
            x1.on_node(1).node_unit_of("kubelet", "service"),
            "kubeunit-dev_x1-kubelet@worker-1.service"
        );
        assert_eq!(
            x1.nodes[1].run_dir,
            Path::new("/run/kubeunit/dev_x1/nodes/worker-1")
        );
        assert_eq!(
            x1.nodes[1].pods_slice,
            "kubeunit-dev_x1-node_worker_1-kubepods.slice"
        );
    }

    #[test]
    fn a_host_of_an_environment_across_hosts_sees_its_own_node_member_and_address() {
        let cp2 = Plan::for_tests("ha", &["host=cp-2"]);
        let w1 = Plan::for_tests("ha", &["host=worker-1"]);
        assert_eq!(cp2.hosts.len(), 5);
        assert_eq!(cp2.this_host().map(|h| h.name.as_str()), Some("cp-2"));
        // One node, the host's, with the environment's names and a link of the host's own.
        assert_eq!(cp2.nodes.len(), 1);
        assert_eq!(cp2.node().name, "cp-2");
        assert_eq!(cp2.node().link.netns, "kubeunit-ha");
        assert_eq!(cp2.node().link, cp2.hosts[1].link);
        let links: std::collections::BTreeSet<_> = cp2.hosts.iter().map(|h| h.link.net).collect();
        assert_eq!(links.len(), 5, "every host's node its own link");
        assert_eq!(w1.node().link, cp2.hosts[3].link, "the same on every host");
        // Listeners on the host's address; its own etcd member; every member at its host.
        assert_eq!(cp2.advertise.to_string(), "198.19.254.12");
        assert_eq!(cp2.bind, cp2.advertise);
        assert_eq!(cp2.etcd_member().name, "cp-2");
        assert_eq!(
            cp2.etcd_members
                .iter()
                .map(|m| m.peer_address.to_string())
                .collect::<Vec<_>>(),
            ["198.19.254.11", "198.19.254.12", "198.19.254.13"]
        );
        assert!(cp2.here_has(HostRole::ControlPlane) && !w1.here_has(HostRole::ControlPlane));
        // Each node its /24, in host order; profile.yaml records every host's node, not one.
        assert_eq!(w1.node().pod_cidr.to_string(), "10.88.3.0/24");
        let recorded = w1.resolved_profile();
        assert_eq!(recorded.nodes.count(), 5);
        assert_eq!(recorded.node.name, "");
        // `gen --hermetic` reads no interface: each host advertises its inventory address.
        let (_, hermetic) = super::super::load::layered("ha", &["host=cp-2".to_string()]).unwrap();
        let cp2_hermetic = Plan::new(hermetic, Path::new("/s"), &HostFacts::none()).unwrap();
        assert_eq!(cp2_hermetic.advertise.to_string(), "198.19.254.12");
        // Without a host, a profile with hosts cannot be planned.
        let (_, p) = super::super::load::layered("ha", &["instance=".to_string()]).unwrap();
        let e = Plan::new(p, Path::new("/s"), &facts()).unwrap_err();
        assert!(e.to_string().contains("gen --out"), "{e}");
    }

    /// The host facts of a `gen` that found ha's host names at ha's addresses, cp-2.test at
    /// `cp2` (`resolve::ha_by_name`), and that `--set` of the hosts.
    fn ha_names_found_at(cp2: &str) -> (String, HostFacts) {
        let (names, found) = super::super::resolve::ha_by_name(cp2);
        let facts = HostFacts {
            host_addresses: found,
            ..facts()
        };
        (names, facts)
    }

    #[test]
    fn hosts_given_by_dns_name_plan_as_by_their_addresses_and_record_what_they_resolved_to() {
        let (names, found) = ha_names_found_at("198.19.254.12");
        for host in ["cp-2", "worker-1"] {
            let set = format!("host={host}");
            let literal = Plan::for_tests("ha", &[&set]);
            let named = Plan::for_tests_on("ha", &[&names, &set], &found);
            // Every address is the one written as such: hosts, etcd members, listeners, the
            // load balancer's uplink; only the names are new.
            let without_names: Vec<HostPlan> = named
                .hosts
                .iter()
                .map(|h| HostPlan {
                    dns_name: None,
                    ..h.clone()
                })
                .collect();
            assert_eq!(without_names, literal.hosts, "{host}");
            assert_eq!(named.etcd_members, literal.etcd_members, "{host}");
            assert_eq!(
                (named.bind, named.advertise, named.local),
                (literal.bind, literal.advertise, literal.local),
                "{host}"
            );
            assert_eq!(named.load_balancer, literal.load_balancer, "{host}");
            assert_eq!(named.nodes, literal.nodes, "{host}");
            assert_eq!(
                named.this_host().and_then(|h| h.dns_name.as_deref()),
                Some(format!("{host}.test").as_str())
            );
            assert!(literal.hosts.iter().all(|h| h.dns_name.is_none()));
        }

        // profile.yaml keeps each name and records what it resolved to.
        let cp2 = Plan::for_tests_on("ha", &[&names, "host=cp-2"], &found);
        let recorded = cp2.resolved_profile();
        let entry = &recorded.hosts[1];
        assert_eq!(
            (entry.address.as_str(), entry.resolved_address.as_str()),
            ("cp-2.test", "198.19.254.12")
        );
        assert!(
            Plan::for_tests("ha", &["host=cp-2"])
                .resolved_profile()
                .hosts[1]
                .resolved_address
                .is_empty(),
            "an address written as such records nothing more"
        );
        // At run time nothing is looked up: the record plans the same, and records itself.
        let again = Plan::new(recorded.clone(), Path::new("/s"), &facts()).unwrap();
        assert_eq!(again.hosts, cp2.hosts);
        assert_eq!(again.resolved_profile(), recorded);
        // A gen whose lookup finds a name elsewhere now plans that (and `gen --check` finds the
        // state dir's record differing).
        let moved = Plan::new(
            recorded.clone(),
            Path::new("/s"),
            &ha_names_found_at("198.19.254.14").1,
        )
        .unwrap();
        assert_eq!(moved.advertise.to_string(), "198.19.254.14");
        assert_eq!(
            moved.etcd_member().peer_address.to_string(),
            "198.19.254.14"
        );
        assert_eq!(
            moved.resolved_profile().hosts[1].resolved_address,
            "198.19.254.14"
        );
        // A name neither looked up nor recorded cannot be planned: the field and a fix are named.
        let (_, bare) = super::super::load::layered("ha", &[names, "host=cp-2".into()]).unwrap();
        let e = Plan::new(bare, Path::new("/s"), &facts()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("hosts[0].address") && e.to_string().contains("fix:"),
            "{e}"
        );
    }

    #[test]
    fn nth_address_ipv4_and_ipv6() {
        let v4: IpNet = "10.96.0.0/12".parse().unwrap();
        assert_eq!(nth_address(&v4, 1).to_string(), "10.96.0.1");
        assert_eq!(nth_address(&v4, 10).to_string(), "10.96.0.10");
        let v6: IpNet = "fd00:10:96::/108".parse().unwrap();
        assert_eq!(nth_address(&v6, 1).to_string(), "fd00:10:96::1");
        assert_eq!(nth_address(&v6, 10).to_string(), "fd00:10:96::a");
    }
}
