//! The state directory: layout, manifest, atomic writes and `gen --check`.
//!
//! Layout: `pki/`, `kubeconfig/`, `config/`, `units/`, `env/` (generated, listed in `manifest.json`
//! with their sha256), `profile.yaml` (the resolved profile) and `data/` (runtime data, not listed).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::artifacts::{Generated, Tree};
use crate::error::Error;
use crate::plan::Plan;

pub const MANIFEST: &str = "manifest.json";
pub const PROFILE: &str = "profile.yaml";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub kubeunit_version: String,
    pub name: String,
    pub state_dir: PathBuf,
    pub files: BTreeMap<String, FileEntry>,
    /// Certificate name -> digest of the inputs it was issued from.
    pub certs: BTreeMap<String, String>,
    pub profile: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileEntry {
    pub sha256: String,
    /// Octal, e.g. "0600".
    pub mode: String,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Default state dir: `$KUBEUNIT_STATE_DIR`, else `/var/lib/kubeunit/<name>` for root and
/// `$XDG_STATE_HOME/kubeunit/<name>` (default `~/.local/state`) otherwise.
pub fn default_state_dir(name: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("KUBEUNIT_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if is_root() {
        return PathBuf::from("/var/lib/kubeunit").join(name);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("kubeunit").join(name)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// What a previous `gen` left in the state dir.
pub struct Existing {
    pub dir: PathBuf,
    pub manifest: Option<Manifest>,
}

impl Existing {
    /// Read the state dir. A missing dir is an empty state; a dir with content but no manifest is
    /// refused (it is not ours), except one holding only `pki/` (a CA the user brings).
    pub fn load(dir: &Path) -> Result<Existing, Error> {
        let manifest_path = dir.join(MANIFEST);
        let manifest = match fs::read(&manifest_path) {
            Ok(bytes) => Some(serde_json::from_slice::<Manifest>(&bytes).map_err(|e| {
                Error::state(
                    dir,
                    format!("{MANIFEST} is unreadable: {e}"),
                    "restore it, or regenerate everything with `kubeunit gen --force`",
                )
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::state(
                    dir,
                    format!("cannot read {MANIFEST}: {e}"),
                    "check the directory's permissions (run as its owner or as root)",
                ))
            }
        };
        if manifest.is_none() {
            if let Ok(entries) = fs::read_dir(dir) {
                let foreign: Vec<String> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n != "pki")
                    .collect();
                if !foreign.is_empty() {
                    return Err(Error::state(
                        dir,
                        format!(
                            "exists, has no {MANIFEST} and holds other files ({}): not a kubeunit state dir",
                            foreign.join(", ")
                        ),
                        "pick a new or empty directory with --state-dir",
                    ));
                }
            }
        }
        Ok(Existing {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.dir.join(rel)).ok()
    }

    /// The file is on disk exactly as the manifest recorded it.
    pub fn intact(&self, rel: &str) -> bool {
        let Some(entry) = self.manifest.as_ref().and_then(|m| m.files.get(rel)) else {
            return false;
        };
        fs::read(self.dir.join(rel))
            .map(|b| sha256_hex(&b) == entry.sha256)
            .unwrap_or(false)
    }

    pub fn cert_digest(&self, name: &str) -> Option<String> {
        self.manifest.as_ref()?.certs.get(name).cloned()
    }
}

pub fn manifest_for(plan: &Plan, g: &Generated) -> Manifest {
    Manifest {
        kubeunit_version: env!("CARGO_PKG_VERSION").into(),
        name: plan.name().into(),
        state_dir: plan.state_dir.clone(),
        files: g
            .tree
            .iter()
            .map(|(path, a)| {
                (
                    path.clone(),
                    FileEntry {
                        sha256: sha256_hex(&a.bytes),
                        mode: format!("{:04o}", a.mode),
                    },
                )
            })
            .collect(),
        certs: g.cert_digests.clone(),
        profile: serde_json::to_value(&plan.profile).unwrap_or_default(),
    }
}

/// Counts of what `write` did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct WriteSummary {
    pub written: Vec<String>,
    pub unchanged: usize,
    pub removed: Vec<String>,
}

/// Make sure the state dir exists (0700) and is writable, before anything is written.
pub fn prepare_dir(dir: &Path) -> Result<(), Error> {
    let fix =
        "pick a directory you can write with --state-dir (or KUBEUNIT_STATE_DIR), or run as root";
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::state(dir, format!("cannot create it: {e}"), fix))?;
    // chmod fails on a read-only file system and for a directory we do not own: a probe that,
    // unlike a test file, leaves the directory's mtime alone.
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::state(dir, format!("cannot set its mode to 0700: {e}"), fix))?;
    Ok(())
}

/// Write the tree into the state dir: changed files only, each through a temp file and rename; files
/// the previous manifest listed and the new tree lacks are removed; the manifest goes last.
pub fn write(
    dir: &Path,
    old: &Existing,
    tree: &Tree,
    manifest: &Manifest,
) -> Result<WriteSummary, Error> {
    prepare_dir(dir)?;
    let mut summary = WriteSummary::default();
    for (rel, artifact) in tree {
        let path = dir.join(rel);
        let same = fs::read(&path)
            .map(|b| b == artifact.bytes)
            .unwrap_or(false)
            && fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o7777 == artifact.mode)
                .unwrap_or(false);
        if same {
            summary.unchanged += 1;
            continue;
        }
        write_atomic(&path, &artifact.bytes, artifact.mode)?;
        summary.written.push(rel.clone());
    }
    if let Some(m) = &old.manifest {
        for rel in m.files.keys().filter(|r| !tree.contains_key(*r)) {
            if fs::remove_file(dir.join(rel)).is_ok() {
                summary.removed.push(rel.clone());
            }
        }
    }
    let mut json = serde_json::to_vec_pretty(manifest).map_err(|e| Error::Other(e.to_string()))?;
    json.push(b'\n');
    if fs::read(dir.join(MANIFEST)).ok().as_deref() != Some(json.as_slice()) {
        write_atomic(&dir.join(MANIFEST), &json, 0o644)?;
    }
    Ok(summary)
}

pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    let io = |e: std::io::Error| {
        Error::state(
            path,
            format!("cannot write: {e}"),
            "check free space and permissions of the state dir",
        )
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent).map_err(io)?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DiffKind {
    /// Listed in the manifest (or expected) but not on disk.
    Missing,
    /// On disk, but not what the manifest recorded: edited or tampered with.
    Tampered,
    /// Mode differs from what kubeunit writes.
    Mode,
    /// As generated, but the profile now asks for something else: `gen` would rewrite it.
    Changed,
    /// Listed in the manifest, no longer generated: `gen` would remove it.
    Stale,
    /// In a directory kubeunit manages, but not kubeunit's (an extra unit file, a dropped-in manifest).
    Unknown,
}

/// Directories whose every file kubeunit writes (runtime data lives elsewhere).
pub const MANAGED_DIRS: &[&str] = &["pki", "kubeconfig", "config", "units", "env", "addons"];

#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    pub path: String,
    pub kind: DiffKind,
}

/// Compare the state dir with its manifest and with what `gen` would write now.
pub fn check(dir: &Path, old: &Existing, tree: &Tree) -> Result<Vec<Difference>, Error> {
    let Some(manifest) = &old.manifest else {
        return Err(Error::state(
            dir,
            format!("no {MANIFEST}: not generated by kubeunit"),
            "run `kubeunit gen` first",
        ));
    };
    let mut diffs = Vec::new();
    let mut paths: Vec<&String> = manifest.files.keys().chain(tree.keys()).collect();
    paths.sort();
    paths.dedup();
    for rel in paths {
        let on_disk = fs::read(dir.join(rel)).ok();
        let recorded = manifest.files.get(rel);
        let wanted = tree.get(rel);
        let kind = match (on_disk, recorded, wanted) {
            (None, _, _) => Some(DiffKind::Missing),
            (Some(bytes), Some(entry), _) if sha256_hex(&bytes) != entry.sha256 => {
                Some(DiffKind::Tampered)
            }
            (Some(_), None, Some(_)) => Some(DiffKind::Changed),
            (Some(_), Some(_), None) => Some(DiffKind::Stale),
            (Some(bytes), Some(_), Some(w)) if bytes != w.bytes => Some(DiffKind::Changed),
            (Some(_), _, Some(w)) => {
                let mode = fs::metadata(dir.join(rel))
                    .map(|m| m.permissions().mode() & 0o7777)
                    .unwrap_or(0);
                (mode != w.mode).then_some(DiffKind::Mode)
            }
            (Some(_), None, None) => None,
        };
        if let Some(kind) = kind {
            diffs.push(Difference {
                path: rel.clone(),
                kind,
            });
        }
    }
    for managed in MANAGED_DIRS {
        for entry in walkdir::WalkDir::new(dir.join(managed))
            .sort_by_file_name()
            .into_iter()
            .flatten()
        {
            let Ok(rel) = entry.path().strip_prefix(dir) else {
                continue;
            };
            let rel = rel.to_string_lossy().into_owned();
            if entry.file_type().is_file()
                && !manifest.files.contains_key(&rel)
                && !tree.contains_key(&rel)
            {
                diffs.push(Difference {
                    path: rel,
                    kind: DiffKind::Unknown,
                });
            }
        }
    }
    Ok(diffs)
}
