//! Writing the tree: changed files only, each through a temp file and rename, the manifest last.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use serde::Serialize;

use super::manifest::Manifest;
use super::previous::Previous;
use super::tree::Tree;
use crate::error::Error;
use crate::spec::paths::MANIFEST;

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
    old: &Previous,
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
    let mut json = serde_json::to_vec_pretty(manifest)
        .map_err(|e| Error::Internal(format!("serializing the manifest: {e}")))?;
    json.push(b'\n');
    if fs::read(dir.join(MANIFEST)).ok().as_deref() != Some(json.as_slice()) {
        write_atomic(&dir.join(MANIFEST), &json, 0o644)?;
    }
    Ok(summary)
}

pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    let io = |source: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        op: "write",
        source,
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
