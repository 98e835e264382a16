//! The state dir as an open directory. Every path below it is relative and checked (no absolute path,
//! no `..`, `.` or empty component), and is resolved one component at a time with `openat` and
//! `O_NOFOLLOW`: no manifest entry and no symbolic link in the tree can make kubeunit read, write or
//! delete a file outside the state dir. Writes go through a temp file next to the target, named
//! recognisably (`.<name>.kubeunit-tmp`) so that an interrupted `gen` leaves nothing unnamed behind.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Suffix of the temp files `write_temp` makes (and recovery removes).
pub const TMP_SUFFIX: &str = ".kubeunit-tmp";

const DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Why a path is not a relative path inside the state dir.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotInside {
    #[error("an empty path")]
    Empty,
    #[error("an absolute path")]
    Absolute,
    #[error("an empty path component")]
    EmptyComponent,
    #[error("a '{0}' component")]
    Dots(&'static str),
    #[error("a NUL byte")]
    Nul,
}

/// The components of a relative path inside the state dir, or why it is not one.
pub fn parts(rel: &str) -> Result<Vec<&str>, NotInside> {
    if rel.is_empty() {
        return Err(NotInside::Empty);
    }
    if rel.starts_with('/') {
        return Err(NotInside::Absolute);
    }
    let parts: Vec<&str> = rel.split('/').collect();
    for p in &parts {
        match *p {
            "" => return Err(NotInside::EmptyComponent),
            "." => return Err(NotInside::Dots(".")),
            ".." => return Err(NotInside::Dots("..")),
            p if p.contains('\0') => return Err(NotInside::Nul),
            _ => {}
        }
    }
    Ok(parts)
}

/// The temp file `write_temp` uses for a file named `name`.
pub fn tmp_name(name: &str) -> String {
    format!(".{name}{TMP_SUFFIX}")
}

/// What a directory entry is (links are never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// An entry found by `Root::walk`: its path relative to the state dir, and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub rel: String,
    pub kind: Kind,
}

/// An open state dir.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    fd: OwnedFd,
}

/// An I/O error that says which component is a link or not a directory.
fn explain(rel: &str, component: &str, e: Errno) -> io::Error {
    match e {
        Errno::LOOP | Errno::NOTDIR => io::Error::other(format!(
            "{rel}: '{component}' is a symbolic link or not a directory (kubeunit follows no links inside the state dir)"
        )),
        e => e.into(),
    }
}

impl Root {
    /// Open the directory at `path` (the path itself may go through links: it is the user's choice).
    pub fn open(path: &Path) -> io::Result<Root> {
        let fd = rfs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root {
            path: path.to_path_buf(),
            fd,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The directory that holds `rel`, and the file name; with `create`, missing directories are
    /// made (0700).
    fn parent<'r>(&self, rel: &'r str, create: bool) -> io::Result<(OwnedFd, &'r str)> {
        let parts = parts(rel).map_err(|m| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{rel:?} is {m}, not a path inside the state dir"),
            )
        })?;
        let Some((name, dirs)) = parts.split_last() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty path"));
        };
        let mut dir = rfs::openat(&self.fd, ".", DIR, Mode::empty())?;
        for d in dirs {
            if create {
                match rfs::mkdirat(&dir, *d, Mode::from_raw_mode(0o700)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            dir = rfs::openat(&dir, *d, DIR, Mode::empty()).map_err(|e| explain(rel, d, e))?;
        }
        Ok((dir, name))
    }

    /// The bytes of the regular file `rel`; a link, FIFO or device is an error.
    pub fn read(&self, rel: &str) -> io::Result<Vec<u8>> {
        let (dir, name) = self.parent(rel, false)?;
        // O_NONBLOCK: opening a FIFO planted in the tree must not hang.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd =
            rfs::openat(&dir, name, flags, Mode::empty()).map_err(|e| explain(rel, name, e))?;
        if kind_of(FileType::from_raw_mode(rfs::fstat(&fd)?.st_mode)) != Kind::File {
            return Err(io::Error::other(format!("{rel} is not a regular file")));
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    pub fn read_string(&self, rel: &str) -> io::Result<String> {
        String::from_utf8(self.read(rel)?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{rel} is not UTF-8")))
    }

    /// Kind and permission bits of `rel` itself (not followed); `None` when it does not exist.
    pub fn stat(&self, rel: &str) -> io::Result<Option<(Kind, u32)>> {
        let (dir, name) = match self.parent(rel, false) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some((
                kind_of(FileType::from_raw_mode(st.st_mode)),
                st.st_mode & 0o7777,
            ))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Write `bytes` with `mode` to the temp file of `rel` (directories made as needed), synced.
    pub fn write_temp(&self, rel: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent(rel, true)?;
        let tmp = tmp_name(name);
        match rfs::unlinkat(&dir, tmp.as_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rfs::openat(&dir, tmp.as_str(), flags, Mode::from_raw_mode(0o600))?;
        rfs::fchmod(&fd, Mode::from_raw_mode(mode))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)?;
        file.sync_all()
    }

    /// Move the temp file of `rel` into place; `false` when there was none (already moved).
    pub fn commit_temp(&self, rel: &str) -> io::Result<bool> {
        let (dir, name) = self.parent(rel, false)?;
        match rfs::renameat(&dir, tmp_name(name).as_str(), &dir, name) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// `rel` replaced as one step: temp file, sync, rename.
    pub fn write_atomic(&self, rel: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        self.write_temp(rel, bytes, mode)?;
        self.commit_temp(rel)?;
        self.sync_parent(rel)
    }

    /// Remove the file (or link) `rel`; `false` when it was not there.
    pub fn remove(&self, rel: &str) -> io::Result<bool> {
        let (dir, name) = match self.parent(rel, false) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        match rfs::unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The directory `rel` ("" for the state dir itself), opened without following links; `None`
    /// when it does not exist.
    fn open_dir(&self, rel: &str) -> io::Result<Option<OwnedFd>> {
        if rel.is_empty() {
            return rfs::openat(&self.fd, ".", DIR, Mode::empty())
                .map(Some)
                .map_err(Into::into);
        }
        let (parent, name) = match self.parent(rel, false) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match rfs::openat(&parent, name, DIR, Mode::empty()) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(explain(rel, name, e)),
        }
    }

    /// The names in the directory `rel` and their kinds, sorted (links are not followed).
    pub fn list(&self, rel: &str) -> io::Result<Vec<(String, Kind)>> {
        match self.open_dir(rel)? {
            Some(fd) => list_fd(&fd),
            None => Ok(vec![]),
        }
    }

    /// The entries of the state dir itself.
    pub fn walk_top(&self) -> io::Result<Vec<(String, Kind)>> {
        self.list("")
    }

    /// Every entry below the directory `rel` ("" for the state dir itself), depth first and sorted;
    /// links are listed, never followed. A missing directory has no entries.
    pub fn walk(&self, rel: &str) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        if let Some(fd) = self.open_dir(rel)? {
            walk_fd(&fd, rel, &mut out)?;
        }
        Ok(out)
    }

    /// fsync the directory that holds `rel` (after renames in it).
    pub fn sync_parent(&self, rel: &str) -> io::Result<()> {
        let (dir, _) = self.parent(rel, false)?;
        rfs::fsync(&dir).map_err(Into::into)
    }
}

fn list_fd(dir: &OwnedFd) -> io::Result<Vec<(String, Kind)>> {
    let mut names = Vec::new();
    for entry in rfs::Dir::read_from(dir.as_fd())? {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes()).to_string_lossy();
        if name == "." || name == ".." {
            continue;
        }
        let st = rfs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)?;
        names.push((
            name.into_owned(),
            kind_of(FileType::from_raw_mode(st.st_mode)),
        ));
    }
    names.sort();
    Ok(names)
}

fn walk_fd(dir: &OwnedFd, rel: &str, out: &mut Vec<Entry>) -> io::Result<()> {
    for (name, kind) in list_fd(dir)? {
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        out.push(Entry {
            rel: child.clone(),
            kind,
        });
        if kind == Kind::Dir {
            let fd = rfs::openat(dir, name.as_str(), DIR, Mode::empty())?;
            walk_fd(&fd, &child, out)?;
        }
    }
    Ok(())
}

/// Read `rel` below the state dir `dir` safely (for run-time readers that hold no `Root`).
pub fn read_in(dir: &Path, rel: &str) -> io::Result<Vec<u8>> {
    Root::open(dir)?.read(rel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    #[test]
    fn paths_that_leave_the_state_dir_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/."] {
            assert!(parts(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parts("pki/etcd/ca.crt").unwrap(),
            vec!["pki", "etcd", "ca.crt"]
        );
    }

    #[test]
    fn links_are_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "outside").unwrap();
        symlink(&outside, state.join("pki")).unwrap();
        symlink(outside.join("secret"), state.join("profile.yaml")).unwrap();
        let root = Root::open(&state).unwrap();
        // Reads, writes and deletes through the linked directory fail and touch nothing outside.
        let e = root.read("pki/secret").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(root.write_atomic("pki/new", b"x", 0o600).is_err());
        assert!(root.remove("pki/secret").is_err());
        assert!(
            root.read("profile.yaml").is_err(),
            "a linked file is not read"
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"outside");
        // Replacing a linked file replaces the link, not its target.
        root.write_atomic("profile.yaml", b"mine", 0o644).unwrap();
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"outside");
        assert_eq!(root.read("profile.yaml").unwrap(), b"mine");
        // The walk lists the link without descending.
        let entries = root.walk("").unwrap();
        assert!(entries.contains(&Entry {
            rel: "pki".into(),
            kind: Kind::Symlink
        }));
        assert!(!entries.iter().any(|e| e.rel.starts_with("pki/")));
        // Paths outside are refused before any system call.
        assert!(root.read("../outside/secret").is_err());
        assert!(!root.remove("/etc/hostname").unwrap_or(false));
    }

    #[test]
    fn writes_are_atomic_and_set_the_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::open(tmp.path()).unwrap();
        root.write_atomic("a/b/c.key", b"k", 0o600).unwrap();
        let meta = std::fs::metadata(tmp.path().join("a/b/c.key")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
        assert_eq!(
            std::fs::metadata(tmp.path().join("a"))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777,
            0o700
        );
        root.write_temp("a/b/c.key", b"new", 0o600).unwrap();
        assert_eq!(root.read("a/b/c.key").unwrap(), b"k", "not yet committed");
        assert!(tmp.path().join("a/b/.c.key.kubeunit-tmp").exists());
        assert!(root.commit_temp("a/b/c.key").unwrap());
        assert!(!root.commit_temp("a/b/c.key").unwrap());
        assert_eq!(root.read("a/b/c.key").unwrap(), b"new");
        assert_eq!(root.stat("a/b/c.key").unwrap(), Some((Kind::File, 0o600)));
        assert_eq!(root.stat("a/x").unwrap(), None);
    }
}
