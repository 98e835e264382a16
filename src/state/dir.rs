//! Whether a directory may become (or is) a state dir, decided before anything in it is touched:
//! `gen --state-dir /` and a shared `/tmp` are refused with their modes and files as they were.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::root::{Kind, Root};
use crate::error::Error;
use crate::spec::paths::{JOURNAL, LOCK, MANAGED_DIRS, MANIFEST};

/// What is at a state-dir path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Nothing: `gen` creates it.
    Missing,
    /// An empty directory of ours, or one holding only a CA the user brings in `pki/`.
    Adoptable,
    /// A state dir (it has a manifest, or a journal of a `gen` that was interrupted).
    Ours,
}

/// The state dirs directly below `home` (`kubeunit list`'s default place: /var/lib/kubeunit), by
/// name. What is no state dir of ours there (another tool's directory, a file) is passed over; a
/// missing or unreadable home holds none.
pub fn generated_below(home: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(home) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|d| matches!(inspect(d), Ok(Found::Ours)))
        .collect();
    dirs.sort();
    dirs
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Look at `dir` without changing anything, and refuse what must not become a state dir: a file, a
/// directory with other files, a shared (world-writable or sticky) directory, one owned by another
/// user, and links or special files where kubeunit keeps its own files.
pub fn inspect(dir: &Path) -> Result<Found, Error> {
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        // Below a file (ENOTDIR) it is missing too: creating it reports why it cannot be.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(Found::Missing)
        }
        Err(e) => {
            return Err(Error::state(
                dir,
                format!("cannot look at it: {e}"),
                "pick a directory you can read with --state-dir, or run as its owner",
            ))
        }
    };
    if !meta.is_dir() {
        return Err(Error::state(
            dir,
            "exists and is not a directory",
            "pick a new or empty directory with --state-dir",
        ));
    }
    let root = Root::open(dir).map_err(|e| {
        Error::state(
            dir,
            format!("cannot open it: {e}"),
            "pick a directory you can read with --state-dir, or run as its owner",
        )
    })?;
    let top = root.walk_top().map_err(|e| {
        Error::state(
            dir,
            format!("cannot list it: {e}"),
            "pick a directory you can read with --state-dir, or run as its owner",
        )
    })?;
    let has = |name: &str| top.iter().any(|(n, _)| n == name);
    // The journal's temp file alone: another `gen` or `import` is writing its first journal now
    // (or was killed doing so); under the lock, recovery finishes or clears it.
    let found = if has(MANIFEST) || has(JOURNAL) || has(&super::root::tmp_name(JOURNAL)) {
        Found::Ours
    } else {
        let mut foreign = Vec::new();
        for (name, kind) in &top {
            let ok = match name.as_str() {
                LOCK => true,
                // A CA the user brings, or what an interrupted first `gen` left (it is rolled back).
                "pki" => *kind == Kind::Dir,
                n if MANAGED_DIRS.contains(&n) => *kind == Kind::Dir && holds_no_files(&root, n),
                _ => false,
            };
            if !ok {
                foreign.push(name.clone());
            }
        }
        if !foreign.is_empty() {
            let shown: Vec<&str> = foreign.iter().take(8).map(String::as_str).collect();
            let more = if foreign.len() > shown.len() {
                format!(" and {} more", foreign.len() - shown.len())
            } else {
                String::new()
            };
            return Err(Error::state(
                dir,
                format!(
                    "exists, has no {MANIFEST} and holds other files ({}{more}): not a kubeunit state dir",
                    shown.join(", ")
                ),
                "pick a new or empty directory with --state-dir",
            ));
        }
        let mode = meta.permissions().mode();
        if mode & 0o1002 != 0 {
            return Err(Error::state(
                dir,
                format!(
                    "a shared directory (mode {:04o}): kubeunit would make it private (0700)",
                    mode & 0o7777
                ),
                "pick a new directory below it with --state-dir, e.g. --state-dir DIR/kubeunit",
            ));
        }
        Found::Adoptable
    };
    if meta.uid() != euid() {
        return Err(Error::state(
            dir,
            format!("owned by uid {}, not by you (uid {})", meta.uid(), euid()),
            "run as its owner, or pick a directory of your own with --state-dir",
        ));
    }
    links(&root, dir, &top)?;
    Ok(found)
}

/// The directory `rel` (below the root) holds directories at most: what an interrupted first `gen`
/// may leave after its temp files are gone.
fn holds_no_files(root: &Root, rel: &str) -> bool {
    root.walk(rel)
        .map(|entries| entries.iter().all(|e| e.kind == Kind::Dir))
        .unwrap_or(false)
}

/// Refuse links and special files among kubeunit's own files: reading through a link would take a
/// key from outside (or put one there).
fn links(root: &Root, dir: &Path, top: &[(String, Kind)]) -> Result<(), Error> {
    let mut bad = Vec::new();
    for (name, kind) in top {
        let ours = MANAGED_DIRS.contains(&name.as_str())
            || [MANIFEST, JOURNAL, LOCK, crate::spec::paths::PROFILE].contains(&name.as_str());
        match kind {
            _ if !ours => {}
            Kind::Dir if MANAGED_DIRS.contains(&name.as_str()) => {
                let entries = root.walk(name).map_err(Error::io(dir.join(name), "list"))?;
                bad.extend(
                    entries
                        .into_iter()
                        .filter(|e| !matches!(e.kind, Kind::Dir | Kind::File))
                        .map(|e| e.rel),
                );
            }
            Kind::File if !MANAGED_DIRS.contains(&name.as_str()) => {}
            _ => bad.push(name.clone()),
        }
    }
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::state(
        dir,
        format!(
            "{} {} a symbolic link or special file where kubeunit keeps its own files (it follows no links inside a state dir)",
            bad.join(", "),
            if bad.len() == 1 { "is" } else { "are" }
        ),
        "replace each with the regular file or directory itself (e.g. `cp --remove-destination TARGET LINK`), or remove it and run `kubeunit gen`",
    ))
}

/// Create a missing state dir (0700, parents too) and make an adopted or existing one private. The
/// chmod doubles as the check that the directory is ours to write (it fails on a read-only mount).
pub fn create(dir: &Path) -> Result<(), Error> {
    let fix =
        "pick a directory you can write with --state-dir (or KUBEUNIT_STATE_DIR), or run as root";
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::state(dir, format!("cannot create it: {e}"), fix))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::state(dir, format!("cannot set its mode to 0700: {e}"), fix))
}

/// What `create` changes, to be put back when `gen` fails before it writes anything (bad input
/// found while rendering): a new directory (and its new parents) removed, an adopted directory's
/// mode and lock file restored.
#[derive(Debug)]
pub struct Undo {
    dir: PathBuf,
    found: Found,
    /// The topmost directory `create` makes.
    created: Option<PathBuf>,
    mode: Option<u32>,
}

impl Undo {
    /// Record the state before `create(dir)`.
    pub fn before_create(dir: &Path, found: Found) -> Undo {
        let created = dir
            .ancestors()
            .take_while(|a| std::fs::symlink_metadata(a).is_err())
            .last()
            .map(Path::to_path_buf);
        let mode = std::fs::metadata(dir)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777);
        Undo {
            dir: dir.to_path_buf(),
            found,
            created,
            mode,
        }
    }

    /// Put things back (best effort: only empty directories are removed).
    pub fn run(self) {
        if self.found != Found::Ours {
            let _ = std::fs::remove_file(self.dir.join(LOCK));
        }
        if let Some(top) = &self.created {
            for d in self.dir.ancestors() {
                if std::fs::remove_dir(d).is_err() || d == top {
                    break;
                }
            }
        } else if let Some(mode) = self.mode {
            let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(mode));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn state_dirs_below_a_home_are_found_by_name_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        for (dir, file) in [("b", MANIFEST), ("a", JOURNAL), ("other", "notes.txt")] {
            std::fs::create_dir(home.join(dir)).unwrap();
            std::fs::set_permissions(home.join(dir), std::fs::Permissions::from_mode(0o700))
                .unwrap();
            std::fs::write(home.join(dir).join(file), "{}").unwrap();
        }
        std::fs::create_dir(home.join("empty")).unwrap();
        std::fs::write(home.join("file"), "").unwrap();
        symlink(home.join("b"), home.join("link")).unwrap();
        // A link to a state dir is that dir again, under another name: not listed twice.
        assert_eq!(generated_below(home), vec![home.join("a"), home.join("b")]);
        assert!(generated_below(&home.join("missing")).is_empty());
    }

    #[test]
    fn what_may_become_a_state_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert_eq!(inspect(&d.join("new")).unwrap(), Found::Missing);
        std::fs::create_dir(d.join("empty")).unwrap();
        std::fs::set_permissions(d.join("empty"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(inspect(&d.join("empty")).unwrap(), Found::Adoptable);
        assert_eq!(mode(&d.join("empty")), 0o755, "inspect changes nothing");

        // A shared directory, empty or not, keeps its mode.
        std::fs::create_dir(d.join("shared")).unwrap();
        std::fs::set_permissions(d.join("shared"), std::fs::Permissions::from_mode(0o1777))
            .unwrap();
        let e = inspect(&d.join("shared")).unwrap_err();
        assert!(
            e.to_string().contains("shared directory (mode 1777)"),
            "{e}"
        );
        std::fs::write(d.join("shared/theirs"), "x").unwrap();
        let e = inspect(&d.join("shared")).unwrap_err();
        assert!(e.to_string().contains("not a kubeunit state dir"), "{e}");
        assert_eq!(mode(&d.join("shared")), 0o1777);

        // An interrupted first gen: a lock, a journal.
        std::fs::create_dir(d.join("started")).unwrap();
        std::fs::write(d.join("started").join(LOCK), "").unwrap();
        std::fs::create_dir_all(d.join("started/kubeconfig")).unwrap();
        assert_eq!(inspect(&d.join("started")).unwrap(), Found::Adoptable);
        std::fs::write(d.join("started").join(JOURNAL), "{}").unwrap();
        std::fs::write(d.join("started/kubeconfig/x"), "{}").unwrap();
        assert_eq!(inspect(&d.join("started")).unwrap(), Found::Ours);

        // Links where kubeunit keeps its files.
        std::fs::create_dir(d.join("linked")).unwrap();
        std::fs::write(d.join("linked").join(MANIFEST), "{}").unwrap();
        symlink("/etc", d.join("linked/pki")).unwrap();
        let e = inspect(&d.join("linked")).unwrap_err();
        assert!(e.to_string().contains("pki is a symbolic link"), "{e}");
        assert_eq!(e.exit_code(), 2);
        std::fs::remove_file(d.join("linked/pki")).unwrap();
        std::fs::create_dir(d.join("linked/pki")).unwrap();
        symlink("/etc/hostname", d.join("linked/pki/ca.key")).unwrap();
        let e = inspect(&d.join("linked")).unwrap_err();
        assert!(
            e.to_string().contains("pki/ca.key is a symbolic link"),
            "{e}"
        );

        // A file is no directory.
        std::fs::write(d.join("file"), "x").unwrap();
        assert!(inspect(&d.join("file")).is_err());
    }
}
