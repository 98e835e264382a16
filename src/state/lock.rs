//! One writer at a time: `gen`, `start`, `stop`, `restart` and `destroy` hold an exclusive `flock` on
//! the state dir's `.lock` (`gen --check` a shared one) for as long as they run. A second caller
//! waits a bounded time, then fails naming the holder (its PID and command line, from /proc/locks).
//! The lock file stays empty: the kernel knows the holder, and releases the lock when it exits, even
//! on kill -9.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::root::Root;
use crate::error::Error;
use crate::spec::paths::LOCK;

/// Held until dropped (the descriptor's close releases the flock).
#[derive(Debug)]
pub struct Lock {
    _fd: OwnedFd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Changes the state dir or the running environment.
    Exclusive,
    /// Only reads it (`gen --check`): several at once, none while a writer works.
    Shared,
}

/// Lock the state dir at `dir`: open it, then flock its `.lock` (created when `create`; without it,
/// a dir that has no lock file yet is not locked: `Ok(None)`). Waits up to `wait`, telling
/// `on_wait` once who it waits for.
pub fn acquire(
    dir: &Path,
    access: Access,
    create: bool,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<Option<(Root, Lock)>, Error> {
    acquire_file(dir, LOCK, access, create, wait, on_wait)
}

/// The same on another lock file in `dir`: `upgrade`'s, in the data dir, held from its plan to its
/// end (the state dir's lock is taken and let go by the render in between).
pub fn acquire_file(
    dir: &Path,
    file: &str,
    access: Access,
    create: bool,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<Option<(Root, Lock)>, Error> {
    let t0 = Instant::now();
    let mut told = false;
    loop {
        let root = match Root::open(dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => return Err(Error::io(dir, "open")(e)),
        };
        let mut flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        if create {
            flags |= OFlags::CREATE;
        }
        let fd = match rfs::openat(root.fd(), file, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if !create => return Ok(None),
            Err(e) => return Err(Error::io(dir.join(file), "open")(e.into())),
        };
        let op = match access {
            Access::Exclusive => FlockOperation::NonBlockingLockExclusive,
            Access::Shared => FlockOperation::NonBlockingLockShared,
        };
        match rfs::flock(&fd, op) {
            Ok(()) => {
                // `destroy --all` may have removed the dir (and this lock file) while we waited:
                // then lock what is at the path now.
                if same_file(&root, file, &fd) {
                    return Ok(Some((root, Lock { _fd: fd })));
                }
                continue;
            }
            Err(Errno::WOULDBLOCK) => {}
            Err(e) => return Err(Error::io(dir.join(file), "lock")(e.into())),
        }
        let holder = holder(&fd);
        if t0.elapsed() >= wait {
            return Err(Error::Busy {
                path: dir.to_path_buf(),
                holder,
                waited_secs: wait.as_secs(),
            });
        }
        if !told {
            on_wait(&format!(
                "waiting for {} (it holds {}; up to {}s)",
                holder,
                dir.display(),
                wait.as_secs()
            ));
            told = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn same_file(root: &Root, file: &str, fd: &OwnedFd) -> bool {
    let (Ok(open), Ok(there)) = (
        rfs::fstat(fd),
        rfs::statat(root.fd(), file, AtFlags::SYMLINK_NOFOLLOW),
    ) else {
        return false;
    };
    open.st_ino == there.st_ino && open.st_dev == there.st_dev
}

/// "PID 1234 (kubeunit start --state-dir /x)": who holds a flock on the file `fd` is open on.
fn holder(fd: &OwnedFd) -> String {
    let Ok(st) = rfs::fstat(fd) else {
        return "another process".into();
    };
    let id = format!(
        "{:02x}:{:02x}:{}",
        rfs::major(st.st_dev),
        rfs::minor(st.st_dev),
        st.st_ino
    );
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let pid = locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; waiters have "->" after the number.
        match fields.as_slice() {
            [_, "FLOCK", _, _, pid, file, ..] if *file == id => Some(pid.to_string()),
            _ => None,
        }
    });
    let Some(pid) = pid else {
        return "another process".into();
    };
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    if cmd.is_empty() {
        format!("PID {pid}")
    } else {
        format!("PID {pid} ({cmd})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_waits_then_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let quiet = &mut |_: &str| {};
        let held = acquire(dir.path(), Access::Exclusive, true, Duration::ZERO, quiet)
            .unwrap()
            .unwrap();
        // flock locks belong to the open file description: a second open in this process conflicts
        // like another process would.
        let mut said = Vec::new();
        let e = acquire(
            dir.path(),
            Access::Exclusive,
            true,
            Duration::from_millis(120),
            &mut |m: &str| said.push(m.to_string()),
        )
        .unwrap_err();
        let pid = std::process::id().to_string();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains(&format!("PID {pid}")), "{e}");
        assert!(e.to_string().contains("KUBEUNIT_LOCK_TIMEOUT"), "{e}");
        assert_eq!(said.len(), 1, "told once: {said:?}");
        // Readers are kept out too, and get in once the writer is done.
        assert!(acquire(dir.path(), Access::Shared, false, Duration::ZERO, quiet).is_err());
        drop(held);
        // (A wait: a child another test forks in this process holds a copy of the lock's open file
        // description until its exec closes it.)
        let wait = Duration::from_secs(5);
        let a = acquire(dir.path(), Access::Shared, false, wait, quiet).unwrap();
        let b = acquire(dir.path(), Access::Shared, false, wait, quiet).unwrap();
        assert!(a.is_some() && b.is_some(), "readers share");
        // Without a lock file and without `create`, nothing is created.
        let empty = tempfile::tempdir().unwrap();
        assert!(
            acquire(empty.path(), Access::Shared, false, Duration::ZERO, quiet)
                .unwrap()
                .is_none()
        );
        assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
    }
}
