//! Writing the tree so that a `gen` killed at any instant leaves a state dir the next `gen` completes:
//!
//! 1. a journal (`.kubeunit-journal.json`) lists the files to replace and to remove;
//! 2. every changed file is written to a temp file next to it (`.<name>.kubeunit-tmp`), synced;
//! 3. the journal gets the new manifest: from here on the run is complete on disk;
//! 4. temp files are renamed into place, stale files removed, the manifest written, the journal removed.
//!
//! `recover` (run by `gen` under the lock, before it reads anything) rolls a journal without a
//! manifest back (temp files removed, nothing else was touched) and one with a manifest forward
//! (steps 4 again: every step is idempotent), and removes stray temp files.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::manifest::{owned_path, Manifest};
use super::previous::Previous;
use super::root::{Kind, Root, TMP_SUFFIX};
use super::tree::Tree;
use crate::error::Error;
use crate::spec::paths::{JOURNAL, MANAGED_DIRS, MANIFEST};

/// Counts of what `write` did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct WriteSummary {
    pub written: Vec<String>,
    pub unchanged: usize,
    pub removed: Vec<String>,
    /// What `gen` did beyond writing the tree (an interrupted run completed, ...).
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    /// Files whose new content waits in their temp file.
    commit: Vec<String>,
    /// Files the previous manifest listed and the new tree lacks.
    remove: Vec<String>,
    /// The new manifest (its JSON text) once every temp file is written; absent before.
    manifest: Option<String>,
    /// Its mode.
    manifest_mode: u32,
}

fn io_err(root: &Root, rel: &str, op: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    Error::io(root.path().join(rel), op)
}

impl Journal {
    fn save(&self, root: &Root) -> Result<(), Error> {
        let json = serde_json::to_vec(self)
            .map_err(|e| Error::Internal(format!("serializing the journal: {e}")))?;
        super::faults::step();
        root.write_atomic(JOURNAL, &json, 0o600)
            .map_err(io_err(root, JOURNAL, "write"))
    }

    /// Step 4: idempotent, so that a run killed in the middle of it can run it again.
    fn finish(&self, root: &Root, manifest: &str) -> Result<(), Error> {
        let mut dirs = BTreeSet::new();
        for rel in &self.commit {
            super::faults::step();
            root.commit_temp(rel).map_err(io_err(root, rel, "rename"))?;
            dirs.insert(rel.rsplit_once('/').map_or("", |(d, _)| d).to_string());
        }
        for dir in dirs.iter().filter(|d| !d.is_empty()) {
            root.sync_parent(&format!("{dir}/x"))
                .map_err(io_err(root, dir, "sync"))?;
        }
        for rel in &self.remove {
            super::faults::step();
            root.remove(rel).map_err(io_err(root, rel, "remove"))?;
        }
        super::faults::step();
        root.write_atomic(MANIFEST, manifest.as_bytes(), self.manifest_mode)
            .map_err(io_err(root, MANIFEST, "write"))?;
        super::faults::step();
        root.remove(JOURNAL)
            .map_err(io_err(root, JOURNAL, "remove"))?;
        Ok(())
    }
}

/// Complete or roll back what an interrupted `gen` left, and remove stray temp files. Returns what
/// was done, for the report.
pub fn recover(root: &Root) -> Result<Option<String>, Error> {
    let mut note = None;
    match root.read(JOURNAL) {
        Ok(bytes) => {
            let journal: Journal = serde_json::from_slice(&bytes).map_err(|e| {
                Error::state(
                    root.path(),
                    format!("{JOURNAL} (left by an interrupted gen) is unreadable: {e}"),
                    format!(
                        "remove {} and run `kubeunit gen` again (it rewrites what differs)",
                        root.path().join(JOURNAL).display()
                    ),
                )
            })?;
            let bad: Vec<&String> = journal
                .commit
                .iter()
                .chain(&journal.remove)
                .filter(|r| !owned_path(r))
                .collect();
            if !bad.is_empty() {
                return Err(Error::state(
                    root.path(),
                    format!("{JOURNAL} names paths outside kubeunit's files: {bad:?}"),
                    format!(
                        "remove {} and run `kubeunit gen` again",
                        root.path().join(JOURNAL).display()
                    ),
                ));
            }
            match &journal.manifest {
                Some(manifest) => {
                    journal.finish(root, manifest)?;
                    note = Some(format!(
                        "completed an interrupted gen ({} files put in place)",
                        journal.commit.len()
                    ));
                }
                None => {
                    for rel in &journal.commit {
                        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
                        let tmp = super::root::tmp_name(name);
                        let tmp = if dir.is_empty() {
                            tmp
                        } else {
                            format!("{dir}/{tmp}")
                        };
                        root.remove(&tmp).map_err(io_err(root, &tmp, "remove"))?;
                    }
                    root.remove(JOURNAL)
                        .map_err(io_err(root, JOURNAL, "remove"))?;
                    note = Some(
                        "rolled back an interrupted gen (it had changed nothing yet)".to_string(),
                    );
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(root, JOURNAL, "read")(e)),
    }
    let mut strays = Vec::new();
    for (name, kind) in root.walk_top().map_err(io_err(root, "", "list"))? {
        if kind == Kind::File && name.ends_with(TMP_SUFFIX) {
            strays.push(name);
        }
    }
    for dir in MANAGED_DIRS {
        for e in root.walk(dir).map_err(io_err(root, dir, "list"))? {
            if e.kind == Kind::File && e.rel.ends_with(TMP_SUFFIX) {
                strays.push(e.rel);
            }
        }
    }
    for rel in &strays {
        root.remove(rel).map_err(io_err(root, rel, "remove"))?;
    }
    if note.is_none() && !strays.is_empty() {
        note = Some(format!(
            "removed {} temp files of an interrupted gen",
            strays.len()
        ));
    }
    Ok(note)
}

/// Write the tree into the state dir: changed files only, through the journal (module docs); files
/// the previous manifest listed and the new tree lacks are removed; the manifest goes last.
pub fn write(
    root: &Root,
    old: &Previous,
    tree: &Tree,
    manifest: &Manifest,
) -> Result<WriteSummary, Error> {
    let mut summary = WriteSummary::default();
    let mut changed = Vec::new();
    for (rel, artifact) in tree {
        let same = root.stat(rel).ok().flatten() == Some((Kind::File, artifact.mode))
            && root.read(rel).ok().as_deref() == Some(artifact.bytes.as_slice());
        if same {
            summary.unchanged += 1;
        } else {
            changed.push(rel.clone());
        }
    }
    let removed: Vec<String> = match &old.manifest {
        Some(m) => m
            .files
            .keys()
            .filter(|r| !tree.contains_key(*r))
            .filter(|r| root.stat(r).ok().flatten().is_some())
            .cloned()
            .collect(),
        None => vec![],
    };
    let mut json = serde_json::to_string_pretty(manifest)
        .map_err(|e| Error::Internal(format!("serializing the manifest: {e}")))?;
    json.push('\n');
    let manifest_mode = manifest.mode();
    let manifest_same = root.read(MANIFEST).ok().as_deref() == Some(json.as_bytes())
        && root.stat(MANIFEST).ok().flatten() == Some((Kind::File, manifest_mode));
    if changed.is_empty() && removed.is_empty() && manifest_same {
        return Ok(summary);
    }
    let mut journal = Journal {
        commit: changed.clone(),
        remove: removed.clone(),
        manifest: None,
        manifest_mode,
    };
    journal.save(root)?;
    let staged = (|| {
        for rel in &changed {
            let a = &tree[rel];
            super::faults::step();
            root.write_temp(rel, &a.bytes, a.mode)
                .map_err(io_err(root, rel, "write"))?;
        }
        journal.manifest = Some(json.clone());
        journal.save(root)
    })();
    if let Err(e) = staged {
        // A write that failed (a full disk) before the run was complete on disk: roll it back
        // now, as the next gen would, so that the state dir is as it was (recover acts on the
        // journal as it is on disk: rolled forward if its manifest got there after all).
        let _ = recover(root);
        return Err(e);
    }
    journal.finish(root, &json)?;
    summary.written = changed;
    summary.removed = removed;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::state::{Artifact, MODE_PUBLIC, MODE_SECRET};

    fn tree(files: &[(&str, &str, u32)]) -> Tree {
        files
            .iter()
            .map(|(p, t, m)| {
                let a = Artifact {
                    bytes: t.as_bytes().to_vec(),
                    mode: *m,
                };
                (p.to_string(), a)
            })
            .collect()
    }

    fn manifest(t: &Tree) -> Manifest {
        Manifest::new(
            "t",
            "/s".into(),
            t,
            BTreeMap::new(),
            BTreeMap::new(),
            serde_json::Value::Null,
        )
    }

    #[test]
    fn a_journal_is_rolled_forward_or_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let one = tree(&[
            ("pki/ca.crt", "crt1", MODE_PUBLIC),
            ("pki/ca.key", "key1", MODE_SECRET),
            ("units/old.service", "old", MODE_PUBLIC),
        ]);
        write(
            &root,
            &Previous::load(dir.path()).unwrap(),
            &one,
            &manifest(&one),
        )
        .unwrap();
        let two = tree(&[
            ("pki/ca.crt", "crt2", MODE_PUBLIC),
            ("pki/ca.key", "key2", MODE_SECRET),
        ]);
        let m2 = manifest(&two);
        let mut json = serde_json::to_string_pretty(&m2).unwrap();
        json.push('\n');

        // Killed while writing temp files: rolled back, the old pair stays.
        let j = Journal {
            commit: vec!["pki/ca.crt".into(), "pki/ca.key".into()],
            remove: vec!["units/old.service".into()],
            manifest: None,
            manifest_mode: 0o644,
        };
        j.save(&root).unwrap();
        root.write_temp("pki/ca.crt", b"crt2", MODE_PUBLIC).unwrap();
        let note = recover(&root).unwrap().unwrap();
        assert!(note.contains("rolled back"), "{note}");
        assert_eq!(root.read("pki/ca.crt").unwrap(), b"crt1");
        assert!(root.read("units/old.service").is_ok());
        assert!(!dir.path().join(JOURNAL).exists());
        assert!(!dir.path().join("pki/.ca.crt.kubeunit-tmp").exists());

        // Killed after the first rename: rolled forward, the new pair is complete.
        let j = Journal {
            manifest: Some(json.clone()),
            ..j
        };
        root.write_temp("pki/ca.crt", b"crt2", MODE_PUBLIC).unwrap();
        root.write_temp("pki/ca.key", b"key2", MODE_SECRET).unwrap();
        j.save(&root).unwrap();
        root.commit_temp("pki/ca.crt").unwrap();
        let note = recover(&root).unwrap().unwrap();
        assert!(note.contains("completed"), "{note}");
        assert_eq!(root.read("pki/ca.crt").unwrap(), b"crt2");
        assert_eq!(root.read("pki/ca.key").unwrap(), b"key2");
        assert!(
            root.read("units/old.service").is_err(),
            "stale file removed"
        );
        assert_eq!(root.read(MANIFEST).unwrap(), json.as_bytes());
        assert!(recover(&root).unwrap().is_none(), "nothing left to do");

        // A journal naming paths outside the state dir is refused, and nothing is removed.
        let evil = Journal {
            commit: vec![],
            remove: vec!["../../etc/hostname".into()],
            manifest: Some(json),
            manifest_mode: 0o644,
        };
        evil.save(&root).unwrap();
        let e = recover(&root).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("outside"), "{e}");
    }

    #[test]
    fn stray_temp_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        root.write_temp("config/a.yaml", b"x", 0o644).unwrap();
        root.write_temp("manifest.json", b"x", 0o644).unwrap();
        std::fs::write(dir.path().join("notes.kubeunit-tmp.txt"), "mine").unwrap();
        let note = recover(&root).unwrap().unwrap();
        assert!(note.contains("2 temp files"), "{note}");
        assert_eq!(root.walk("config").unwrap(), vec![]);
        assert!(dir.path().join("notes.kubeunit-tmp.txt").exists());
    }
}
