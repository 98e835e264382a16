//! Checks of a typed profile that its types cannot express. Every check runs and every wrong field is
//! reported (kubeadm's field.ErrorList), each with its value and the fix. Checks about components
//! (which exist, which need which) live with the component table: `components::validate`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;

pub use super::names::{is_dns_name, is_subdomain};
use super::profile::{Network, Profile, AUDIT_LEVELS};
use crate::error::FieldError;

/// Every wrong field of `p` (empty when it is valid).
pub fn validate(p: &Profile) -> Vec<FieldError> {
    let mut errs = Vec::new();
    name(p, &mut errs);
    paths(p, &mut errs);
    network(p, &mut errs);
    ports(p, &mut errs);
    pki(p, &mut errs);
    component_settings(p, &mut errs);
    datastore(p, &mut errs);
    if !p.kubeconfig.write.as_os_str().is_empty() {
        path_field("kubeconfig.write", &p.kubeconfig.write, &mut errs);
    }
    if !p.kubeconfig.mode.is_empty() && super::profile::parse_mode(&p.kubeconfig.mode).is_none() {
        errs.push(FieldError::new(
            "kubeconfig.mode",
            quoted(&p.kubeconfig.mode),
            "not an octal file mode",
            "write it quoted, e.g. \"0600\" or \"0640\"",
        ));
    }
    snapshot(p, &mut errs);
    hosts_sync(p, &mut errs);
    pod_security(p, &mut errs);
    fetch_mirrors(p, &mut errs);
    errs.extend(super::nodes::errors(p));
    errs.extend(super::hosts::errors(p));
    errs.extend(super::egress::errors(p));
    errs.extend(super::registries::errors(p));
    errs.extend(super::load_balancer::errors(p));
    errs.extend(super::dual_stack::errors(p));
    gates("featureGates", &p.feature_gates, &mut errs);
    if !p.node.name.is_empty() && !is_subdomain(&p.node.name) {
        errs.push(FieldError::new(
            "node.name",
            quoted(&p.node.name),
            "not an RFC 1123 subdomain (Kubernetes node names are)",
            "use at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, e.g. node-1",
        ));
    }
    for (field, list) in [
        ("apiserver.admissionPlugins", &p.apiserver.admission_plugins),
        (
            "apiserver.authorizationMode",
            &p.apiserver.authorization_mode,
        ),
    ] {
        for v in list.iter().filter(|v| !is_word(v)) {
            errs.push(FieldError::new(
                field,
                quoted(v),
                "not a plugin or mode name",
                "use names such as NodeRestriction or RBAC (letters and digits)",
            ));
        }
    }
    addon_images(p, &mut errs);
    // Traefik publishes each Gateway at its Service's LoadBalancer address: without the pool a
    // Gateway would never get an address.
    if p.addons.gateway && !p.addons.load_balancer {
        errs.push(FieldError::new(
            "addons.gateway",
            "true",
            "needs addons.loadBalancer: true (each Gateway's address is Traefik's LoadBalancer Service's)",
            "set addons.loadBalancer: true, or addons.gateway: false",
        ));
    }
    if let Some(why) = coredns_forward_problem(&p.addons.coredns_forward) {
        errs.push(FieldError::new(
            "addons.corednsForward",
            quoted(&p.addons.coredns_forward),
            why,
            "write an absolute resolv.conf path, addresses such as \"192.0.2.53 192.0.2.54:53\", or \"\" for none",
        ));
    }
    if !AUDIT_LEVELS.contains(&p.audit.policy.as_str()) && !Path::new(&p.audit.policy).is_absolute()
    {
        errs.push(FieldError::new(
            "audit.policy",
            &p.audit.policy,
            "neither an audit level nor an absolute path to a policy file",
            format!("use one of {} or an absolute path", AUDIT_LEVELS.join(", ")),
        ));
    }
    if p.apiserver.authorization_mode.is_empty() {
        errs.push(FieldError::new(
            "apiserver.authorizationMode",
            "[]",
            "needs at least one mode",
            "use [Node, RBAC]",
        ));
    }
    admission_overlap(p, &mut errs);
    errs
}

/// A plugin both enabled (`apiserver.admissionPlugins`) and disabled (kube-apiserver's
/// `--disable-admission-plugins` by extraArgs): kube-apiserver refuses to start ("overlapped"); said
/// here, with the fix, before anything runs.
fn admission_overlap(p: &Profile, errs: &mut Vec<FieldError>) {
    let field = "components.kube-apiserver.extraArgs.disable-admission-plugins";
    let disabled = p
        .component("kube-apiserver")
        .extra_args
        .get("disable-admission-plugins")
        .cloned();
    let Some(Some(disabled)) = disabled else {
        return;
    };
    for plugin in disabled.split(',').map(str::trim) {
        if p.apiserver.admission_plugins.iter().any(|e| e == plugin) {
            errs.push(FieldError::new(
                field,
                quoted(&disabled),
                format!("disables {plugin}, which apiserver.admissionPlugins enables (kube-apiserver refuses both)"),
                format!("remove {plugin} from apiserver.admissionPlugins too (the envtest profile does so for ServiceAccount)"),
            ));
        }
    }
}

fn name(p: &Profile, errs: &mut Vec<FieldError>) {
    let ok = !p.name.is_empty()
        && p.name.len() <= 32
        && p.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !p.name.starts_with('-')
        && !p.name.ends_with('-');
    if !ok {
        errs.push(FieldError::new(
            "name",
            &p.name,
            "not a valid environment name",
            "use 1-32 lowercase letters, digits and inner dashes, e.g. `dev2`",
        ));
    }
    // No dash: a slice's name is its place in the tree (`kubeunit-a-b.slice` lives in
    // `kubeunit-a.slice`), and an instance must not put one environment's slice in another's.
    let instance = &p.instance;
    let ok = instance == "auto"
        || (instance.len() <= 16
            && instance
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    if !ok {
        errs.push(FieldError::new(
            "instance",
            quoted(instance),
            "not an instance suffix",
            "use `auto`, \"\" (none), or up to 16 lowercase letters and digits",
        ));
    }
}

/// A value shown in an error: quoted and escaped, so that a newline or a control character in it
/// is visible rather than acted on.
fn quoted(v: &str) -> String {
    format!("{v:?}")
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// `[A-Za-z0-9]+`: feature gate, admission plugin and authorization mode names.
fn is_word(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn gates(field: &str, gates: &BTreeMap<String, bool>, errs: &mut Vec<FieldError>) {
    for name in gates.keys().filter(|n| !is_word(n)) {
        errs.push(FieldError::new(
            field,
            quoted(name),
            "not a feature gate name",
            "feature gates are letters and digits, e.g. InPlacePodVerticalScaling",
        ));
    }
}

/// The longest path a path field may hold: PATH_MAX is 4096 bytes, and the files and dirs kubeunit
/// and the components put below a field's path (containerd's snapshots, etcd's member dir) need
/// the rest.
const PATH_FIELD_MAX: usize = 1024;
/// The longest name of one directory or file (NAME_MAX).
const NAME_MAX: usize = 255;

/// A path that reaches flags, unit files and configs: absolute, without control characters, and
/// short enough for the kernel to take what goes below it.
fn path_field(field: &str, path: &std::path::Path, errs: &mut Vec<FieldError>) {
    let text = path.to_string_lossy();
    if !path.is_absolute() || has_control(&text) || path.to_str().is_none() {
        errs.push(FieldError::new(
            field,
            quoted(&text),
            "not an absolute UTF-8 path without control characters",
            "give an absolute path, e.g. /usr/local/bin/x",
        ));
    } else if text.len() > PATH_FIELD_MAX || text.split('/').any(|n| n.len() > NAME_MAX) {
        let shown: String = text.chars().take(60).collect();
        errs.push(FieldError::new(
            field,
            format!("{shown:?}... ({} bytes)", text.len()),
            format!("longer than a path kubeunit can put files below ({PATH_FIELD_MAX} bytes, {NAME_MAX} for one name)"),
            "give a shorter absolute path, e.g. /var/lib/kubeunit",
        ));
    }
}

/// `fetch.mirrors` and `fetch.checksums`: a known source each, at an https base URL.
fn fetch_mirrors(p: &Profile, errs: &mut Vec<FieldError>) {
    use crate::fetch::{self, sources};
    let named = [
        ("mirrors", &p.fetch.mirrors),
        ("checksums", &p.fetch.checksums),
    ];
    for (source, url, field) in named.iter().flat_map(|(key, urls)| {
        urls.iter()
            .map(move |(source, url)| (source, url, format!("fetch.{key}.{source}")))
    }) {
        if sources::find(source).is_none() {
            errs.push(FieldError::new(
                field,
                quoted(source),
                "no such source of release binaries",
                format!("use one of: {}", sources::names().join(", ")),
            ));
        } else if fetch::mirror_url(&field, url).is_err() {
            errs.push(FieldError::new(
                field,
                quoted(url),
                "not an https:// base URL",
                "give the URL the source's release layout sits under, e.g. https://mirror.example/dl.k8s.io/release",
            ));
        }
    }
}

fn paths(p: &Profile, errs: &mut Vec<FieldError>) {
    for image in &p.images {
        // ctr gets it as an argument and the manifest records it: absolute, printable, UTF-8.
        path_field("images", image, errs);
    }
    // Empty: the fetched binaries, whose paths `gen` fills in.
    if p.bin_dir.as_os_str().is_empty() {
    } else if p.bin_dir.is_absolute() {
        path_field("binDir", &p.bin_dir, errs);
        if p.bin_dir.to_string_lossy().contains(['"', '\'', '\\']) {
            errs.push(FieldError::new(
                "binDir",
                quoted(&p.bin_dir.to_string_lossy()),
                "quotes or backslashes in a command path (systemd refuses them)",
                "use a directory without them",
            ));
        }
    } else {
        errs.push(FieldError::new(
            "binDir",
            p.bin_dir.display(),
            "must be an absolute path",
            "give an absolute directory, e.g. /usr/local/bin",
        ));
    }
    if let Some(d) = &p.data_dir {
        if !d.as_os_str().is_empty() && !d.is_absolute() {
            errs.push(FieldError::new(
                "dataDir",
                d.display(),
                "must be an absolute path",
                "give an absolute directory or leave it empty",
            ));
        } else if !d.as_os_str().is_empty() {
            path_field("dataDir", d, errs);
        }
    }
    for (field, path, may_be_empty) in [
        ("containerd.socket", &p.containerd.socket, true),
        ("containerd.cniBinDir", &p.containerd.cni_bin_dir, true),
        ("containerd.runtime", &p.containerd.runtime, true),
    ] {
        let empty_ok = may_be_empty && path.as_os_str().is_empty();
        if !empty_ok && !path.is_absolute() {
            errs.push(FieldError::new(
                field,
                path.display(),
                "must be an absolute path",
                "give an absolute path",
            ));
        } else if !empty_ok {
            path_field(field, path, errs);
        }
    }
}

/// An external etcd: https URLs, and the files kube-apiserver needs to reach it (whether it can
/// read them is the component's check, `components::table`).
fn datastore(p: &Profile, errs: &mut Vec<FieldError>) {
    let d = &p.datastore;
    for e in &d.endpoints {
        if let Some(why) = endpoint_problem(e) {
            errs.push(FieldError::new(
                "datastore.endpoints",
                quoted(e),
                why,
                "write an etcd client URL such as https://10.0.0.5:2379",
            ));
        }
    }
    let files = [
        ("datastore.caFile", &d.ca_file),
        ("datastore.certFile", &d.cert_file),
        ("datastore.keyFile", &d.key_file),
    ];
    if !d.external() {
        for (field, path) in files.iter().filter(|(_, f)| !f.as_os_str().is_empty()) {
            errs.push(FieldError::new(
                *field,
                quoted(&path.to_string_lossy()),
                "set without datastore.endpoints",
                "name the etcd's client URLs in datastore.endpoints, or clear this field",
            ));
        }
        if !d.prefix.is_empty() {
            errs.push(FieldError::new(
                "datastore.prefix",
                quoted(&d.prefix),
                "set without datastore.endpoints (the environment's own etcd holds one cluster)",
                "name the etcd's client URLs in datastore.endpoints, or clear this field",
            ));
        }
        return;
    }
    if d.ca_file.as_os_str().is_empty() {
        errs.push(FieldError::new(
            "datastore.caFile",
            "\"\"",
            "an external etcd is reached over TLS and needs the CA of its certificates",
            "give the absolute path of the etcd CA certificate, e.g. /etc/etcd/pki/ca.crt",
        ));
    }
    for (field, path) in files.iter().filter(|(_, f)| !f.as_os_str().is_empty()) {
        path_field(field, path, errs);
    }
    if d.cert_file.as_os_str().is_empty() != d.key_file.as_os_str().is_empty() {
        let (field, path) = if d.cert_file.as_os_str().is_empty() {
            ("datastore.keyFile", &d.key_file)
        } else {
            ("datastore.certFile", &d.cert_file)
        };
        errs.push(FieldError::new(
            field,
            quoted(&path.to_string_lossy()),
            "a client certificate needs its key and a key its certificate",
            "set both datastore.certFile and datastore.keyFile, or neither",
        ));
    }
    let prefix_ok = d.prefix.is_empty()
        || (d.prefix.starts_with('/')
            && d.prefix.len() > 1
            && !has_control(&d.prefix)
            && !d.prefix.contains([' ', ',']));
    if !prefix_ok {
        errs.push(FieldError::new(
            "datastore.prefix",
            quoted(&d.prefix),
            "not an etcd key prefix",
            "write a path such as /clusters/dev (leading '/', no spaces or commas), or leave it empty for /registry",
        ));
    }
}

/// Why `e` is not an etcd client URL kube-apiserver can use (`https://host:port`), if it is not.
fn endpoint_problem(e: &str) -> Option<&'static str> {
    let Some(rest) = e.strip_prefix("https://") else {
        return Some("not an https:// URL (kubeunit talks TLS to every etcd)");
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let Some((host, port)) = authority.rsplit_once(':') else {
        return Some("no port");
    };
    if port.parse::<u16>().map_or(true, |p| p == 0) {
        return Some("not a port number after the host");
    }
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => host.parse::<std::net::Ipv4Addr>().is_ok() || is_dns_name(host),
    };
    if !host_ok {
        return Some("not a host name or IP address before the port");
    }
    None
}

/// A network written with its network address (no host bits).
fn cidr(field: &str, value: &str, example: &str, errs: &mut Vec<FieldError>) -> Option<IpNet> {
    let Ok(net) = value.parse::<IpNet>() else {
        errs.push(FieldError::new(
            field,
            value,
            "not a CIDR",
            format!("write a network such as {example}"),
        ));
        return None;
    };
    if net.trunc() != net {
        errs.push(FieldError::new(
            field,
            value,
            "has host bits set",
            format!("use the network address: {}", net.trunc()),
        ));
        return None;
    }
    Some(net)
}

/// Why `value` is not what CoreDNS's `forward` takes after its zone (one resolv.conf path, or IP
/// addresses with optional ports), if it is not. Empty is fine: no forwarding.
fn coredns_forward_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        return None;
    }
    if has_control(value) {
        return Some("holds control characters");
    }
    if value.starts_with('/') {
        return (value.split_whitespace().count() != 1)
            .then_some("a path, followed by more (write one resolv.conf path, or addresses)");
    }
    let address = |a: &str| {
        a.parse::<IpAddr>().is_ok()
            || a.parse::<std::net::SocketAddr>()
                .is_ok_and(|s| s.port() != 0)
    };
    (!value.split_whitespace().all(address)).then_some("neither an absolute path nor IP addresses")
}

/// `network:` and `node.link`: the ranges, each on its own and against the others, and the
/// addresses and names in them.
fn network(p: &Profile, errs: &mut Vec<FieldError>) {
    let n = &p.network;
    let service = service_cidr(&n.service_cidr, errs);
    let pod = cidr("network.podCIDR", &n.pod_cidr, "10.88.0.0/16", errs);
    if let (Some(pod), Some(service)) = (pod, service) {
        if pod.contains(&service.network()) || service.contains(&pod.network()) {
            errs.push(FieldError::new(
                "network.podCIDR",
                &n.pod_cidr,
                format!("overlaps network.serviceCIDR {service}"),
                "pick disjoint pod and service ranges",
            ));
        }
    }
    if p.node.link != "auto" {
        node_link(&p.node.link, pod, service, errs);
    }
    if !n.dns_ip.is_empty() {
        dns_ip(&n.dns_ip, service, errs);
    }
    if !is_dns_name(&n.dns_domain) {
        errs.push(FieldError::new(
            "network.dnsDomain",
            &n.dns_domain,
            "not a DNS domain",
            "write a domain such as cluster.local",
        ));
    }
    listen_addresses(n, errs);
    for san in &n.extra_sans {
        if san.parse::<IpAddr>().is_err() && !is_dns_name(san.trim_start_matches("*.")) {
            errs.push(FieldError::new(
                "network.extraSANs",
                san,
                "neither an IP address nor a DNS name",
                "list IPs or DNS names",
            ));
        }
    }
}

/// `network.serviceCIDR`: a network with room for the `kubernetes` and DNS Services, and no more
/// than kube-apiserver takes. The network, when it is one (even of a wrong size: the other
/// checks are made against it).
fn service_cidr(value: &str, errs: &mut Vec<FieldError>) -> Option<IpNet> {
    let field = "network.serviceCIDR";
    let service = cidr(field, value, "10.0.0.0/24 or fd00:10::/108", errs)?;
    let host_bits = u32::from(service.max_prefix_len() - service.prefix_len());
    if host_bits < 4 {
        errs.push(FieldError::new(
            field,
            value,
            "too small for the kubernetes and DNS service addresses",
            "use a prefix of /28 or shorter",
        ));
    }
    if host_bits > 20 {
        errs.push(FieldError::new(
            field,
            value,
            "too large: kube-apiserver accepts at most 20 host bits",
            "use a smaller range, e.g. /12 for IPv4 or /108 for IPv6",
        ));
    }
    Some(service)
}

/// `node.link` written as a network: an IPv4 range the kubelet takes a node address from, with
/// room for the host's and the node's, apart from the pod and service ranges.
fn node_link(value: &str, pod: Option<IpNet>, service: Option<IpNet>, errs: &mut Vec<FieldError>) {
    let bad = |why: String, fix: &str| FieldError::new("node.link", value, why, fix);
    let Some(link) = cidr("node.link", value, "198.18.0.0/30", errs) else {
        return;
    };
    if link.network().is_ipv6() {
        errs.push(bad(
            "not an IPv4 network".into(),
            "write an IPv4 /30 such as 198.18.0.0/30, or auto",
        ));
    } else if matches!(link.network(), IpAddr::V4(a) if a.is_loopback() || a.is_link_local() || a.is_multicast() || a.is_unspecified() || a.is_broadcast())
    {
        errs.push(bad(
            "a loopback, link-local, multicast or reserved range (the kubelet refuses such a node address)".into(),
            "use a private or benchmarking range such as 198.18.0.0/30, or auto",
        ));
    } else if link.prefix_len() > 30 {
        errs.push(bad(
            "too small: the host and the node need an address each".into(),
            "use a /30 such as 198.18.0.0/30, or auto",
        ));
    }
    for (field, other) in [("network.podCIDR", pod), ("network.serviceCIDR", service)] {
        if other.is_some_and(|o| o.contains(&link.network()) || link.contains(&o.network())) {
            errs.push(bad(
                format!("overlaps {field}"),
                "pick a range of its own, e.g. 198.18.0.0/30, or auto",
            ));
        }
    }
}

/// `network.dnsIP` written: an address of the service range (`service`, unchecked when that is
/// wrong itself) that no other address there is.
fn dns_ip(value: &str, service: Option<IpNet>, errs: &mut Vec<FieldError>) {
    let Ok(ip) = value.parse::<IpAddr>() else {
        errs.push(FieldError::new(
            "network.dnsIP",
            value,
            "not an IP address",
            "write an address inside network.serviceCIDR, or leave it empty",
        ));
        return;
    };
    let Some(service) = service else {
        return;
    };
    let first = super::plan::nth_address(&service, 1);
    let broadcast = service.network().is_ipv4() && ip == service.broadcast();
    let why = if !service.contains(&ip) || ip == service.network() {
        format!("not a usable address of network.serviceCIDR {service}")
    } else if ip == first {
        format!(
            "the address of the `kubernetes` Service ({first}, the first of network.serviceCIDR)"
        )
    } else if broadcast {
        format!("the broadcast address of network.serviceCIDR {service}")
    } else {
        return;
    };
    errs.push(FieldError::new(
        "network.dnsIP",
        ip,
        why,
        "pick another address inside the service CIDR (the default is its 10th address)",
    ));
}

/// `network.bindAddress` and `network.advertiseAddress` (which may be empty): unicast addresses,
/// and an advertised one that other hosts can reach.
fn listen_addresses(n: &Network, errs: &mut Vec<FieldError>) {
    for (field, v, may_be_empty) in [
        ("network.bindAddress", &n.bind_address, false),
        ("network.advertiseAddress", &n.advertise_address, true),
    ] {
        if may_be_empty && v.is_empty() {
            continue;
        }
        match v.parse::<IpAddr>() {
            Err(_) => errs.push(FieldError::new(
                field,
                quoted(v),
                "not an IP address",
                "write an address such as 127.0.0.1",
            )),
            Ok(ip) if ip.is_multicast() => errs.push(FieldError::new(
                field,
                ip,
                "a multicast address",
                "use a unicast address of this host",
            )),
            Ok(ip) if field == "network.advertiseAddress" && (ip.is_loopback() || ip.is_unspecified()) => {
                errs.push(FieldError::new(
                    field,
                    ip,
                    "loopback and unspecified addresses cannot be advertised (kube-apiserver rejects them as `kubernetes` Service endpoints)",
                    "give this host's address, or leave it empty to use the first global one",
                ))
            }
            Ok(_) => {}
        }
    }
}

/// Each port a number of its own. Which fields there are is the component table's to check
/// (`components::validate`).
fn ports(p: &Profile, errs: &mut Vec<FieldError>) {
    // `auto` is resolved by `gen` into ports that pass these checks.
    let Some(ports) = p.ports.fixed() else {
        return;
    };
    let mut seen: BTreeMap<u16, &str> = BTreeMap::new();
    for (field, port) in ports.all() {
        if port == 0 {
            errs.push(FieldError::new(
                format!("ports.{field}"),
                port,
                "port 0 is not allowed",
                "pick a port from 1 to 65535",
            ));
            continue;
        }
        if let Some(other) = seen.insert(port, field) {
            errs.push(FieldError::new(
                format!("ports.{field}"),
                port,
                format!("the same port as ports.{other}"),
                "give every port its own number (two environments side by side need disjoint ports too)",
            ));
        }
    }
}

fn pki(p: &Profile, errs: &mut Vec<FieldError>) {
    // Leaf certificates may be short-lived (minutes: tests of expiry and `certs renew`); a CA
    // lives at least an hour.
    for (field, v, min, least, example) in [
        (
            "pki.caValidity",
            &p.pki.ca_validity,
            3600,
            "one hour",
            "3650d or 8760h",
        ),
        (
            "pki.certValidity",
            &p.pki.cert_validity,
            60,
            "one minute",
            "365d, 8760h or 2m",
        ),
    ] {
        if !matches!(humantime::parse_duration(v), Ok(d) if d.as_secs() >= min) {
            errs.push(FieldError::new(
                field,
                v,
                format!("not a duration of at least {least}"),
                format!("write e.g. {example}"),
            ));
        }
    }
    if let Some(e) = p.pki.epoch.as_deref().filter(|e| !e.is_empty()) {
        match super::profile::parse_epoch(e) {
            None => errs.push(FieldError::new(
                "pki.epoch",
                quoted(e),
                "not a time",
                "write RFC 3339 (2026-01-01T00:00:00Z) or Unix seconds",
            )),
            Some(t) => errs.extend(super::plan::validity_errors(p, t, "pki.epoch")),
        }
    }
}

/// `hostsSync.schedule`: a calendar expression systemd accepts (never empty: a host that joins
/// later waits for it).
fn hosts_sync(p: &Profile, errs: &mut Vec<FieldError>) {
    let schedule = &p.hosts_sync.schedule;
    if let Err(why) = crate::systemd::calendar::check(schedule) {
        errs.push(FieldError::new(
            "hostsSync.schedule",
            quoted(schedule),
            format!("not a systemd calendar expression: {why}"),
            "write an OnCalendar= value such as *:*:0/10 (every 10 s, the default) or *:0/2 (every 2 minutes); systemd-analyze calendar EXPR checks one",
        ));
    }
}

/// `etcd.snapshot`: a calendar expression systemd accepts, a retention of at least one, absolute paths.
fn snapshot(p: &Profile, errs: &mut Vec<FieldError>) {
    let s = &p.etcd.snapshot;
    if !s.schedule.is_empty() {
        if let Err(why) = crate::systemd::calendar::check(&s.schedule) {
            errs.push(FieldError::new(
                "etcd.snapshot.schedule",
                quoted(&s.schedule),
                format!("not a systemd calendar expression: {why}"),
                "write an OnCalendar= value such as hourly, daily, *:0/15 or Mon..Fri 02:00 (systemd-analyze calendar EXPR checks one), or \"\" for no scheduled snapshots",
            ));
        }
    }
    etcd_user(p, errs);
    if s.retention == 0 {
        errs.push(FieldError::new(
            "etcd.snapshot.retention",
            0,
            "would delete every scheduled snapshot right after taking it",
            "keep at least 1; for no scheduled snapshots set etcd.snapshot.schedule to \"\"",
        ));
    }
    for (field, path) in [
        ("etcd.snapshot.dir", &s.dir),
        ("etcd.snapshot.etcdctl", &s.etcdctl),
        ("etcd.snapshot.etcdutl", &s.etcdutl),
    ] {
        if !path.as_os_str().is_empty() {
            path_field(field, path, errs);
        }
    }
}

/// `apiserver.podSecurity`: one of the Pod Security Standards, or empty.
fn pod_security(p: &Profile, errs: &mut Vec<FieldError>) {
    let level = &p.apiserver.pod_security;
    if !level.is_empty() && !super::profile::POD_SECURITY_LEVELS.contains(&level.as_str()) {
        errs.push(FieldError::new(
            "apiserver.podSecurity",
            quoted(level),
            "not a Pod Security Standard",
            format!(
                "use one of {} (or \"\" for Kubernetes' default, privileged)",
                super::profile::POD_SECURITY_LEVELS.join(", ")
            ),
        ));
    }
}

/// `etcd.user`: a name systemd's User= takes (its valid_user_group_name, without numeric ids), and
/// a manager that can switch users.
fn etcd_user(p: &Profile, errs: &mut Vec<FieldError>) {
    let user = &p.etcd.user;
    if user.is_empty() {
        return;
    }
    let ok = user.len() <= 31
        && user
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if !ok {
        errs.push(FieldError::new(
            "etcd.user",
            quoted(user),
            "not a user name systemd accepts",
            "use at most 31 letters, digits, '_' and '-', starting with a letter or '_', e.g. etcd",
        ));
    } else if p.rootless {
        errs.push(FieldError::new(
            "etcd.user",
            quoted(user),
            "a rootless environment's manager cannot run a service as another user",
            "set etcd.user to \"\" (etcd runs as you)",
        ));
    }
}

/// The parts of a component's settings whose form does not depend on the component.
fn component_settings(p: &Profile, errs: &mut Vec<FieldError>) {
    for (name, c) in &p.components {
        let flag_ok = |f: &str| {
            f.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && f.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        for (flag, value) in &c.extra_args {
            if !flag_ok(flag) {
                errs.push(FieldError::new(
                    format!("components.{name}.extraArgs"),
                    quoted(flag),
                    "flag names are written without dashes or '=' (letters, digits, '-', '_', '.')",
                    "write e.g. `v: \"4\"` for --v=4",
                ));
            }
            if value.as_deref().is_some_and(|v| v.contains('\0')) {
                errs.push(FieldError::new(
                    format!("components.{name}.extraArgs.{flag}"),
                    quoted(value.as_deref().unwrap_or_default()),
                    "a NUL byte cannot be part of a command line",
                    "remove it",
                ));
            }
        }
        for arg in c.binary_args.iter().filter(|a| a.contains('\0')) {
            errs.push(FieldError::new(
                format!("components.{name}.binaryArgs"),
                quoted(arg),
                "a NUL byte cannot be part of a command line",
                "remove it",
            ));
        }
        if has_control(&c.binary) || c.binary.contains(['"', '\'', '\\']) {
            errs.push(FieldError::new(
                format!("components.{name}.binary"),
                quoted(&c.binary),
                "control characters, quotes or backslashes in a binary name (systemd refuses them)",
                "give a binary name or an absolute path",
            ));
        }
        gates(
            &format!("components.{name}.featureGates"),
            &c.feature_gates,
            errs,
        );
        let env_ok = |k: &str| {
            k.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        };
        for (key, value) in &c.env {
            if !env_ok(key) {
                errs.push(FieldError::new(
                    format!("components.{name}.env"),
                    quoted(key),
                    "not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                    "use NAME: value",
                ));
            }
            if value.contains('\0') {
                errs.push(FieldError::new(
                    format!("components.{name}.env.{key}"),
                    "(hidden)",
                    "a NUL byte cannot be part of an environment value",
                    "remove it",
                ));
            }
        }
    }
}

/// Every addon image is one word (whitespace would split or break the manifest's line).
fn addon_images(p: &Profile, errs: &mut Vec<FieldError>) {
    for (field, image, example) in [
        (
            "addons.corednsImage",
            &p.addons.coredns_image,
            "registry.k8s.io/coredns/coredns:v1.14.2",
        ),
        (
            "addons.localPathImage",
            &p.addons.local_path_image,
            "docker.io/rancher/local-path-provisioner:v0.0.30",
        ),
        (
            "addons.localPathHelperImage",
            &p.addons.local_path_helper_image,
            "docker.io/library/busybox:1.37.0",
        ),
        (
            "addons.metricsServerImage",
            &p.addons.metrics_server_image,
            "registry.k8s.io/metrics-server/metrics-server:v0.9.0",
        ),
        (
            "addons.metallbControllerImage",
            &p.addons.metallb_controller_image,
            "quay.io/metallb/controller:v0.15.2",
        ),
        (
            "addons.metallbSpeakerImage",
            &p.addons.metallb_speaker_image,
            "quay.io/metallb/speaker:v0.15.2",
        ),
        (
            "addons.traefikImage",
            &p.addons.traefik_image,
            "docker.io/library/traefik:v3.6.12",
        ),
    ] {
        // An image reference is one word: whitespace would split or break the manifest's line.
        if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
            errs.push(FieldError::new(
                field,
                quoted(image),
                "not an image reference",
                format!("write e.g. {example}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn errors(sets: &[&str]) -> Vec<FieldError> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let (_, p) = load::layered("dev", &sets).unwrap();
        validate(&p)
    }

    #[test]
    fn a_plugin_enabled_and_disabled_is_refused() {
        let errs = errors(&[
            "components.kube-apiserver.extraArgs.disable-admission-plugins=ServiceAccount",
        ]);
        assert!(
            errs.iter()
                .any(|e| e.to_string().contains("disables ServiceAccount")),
            "{errs:?}"
        );
        let (_, p) = load::layered("envtest", &[]).unwrap();
        assert!(validate(&p).is_empty(), "{:?}", validate(&p));
    }

    #[test]
    fn coredns_forward_is_a_path_addresses_or_nothing() {
        for ok in [
            "",
            "/etc/resolv.conf",
            "192.0.2.53",
            "192.0.2.53 [2001:db8::1]:5353",
        ] {
            let set = format!("addons.corednsForward={ok}");
            assert_eq!(errors(&[&set]), vec![], "{ok:?}");
        }
        for bad in [
            "resolv.conf",
            "/etc/resolv.conf 192.0.2.53",
            "dns.example",
            "192.0.2.53:0",
        ] {
            let set = format!("addons.corednsForward={bad}");
            let errs = errors(&[&set]);
            assert_eq!(errs.len(), 1, "{bad:?}: {errs:?}");
            assert_eq!(errs[0].field, "addons.corednsForward");
        }
        let errs = errors(&["addons.corednsForward=\"/etc/resolv.conf\\n}\\nevil\""]);
        assert_eq!(
            errs.len(),
            1,
            "a newline would end the Corefile's block: {errs:?}"
        );
    }

    #[test]
    fn addon_images_are_one_word() {
        for field in [
            "addons.corednsImage",
            "addons.localPathImage",
            "addons.localPathHelperImage",
            "addons.metricsServerImage",
            "addons.metallbControllerImage",
            "addons.metallbSpeakerImage",
            "addons.traefikImage",
        ] {
            assert_eq!(errors(&[&format!("{field}=example.com/a/b:1")]), vec![]);
            for bad in ["", "a b", "a\nkind: Secret", "a\tb"] {
                let e = errors(&[&format!("{field}={bad}")]);
                assert_eq!(e.len(), 1, "{field}={bad:?}: {e:?}");
                assert_eq!(e[0].field, field);
            }
        }
        assert_eq!(errors(&["addons.storageProvisioner=host-path"]), vec![]);
        assert!(load::layered("dev", &["addons.storageProvisioner=nfs".to_string()]).is_err());
    }

    #[test]
    fn a_gateway_needs_the_load_balancer() {
        let errs = errors(&["addons.gateway=true"]);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "addons.gateway");
        assert_eq!(
            errors(&["addons.loadBalancer=true", "addons.gateway=true"]),
            vec![]
        );
    }

    #[test]
    fn instances_and_auto_ports() {
        for ok in ["auto", "", "ab12", "0123456789abcdef"] {
            assert_eq!(errors(&[&format!("instance={ok}")]), vec![], "{ok}");
        }
        for bad in ["Ab", "a-b", "a_b", "0123456789abcdef0", "a b"] {
            let e = errors(&[&format!("instance={bad}")]);
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert_eq!(e[0].field, "instance");
        }
        // `auto` is for gen to resolve; anything else where ports go is refused with the field.
        assert_eq!(errors(&["ports=auto"]), vec![]);
        let bad = load::layered("dev", &["ports=some".to_string()])
            .unwrap_err()
            .to_string();
        assert!(bad.contains("ports") && bad.contains("auto"), "{bad}");
    }

    #[test]
    fn leaf_certificates_may_last_minutes_cas_an_hour() {
        assert_eq!(errors(&["pki.certValidity=2m"]), vec![]);
        assert_eq!(errors(&["pki.certValidity=1m"]), vec![]);
        let e = errors(&["pki.certValidity=59s", "pki.caValidity=59m"]);
        let fields: Vec<(&str, &str)> = e
            .iter()
            .map(|e| (e.field.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            fields,
            vec![("pki.caValidity", "59m"), ("pki.certValidity", "59s")]
        );
        assert!(e[1].message.contains("one minute"), "{}", e[1].message);
    }

    #[test]
    fn built_in_profiles_are_valid() {
        for (name, _) in crate::spec::profile::BUILTIN {
            let (_, p) = load::layered(name, &[]).unwrap();
            assert_eq!(validate(&p), vec![], "{name}");
        }
    }

    #[test]
    fn every_wrong_field_is_reported_at_once() {
        let errs = errors(&[
            "name=Bad_Name",
            "binDir=relative/bin",
            "network.serviceCIDR=10.0.0.1/24",
            "network.podCIDR=not-a-cidr",
            "network.dnsDomain=-bad-",
            "network.bindAddress=localhost",
            "network.extraSANs=[ok.example, 'bad name']",
            "ports.scheduler=6443",
            "ports.kubelet=0",
            "pki.certValidity=30s",
            "pki.epoch=yesterday",
            "audit.policy=Verbose",
            "apiserver.authorizationMode=[]",
            "containerd.socket=run/containerd.sock",
            "components.kube-apiserver.extraArgs.--v=2",
            "components.etcd.env.BAD KEY=1",
            "etcd.snapshot.schedule=every hour",
            "hostsSync.schedule=''",
            "etcd.snapshot.retention=0",
            "etcd.snapshot.dir=snaps",
            "etcd.user=\"a b\"",
            "apiserver.podSecurity=strict",
        ]);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        for want in [
            "name",
            "binDir",
            "network.serviceCIDR",
            "network.podCIDR",
            "network.dnsDomain",
            "network.bindAddress",
            "network.extraSANs",
            "ports.scheduler",
            "ports.kubelet",
            "pki.certValidity",
            "pki.epoch",
            "audit.policy",
            "apiserver.authorizationMode",
            "containerd.socket",
            "components.kube-apiserver.extraArgs",
            "components.etcd.env",
            "etcd.snapshot.schedule",
            "hostsSync.schedule",
            "etcd.snapshot.retention",
            "etcd.snapshot.dir",
            "etcd.user",
            "apiserver.podSecurity",
        ] {
            assert!(fields.contains(&want), "{want} missing from {fields:?}");
        }
        assert_eq!(errs.len(), 22, "{errs:#?}");
        for e in &errs {
            assert!(!e.fix.is_empty() && !e.message.is_empty(), "{e:?}");
        }
        let host_bits = errs
            .iter()
            .find(|e| e.field == "network.serviceCIDR")
            .unwrap();
        assert_eq!(host_bits.value, "10.0.0.1/24");
        assert!(host_bits.fix.contains("10.0.0.0/24"), "{host_bits:?}");
    }

    #[test]
    fn a_rootless_etcd_cannot_have_a_user_of_its_own() {
        let errs = errors(&["rootless=true", "etcd.user=etcd"]);
        assert!(
            errs.iter()
                .any(|e| e.field == "etcd.user" && e.message.contains("rootless")),
            "{errs:#?}"
        );
        assert!(errors(&["etcd.user=etcd_1-x"]).is_empty());
    }

    #[test]
    fn image_paths_are_absolute_and_printable() {
        let errs = errors(&["images=[relative.tar, \"/a\\nb.tar\", /ok.tar]"]);
        let images: Vec<&FieldError> = errs.iter().filter(|e| e.field == "images").collect();
        assert_eq!(images.len(), 2, "{errs:#?}");
    }

    #[test]
    fn network_relations() {
        let errs = errors(&["network.podCIDR=10.0.0.0/16"]);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].message.contains("overlaps"), "{errs:?}");
        let errs = errors(&["network.dnsIP=10.1.0.10"]);
        assert_eq!(errs[0].field, "network.dnsIP");
        let errs = errors(&["network.dnsIP=10.0.0.0"]);
        assert_eq!(
            errs[0].field, "network.dnsIP",
            "the network address is no host"
        );
        let errs = errors(&["network.serviceCIDR=10.0.0.0/30"]);
        assert!(errs[0].message.contains("too small"), "{errs:?}");
        let errs = errors(&["network.serviceCIDR=10.0.0.0/8"]);
        assert!(errs[0].message.contains("too large"), "{errs:?}");
        // IPv6 service range with a DNS IP inside it is fine.
        let errs = errors(&[
            "network.serviceCIDR=fd00:10::/108",
            "network.podCIDR=fd00:20::/64",
            "network.dnsIP=fd00:10::a",
        ]);
        assert_eq!(errs, vec![]);
    }

    #[test]
    fn datastore_fields() {
        let ok = [
            "datastore.endpoints=[https://10.0.0.5:2379, \"https://[::1]:2379\", https://etcd-1.example:2379/]",
            "datastore.caFile=/etc/etcd/ca.crt",
            "datastore.prefix=/clusters/dev",
        ];
        assert_eq!(errors(&ok), vec![]);
        let fields = |sets: &[&str]| -> Vec<(String, String)> {
            errors(sets)
                .into_iter()
                .map(|e| (e.field, e.value))
                .collect()
        };
        assert_eq!(
            fields(&[
                "datastore.endpoints=[http://10.0.0.5:2379, https://10.0.0.5, https://a b:1, https://h:0]",
                "datastore.certFile=relative.crt",
                "datastore.prefix=registry",
            ]),
            vec![
                ("datastore.endpoints".into(), "\"http://10.0.0.5:2379\"".into()),
                ("datastore.endpoints".into(), "\"https://10.0.0.5\"".into()),
                ("datastore.endpoints".into(), "\"https://a b:1\"".into()),
                ("datastore.endpoints".into(), "\"https://h:0\"".into()),
                ("datastore.caFile".into(), "\"\"".into()),
                ("datastore.certFile".into(), "\"relative.crt\"".into()),
                ("datastore.certFile".into(), "\"relative.crt\"".into()),
                ("datastore.prefix".into(), "\"registry\"".into()),
            ]
        );
        // Files and a prefix mean nothing without an external etcd.
        assert_eq!(
            fields(&["datastore.keyFile=/k.key", "datastore.prefix=/p"]),
            vec![
                ("datastore.keyFile".into(), "\"/k.key\"".into()),
                ("datastore.prefix".into(), "\"/p\"".into()),
            ]
        );
    }

    #[test]
    fn kubeconfig_output() {
        assert_eq!(
            errors(&[
                "kubeconfig.write=/root/.kube/config",
                "kubeconfig.mode=\"0640\""
            ]),
            vec![]
        );
        let fields: Vec<String> =
            errors(&["kubeconfig.write=kube/config", "kubeconfig.mode=\"0999\""])
                .into_iter()
                .map(|e| e.field)
                .collect();
        assert_eq!(fields, ["kubeconfig.write", "kubeconfig.mode"]);
        use crate::spec::profile::parse_mode;
        assert_eq!(parse_mode("0600"), Some(0o600));
        assert_eq!(parse_mode("0o640"), Some(0o640));
        assert_eq!(parse_mode("644"), Some(0o644));
        for bad in ["", "8", "01777", "-1", "0x1", "77777"] {
            assert_eq!(parse_mode(bad), None, "{bad}");
        }
    }

    #[test]
    fn node_links() {
        assert_eq!(errors(&["node.link=198.18.4.0/30"]), vec![]);
        assert_eq!(errors(&["node.link=10.200.0.0/29"]), vec![]);
        for (value, why) in [
            ("198.18.4.1/30", "has host bits set"),
            ("198.18.4.0/31", "too small"),
            ("fd00::/126", "not an IPv4 network"),
            ("127.0.0.0/30", "loopback"),
            ("169.254.3.0/30", "link-local"),
            ("10.88.1.0/30", "overlaps network.podCIDR"),
            ("10.0.0.0/30", "overlaps network.serviceCIDR"),
            ("nonsense", "not a CIDR"),
        ] {
            let errs = errors(&[&format!("node.link={value}")]);
            assert_eq!(errs.len(), 1, "{value}: {errs:?}");
            assert_eq!(errs[0].field, "node.link");
            assert!(errs[0].message.contains(why), "{value}: {errs:?}");
        }
    }
}
