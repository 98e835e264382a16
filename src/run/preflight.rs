//! Checks before anything starts, as a list run in order: the state dir is intact (edited unit files
//! and addons are allowed and reported), binaries are there and report the pinned versions, ports
//! are free. Components already running are skipped (their ports are theirs).

use std::collections::BTreeSet;
use std::path::Path;

use super::certs::{self, CertExpiry};
use super::env::Env;
use super::probe;
use crate::artifacts::Options;
use crate::components::{Component, Namespace};
use crate::error::Error;
use crate::pipeline;
use crate::pki::Entropy;
use crate::spec::paths;
use crate::state::DiffKind;
use crate::unit::ExecFlags;

/// Names of the instances already running (`Instance::name`).
pub type Running<'a> = BTreeSet<&'a str>;

/// A check: fails with the fix, or adds notes for the user.
type Check = fn(&Env, &Running, &mut Vec<String>) -> Result<(), Error>;

/// The checks of `before_stopping`: all but ports_free, which `preflight` runs last.
const CHECKS_BUT_PORTS: &[Check] = &[
    state_dir_intact,
    certificates_valid,
    binaries,
    host,
    versions,
];

/// Run every check; the notes say what kubeunit will use that is not its own.
pub fn preflight(env: &Env, running: &Running) -> Result<Vec<String>, Error> {
    let notes = before_stopping(env, running)?;
    ports_released(env, running)?;
    Ok(notes)
}

/// Every check but the free ports: what a restart runs before it stops anything (so that a refusal
/// stops nothing, and its checks take none of the time the component does not answer); the ports
/// are the stopping components' until they stopped (`ports_released` then).
pub fn before_stopping(env: &Env, running: &Running) -> Result<Vec<String>, Error> {
    let mut notes = Vec::new();
    for check in CHECKS_BUT_PORTS {
        check(env, running, &mut notes)?;
    }
    Ok(notes)
}

/// The free-ports check alone: the last of `preflight`, and a restart's once what it stopped is gone.
pub fn ports_released(env: &Env, running: &Running) -> Result<(), Error> {
    ports_free(env, running, &mut Vec::new())
}

fn state_dir_intact(env: &Env, _: &Running, notes: &mut Vec<String>) -> Result<(), Error> {
    let plan = &env.plan;
    let opts = Options {
        entropy: Entropy::Os,
        force: false,
    };
    let mut problems = Vec::new();
    for d in pipeline::check(plan, &opts)? {
        match d.kind {
            _ if !d.is_users_edit() => problems.push(format!("{} {}", d.kind.as_str(), d.path)),
            DiffKind::Unknown if paths::is_in(&d.path, &[paths::ADDONS]) => {
                notes.push(format!("applying your {} too", d.path))
            }
            DiffKind::Unknown => notes.push(format!("{} is not kubeunit's; left alone", d.path)),
            _ => notes.push(format!("using your edited {}", d.path)),
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::state(
        &plan.state_dir,
        format!("does not match its manifest: {}", problems.join(", ")),
        format!(
            "run `kubeunit gen --state-dir {}` to repair it (keys and CAs are kept); `kubeunit gen --check` lists the differences",
            plan.state_dir.display()
        ),
    ))
}

/// Every certificate is valid now: components refuse expired ones (and those not valid yet) with
/// TLS errors in their journals, long after `start` began.
fn certificates_valid(env: &Env, _: &Running, _: &mut Vec<String>) -> Result<(), Error> {
    let now = time::OffsetDateTime::now_utc();
    let certs = certs::expiration(&env.plan, &certs::Users::new(), now)?;
    let expired: Vec<&CertExpiry> = certs.iter().filter(|c| c.expired).collect();
    let early: Vec<&CertExpiry> = certs.iter().filter(|c| c.not_yet_valid).collect();
    let dir = env.plan.state_dir.display();
    if !expired.is_empty() {
        let names: Vec<String> = expired
            .iter()
            .map(|c| format!("{} ({})", c.name, c.not_after))
            .collect();
        let fix = if expired.iter().any(|c| c.is_ca) {
            format!("a CA is not renewed: `kubeunit gen --force --state-dir {dir}` replaces the whole PKI")
        } else {
            format!("renew them: kubeunit certs renew all --state-dir {dir}")
        };
        return Err(Error::Preflight {
            message: format!("certificates expired: {}", names.join(", ")),
            fix,
        });
    }
    if !early.is_empty() {
        let names: Vec<String> = early
            .iter()
            .map(|c| format!("{} ({})", c.name, c.not_before))
            .collect();
        return Err(Error::Preflight {
            message: format!("certificates not valid yet: {}", names.join(", ")),
            fix: format!(
                "wait until then, or issue them from now: kubeunit gen --profile {dir}/profile.yaml --state-dir {dir} --set pki.epoch=$(date +%s)"
            ),
        });
    }
    Ok(())
}

fn binaries(env: &Env, running: &Running, _: &mut Vec<String>) -> Result<(), Error> {
    for (i, unit) in &env.units {
        if running.contains(i.name.as_str()) {
            continue;
        }
        let c = i.component;
        let Some((path, _, _)) = unit.exec_start() else {
            return Err(Error::Artifact {
                path: unit.path.clone(),
                message: "no ExecStart=".into(),
                fix: "regenerate it with `kubeunit gen`".into(),
            });
        };
        if let Err(why) = crate::spec::host::executable(Path::new(path)) {
            return Err(Error::Preflight {
                message: format!("{}: binary {path}: {why}", i.name),
                fix: if crate::fetch::cache::in_a_set(Path::new(path)) {
                    "download the release binaries first: kubeunit fetch (with the --profile and --set gen had)".to_string()
                } else {
                    format!(
                        "install {} there, or regenerate with the right directory: kubeunit gen --bin-dir DIR (or --set components.{}.binary=PATH)",
                        c.binary, c.name
                    )
                },
            });
        }
    }
    Ok(())
}

/// What the components need of the host (the component table's `host_checks`).
fn host(env: &Env, running: &Running, _: &mut Vec<String>) -> Result<(), Error> {
    let problems: Vec<(String, String)> = env
        .units
        .iter()
        .filter(|(i, _)| !running.contains(i.name.as_str()))
        .flat_map(|(i, _)| {
            // Each with its node's plan: its link, its namespace.
            i.component
                .host_checks
                .iter()
                .filter_map(|check| check(&i.plan).err())
                .map(|(what, fix)| (format!("{}: {what}", i.name), fix))
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::Preflight {
        message: format!(
            "this host lacks what the environment needs:\n  - {}",
            problems
                .iter()
                .map(|(w, _)| w.as_str())
                .collect::<Vec<_>>()
                .join("\n  - ")
        ),
        fix: problems
            .iter()
            .map(|(_, f)| f.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    })
}

fn ports_free(env: &Env, running: &Running, _: &mut Vec<String>) -> Result<(), Error> {
    let plan = &env.plan;
    // (port, its ports.* field, component); the node's namespace is new and its own.
    let wanted: Vec<(u16, &str, &str)> = env
        .units
        .iter()
        .filter(|(i, _)| !running.contains(i.name.as_str()))
        .flat_map(|(i, _)| {
            // Each instance's own plan: a cache's port is its own.
            i.component
                .listeners(&i.plan)
                .into_iter()
                .filter(|(p, _)| p.namespace == Namespace::Host)
                .map(move |(p, port)| (port, p.field, i.name.as_str()))
        })
        .collect();
    let ports: Vec<u16> = wanted.iter().map(|(p, _, _)| *p).collect();
    let Some(busy) = probe::listeners(&ports).into_iter().next() else {
        return Ok(());
    };
    let (_, field, component) = wanted
        .iter()
        .find(|(p, _, _)| *p == busy.port)
        .copied()
        .unwrap_or((busy.port, "?", "?"));
    Err(Error::Preflight {
        message: format!(
            "port {} (ports.{field}, for {component}) is already in use: {} listens on {}",
            busy.port, busy.process, busy.address
        ),
        fix: format!(
            "stop that process, or give this environment other ports: kubeunit gen --state-dir {} --set ports.{field}=N",
            plan.state_dir.display()
        ),
    })
}

/// What the binaries' `--version` printed, kept in the data dir: each call is a process start of a
/// large binary (up to 0.3 s together, on start's critical path). An entry counts only for the same
/// file: device, inode, size, mtime and ctime (which any write, rename or chmod changes and no
/// user can set back).
const VERSION_CACHE: &str = "binary-versions.json";

#[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct VersionCache(std::collections::BTreeMap<String, (String, String)>);

impl VersionCache {
    /// The cache, or an empty one when it is missing, too large or not ours.
    fn read(path: &Path) -> VersionCache {
        let small = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() < 1 << 20);
        small
            .then(|| std::fs::read(path).ok())
            .flatten()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn get(&self, key: &str, identity: &str) -> Option<&str> {
        self.0
            .get(key)
            .filter(|(id, _)| id == identity)
            .map(|(_, out)| out.as_str())
    }

    fn insert(&mut self, key: &str, identity: &str, out: &str) {
        self.0.insert(key.into(), (identity.into(), out.into()));
    }

    /// Best effort (temp file, rename): without it the next start asks the binaries again. Only
    /// into a data dir that exists (the first start creates it).
    fn write(&self, path: &Path) {
        let Some(dir) = path.parent().filter(|d| d.is_dir()) else {
            return;
        };
        let Ok(json) = serde_json::to_vec(self) else {
            return;
        };
        if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) {
            use std::io::Write;
            if tmp.write_all(&json).is_ok() {
                let _ = tmp.persist(path);
            }
        }
    }
}

/// A file's identity for the version cache (`None`: not a file we can stat).
fn file_identity(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!(
        "{}:{}:{}:{}.{}:{}.{}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// `expected` (the profile's version), when the binary's Go build info says it is a build of
/// `module` at that release: what `--version` would print, without starting the binary.
fn built_as(path: &Path, module: &str, expected: &str) -> Option<String> {
    let release = super::versions::build_release(path, module)?;
    is_version(&release, expected).then(|| format!("{release} (Go build info: module {module})"))
}

/// `word` names version `expected` (without its `v`): the same, or a patch or pre-release of it
/// (`1.36` matches `v1.36.3`).
pub(crate) fn is_version(word: &str, expected: &str) -> bool {
    let w = word.trim_start_matches('v');
    w == expected
        || w.starts_with(&format!("{expected}."))
        || w.starts_with(&format!("{expected}-"))
}

/// Binaries must report the versions the profile pins (`versions.kubernetes`, `versions.etcd`).
/// A binary built from its component's Go module at that release says so in its build info; the
/// others' `--version` calls run side by side (or come from the cache above).
fn versions(env: &Env, running: &Running, _: &mut Vec<String>) -> Result<(), Error> {
    let versions = &env.plan.profile.versions;
    type Version<'a> = (&'a Component, &'a str, &'a (String, Vec<String>, ExecFlags));
    let checks: Vec<Version> = env
        .units
        .iter()
        .filter(|(i, _)| !running.contains(i.name.as_str()))
        .filter_map(|(i, unit)| {
            let c = i.component;
            let expected = (c.version)(versions).trim_start_matches('v');
            Some((c, expected, unit.exec_start()?)).filter(|_| !expected.is_empty())
        })
        .collect();
    let cache_path = env.plan.data_dir.join(VERSION_CACHE);
    let cached = VersionCache::read(&cache_path);
    let found: Vec<(String, Option<String>, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = checks
            .iter()
            .map(|(c, expected, (path, argv, _))| {
                let cached = &cached;
                s.spawn(move || {
                    // A hyperkube-style binary's component argument.
                    let leading = super::versions::leading(argv);
                    let key = std::iter::once(path)
                        .chain(&leading)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" ");
                    let identity = file_identity(Path::new(path));
                    if let Some(out) = identity.as_ref().and_then(|id| cached.get(&key, id)) {
                        return (key, identity, out.to_string());
                    }
                    if let Some(release) = built_as(Path::new(path), c.go_module, expected) {
                        return (key, None, release);
                    }
                    let out = super::versions::version_output(Path::new(path), &leading)
                        .unwrap_or_else(|e| format!("({e})"));
                    (key, identity, out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut cache = VersionCache::default();
    for ((c, expected, (path, _, _)), (key, identity, found)) in checks.iter().zip(&found) {
        let matches = found
            .split(|ch: char| ch.is_whitespace() || ch == ',')
            .any(|word| is_version(word, expected));
        if !matches {
            return Err(Error::Preflight {
                message: format!(
                    "{}: {path} reports {:?}, the profile wants {expected}",
                    c.name,
                    found.lines().next().unwrap_or("").trim()
                ),
                fix: "install the pinned version there (scripts/build-test-binaries.sh builds them), or change versions.* in the profile".into(),
            });
        }
        if let Some(id) = identity {
            cache.insert(key, id, found);
        }
    }
    // Only what all matched: a wrong binary is asked again next time.
    if cache != cached {
        cache.write(&cache_path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_word_names_the_pin_its_patches_and_pre_releases() {
        for (word, pin) in [
            ("v1.36.3", "1.36.3"),
            ("1.36.3", "1.36"),
            ("v1.37.0-rc.1", "1.37.0"),
        ] {
            assert!(is_version(word, pin), "{word} {pin}");
        }
        for (word, pin) in [
            ("v1.36.30", "1.36.3"),
            ("v1.3", "1.36"),
            ("v1.35.4", "1.36"),
            ("", "1.36"),
        ] {
            assert!(!is_version(word, pin), "{word} {pin}");
        }
    }

    #[test]
    fn a_cached_version_counts_only_for_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("etcd");
        std::fs::write(&bin, "one").unwrap();
        let id = file_identity(&bin).unwrap();
        let mut cache = VersionCache::default();
        cache.insert("etcd", &id, "etcd Version: 3.6.16");
        let path = dir.path().join(VERSION_CACHE);
        cache.write(&path);
        let read = VersionCache::read(&path);
        assert_eq!(read, cache);
        assert_eq!(read.get("etcd", &id), Some("etcd Version: 3.6.16"));
        // Rewritten in place, even with the same size: another file as far as the cache goes.
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&bin, "two").unwrap();
        let id2 = file_identity(&bin).unwrap();
        assert_ne!(id, id2);
        assert_eq!(read.get("etcd", &id2), None);
        // Replaced by a rename.
        let other = dir.path().join("new");
        std::fs::write(&other, "one").unwrap();
        std::fs::rename(&other, &bin).unwrap();
        assert_ne!(file_identity(&bin).unwrap(), id2);
        // Garbage is an empty cache.
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(VersionCache::read(&path), VersionCache::default());
        // So are a link (to a cache elsewhere) and a file too large to be one, unread.
        let elsewhere = dir.path().join("elsewhere.json");
        cache.write(&elsewhere);
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        assert_eq!(VersionCache::read(&path), VersionCache::default());
        std::fs::remove_file(&path).unwrap();
        std::fs::File::create(&path)
            .unwrap()
            .set_len(2 << 20)
            .unwrap();
        assert_eq!(VersionCache::read(&path), VersionCache::default());
        // Writing replaces the link itself, never what it points at.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        VersionCache::default().write(&path);
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!(VersionCache::read(&elsewhere), cache);
    }
}
