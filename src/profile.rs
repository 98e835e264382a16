//! Profiles: the user-facing schema, built-in profiles, `extends:` layering, `--set` overrides and validation.
//!
//! A profile is loaded as a YAML value tree first (so `extends:` and `--set` can merge by key), then
//! deserialized once into [`Profile`] with unknown fields rejected. Validation that needs more than
//! types (CIDRs, ports, components) happens in [`Profile::validate`]; every error names the field,
//! the value and the fix.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value;

use crate::components::{self, COMPONENTS};
use crate::error::Error;

/// Built-in profiles, embedded so the binary is self-contained.
pub const BUILTIN: &[(&str, &str)] = &[
    ("base", include_str!("../profiles/base.yaml")),
    ("dev", include_str!("../profiles/dev.yaml")),
    (
        "control-plane",
        include_str!("../profiles/control-plane.yaml"),
    ),
    ("ci", include_str!("../profiles/ci.yaml")),
];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// Environment name: unit names, slice, cluster name. Lowercase letters, digits and dashes.
    pub name: String,
    /// Where component binaries live unless a component names an absolute `binary`.
    pub bin_dir: PathBuf,
    /// Runtime data (etcd data, audit log, kubelet root). Empty: `<state dir>/data`.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    pub node: Node,
    pub network: Network,
    pub ports: Ports,
    pub pki: Pki,
    /// Feature gates for every Kubernetes component.
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    pub components: BTreeMap<String, ComponentSettings>,
    pub audit: Audit,
    pub apiserver: Apiserver,
    pub etcd: Etcd,
    pub logging: Logging,
    pub encryption: Encryption,
    pub containerd: Containerd,
    pub addons: Addons,
    /// Versions `start` insists on (checked with `BINARY --version`); empty: any.
    #[serde(default)]
    pub versions: Versions,
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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ports {
    pub etcd_client: u16,
    pub etcd_peer: u16,
    pub apiserver: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
    pub kubelet: u16,
    pub kubelet_healthz: u16,
    pub kube_proxy_healthz: u16,
    pub kube_proxy_metrics: u16,
    pub cloud_controller_manager: u16,
}

impl Ports {
    /// (field name, port) for every port, in schema order.
    pub fn all(&self) -> Vec<(&'static str, u16)> {
        vec![
            ("etcdClient", self.etcd_client),
            ("etcdPeer", self.etcd_peer),
            ("apiserver", self.apiserver),
            ("controllerManager", self.controller_manager),
            ("scheduler", self.scheduler),
            ("kubelet", self.kubelet),
            ("kubeletHealthz", self.kubelet_healthz),
            ("kubeProxyHealthz", self.kube_proxy_healthz),
            ("kubeProxyMetrics", self.kube_proxy_metrics),
            ("cloudControllerManager", self.cloud_controller_manager),
        ]
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
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Etcd {
    /// Skip fsync: fast and unsafe, for throwaway CI clusters.
    #[serde(default)]
    pub unsafe_no_fsync: bool,
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
    /// containerd's gRPC socket, used by the kubelet and by kubeunit's own containerd unit.
    pub socket: PathBuf,
    /// Directory of CNI plugin binaries.
    pub cni_bin_dir: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Addons {
    pub coredns: bool,
    pub coredns_image: String,
    pub default_storage_class: bool,
}

/// Where a profile came from, for error messages.
#[derive(Debug, Clone)]
pub enum Source {
    Builtin(String),
    File(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Builtin(n) => write!(f, "built-in profile '{n}'"),
            Source::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Load `spec` (a built-in name or a path), apply `extends:` chains and `--set` overrides, validate.
pub fn load(spec: &str, sets: &[String]) -> Result<Profile, Error> {
    let (source, value) = load_layered(spec, &mut Vec::new())?;
    finish(source, value, sets)
}

/// Parse an already resolved profile (a state dir's `profile.yaml`).
pub fn load_resolved(path: &Path) -> Result<Profile, Error> {
    let source = Source::File(path.to_path_buf());
    let text = std::fs::read_to_string(path).map_err(|e| Error::ProfileRead {
        source_name: source.to_string(),
        reason: e.to_string(),
    })?;
    // On top of `base`: a state dir written by an older kubeunit lacks fields added since.
    let (_, mut value) = load_layered("base", &mut Vec::new())?;
    merge(&mut value, parse_yaml(&source, &text)?);
    finish(source, value, &[])
}

fn finish(source: Source, mut value: Value, sets: &[String]) -> Result<Profile, Error> {
    if let Value::Mapping(m) = &mut value {
        m.remove("extends");
    }
    for set in sets {
        apply_set(&mut value, set)?;
    }
    let profile = typed(&source, value)?;
    profile.validate(&source)?;
    Ok(profile)
}

/// Deserialize with the path of the offending field in the error (`ports.apiserver`, not "(document)").
fn typed(source: &Source, value: Value) -> Result<Profile, Error> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        Error::Profile {
            source_name: source.to_string(),
            field: if path == "." {
                "(document)".into()
            } else {
                path
            },
            message: e.into_inner().to_string(),
            fix: "check the field's spelling and type against `kubeunit profile show base`".into(),
        }
    })
}

fn parse_yaml(source: &Source, text: &str) -> Result<Value, Error> {
    serde_yaml_ng::from_str(text).map_err(|e| Error::Profile {
        source_name: source.to_string(),
        field: "(document)".into(),
        message: e.to_string(),
        fix: "fix the YAML syntax".into(),
    })
}

fn load_layered(spec: &str, chain: &mut Vec<String>) -> Result<(Source, Value), Error> {
    if chain.iter().any(|c| c == spec) || chain.len() > 8 {
        return Err(Error::Profile {
            source_name: spec.into(),
            field: "extends".into(),
            message: format!(
                "profiles extend each other in a loop: {} -> {spec}",
                chain.join(" -> ")
            ),
            fix: "remove one of the `extends:` entries".into(),
        });
    }
    chain.push(spec.to_string());
    let (source, text) = read_source(spec)?;
    let mut value = parse_yaml(&source, &text)?;
    if !matches!(value, Value::Mapping(_)) {
        return Err(Error::Profile {
            source_name: source.to_string(),
            field: "(document)".into(),
            message: "a profile must be a YAML mapping".into(),
            fix: "start from `kubeunit profile show dev`".into(),
        });
    }
    let parent = match &value {
        Value::Mapping(m) => m.get("extends").cloned(),
        _ => None,
    };
    // Every profile but `base` sits on top of `base`, so a user profile only states what differs.
    let parent = match parent {
        Some(Value::String(p)) => Some(resolve_relative(&source, &p)),
        Some(Value::Null) | None if spec != "base" => Some("base".to_string()),
        None | Some(Value::Null) => None,
        Some(other) => {
            return Err(Error::Profile {
                source_name: source.to_string(),
                field: "extends".into(),
                message: format!("expected a profile name or path, got {other:?}"),
                fix: "write `extends: dev` or `extends: ./other.yaml`".into(),
            })
        }
    };
    if let Some(parent) = parent {
        let (_, mut base) = load_layered(&parent, chain)?;
        merge(&mut base, value);
        value = base;
    }
    Ok((source, value))
}

fn resolve_relative(source: &Source, parent: &str) -> String {
    if BUILTIN.iter().any(|(n, _)| *n == parent) {
        return parent.to_string();
    }
    match source {
        Source::File(p) if Path::new(parent).is_relative() => p
            .parent()
            .unwrap_or(Path::new("."))
            .join(parent)
            .to_string_lossy()
            .into_owned(),
        _ => parent.to_string(),
    }
}

fn read_source(spec: &str) -> Result<(Source, String), Error> {
    if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == spec) {
        return Ok((Source::Builtin(name.to_string()), text.to_string()));
    }
    let looks_like_path = spec.contains('/') || spec.ends_with(".yaml") || spec.ends_with(".yml");
    if !looks_like_path {
        let names: Vec<_> = BUILTIN.iter().map(|(n, _)| *n).collect();
        return Err(Error::ProfileRead {
            source_name: spec.into(),
            reason: format!(
                "no built-in profile of that name (built-ins: {}); a file path needs a '/' or a .yaml suffix",
                names.join(", ")
            ),
        });
    }
    let path = PathBuf::from(spec);
    std::fs::read_to_string(&path)
        .map(|t| (Source::File(path.clone()), t))
        .map_err(|e| Error::ProfileRead {
            source_name: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// Deep-merge `over` into `base`: mappings merge by key, everything else replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, over) => *slot = over,
    }
}

/// `--set a.b.c=VALUE`. VALUE is read as YAML (`[a,b]`, `true`, `12`); where the schema wants a string
/// there (`--set name=007`, `extraArgs.profiling=false`) the raw text is used instead.
fn apply_set(root: &mut Value, set: &str) -> Result<(), Error> {
    let Some((path, raw)) = set.split_once('=') else {
        return Err(Error::Set {
            set: set.into(),
            message: "expected KEY=VALUE".into(),
        });
    };
    let keys: Vec<&str> = path.split('.').collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(Error::Set {
            set: set.into(),
            message: format!("'{path}' is not a dotted key path like network.serviceCIDR"),
        });
    }
    let parsed: Value = serde_yaml_ng::from_str(raw).unwrap_or(Value::String(raw.to_string()));
    let as_string = Value::String(raw.to_string());
    if parsed != as_string {
        let mut typed_try = root.clone();
        set_path(&mut typed_try, &keys, parsed, set)?;
        let typed_ok = serde_path_to_error::deserialize::<_, Profile>(typed_try.clone()).is_ok();
        let mut string_try = root.clone();
        set_path(&mut string_try, &keys, as_string, set)?;
        let string_ok = serde_path_to_error::deserialize::<_, Profile>(string_try.clone()).is_ok();
        *root = if string_ok && !typed_ok {
            string_try
        } else {
            typed_try
        };
        return Ok(());
    }
    set_path(root, &keys, parsed, set)
}

fn set_path(root: &mut Value, keys: &[&str], new: Value, set: &str) -> Result<(), Error> {
    let mut node = root;
    for (i, key) in keys.iter().enumerate() {
        let Value::Mapping(map) = node else {
            return Err(Error::Set {
                set: set.into(),
                message: format!("'{}' is not a mapping", keys[..i].join(".")),
            });
        };
        let key_value = Value::String(key.to_string());
        if i + 1 == keys.len() {
            map.insert(key_value, new);
            return Ok(());
        }
        node = map
            .entry(key_value)
            .or_insert_with(|| Value::Mapping(Default::default()));
    }
    Ok(())
}

impl Profile {
    pub fn validate(&self, source: &Source) -> Result<(), Error> {
        let err =
            |field: &str, value: &dyn std::fmt::Display, message: &str, fix: &str| Error::Profile {
                source_name: source.to_string(),
                field: field.into(),
                message: format!("{message} (value: {value})"),
                fix: fix.into(),
            };
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 32
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !self.name.starts_with('-')
            && !self.name.ends_with('-');
        if !name_ok {
            return Err(err(
                "name",
                &self.name,
                "not a valid environment name",
                "use 1-32 lowercase letters, digits and inner dashes, e.g. `dev2`",
            ));
        }
        if !self.bin_dir.is_absolute() {
            return Err(err(
                "binDir",
                &self.bin_dir.display(),
                "must be an absolute path",
                "give an absolute directory, e.g. /usr/local/bin",
            ));
        }
        if let Some(d) = &self.data_dir {
            if !d.as_os_str().is_empty() && !d.is_absolute() {
                return Err(err(
                    "dataDir",
                    &d.display(),
                    "must be an absolute path",
                    "give an absolute directory or leave it empty",
                ));
            }
        }
        let service: IpNet = self.network.service_cidr.parse().map_err(|_| {
            err(
                "network.serviceCIDR",
                &self.network.service_cidr,
                "not a CIDR",
                "write an IPv4 or IPv6 network such as 10.0.0.0/24 or fd00:10::/108",
            )
        })?;
        if service.trunc() != service {
            return Err(err(
                "network.serviceCIDR",
                &self.network.service_cidr,
                "has host bits set",
                &format!("use the network address: {}", service.trunc()),
            ));
        }
        let host_bits = u32::from(service.max_prefix_len() - service.prefix_len());
        if host_bits < 4 {
            return Err(err(
                "network.serviceCIDR",
                &self.network.service_cidr,
                "too small for the kubernetes and DNS service addresses",
                "use a prefix of /28 or shorter",
            ));
        }
        if host_bits > 20 {
            return Err(err(
                "network.serviceCIDR",
                &self.network.service_cidr,
                "too large: kube-apiserver accepts at most 20 host bits",
                "use a smaller range, e.g. /12 for IPv4 or /108 for IPv6",
            ));
        }
        let pod: IpNet = self.network.pod_cidr.parse().map_err(|_| {
            err(
                "network.podCIDR",
                &self.network.pod_cidr,
                "not a CIDR",
                "write a network such as 10.88.0.0/16",
            )
        })?;
        if pod.trunc() != pod {
            return Err(err(
                "network.podCIDR",
                &self.network.pod_cidr,
                "has host bits set",
                &format!("use the network address: {}", pod.trunc()),
            ));
        }
        if pod.contains(&service.network()) || service.contains(&pod.network()) {
            return Err(err(
                "network.podCIDR",
                &self.network.pod_cidr,
                &format!("overlaps network.serviceCIDR {service}"),
                "pick disjoint pod and service ranges",
            ));
        }
        if !self.network.dns_ip.is_empty() {
            let ip: IpAddr = self.network.dns_ip.parse().map_err(|_| {
                err(
                    "network.dnsIP",
                    &self.network.dns_ip,
                    "not an IP address",
                    "write an address inside network.serviceCIDR, or leave it empty",
                )
            })?;
            if !service.contains(&ip) || ip == service.network() {
                return Err(err(
                    "network.dnsIP",
                    &ip,
                    &format!("not a usable address of network.serviceCIDR {service}"),
                    "pick an address inside the service CIDR (the default is its 10th address)",
                ));
            }
        }
        if !is_dns_name(&self.network.dns_domain) {
            return Err(err(
                "network.dnsDomain",
                &self.network.dns_domain,
                "not a DNS domain",
                "write a domain such as cluster.local",
            ));
        }
        for (field, v) in [
            ("network.bindAddress", &self.network.bind_address),
            ("network.advertiseAddress", &self.network.advertise_address),
        ] {
            if field == "network.advertiseAddress" && v.is_empty() {
                continue;
            }
            if v.parse::<IpAddr>().is_err() {
                return Err(err(
                    field,
                    v,
                    "not an IP address",
                    "write an address such as 127.0.0.1",
                ));
            }
        }
        for san in &self.network.extra_sans {
            if san.parse::<IpAddr>().is_err() && !is_dns_name(san.trim_start_matches("*.")) {
                return Err(err(
                    "network.extraSANs",
                    san,
                    "neither an IP address nor a DNS name",
                    "list IPs or DNS names",
                ));
            }
        }
        let mut seen: BTreeMap<u16, &str> = BTreeMap::new();
        for (field, port) in self.ports.all() {
            if port == 0 {
                return Err(err(
                    &format!("ports.{field}"),
                    &port,
                    "port 0 is not allowed",
                    "pick a port from 1 to 65535",
                ));
            }
            if let Some(other) = seen.insert(port, field) {
                return Err(err(
                    &format!("ports.{field}"),
                    &port,
                    &format!("the same port as ports.{other}"),
                    "give every port its own number (two environments side by side need disjoint ports too)",
                ));
            }
        }
        for (field, v) in [
            ("pki.caValidity", &self.pki.ca_validity),
            ("pki.certValidity", &self.pki.cert_validity),
        ] {
            match humantime::parse_duration(v) {
                Ok(d) if d.as_secs() >= 3600 => {}
                _ => {
                    return Err(err(
                        field,
                        v,
                        "not a duration of at least one hour",
                        "write e.g. 3650d or 8760h",
                    ))
                }
            }
        }
        if let Some(e) = &self.pki.epoch {
            if !e.is_empty() && parse_epoch(e).is_none() {
                return Err(err(
                    "pki.epoch",
                    e,
                    "not a time",
                    "write RFC 3339 (2026-01-01T00:00:00Z) or Unix seconds",
                ));
            }
        }
        let known: BTreeSet<&str> = COMPONENTS.iter().map(|c| c.name).collect();
        for (name, c) in &self.components {
            if !known.contains(name.as_str()) {
                return Err(err(
                    &format!("components.{name}"),
                    name,
                    "unknown component",
                    &format!(
                        "use one of: {}",
                        known.iter().copied().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            for flag in c.extra_args.keys() {
                if flag.starts_with('-') || flag.is_empty() || flag.contains('=') {
                    return Err(err(
                        &format!("components.{name}.extraArgs"),
                        flag,
                        "flag names are written without dashes or '='",
                        "write e.g. `v: \"4\"` for --v=4",
                    ));
                }
            }
            for key in c.env.keys() {
                if key.is_empty()
                    || key.contains('=')
                    || key.bytes().any(|b| b.is_ascii_whitespace())
                {
                    return Err(err(
                        &format!("components.{name}.env"),
                        key,
                        "not an environment variable name",
                        "use NAME: value",
                    ));
                }
            }
        }
        for c in COMPONENTS {
            if c.required && !self.component(c.name).enabled {
                return Err(err(
                    &format!("components.{}.enabled", c.name),
                    &false,
                    "every environment needs this component",
                    "set it to true",
                ));
            }
        }
        for (comp, dep) in components::requirements() {
            if self.component(comp).enabled && !self.component(dep).enabled {
                return Err(err(
                    &format!("components.{dep}.enabled"),
                    &false,
                    &format!("{comp} is enabled and needs {dep}"),
                    &format!("enable {dep} or disable {comp}"),
                ));
            }
        }
        let ccm = self.component("cloud-controller-manager");
        if ccm.enabled && !ccm.extra_args.contains_key("cloud-provider") {
            return Err(err(
                "components.cloud-controller-manager.extraArgs.cloud-provider",
                &"(unset)",
                "the cloud-controller-manager needs to know its provider",
                "set components.cloud-controller-manager.extraArgs.cloud-provider",
            ));
        }
        if !AUDIT_LEVELS.contains(&self.audit.policy.as_str())
            && !Path::new(&self.audit.policy).is_absolute()
        {
            return Err(err(
                "audit.policy",
                &self.audit.policy,
                "neither an audit level nor an absolute path to a policy file",
                &format!("use one of {} or an absolute path", AUDIT_LEVELS.join(", ")),
            ));
        }
        if self.apiserver.authorization_mode.is_empty() {
            return Err(err(
                "apiserver.authorizationMode",
                &"[]",
                "needs at least one mode",
                "use [Node, RBAC]",
            ));
        }
        if !self.containerd.socket.is_absolute() || !self.containerd.cni_bin_dir.is_absolute() {
            return Err(err(
                "containerd",
                &format!(
                    "{} / {}",
                    self.containerd.socket.display(),
                    self.containerd.cni_bin_dir.display()
                ),
                "socket and cniBinDir must be absolute paths",
                "give absolute paths",
            ));
        }
        Ok(())
    }

    /// Settings of a component; a component the profile does not mention is disabled.
    pub fn component(&self, name: &str) -> ComponentSettings {
        self.components.get(name).cloned().unwrap_or_default()
    }

    /// Canonical YAML of the resolved profile (written to the state dir as `profile.yaml`).
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("a profile always serializes")
    }
}

pub fn parse_epoch(s: &str) -> Option<time::OffsetDateTime> {
    if let Ok(secs) = s.trim().parse::<i64>() {
        return time::OffsetDateTime::from_unix_timestamp(secs).ok();
    }
    time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339).ok()
}

fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}
