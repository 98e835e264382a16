//! A running unit's memory for `status` when systemd does not account it (MemoryCurrent unset: the
//! memory controller is off for the unit, as on a legacy cgroup tree mounted read-only in a
//! container). Read from the unit's cgroup instead: its `memory.current` when the unified tree has
//! one, else the proportional set size of every process in it and below (a Delegate=yes unit's
//! children too). procfs parses smaps_rollup; walking the cgroup tree is a few lines.

use std::path::Path;

/// Where systemd tracks units: the unified tree (at the cgroup root, or at `unified/` beside the
/// legacy controllers) or the legacy name=systemd tree.
const TREES: &[&str] = &[
    "/sys/fs/cgroup",
    "/sys/fs/cgroup/unified",
    "/sys/fs/cgroup/systemd",
];

/// Bytes in use by the unit whose ControlGroup is `control_group` ("/x.slice/y.service"); `None`
/// when no tree has that cgroup (the unit has no processes, or the path is not a plain cgroup).
pub fn of_cgroup(control_group: &str) -> Option<u64> {
    let rel = Path::new(control_group.strip_prefix('/')?);
    // systemd's own value, but a path with `..` would leave the tree.
    if control_group == "/"
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    let dir = TREES
        .iter()
        .map(|t| Path::new(t).join(rel))
        .find(|d| d.join("cgroup.procs").is_file())?;
    if let Some(bytes) = std::fs::read_to_string(dir.join("memory.current"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return Some(bytes);
    }
    Some(pss_below(&dir))
}

/// The summed proportional set size of the processes in `dir` and every cgroup below it.
fn pss_below(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_dir())
        .filter_map(|e| std::fs::read_to_string(e.path().join("cgroup.procs")).ok())
        .flat_map(|procs| {
            procs
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .filter_map(|pid| procfs::process::Process::new(pid).ok()?.smaps_rollup().ok())
        .flat_map(|r| r.memory_map_rollup.0)
        .filter_map(|m| m.extension.map.get("Pss").copied())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_tree_or_are_not_cgroups_have_none() {
        for cg in [
            "",
            "/",
            "relative",
            "/../etc",
            "/a/../../b",
            "/no-such.slice/x.service",
        ] {
            assert_eq!(of_cgroup(cg), None, "{cg}");
        }
    }
}
