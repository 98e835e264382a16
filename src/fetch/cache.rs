//! The cache of fetched binaries: `bin/NAME-VERSION/` per source and version, each complete or
//! absent. A set is assembled in a staging dir under `tmp/` and renamed into place once every file
//! matched its checksum, with a stamp (`.fetched`) recording what each file's digest is; a later
//! fetch checks the files against it, so a binary changed in the cache is caught, not used.
//! Concurrent fetches of one set take turns (an flock per set); the second finds it done.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::FetchError;

/// The stamp of a complete set.
pub const STAMP: &str = ".fetched";

/// The cache dir: `$KUBEUNIT_CACHE_DIR`, else `$XDG_CACHE_HOME/kubeunit`, else `~/.cache/kubeunit`.
pub fn default_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("KUBEUNIT_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("kubeunit")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/kubeunit")))
}

/// Where the set of `source` at `version` lives.
pub fn set_dir(cache: &Path, source: &str, version: &str) -> PathBuf {
    cache.join("bin").join(format!("{source}-{version}"))
}

/// Whether `path` is a file of a fetched set (`.../bin/SOURCE-VERSION/FILE`), present or not.
pub fn in_a_set(path: &Path) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    let in_bin = dir
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "bin");
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    in_bin
        && super::SOURCES.iter().any(|s| {
            name.strip_prefix(s.name)
                .is_some_and(|v| v.starts_with("-v"))
        })
}

/// What a complete set holds: each file's sha256 and size, and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stamp {
    pub source: String,
    pub version: String,
    /// The base URL it came from (the release page or a mirror) and its architecture: a set is
    /// "in the cache" only for the same origin and architecture (a stamp without them, from an
    /// older kubeunit, for none).
    #[serde(default)]
    pub base: String,
    #[serde(default)]
    pub arch: String,
    pub files: BTreeMap<String, FileStamp>,
    /// Each download's URL and its published digest (`ALGORITHM:HEX`).
    pub downloads: BTreeMap<String, String>,
}

impl Stamp {
    /// Why this set is not the one wanted from `base` for `arch`, if it is not.
    pub fn differs(&self, base: &str, arch: &str) -> Option<String> {
        if self.arch != arch {
            Some(match self.arch.as_str() {
                "" => "its architecture is not recorded (an older kubeunit fetched it)".into(),
                a => format!("it holds {a} binaries, this host runs {arch}"),
            })
        } else if self.base != base {
            Some(match self.base.as_str() {
                "" => "its origin is not recorded (an older kubeunit fetched it)".into(),
                b => format!("it came from {b}, not {base}"),
            })
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileStamp {
    pub sha256: String,
    pub size: u64,
}

/// A set's lock: held until dropped.
pub struct SetLock {
    _file: File,
}

/// Take the lock of one set, waiting for another fetch of it to finish. `waiting` hears, before
/// the wait, the PID the holder wrote into the lock file (when it could be read): a second fetch
/// says whose turn it waits for instead of hanging silently.
pub fn lock(
    cache: &Path,
    source: &str,
    version: &str,
    waiting: &mut dyn FnMut(&Path, Option<u32>),
) -> Result<SetLock, FetchError> {
    let dir = cache.join("bin");
    make_dir(cache)?;
    make_dir(&dir)?;
    let path = dir.join(format!(".{source}-{version}.lock"));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| FetchError::io(&path, "open", e))?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            let mut text = String::new();
            let holder = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            waiting(&path, holder);
            flock(&file, FlockOperation::LockExclusive)
                .map_err(|e| FetchError::io(&path, "lock", e.into()))?;
        }
        Err(e) => return Err(FetchError::io(&path, "lock", e.into())),
    }
    // The holder's PID for the next waiter to name; a lock without it still locks.
    let _ = file.set_len(0).and_then(|()| {
        use std::io::{Seek, Write};
        file.seek(std::io::SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())
    });
    Ok(SetLock { _file: file })
}

/// The stamp of a complete set, checked against its files; `None` when there is no set.
pub fn complete(dir: &Path) -> Result<Option<Stamp>, FetchError> {
    let stamp_path = dir.join(STAMP);
    let text = match std::fs::read_to_string(&stamp_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FetchError::io(&stamp_path, "read", e)),
    };
    let tampered = |file: &Path, what: String| FetchError::Tampered {
        path: file.to_path_buf(),
        what,
        dir: dir.to_path_buf(),
    };
    let stamp: Stamp = serde_json::from_str(&text)
        .map_err(|e| tampered(&stamp_path, format!("not a stamp kubeunit wrote ({e})")))?;
    for (name, want) in &stamp.files {
        let path = dir.join(name);
        // A link or anything but a file in its place is a change too (and is not followed).
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => return Err(tampered(&path, "no longer a regular file".into())),
            Err(e) => return Err(tampered(&path, format!("cannot be read: {e}"))),
        }
        let (sha256, size) = sha256_of(&path)?;
        if sha256 != want.sha256 || size != want.size {
            return Err(tampered(
                &path,
                format!(
                    "sha256 {sha256} ({size} bytes), not the {} ({} bytes) it was fetched with",
                    want.sha256, want.size
                ),
            ));
        }
    }
    Ok(Some(stamp))
}

/// A file's sha256 (hex) and size. Not following a link: the set holds files only.
pub fn sha256_of(path: &Path) -> Result<(String, u64), FetchError> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| FetchError::io(path, "read", e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| FetchError::io(path, "read", e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), size))
}

/// A staging dir for one set under `tmp/` (removed when dropped, also on an error). Staging dirs
/// of this set that a killed fetch left are removed first: this one holds the set's lock.
pub fn staging(cache: &Path, source: &str, version: &str) -> Result<tempfile::TempDir, FetchError> {
    let tmp = cache.join("tmp");
    make_dir(&tmp)?;
    let prefix = format!("{source}-{version}.");
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    tempfile::Builder::new()
        .prefix(&prefix)
        .tempdir_in(&tmp)
        .map_err(|e| FetchError::io(&tmp, "create a directory in", e))
}

/// Write `stamp` into the staging dir, make everything durable and rename it into place. A set
/// already there (changed, or from another origin) is exchanged with it in one step
/// (renameat2 RENAME_EXCHANGE): no instant without a set at `dir`; the old one is removed after.
pub fn install(staged: tempfile::TempDir, stamp: &Stamp, dir: &Path) -> Result<(), FetchError> {
    let from = staged.path().to_path_buf();
    let text =
        serde_json::to_string_pretty(stamp).map_err(|e| FetchError::Internal(e.to_string()))?;
    let stamp_path = from.join(STAMP);
    std::fs::write(&stamp_path, text + "\n")
        .map_err(|e| FetchError::io(&stamp_path, "write", e))?;
    for name in stamp.files.keys().map(String::as_str).chain([STAMP]) {
        sync(&from.join(name))?;
    }
    sync(&from)?;
    std::fs::set_permissions(&from, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| FetchError::io(&from, "chmod", e))?;
    if dir.exists() {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        renameat_with(CWD, &from, CWD, dir, RenameFlags::EXCHANGE)
            .map_err(|e| FetchError::io(dir, "exchange with the new set", e.into()))?;
        // `staged` now holds the old set: dropping it removes it.
    } else {
        std::fs::rename(&from, dir).map_err(|e| FetchError::io(dir, "rename into place", e))?;
        // Renamed: nothing left for the TempDir to remove.
        let _ = staged.keep();
    }
    if let Some(parent) = dir.parent() {
        sync(parent)?;
    }
    Ok(())
}

/// An executable file of the staging dir, made from `from` (moved) under `name`.
pub fn place(from: &Path, staged: &Path, name: &str) -> Result<FileStamp, FetchError> {
    let to = staged.join(name);
    std::fs::rename(from, &to).map_err(|e| FetchError::io(&to, "rename", e))?;
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| FetchError::io(&to, "chmod", e))?;
    let (sha256, size) = sha256_of(&to)?;
    Ok(FileStamp { sha256, size })
}

fn sync(path: &Path) -> Result<(), FetchError> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| FetchError::io(path, "sync", e))
}

/// A cache directory: created 0700 (the user's own), an existing one as it is.
fn make_dir(dir: &Path) -> Result<(), FetchError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(FetchError::NotADir {
            path: dir.to_path_buf(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| FetchError::io(dir, "create", e)),
        Err(e) => Err(FetchError::io(dir, "stat", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(base: &str, arch: &str) -> Stamp {
        Stamp {
            source: "etcd".into(),
            version: "v3.6.16".into(),
            base: base.into(),
            arch: arch.into(),
            files: BTreeMap::new(),
            downloads: BTreeMap::new(),
        }
    }

    #[test]
    fn a_set_is_the_wanted_one_only_from_its_origin_for_its_architecture() {
        let official = "https://github.com/etcd-io/etcd/releases/download";
        let mirror = "https://mirror.example/etcd";
        assert_eq!(stamp(official, "amd64").differs(official, "amd64"), None);
        let why = stamp(mirror, "amd64").differs(official, "amd64").unwrap();
        assert!(why.contains(mirror) && why.contains(official), "{why}");
        let why = stamp(official, "arm64").differs(official, "amd64").unwrap();
        assert!(why.contains("arm64") && why.contains("amd64"), "{why}");
        // An older kubeunit's stamp, without them: fetched again, not trusted.
        let old: Stamp = serde_json::from_str(
            r#"{"source":"etcd","version":"v3.6.16","files":{},"downloads":{}}"#,
        )
        .unwrap();
        assert!(old.differs(official, "amd64").is_some());
    }
}
