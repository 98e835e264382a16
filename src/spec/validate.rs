//! Checks of a typed profile that its types cannot express. Every check runs and every wrong field is
//! reported (kubeadm's field.ErrorList), each with its value and the fix. Checks about components
//! (which exist, which need which) live with the component table: `components::validate`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;

use super::profile::{Profile, AUDIT_LEVELS};
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
    errs
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
}

fn paths(p: &Profile, errs: &mut Vec<FieldError>) {
    for image in &p.images {
        if !image.is_absolute() {
            errs.push(FieldError::new(
                "images",
                image.display(),
                "an image archive must be given by its absolute path",
                "write the absolute path of a docker-archive or OCI tar file",
            ));
        }
    }
    if !p.bin_dir.is_absolute() {
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
        }
    }
    for (field, path, may_be_empty) in [
        ("containerd.socket", &p.containerd.socket, true),
        ("containerd.cniBinDir", &p.containerd.cni_bin_dir, false),
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
        }
    }
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

fn network(p: &Profile, errs: &mut Vec<FieldError>) {
    let n = &p.network;
    let service = cidr(
        "network.serviceCIDR",
        &n.service_cidr,
        "10.0.0.0/24 or fd00:10::/108",
        errs,
    );
    if let Some(service) = service {
        let host_bits = u32::from(service.max_prefix_len() - service.prefix_len());
        if host_bits < 4 {
            errs.push(FieldError::new(
                "network.serviceCIDR",
                &n.service_cidr,
                "too small for the kubernetes and DNS service addresses",
                "use a prefix of /28 or shorter",
            ));
        }
        if host_bits > 20 {
            errs.push(FieldError::new(
                "network.serviceCIDR",
                &n.service_cidr,
                "too large: kube-apiserver accepts at most 20 host bits",
                "use a smaller range, e.g. /12 for IPv4 or /108 for IPv6",
            ));
        }
    }
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
    if !n.dns_ip.is_empty() {
        match n.dns_ip.parse::<IpAddr>() {
            Err(_) => errs.push(FieldError::new(
                "network.dnsIP",
                &n.dns_ip,
                "not an IP address",
                "write an address inside network.serviceCIDR, or leave it empty",
            )),
            Ok(ip) => {
                if let Some(service) = service {
                    if !service.contains(&ip) || ip == service.network() {
                        errs.push(FieldError::new(
                            "network.dnsIP",
                            ip,
                            format!("not a usable address of network.serviceCIDR {service}"),
                            "pick an address inside the service CIDR (the default is its 10th address)",
                        ));
                    }
                }
            }
        }
    }
    if !is_dns_name(&n.dns_domain) {
        errs.push(FieldError::new(
            "network.dnsDomain",
            &n.dns_domain,
            "not a DNS domain",
            "write a domain such as cluster.local",
        ));
    }
    for (field, v, may_be_empty) in [
        ("network.bindAddress", &n.bind_address, false),
        ("network.advertiseAddress", &n.advertise_address, true),
    ] {
        if !(may_be_empty && v.is_empty()) && v.parse::<IpAddr>().is_err() {
            errs.push(FieldError::new(
                field,
                v,
                "not an IP address",
                "write an address such as 127.0.0.1",
            ));
        }
    }
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

fn ports(p: &Profile, errs: &mut Vec<FieldError>) {
    let mut seen: BTreeMap<u16, &str> = BTreeMap::new();
    for (field, port) in p.ports.all() {
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
    for (field, v) in [
        ("pki.caValidity", &p.pki.ca_validity),
        ("pki.certValidity", &p.pki.cert_validity),
    ] {
        if !matches!(humantime::parse_duration(v), Ok(d) if d.as_secs() >= 3600) {
            errs.push(FieldError::new(
                field,
                v,
                "not a duration of at least one hour",
                "write e.g. 3650d or 8760h",
            ));
        }
    }
    if let Some(e) = &p.pki.epoch {
        if !e.is_empty() && super::profile::parse_epoch(e).is_none() {
            errs.push(FieldError::new(
                "pki.epoch",
                e,
                "not a time",
                "write RFC 3339 (2026-01-01T00:00:00Z) or Unix seconds",
            ));
        }
    }
}

/// The parts of a component's settings whose form does not depend on the component.
fn component_settings(p: &Profile, errs: &mut Vec<FieldError>) {
    for (name, c) in &p.components {
        for flag in c.extra_args.keys() {
            if flag.starts_with('-') || flag.is_empty() || flag.contains('=') {
                errs.push(FieldError::new(
                    format!("components.{name}.extraArgs"),
                    flag,
                    "flag names are written without dashes or '='",
                    "write e.g. `v: \"4\"` for --v=4",
                ));
            }
        }
        for key in c.env.keys() {
            if key.is_empty() || key.contains('=') || key.bytes().any(|b| b.is_ascii_whitespace()) {
                errs.push(FieldError::new(
                    format!("components.{name}.env"),
                    key,
                    "not an environment variable name",
                    "use NAME: value",
                ));
            }
        }
    }
}

pub fn is_dns_name(s: &str) -> bool {
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
            "pki.certValidity=5m",
            "pki.epoch=yesterday",
            "audit.policy=Verbose",
            "apiserver.authorizationMode=[]",
            "containerd.socket=run/containerd.sock",
            "components.kube-apiserver.extraArgs.--v=2",
            "components.etcd.env.BAD KEY=1",
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
        ] {
            assert!(fields.contains(&want), "{want} missing from {fields:?}");
        }
        assert_eq!(errs.len(), 16, "{errs:#?}");
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
}
