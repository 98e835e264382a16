//! What `stop` removes after the units are gone: the component table's `after_stop` steps; and the
//! pods' frozen cgroups thawed so that their kill takes (`kill_pods`). Each step
//! is best effort and reports what it could not do; none of them touches anything that is not this
//! environment's (paths below its own dirs, its own cgroups). The node's links, bridge and iptables
//! rules need none: they live in the node's network namespace, which its unit deletes.

use std::path::{Path, PathBuf};

use crate::components::{Cleanup, Component};
use crate::error::Error;
use crate::spec::plan::NodePlan;
use crate::spec::Plan;
use crate::systemd::Systemd;

/// What a cleanup step could not do; it goes into the stop report.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// Each path with why it could not be unmounted or deleted.
    #[error("cannot {op} {}", .failed.join(", "))]
    Paths {
        op: &'static str,
        failed: Vec<String>,
    },
    #[error("{0} still has mounts; left in place")]
    Mounted(PathBuf),
    #[error("cannot delete {path}: {source}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Ok when nothing failed, else every failure of `op`.
fn all_or(op: &'static str, failed: Vec<String>) -> Result<(), CleanupError> {
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CleanupError::Paths { op, failed })
    }
}

/// Run one component's cleanup steps; returns what failed (for the stop report).
pub fn after_stop(plan: &Plan, component: &Component) -> Vec<String> {
    let mut problems = Vec::new();
    for step in component.after_stop {
        let result = match step {
            Cleanup::Unmount(dirs) => unmount_below(&dirs(plan)),
            Cleanup::RemoveDir(dir) => remove_dir(&dir(plan)),
            Cleanup::LinksInto(dir, target) => remove_links_into(Path::new(dir), &target(plan)),
            Cleanup::CgroupDirs(path) => remove_cgroup_dirs(&path(plan)),
            Cleanup::UnfinishedSnapshots => remove_unfinished_snapshots(&plan.snapshot_dir),
        };
        if let Err(e) = result {
            problems.push(format!("{}: {e}", component.name));
        }
    }
    problems
}

/// Mount points below `dirs`, deepest first.
fn mounts_below(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mountinfo(p)))
        .filter(|p| dirs.iter().any(|d| p.starts_with(d) && p != d))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape_mountinfo(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let code: String = chars.by_ref().take(3).collect();
            match u8::from_str_radix(&code, 8) {
                Ok(b) => out.push(b as char),
                Err(_) => {
                    out.push('\\');
                    out.push_str(&code);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn unmount_below(dirs: &[PathBuf]) -> Result<(), CleanupError> {
    let mut failed = Vec::new();
    for point in mounts_below(dirs) {
        let Ok(c) = std::ffi::CString::new(point.as_os_str().as_encoded_bytes()) else {
            continue;
        };
        // MNT_DETACH: nothing of the environment runs any more; a busy reference (a process of
        // another environment that entered a mount namespace) must not block the stop.
        // SAFETY: umount2 with a NUL-terminated path we own.
        if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
            failed.push(format!(
                "{}: {}",
                point.display(),
                std::io::Error::last_os_error()
            ));
        }
    }
    all_or("unmount", failed)
}

pub fn remove_dir(dir: &Path) -> Result<(), CleanupError> {
    // Never follow a mount that is still there into another file system.
    if !mounts_below(&[dir.to_path_buf()]).is_empty() {
        return Err(CleanupError::Mounted(dir.to_path_buf()));
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CleanupError::Remove {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// The temporary files of unfinished snapshots directly in `dir` (regular files only).
fn remove_unfinished_snapshots(dir: &Path) -> Result<(), CleanupError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut failed = Vec::new();
    for entry in entries.flatten() {
        let unfinished =
            crate::spec::paths::is_unfinished_snapshot(&entry.file_name().to_string_lossy())
                && entry.file_type().is_ok_and(|t| t.is_file());
        if unfinished {
            if let Err(e) = std::fs::remove_file(entry.path()) {
                failed.push(format!("{}: {e}", entry.path().display()));
            }
        }
    }
    all_or("delete", failed)
}

/// Symlinks directly in `dir` whose target lies below `target` (others' links stay).
fn remove_links_into(dir: &Path, target: &Path) -> Result<(), CleanupError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut failed = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = std::fs::read_link(&path).is_ok_and(|t| t.starts_with(target));
        if ours {
            if let Err(e) = std::fs::remove_file(&path) {
                failed.push(format!("{}: {e}", path.display()));
            }
        }
    }
    all_or("delete", failed)
}

/// SIGKILL to every process of a node's pods, their frozen cgroups thawed first (a frozen process
/// takes no signal: `cleanup::thaw_below`), and once more after the kill for one a runc froze
/// meanwhile (containerd's shims, and the runc they run, outlive containerd's unit until its own
/// kill).
pub async fn kill_pods(sd: &Systemd, node: &NodePlan) -> Result<(), Error> {
    for _ in 0..2 {
        let path = node.pods_cgroup.clone();
        tokio::task::spawn_blocking(move || thaw_below(&path))
            .await
            .map_err(|e| Error::Internal(format!("thawing the pods' cgroups panicked: {e}")))?;
        sd.kill_all(&node.pods_slice).await?;
    }
    Ok(())
}

/// Every cgroup below `path` in cgroup v1's freezer that is FROZEN or FREEZING, thawed; those thawed.
/// runc's systemd driver freezes a container's cgroup while it rewrites its device rules: a runc
/// killed in between (`destroy` of a node whose pod was starting) or a freeze that failed ("unable to
/// freeze") leaves the cgroup frozen, and a frozen process takes no SIGKILL until it thaws, so the
/// pod outlived `stop` with its cgroups. On v2 a fatal signal wakes a frozen process: nothing to do.
pub fn thaw_below(path: &str) -> Vec<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let init = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    match freezer_of_init(&mountinfo, &init) {
        Some(dir) => thaw_below_in(&dir, path),
        None => Vec::new(),
    }
}

/// Where runc's systemd driver puts a unit's freezer cgroup (the freezer is no controller systemd
/// manages on v1): below PID 1's own cgroup in the freezer hierarchy, as it is mounted here. In a
/// container that is the container's cgroup, not the hierarchy's root. None without a v1 freezer.
fn freezer_of_init(mountinfo: &str, init_cgroup: &str) -> Option<PathBuf> {
    let (root, point) = mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let mut fs = fs.split(' ');
        let (kind, super_options) = (fs.next()?, fs.nth(1)?);
        let fields: Vec<&str> = mount.split(' ').collect();
        (kind == "cgroup" && super_options.split(',').any(|o| o == "freezer"))
            .then(|| Some((fields.get(3)?.to_string(), fields.get(4)?.to_string())))?
    })?;
    let init = init_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "freezer")
            .then_some(path)
    })?;
    let below_root = Path::new(init).strip_prefix(&root).ok()?;
    Some(PathBuf::from(unescape_mountinfo(&point)).join(below_root))
}

fn thaw_below_in(freezer: &Path, path: &str) -> Vec<PathBuf> {
    let top = freezer.join(path.trim_start_matches('/'));
    // Parents first (walkdir's order): a child of a frozen cgroup reads FROZEN until its parent thaws.
    walkdir::WalkDir::new(&top)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_dir())
        .filter(|e| {
            let state = e.path().join("freezer.state");
            std::fs::read_to_string(&state).is_ok_and(|s| s.trim() != "THAWED")
                && std::fs::write(&state, "THAWED").is_ok()
        })
        .map(|e| e.into_path())
        .collect()
}

/// Empty cgroup directories below `path` in each v1 controller, deepest first (nothing on v2, where
/// systemd owns the one hierarchy).
fn remove_cgroup_dirs(path: &str) -> Result<(), CleanupError> {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        return Ok(());
    }
    let Ok(controllers) = std::fs::read_dir(root) else {
        return Ok(());
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    for controller in controllers.flatten() {
        let top = controller.path().join(path.trim_start_matches('/'));
        dirs.extend(
            walkdir::WalkDir::new(&top)
                .into_iter()
                .flatten()
                .filter(|e| e.file_type().is_dir())
                .map(|e| e.into_path()),
        );
    }
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    // A cgroup whose last process was just killed stays busy a moment after it has none (a
    // two-environment test found 2 left right after `stop`, once in a whole suite): tried again for
    // a while. One with processes (another environment's? never below ours) stays.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        dirs.retain(|d| match std::fs::remove_dir(d) {
            Ok(()) => false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(_) => {
                std::fs::read_to_string(d.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty())
            }
        });
        if dirs.is_empty() || std::time::Instant::now() > deadline {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_links_into_the_target_go() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("links");
        std::fs::create_dir(&dir).unwrap();
        let ours = tmp.path().join("env/pod-logs");
        std::os::unix::fs::symlink(ours.join("a/0.log"), dir.join("a.log")).unwrap();
        std::os::unix::fs::symlink("/elsewhere/b/0.log", dir.join("b.log")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("env/pod-logs-2/c"), dir.join("c.log")).unwrap();
        std::fs::write(dir.join("plain.log"), "x").unwrap();
        remove_links_into(&dir, &ours).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["b.log", "c.log", "plain.log"]);
        remove_links_into(&tmp.path().join("missing"), &ours).unwrap();
    }

    #[test]
    fn frozen_cgroups_below_the_path_thaw_and_nothing_else() {
        // A fake freezer hierarchy (files, not a cgroupfs): the node test freezes a real pod's.
        let root = tempfile::tempdir().unwrap();
        let ours = root.path().join("kubeunit.slice/kubeunit-dev.slice");
        let pod = ours.join("kubeunit-dev-kubepods.slice/pod1.slice");
        let other = root.path().join("kubeunit.slice/kubeunit-other.slice");
        for (dir, state) in [
            (&ours, "THAWED"),
            (&pod, "FROZEN"),
            (&pod.join("cri-containerd-1.scope"), "FREEZING"),
            (&other, "FROZEN"),
        ] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("freezer.state"), state).unwrap();
        }
        let thawed = thaw_below_in(root.path(), "/kubeunit.slice/kubeunit-dev.slice");
        assert_eq!(thawed, [pod.clone(), pod.join("cri-containerd-1.scope")]);
        let state = |d: &Path| std::fs::read_to_string(d.join("freezer.state")).unwrap();
        assert_eq!(state(&pod), "THAWED");
        assert_eq!(state(&other), "FROZEN", "another environment's stays");
        assert!(thaw_below_in(root.path(), "/missing").is_empty());
    }

    #[test]
    fn the_freezer_dir_is_init_s_own_cgroup() {
        let mountinfo = "\
35 30 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 30 0:31 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
";
        let host = "7:freezer:/\n4:memory:/\n0::/\n";
        assert_eq!(
            freezer_of_init(mountinfo, host),
            Some(PathBuf::from("/sys/fs/cgroup/freezer/"))
        );
        // In a container (no cgroup namespace): its own cgroup below the hierarchy's root.
        let container = "7:freezer:/kubeunit-containers/node-a\n";
        assert_eq!(
            freezer_of_init(mountinfo, container),
            Some(PathBuf::from(
                "/sys/fs/cgroup/freezer/kubeunit-containers/node-a"
            ))
        );
        // Mounted from the container's own cgroup down (a cgroup namespace's view).
        let ns = "36 30 0:31 /kubeunit-containers/node-a /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n";
        assert_eq!(
            freezer_of_init(ns, container),
            Some(PathBuf::from("/sys/fs/cgroup/freezer"))
        );
        // cgroup v2, or no freezer: none.
        let v2 = "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(freezer_of_init(v2, "0::/init.scope\n"), None);
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b\011c\134d"), "/a b\tc\\d");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }
}
