//! `registries:` (k3s's `registries.yaml`) and the pull-through caches it makes: for each registry
//! name a pull of the node is not served by its local registry (`docker.io`, `registry.k8s.io`, and
//! every name `registries.mirrors` has), one cache of one upstream, which the registry-cache
//! component runs an instance of. The upstream is the name's first mirror endpoint, else its own
//! registry; `registries.configs` gives the upstream's host credentials and a CA. Offline there is
//! none (`online`).

use std::path::{Path, PathBuf};

use super::names::is_subdomain;
use super::profile::{Profile, Registries, RegistryAuth};
use crate::error::FieldError;

/// The names that have a cache without `registries.mirrors` naming them, with their upstream:
/// the registries of the images a cluster runs by default. Adding one here is all it takes.
pub const DEFAULT_UPSTREAMS: &[(&str, &str)] = &[
    ("docker.io", "https://registry-1.docker.io"),
    ("registry.k8s.io", "https://registry.k8s.io"),
];

/// The names containerd's host config sends to the local registry alone, which no mirror may
/// take: kubeunit's own images, and `_default` (every name without a directory of its own).
pub const LOCAL_NAMES: &[&str] = &["kubeunit.local", "_default"];

/// One registry name's pull-through cache, as the plan resolves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    /// The registry name images are pulled by (`docker.io`): the cache instance's name.
    pub name: String,
    /// What the cache proxies (`https://registry-1.docker.io`).
    pub remote: String,
    /// The remote's `host[:port]`, its key in `registries.configs`.
    pub host: String,
    /// Credentials for the remote, if `registries.configs` has them.
    pub auth: Option<RegistryAuth>,
    /// A CA file the cache trusts for the remote, besides the system's.
    pub ca_file: Option<PathBuf>,
}

/// Whether the environment reaches beyond this machine for images: not when `offline` (the
/// profile's, or `KUBEUNIT_OFFLINE=1` at `gen`). The one place the caches ask.
pub fn online(p: &Profile) -> bool {
    !p.offline
}

/// The caches of a validated profile, in port order: the defaults first, then the mirrors' other
/// names in order. None offline, or without the node's local registry (the host config that
/// sends pulls to them is its).
pub fn upstreams(p: &Profile) -> Vec<Upstream> {
    if !online(p) || !p.component("registry").enabled {
        return vec![];
    }
    let mirrored = p
        .registries
        .mirrors
        .keys()
        .filter(|n| !DEFAULT_UPSTREAMS.iter().any(|(d, _)| d == n));
    DEFAULT_UPSTREAMS
        .iter()
        .map(|(n, _)| n.to_string())
        .chain(mirrored.cloned())
        .map(|name| {
            let remote = remote_of(p, &name);
            let host = authority(&remote).unwrap_or_default().to_string();
            let config = p.registries.configs.get(&host);
            Upstream {
                auth: config.and_then(|c| c.auth.clone()),
                ca_file: config
                    .and_then(|c| c.tls.as_ref())
                    .map(|t| t.ca_file.clone())
                    .filter(|f| !f.as_os_str().is_empty()),
                name,
                remote,
                host,
            }
        })
        .collect()
}

/// The upstream of `name`: its first mirror endpoint (without a trailing `/`), else its default.
fn remote_of(p: &Profile, name: &str) -> String {
    let endpoint = p
        .registries
        .mirrors
        .get(name)
        .and_then(|m| m.endpoint.first());
    match endpoint {
        Some(e) => e.trim_end_matches('/').to_string(),
        None => DEFAULT_UPSTREAMS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or_else(|| format!("https://{name}"), |(_, u)| u.to_string()),
    }
}

/// The `host[:port]` of an `http(s)://host[:port][/]` URL, or `None` for anything else.
fn authority(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    is_host_port(rest).then_some(rest)
}

/// `host` or `host:port`: a DNS name or IPv4 address, a port of 1-65535.
fn is_host_port(s: &str) -> bool {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    is_subdomain(host) && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0))
}

/// Every wrong field of `registries`.
pub fn errors(p: &Profile) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (name, mirror) in &p.registries.mirrors {
        let field = format!("registries.mirrors.{name}");
        if LOCAL_NAMES.contains(&name.as_str()) || !is_host_port(name) {
            errs.push(FieldError::new(
                &field,
                name,
                "not a registry name a cache can take (kubeunit.local and _default are the local registry's)",
                "name a registry as images name it, e.g. quay.io or mirror.example:5000",
            ));
        }
        for (i, e) in mirror.endpoint.iter().enumerate() {
            if authority(e).is_none() {
                errs.push(FieldError::new(
                    format!("{field}.endpoint[{i}]"),
                    e,
                    "not an http:// or https:// URL of a registry's host (no path)",
                    "write e.g. https://mirror.example or https://mirror.example:5000",
                ));
            }
            // Credentials in cleartext: anyone on the path reads them.
            let host = e.strip_prefix("http://").and_then(|_| authority(e));
            let config = host.and_then(|h| p.registries.configs.get(h));
            if let Some((host, config)) = host.zip(config) {
                if config.auth.is_some() && !config.allow_cleartext {
                    errs.push(FieldError::new(
                        format!("{field}.endpoint[{i}]"),
                        e,
                        format!("plain http:// to an upstream with credentials (registries.configs.{host}.auth): they would cross the network in cleartext"),
                        format!("use https://{host}, or set registries.configs.{host}.allowCleartext: true for a network you trust"),
                    ));
                }
            }
        }
    }
    for (host, config) in &p.registries.configs {
        let field = format!("registries.configs.{host}");
        if !is_host_port(host) {
            errs.push(FieldError::new(
                &field,
                host,
                "not a host or host:port",
                "key each config by its upstream's host, e.g. registry-1.docker.io or mirror.example:5000",
            ));
        }
        if let Some(auth) = &config.auth {
            errs.extend(auth_errors(&format!("{field}.auth"), auth));
        }
        if let Some(tls) = &config.tls {
            if let Some(why) = ca_problem(&tls.ca_file) {
                errs.push(FieldError::new(
                    format!("{field}.tls.caFile"),
                    tls.ca_file.display(),
                    why,
                    "give the absolute path of a readable PEM file of CA certificates",
                ));
            }
        }
    }
    errs
}

fn auth_errors(field: &str, auth: &RegistryAuth) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if auth.username.is_empty() || auth.username.chars().any(char::is_control) {
        errs.push(FieldError::new(
            format!("{field}.username"),
            format!("{:?}", auth.username),
            "empty, or holds control characters",
            "give the upstream's user name",
        ));
    }
    let file = &auth.password_file;
    let (inline, from_file) = (!auth.password.is_empty(), !file.as_os_str().is_empty());
    if inline == from_file {
        // The password itself is never shown.
        errs.push(FieldError::new(
            format!("{field}.password"),
            if inline {
                "(set, with passwordFile)"
            } else {
                "(unset)"
            },
            "needs exactly one of password and passwordFile",
            "give passwordFile, the path of a file holding the password (or password)",
        ));
    } else if from_file {
        if let Some(why) = password_file_problem(file) {
            errs.push(FieldError::new(
                format!("{field}.passwordFile"),
                file.display(),
                why,
                "give the absolute path of a readable file holding the password",
            ));
        }
    }
    errs
}

/// `registries` as `profile.yaml` records it: no password. One given inline is named by the file of
/// the first cache whose upstream it is for (`password_file(name)`: `gen` writes it there, 0600);
/// one that no cache uses (offline, or for no upstream) goes with its `auth`.
pub fn recorded(
    registries: &Registries,
    upstreams: &[Upstream],
    password_file: impl Fn(&str) -> PathBuf,
) -> Registries {
    let mut out = registries.clone();
    for (host, config) in &mut out.configs {
        let Some(auth) = config.auth.as_mut().filter(|a| !a.password.is_empty()) else {
            continue;
        };
        match upstreams.iter().find(|u| &u.host == host) {
            Some(u) => {
                auth.password.clear();
                auth.password_file = password_file(&u.name);
            }
            None => config.auth = None,
        }
    }
    out
}

/// The password of `auth`: inline, or its file's first line.
pub fn password(auth: &RegistryAuth) -> std::io::Result<String> {
    if !auth.password.is_empty() {
        return Ok(auth.password.clone());
    }
    let text = std::fs::read_to_string(&auth.password_file)?;
    Ok(text.lines().next().unwrap_or_default().to_string())
}

fn password_file_problem(file: &Path) -> Option<String> {
    if !file.is_absolute() {
        return Some("not an absolute path".into());
    }
    match std::fs::read_to_string(file) {
        Ok(t) if t.lines().next().is_none_or(str::is_empty) => Some("empty".into()),
        Ok(_) => None,
        Err(e) => Some(format!("cannot read it: {e}")),
    }
}

/// A CA certificate file's problem (absolute, readable, a PEM certificate): None when it has none.
pub fn ca_problem(file: &Path) -> Option<String> {
    if !file.is_absolute() {
        return Some("not an absolute path".into());
    }
    match std::fs::read_to_string(file) {
        Ok(t) if t.contains("-----BEGIN CERTIFICATE-----") => None,
        Ok(_) => Some("no PEM CERTIFICATE block in it".into()),
        Err(e) => Some(format!("cannot read it: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(sets: &[&str]) -> Profile {
        crate::spec::plan::Plan::for_tests("dev", sets).profile
    }

    fn mirror(p: &mut Profile, name: &str, endpoints: &[&str]) {
        p.registries.mirrors.insert(
            name.into(),
            crate::spec::profile::Mirror {
                endpoint: endpoints.iter().map(|e| e.to_string()).collect(),
            },
        );
    }

    #[test]
    fn the_defaults_then_the_mirrors_each_with_its_first_endpoint() {
        let mut p = profile(&[]);
        mirror(
            &mut p,
            "quay.io",
            &["https://mirror.example/", "https://other.example"],
        );
        mirror(&mut p, "docker.io", &["http://hub.example:5000"]);
        mirror(&mut p, "ghcr.io", &[]);
        let got: Vec<(String, String)> = upstreams(&p)
            .into_iter()
            .map(|u| (u.name, u.remote))
            .collect();
        let want = [
            ("docker.io", "http://hub.example:5000"),
            ("registry.k8s.io", "https://registry.k8s.io"),
            ("ghcr.io", "https://ghcr.io"),
            ("quay.io", "https://mirror.example"),
        ];
        assert_eq!(
            got,
            want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec()
        );
    }

    #[test]
    fn a_mirror_named_as_the_local_registry_or_not_a_url_is_refused() {
        let mut p = profile(&[]);
        mirror(&mut p, "kubeunit.local", &[]);
        mirror(&mut p, "quay.io", &["https://mirror.example/v2"]);
        let fields: Vec<String> = errors(&p).into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "registries.mirrors.kubeunit.local",
                "registries.mirrors.quay.io.endpoint[0]"
            ]
        );
    }

    #[test]
    fn offline_or_without_the_local_registry_there_are_none() {
        assert!(upstreams(&profile(&["offline=true"])).is_empty());
        assert!(upstreams(&profile(&["components.registry.enabled=false"])).is_empty());
        assert_eq!(upstreams(&profile(&[])).len(), DEFAULT_UPSTREAMS.len());
    }

    #[test]
    fn credentials_over_plain_http_are_refused_unless_allowed() {
        let mut p = profile(&[]);
        mirror(&mut p, "docker.io", &["http://hub.example:5000"]);
        mirror(&mut p, "quay.io", &["https://quay.example"]);
        let auth = crate::spec::profile::RegistryAuth {
            username: "u".into(),
            password: "secret".into(),
            ..Default::default()
        };
        for host in ["hub.example:5000", "quay.example"] {
            p.registries.configs.insert(
                host.into(),
                crate::spec::profile::RegistryConfig {
                    auth: Some(auth.clone()),
                    ..Default::default()
                },
            );
        }
        let errs = errors(&p);
        assert_eq!(errs.len(), 1, "{errs:?}");
        let e = format!("{:?}", errs[0]);
        assert!(
            e.contains("registries.mirrors.docker.io.endpoint[0]")
                && e.contains("registries.configs.hub.example:5000.allowCleartext"),
            "{e}"
        );
        p.registries
            .configs
            .get_mut("hub.example:5000")
            .unwrap()
            .allow_cleartext = true;
        assert!(errors(&p).is_empty(), "{:?}", errors(&p));
    }

    #[test]
    fn authority_takes_a_host_and_port_only() {
        assert_eq!(authority("https://a.example:5000/"), Some("a.example:5000"));
        assert_eq!(authority("https://a.example/v2"), None);
        assert_eq!(authority("ftp://a.example"), None);
        assert_eq!(authority("https://a.example:0"), None);
    }
}
