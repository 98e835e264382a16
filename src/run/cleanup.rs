//! What `stop` removes after the units are gone: the component table's `after_stop` steps. Each step
//! is best effort and reports what it could not do; none of them touches anything that is not this
//! environment's (paths below its own dirs, rules tagged with its own network, its own bridge).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::components::{Cleanup, Component};
use crate::spec::Plan;
use crate::unit::split_words;

/// Run one component's cleanup steps; returns what failed (for the stop report).
pub fn after_stop(plan: &Plan, component: &Component) -> Vec<String> {
    let mut problems = Vec::new();
    for step in component.after_stop {
        let result = match step {
            Cleanup::Unmount(dirs) => unmount_below(&dirs(plan)),
            Cleanup::RemoveDir(dir) => remove_dir(&dir(plan)),
            Cleanup::IptablesTagged(tag) => delete_tagged_rules(&tag(plan)),
            Cleanup::IptablesChains(chains) => delete_chains(chains),
            Cleanup::DeleteLink(name) => delete_link(&name(plan)),
            Cleanup::CgroupDirs(path) => remove_cgroup_dirs(&path(plan)),
            Cleanup::RunBinary(args) => run(&component.binary_path(plan), args),
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

fn unmount_below(dirs: &[PathBuf]) -> Result<(), String> {
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
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("cannot unmount {}", failed.join(", ")))
    }
}

fn remove_dir(dir: &Path) -> Result<(), String> {
    // Never follow a mount that is still there into another file system.
    if !mounts_below(&[dir.to_path_buf()]).is_empty() {
        return Err(format!("{} still has mounts; left in place", dir.display()));
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot delete {}: {e}", dir.display())),
    }
}

fn delete_link(name: &str) -> Result<(), String> {
    if !Path::new("/sys/class/net").join(name).exists() {
        return Ok(());
    }
    run(Path::new("ip"), &["link", "delete", name])
}

/// One table as `iptables-save` shows it: the chains it declares and each rule's words (chain first).
/// `None` where there is no iptables (then nothing can have been added).
fn table_dump(table: &str) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let out = Command::new("iptables-save")
        .args(["-t", table])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let chains = text
        .lines()
        .filter_map(|l| l.strip_prefix(':')?.split(' ').next().map(String::from))
        .collect();
    let rules = text
        .lines()
        .filter_map(|l| split_words(l.strip_prefix("-A ")?).ok())
        .filter(|w| !w.is_empty())
        .collect();
    Some((chains, rules))
}

/// The chain a rule jumps to.
fn jump_target(words: &[String]) -> Option<&String> {
    words.iter().skip_while(|w| *w != "-j").nth(1)
}

fn delete_rule(table: &str, words: &[String]) -> Result<(), String> {
    let mut args = vec!["-t", table, "-D"];
    args.extend(words.iter().map(String::as_str));
    run(Path::new("iptables"), &args)
}

fn delete_chain(table: &str, chain: &str) -> Result<(), String> {
    run(Path::new("iptables"), &["-t", table, "-F", chain])?;
    run(Path::new("iptables"), &["-t", table, "-X", chain])
}

/// Rules whose comment carries `tag` (the CNI plugins tag every rule with the network's name), in
/// the nat and filter tables, and then the CNI chains they jumped to.
fn delete_tagged_rules(tag: &str) -> Result<(), String> {
    for table in ["nat", "filter"] {
        let Some((_, rules)) = table_dump(table) else {
            return Ok(());
        };
        let mut chains: Vec<&String> = Vec::new();
        for words in rules.iter().filter(|w| w.iter().any(|x| x.contains(tag))) {
            if let Some(target) = jump_target(words).filter(|t| t.starts_with("CNI-")) {
                if !chains.contains(&target) {
                    chains.push(target);
                }
            }
            delete_rule(table, words)?;
        }
        for chain in chains {
            delete_chain(table, chain)?;
        }
    }
    Ok(())
}

/// Delete `chains` from every table where they exist: first the rules jumping to them from
/// elsewhere, then the chains.
fn delete_chains(chains: &[&str]) -> Result<(), String> {
    for table in ["filter", "nat", "mangle"] {
        let Some((declared, rules)) = table_dump(table) else {
            return Ok(());
        };
        let present: Vec<&str> = chains
            .iter()
            .copied()
            .filter(|c| declared.iter().any(|d| d == c))
            .collect();
        let is_present = |c: &String| present.contains(&c.as_str());
        for words in &rules {
            if !is_present(&words[0]) && jump_target(words).is_some_and(is_present) {
                delete_rule(table, words)?;
            }
        }
        for chain in present {
            delete_chain(table, chain)?;
        }
    }
    Ok(())
}

/// Empty cgroup directories below `path` in each v1 controller, deepest first (nothing on v2, where
/// systemd owns the one hierarchy).
fn remove_cgroup_dirs(path: &str) -> Result<(), String> {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        return Ok(());
    }
    let Ok(controllers) = std::fs::read_dir(root) else {
        return Ok(());
    };
    for controller in controllers.flatten() {
        let top = controller.path().join(path.trim_start_matches('/'));
        let mut dirs: Vec<PathBuf> = walkdir::WalkDir::new(&top)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_dir())
            .map(|e| e.into_path())
            .collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            // A directory with processes (another environment's? never below ours) stays.
            let _ = std::fs::remove_dir(&d);
        }
    }
    Ok(())
}

fn run(program: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{} {}: {}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b\011c\134d"), "/a b\tc\\d");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }
}
