//! The state dirs of an environment across hosts (`gen --out DIR`: `DIR/HOST` each), checked
//! together before they go out to their hosts: each one intact against its manifest (`import::read`),
//! the values the hosts must share (the CAs, the service-account key, the encryption key and
//! config) the same wherever they are, and the private keys only a control-plane host may hold on
//! no other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::import;
use super::manifest::sha256_hex;
use super::tree::Tree;
use crate::error::Error;
use crate::spec::paths;
use crate::spec::profile::HostRole;

/// One host's state dir, as the check found it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckedHost {
    pub host: String,
    pub dir: PathBuf,
    pub roles: Vec<&'static str>,
    pub files: usize,
}

/// The files the hosts share: every CA's certificate and key (`pki::CERTS`), the service-account
/// pair and the encryption key and config. Each must be the same on every host that has it.
pub fn shared_files() -> Vec<String> {
    let mut files: Vec<String> = crate::pki::CERTS
        .iter()
        .filter(|c| c.usage == crate::pki::Usage::Ca)
        .flat_map(|c| [paths::cert(c.name), paths::key(c.name)])
        .collect();
    files.extend(
        [
            paths::SA_KEY,
            paths::SA_PUB,
            paths::ENCRYPTION_KEY,
            paths::ENCRYPTION_CONFIG,
        ]
        .map(String::from),
    );
    files
}

/// The private keys only a control-plane host holds: the CAs', the service account's, the
/// encryption key.
fn control_plane_only(rel: &str) -> bool {
    let ca_key = crate::pki::CERTS
        .iter()
        .any(|c| c.usage == crate::pki::Usage::Ca && paths::key(c.name) == rel);
    ca_key || rel == paths::SA_KEY || rel == paths::ENCRYPTION_KEY
}

/// One host's files: a control-plane-only key on a control-plane host alone, and each shared file
/// the same as on the first host that has it (`seen`: path -> (sha256, that host)).
fn check_files(
    sub: &Path,
    host: &str,
    control_plane: bool,
    tree: &Tree,
    shared: &[String],
    seen: &mut BTreeMap<String, (String, String)>,
) -> Result<(), Error> {
    for (rel, artifact) in tree {
        if !control_plane && control_plane_only(rel) {
            return Err(refuse(
                sub,
                format!(
                    "{rel} is here, on host {host:?}, which is no control-plane host: its key belongs on those only"
                ),
            ));
        }
        if !shared.contains(rel) {
            continue;
        }
        let sum = sha256_hex(&artifact.bytes);
        match seen.get(rel) {
            None => {
                seen.insert(rel.clone(), (sum, host.to_string()));
            }
            Some((first, first_host)) if *first != sum => {
                return Err(refuse(
                    sub,
                    format!(
                        "{rel} differs from host {first_host:?}'s (sha256 {sum} against {first}): the hosts must share it"
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Hosts with their addresses, for messages: `cp-1 at 192.168.60.21, ...`.
fn listed(hosts: &[(String, String)]) -> String {
    let each: Vec<String> = hosts.iter().map(|(n, a)| format!("{n} at {a}")).collect();
    each.join(", ")
}

fn refuse(dir: &Path, problem: String) -> Error {
    Error::state(
        dir,
        problem,
        "render every host's state dir again from the profile with `kubeunit gen --out DIR`, and give each host its own unchanged",
    )
}

/// The resolved profile a host dir records (`tree`: the dir as `import::read` read it).
pub fn recorded_profile(dir: &Path, tree: &Tree) -> Result<crate::spec::profile::Profile, Error> {
    let text = tree
        .get(paths::PROFILE)
        .map(|a| String::from_utf8_lossy(&a.bytes).into_owned())
        .unwrap_or_default();
    Ok(crate::spec::load::resolved(&dir.join(paths::PROFILE), &text)?.1)
}

/// Check the host state dirs in `dir` (each subdirectory one; `gen --out DIR` wrote them).
pub fn check(dir: &Path) -> Result<Vec<CheckedHost>, Error> {
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(Error::io(dir, "list"))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    if subdirs.is_empty() {
        return Err(Error::state(
            dir,
            "holds no host state dir",
            "pass the directory `kubeunit gen --out DIR` wrote (DIR/HOST for each host)",
        ));
    }
    let shared = shared_files();
    // rel -> (sha256, the first host that has it)
    let mut seen: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut hosts = Vec::new();
    // Each host's name and address, as the first dir lists them.
    let mut names: Option<Vec<(String, String)>> = None;
    for sub in &subdirs {
        let (tree, _) = import::read(sub)?;
        let profile = recorded_profile(sub, &tree)?;
        let Some(host) = profile.hosts.iter().find(|h| h.name == profile.host) else {
            return Err(refuse(
                sub,
                "its profile.yaml is no host's of an environment across hosts".into(),
            ));
        };
        let dir_name = sub.file_name().map(|n| n.to_string_lossy().into_owned());
        if dir_name.as_deref() != Some(host.name.as_str()) {
            return Err(refuse(
                sub,
                format!("holds host {:?}'s state dir", host.name),
            ));
        }
        // Each host with where it is (a DNS name's address as this dir's gen resolved it): the
        // dirs of two runs, between which a name came to resolve elsewhere, do not go together. A
        // host that joins later lists itself besides the hosts given their certificates, which
        // every dir lists alike (`spec::join`).
        let these: Vec<(String, String)> = profile
            .hosts
            .iter()
            .filter(|h| !crate::spec::join::joins(h))
            .map(|h| match h.dns_name() {
                None => (h.name.clone(), h.address.clone()),
                Some(name) => (h.name.clone(), format!("{name} ({})", h.resolved_address)),
            })
            .collect();
        match &names {
            None => names = Some(these),
            Some(n) if *n != these => {
                return Err(refuse(
                    sub,
                    format!(
                        "its profile lists hosts {}; another dir's {}",
                        listed(&these),
                        listed(n)
                    ),
                ))
            }
            Some(_) => {}
        }
        let control_plane = host.roles.contains(&HostRole::ControlPlane);
        check_files(sub, &host.name, control_plane, &tree, &shared, &mut seen)?;
        hosts.push(CheckedHost {
            host: host.name.clone(),
            dir: sub.clone(),
            roles: host.roles.iter().map(|r| r.as_str()).collect(),
            files: tree.len(),
        });
    }
    if let Some(names) = names {
        let found: Vec<&str> = hosts.iter().map(|h| h.host.as_str()).collect();
        let missing: Vec<&String> = names
            .iter()
            .map(|(n, _)| n)
            .filter(|n| !found.contains(&n.as_str()))
            .collect();
        if !missing.is_empty() {
            return Err(Error::state(
                dir,
                format!("no state dir of host(s) {missing:?}"),
                "pass the whole directory `kubeunit gen --out DIR` wrote",
            ));
        }
    }
    Ok(hosts)
}
