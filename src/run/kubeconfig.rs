//! The admin identity in a kubeconfig of the user's choosing (k3s's write-kubeconfig and
//! write-kubeconfig-mode, kind's export): merged next to other clusters' entries under a context
//! named after the environment, so `kubectl --context NAME` picks it.
//!
//! Written by hand on serde_yaml_ng values rather than a kubeconfig crate: the only Rust ones
//! (kube-client's `Kubeconfig`) drop fields they do not model and pull in a whole client; a merge
//! must keep every other entry and field of the file as it was.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_yaml_ng::{Mapping, Value};

use crate::error::Error;
use crate::spec::{paths, Plan};
use crate::state::Root;

/// A kubeconfig bigger than this is not one.
const MAX_SIZE: u64 = 16 << 20;

/// The environment's entries, named for a file shared with other clusters.
#[derive(Debug, Clone, PartialEq)]
pub struct Entries {
    /// Context name: the environment's.
    pub context: String,
    pub cluster: String,
    pub user: String,
    cluster_body: Value,
    user_body: Value,
}

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub path: PathBuf,
    /// Entries of this environment were there already (now replaced).
    pub replaced: bool,
    pub current_context: String,
}

/// The kubeconfig of one of the environment's client identities as the state dir has it (its
/// component uses it): `admin`, `scheduler`, ..., or a node's own, `kubelet@worker-1`,
/// `kube-proxy@worker-1` (the first node's without `@`). Its certificate row's name works too.
pub fn identity_kubeconfig(plan: &Plan, identity: &str) -> Result<String, Error> {
    let specs = crate::pki::specs(plan);
    let with_kubeconfig: Vec<(String, &crate::pki::CertSpec)> = specs
        .iter()
        .filter_map(|s| {
            let k = s.kubeconfig?;
            let name = match s.node {
                Some(i) => plan.nodes[i].qualified(k),
                None => k.to_string(),
            };
            Some((name, s))
        })
        .collect();
    let Some((_, spec)) = with_kubeconfig
        .iter()
        .find(|(name, s)| name == identity || s.name == identity)
    else {
        let names: Vec<&str> = with_kubeconfig.iter().map(|(n, _)| n.as_str()).collect();
        return Err(Error::Usage {
            message: format!(
                "no identity '{identity}' with a kubeconfig in environment '{}'",
                plan.name()
            ),
            fix: format!("use one of: {}", names.join(", ")),
        });
    };
    let rel = spec.kubeconfig_path.clone().unwrap_or_default();
    let path = plan.state_dir.join(&rel);
    Root::open(&plan.state_dir)
        .and_then(|r| r.read_string(&rel))
        .map_err(|e| Error::Artifact {
            path,
            message: format!("cannot read the kubeconfig of {identity}: {e}"),
            fix: "run `kubeunit gen` to regenerate the state dir".into(),
        })
}

/// The admin kubeconfig of a generated state dir, renamed: context `NAME`, cluster `kubeunit-NAME`,
/// user `kubeunit-NAME-admin`.
pub fn admin_entries(plan: &Plan) -> Result<Entries, Error> {
    let rel = paths::kubeconfig("admin");
    let path = plan.state_dir.join(&rel);
    let text = Root::open(&plan.state_dir)
        .and_then(|r| r.read_string(&rel))
        .map_err(|e| Error::Artifact {
            path: path.clone(),
            message: format!("cannot read the admin kubeconfig: {e}"),
            fix: "run `kubeunit gen` to regenerate the state dir".into(),
        })?;
    let broken = |what: &str| Error::Artifact {
        path: path.clone(),
        message: format!("not a kubeconfig kubeunit wrote: {what}"),
        fix: "run `kubeunit gen` to regenerate it".into(),
    };
    let doc: Value = serde_yaml_ng::from_str(&text).map_err(|e| broken(&e.to_string()))?;
    let first = |list: &str, field: &str| {
        doc.get(list)
            .and_then(Value::as_sequence)
            .and_then(|s| s.first())
            .and_then(|e| e.get(field))
            .cloned()
            .ok_or_else(|| broken(&format!("no {list}[0].{field}")))
    };
    let name = plan.name().to_string();
    Ok(Entries {
        cluster: format!("kubeunit-{name}"),
        user: format!("kubeunit-{name}-admin"),
        context: name,
        cluster_body: first("clusters", "cluster")?,
        user_body: first("users", "user")?,
    })
}

impl Entries {
    /// A kubeconfig holding only these entries (`kubeunit kubeconfig` without --write).
    pub fn to_yaml(&self) -> String {
        let mut doc = empty();
        self.put(&mut doc);
        set(
            &mut doc,
            "current-context",
            Value::from(self.context.clone()),
        );
        serde_yaml_ng::to_string(&doc).unwrap_or_default()
    }

    /// Put the entries into `doc`, replacing those of the same names; whether any was there.
    fn put(&self, doc: &mut Mapping) -> bool {
        let context = mapping(&[
            ("cluster", Value::from(self.cluster.clone())),
            ("user", Value::from(self.user.clone())),
        ]);
        let mut replaced = false;
        for (list, name, field, body) in [
            (
                "clusters",
                &self.cluster,
                "cluster",
                self.cluster_body.clone(),
            ),
            ("users", &self.user, "user", self.user_body.clone()),
            ("contexts", &self.context, "context", context),
        ] {
            let entry = mapping(&[("name", Value::from(name.clone())), (field, body)]);
            let seq = list_mut(doc, list);
            match seq.iter_mut().find(|e| entry_name(e) == Some(name)) {
                Some(old) => {
                    *old = entry;
                    replaced = true;
                }
                None => seq.push(entry),
            }
        }
        replaced
    }
}

/// The admin identity of `plan` merged into `path` (see `merge`), which must lie outside the state dir:
/// kubeunit's own files there are not for editing.
pub fn merge_admin(
    plan: &Plan,
    path: &Path,
    mode: Option<u32>,
    keep_current: bool,
) -> Result<Merged, Error> {
    let target = resolve(path)?;
    let dir = target.parent().unwrap_or(Path::new("/"));
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let state = std::fs::canonicalize(&plan.state_dir).unwrap_or_else(|_| plan.state_dir.clone());
    if dir.starts_with(&state) {
        return Err(Error::Usage {
            message: format!(
                "{}: inside the state dir {}, whose files gen owns",
                path.display(),
                plan.state_dir.display()
            ),
            fix: "write the kubeconfig somewhere else, e.g. ~/.kube/config".into(),
        });
    }
    merge(path, &admin_entries(plan)?, mode, keep_current)
}

/// Merge `entries` into the kubeconfig at `path` (created if missing), making its context current
/// unless `keep_current`. `mode`: the file's mode (default: what it has, 0600 for a new file).
/// Written to a temp file and renamed, under `PATH.lock` as kubectl takes it; a symlink is followed
/// (the file it names is replaced, the link stays).
pub fn merge(
    path: &Path,
    entries: &Entries,
    mode: Option<u32>,
    keep_current: bool,
) -> Result<Merged, Error> {
    let path = resolve(path)?;
    let _lock = FileLock::acquire(&path)?;
    let (mut doc, old) = read(&path)?;
    if let Some(cluster) = context_cluster(&doc, &entries.context) {
        if cluster != entries.cluster {
            return Err(Error::Usage {
                message: format!(
                    "{}: its context '{}' is another cluster's ({cluster})",
                    path.display(),
                    entries.context
                ),
                fix: format!(
                    "delete that context (kubectl config delete-context {}) or write to another file",
                    entries.context
                ),
            });
        }
    }
    let replaced = entries.put(&mut doc);
    let current = match doc.get("current-context").and_then(Value::as_str) {
        Some(c) if keep_current && !c.is_empty() => c.to_string(),
        _ => entries.context.clone(),
    };
    set(&mut doc, "current-context", Value::from(current.clone()));
    let mode = mode.unwrap_or_else(|| old.as_ref().map_or(0o600, |m| m.mode() & 0o7777));
    write(&path, &doc, mode, old.as_ref())?;
    Ok(Merged {
        path,
        replaced,
        current_context: current,
    })
}

/// Remove the environment's entries (named as `admin_entries` names them) from the kubeconfig at
/// `path`, clearing current-context if it was theirs. Whether the file had any; a missing file has none.
pub fn remove(path: &Path, env: &str) -> Result<bool, Error> {
    let path = resolve(path)?;
    if !path.exists() {
        return Ok(false);
    }
    let _lock = FileLock::acquire(&path)?;
    let (mut doc, old) = read(&path)?;
    let cluster = format!("kubeunit-{env}");
    // Someone else's context of that name is not ours to delete.
    if context_cluster(&doc, env).is_some_and(|c| c != cluster) {
        return Ok(false);
    }
    let mut removed = false;
    for (list, name) in [
        ("clusters", cluster.clone()),
        ("users", format!("kubeunit-{env}-admin")),
        ("contexts", env.to_string()),
    ] {
        let seq = list_mut(&mut doc, list);
        let before = seq.len();
        seq.retain(|e| entry_name(e) != Some(&name));
        removed |= seq.len() != before;
    }
    if doc.get("current-context").and_then(Value::as_str) == Some(env) {
        set(&mut doc, "current-context", Value::from(""));
    }
    if removed {
        let mode = old.as_ref().map_or(0o600, |m| m.mode() & 0o7777);
        write(&path, &doc, mode, old.as_ref())?;
    }
    Ok(removed)
}

/// `path`, with a symlink (chain) at its end resolved so that the rename replaces the file it names.
fn resolve(path: &Path) -> Result<PathBuf, Error> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p).map_err(Error::io(&p, "read the link"))?;
                p = match p.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            Ok(m) if !m.is_file() => {
                return Err(Error::Usage {
                    message: format!("{}: not a regular file", p.display()),
                    fix: "name a kubeconfig file (e.g. ~/.kube/config)".into(),
                })
            }
            _ => return Ok(p),
        }
    }
    Err(Error::Usage {
        message: format!("{}: too many levels of symbolic links", path.display()),
        fix: "name the kubeconfig file itself".into(),
    })
}

/// The kubeconfig at `path` (an empty one if missing) and its metadata.
fn read(path: &Path) -> Result<(Mapping, Option<std::fs::Metadata>), Error> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((empty(), None)),
        Err(e) => return Err(Error::io(path, "read")(e)),
    };
    let meta = file.metadata().map_err(Error::io(path, "read"))?;
    let mut text = String::new();
    file.take(MAX_SIZE + 1)
        .read_to_string(&mut text)
        .map_err(Error::io(path, "read"))?;
    let bad = |why: String| Error::Usage {
        message: format!("{}: not a kubeconfig: {why}", path.display()),
        fix: "fix or move that file, or write to another one".into(),
    };
    if text.len() as u64 > MAX_SIZE {
        return Err(bad(format!("bigger than {MAX_SIZE} bytes")));
    }
    let doc = if text.trim().is_empty() {
        empty()
    } else {
        match serde_yaml_ng::from_str::<Value>(&text).map_err(|e| bad(e.to_string()))? {
            Value::Mapping(m) => m,
            Value::Null => empty(),
            _ => return Err(bad("not a YAML mapping".into())),
        }
    };
    for list in ["clusters", "users", "contexts"] {
        match doc.get(list) {
            None | Some(Value::Null) | Some(Value::Sequence(_)) => {}
            Some(_) => return Err(bad(format!("'{list}' is not a list"))),
        }
    }
    Ok((doc, Some(meta)))
}

/// Write `doc` to a temp file next to `path` and rename it over, with `mode` and the old file's owner.
/// (Not `state::Root::write_atomic`: the temp file takes the old file's owner before the rename, so a
/// user's kubeconfig that root rewrites is never, even briefly, root's.)
fn write(
    path: &Path,
    doc: &Mapping,
    mode: u32,
    old: Option<&std::fs::Metadata>,
) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(Error::io(dir, "create"))?;
    }
    let text = serde_yaml_ng::to_string(doc)
        .map_err(|e| Error::Internal(format!("kubeconfig as YAML: {e}")))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".kubeunit-kubeconfig")
        .tempfile_in(dir)
        .map_err(Error::io(dir, "create a temp file in"))?;
    let io = Error::io(tmp.path().to_path_buf(), "write");
    tmp.write_all(text.as_bytes())
        .and_then(|()| {
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))
        })
        .and_then(|()| match old {
            // Root writing a user's kubeconfig leaves it the user's.
            Some(m) => std::os::unix::fs::fchown(tmp.as_file(), Some(m.uid()), Some(m.gid())),
            None => Ok(()),
        })
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io)?;
    tmp.persist(path)
        .map_err(|e| Error::io(path, "replace")(e.error))?;
    Ok(())
}

/// kubectl's lock: `PATH.lock`, created exclusively, removed when done.
struct FileLock(PathBuf);

impl FileLock {
    fn acquire(path: &Path) -> Result<FileLock, Error> {
        let mut name = path.as_os_str().to_owned();
        name.push(".lock");
        let lock = PathBuf::from(name);
        if let Some(dir) = lock.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(Error::io(dir, "create"))?;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&lock)
            {
                Ok(_) => return Ok(FileLock(lock)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if Instant::now() > deadline {
                        return Err(Error::Busy {
                            path: path.to_path_buf(),
                            holder: format!("{} (kubectl's lock file)", lock.display()),
                            waited_secs: 5,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(Error::io(&lock, "create")(e)),
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn empty() -> Mapping {
    let mut m = Mapping::new();
    for (k, v) in [
        ("apiVersion", Value::from("v1")),
        ("kind", Value::from("Config")),
        ("clusters", Value::Sequence(vec![])),
        ("users", Value::Sequence(vec![])),
        ("contexts", Value::Sequence(vec![])),
        ("current-context", Value::from("")),
        ("preferences", Value::Mapping(Mapping::new())),
    ] {
        m.insert(Value::from(k), v);
    }
    m
}

fn mapping(pairs: &[(&str, Value)]) -> Value {
    let mut m = Mapping::new();
    for (k, v) in pairs {
        m.insert(Value::from(*k), v.clone());
    }
    Value::Mapping(m)
}

fn set(doc: &mut Mapping, key: &str, v: Value) {
    doc.insert(Value::from(key), v);
}

fn list_mut<'a>(doc: &'a mut Mapping, list: &str) -> &'a mut Vec<Value> {
    let slot = doc
        .entry(Value::from(list))
        .or_insert_with(|| Value::Sequence(vec![]));
    if !slot.is_sequence() {
        *slot = Value::Sequence(vec![]);
    }
    match slot {
        Value::Sequence(s) => s,
        _ => unreachable!("made a sequence above"),
    }
}

fn entry_name(e: &Value) -> Option<&str> {
    e.get("name").and_then(Value::as_str)
}

/// The cluster the context `name` of `doc` uses, if it has that context.
fn context_cluster(doc: &Mapping, name: &str) -> Option<String> {
    doc.get("contexts")?
        .as_sequence()?
        .iter()
        .find(|e| entry_name(e) == Some(name))
        .map(|e| {
            e.get("context")
                .and_then(|c| c.get("cluster"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(name: &str) -> Entries {
        Entries {
            context: name.into(),
            cluster: format!("kubeunit-{name}"),
            user: format!("kubeunit-{name}-admin"),
            cluster_body: mapping(&[("server", Value::from("https://127.0.0.1:6443"))]),
            user_body: mapping(&[("token", Value::from("t"))]),
        }
    }

    #[test]
    fn merge_keeps_other_entries_and_replaces_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/config");
        let other = "apiVersion: v1\nkind: Config\nclusters:\n- name: kind-x\n  cluster: {server: https://x}\nusers:\n- name: kind-x\n  user: {token: a}\ncontexts:\n- name: kind-x\n  context: {cluster: kind-x, user: kind-x}\ncurrent-context: kind-x\nextensions: [{name: keep, extension: {a: 1}}]\n";
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, other).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let m = merge(&path, &entries("dev"), None, true).unwrap();
        assert!(!m.replaced);
        assert_eq!(m.current_context, "kind-x", "kept on request");
        let m = merge(&path, &entries("dev"), None, false).unwrap();
        assert!(m.replaced);
        assert_eq!(m.current_context, "dev");
        let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let names = |l: &str| -> Vec<String> {
            doc[l]
                .as_sequence()
                .unwrap()
                .iter()
                .map(|e| entry_name(e).unwrap().to_string())
                .collect()
        };
        assert_eq!(names("clusters"), ["kind-x", "kubeunit-dev"]);
        assert_eq!(names("users"), ["kind-x", "kubeunit-dev-admin"]);
        assert_eq!(names("contexts"), ["kind-x", "dev"]);
        assert_eq!(doc["extensions"][0]["name"], "keep");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "the file's mode is kept");
        assert!(!dir.path().join("sub/config.lock").exists());

        assert!(remove(&path, "dev").unwrap());
        let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["clusters"].as_sequence().unwrap().len(), 1);
        assert_eq!(doc["current-context"], "");
        assert!(!remove(&path, "dev").unwrap(), "nothing left to remove");
    }

    #[test]
    fn someone_elses_context_of_that_name_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        let text = "contexts:\n- name: dev\n  context: {cluster: prod, user: me}\n";
        std::fs::write(&path, text).unwrap();
        let e = merge(&path, &entries("dev"), None, false).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("another cluster's (prod)"), "{e}");
        assert!(!remove(&path, "dev").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn a_symlink_is_followed_and_garbage_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("real", &link).unwrap();
        merge(&link, &entries("a"), Some(0o600), false).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(std::fs::read_to_string(&real)
            .unwrap()
            .contains("kubeunit-a"));
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        for garbage in ["[1, 2]", "clusters: 3", "\u{0}\u{1}: [", "a: b: c"] {
            std::fs::write(&real, garbage).unwrap();
            let e = merge(&link, &entries("a"), None, false).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{garbage}: {e}");
            assert_eq!(std::fs::read_to_string(&real).unwrap(), garbage);
        }
        // A file too big to be a kubeconfig is refused, not read whole.
        let huge = vec![b'#'; (MAX_SIZE + 1) as usize];
        std::fs::write(&real, &huge).unwrap();
        let e = merge(&link, &entries("a"), None, false).unwrap_err();
        assert!(e.to_string().contains("bigger than"), "{e}");
        assert_eq!(std::fs::metadata(&real).unwrap().len(), MAX_SIZE + 1);
        let e = merge(dir.path(), &entries("a"), None, false).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
