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

/// Rules whose comment carries `tag` (the CNI plugins tag every rule with the network's name), in
/// the nat and filter tables, and then the chains they jumped to.
fn delete_tagged_rules(tag: &str) -> Result<(), String> {
    for table in ["nat", "filter"] {
        let Ok(out) = Command::new("iptables-save").args(["-t", table]).output() else {
            return Ok(()); // no iptables here: nothing can have been added
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let mut chains = Vec::new();
        for line in text.lines() {
            let Some(rule) = line.strip_prefix("-A ") else {
                continue;
            };
            let Ok(words) = split_words(rule) else {
                continue;
            };
            if !words.iter().any(|w| w.contains(tag)) {
                continue;
            }
            if let Some(target) = words.iter().skip_while(|w| *w != "-j").nth(1) {
                if target.starts_with("CNI-") && !chains.contains(target) {
                    chains.push(target.clone());
                }
            }
            let mut args = vec!["-t".to_string(), table.into(), "-D".into()];
            args.extend(words);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(Path::new("iptables"), &args)?;
        }
        for chain in chains {
            run(Path::new("iptables"), &["-t", table, "-F", &chain])?;
            run(Path::new("iptables"), &["-t", table, "-X", &chain])?;
        }
    }
    Ok(())
}

/// Delete `chains` from every table where they exist: first the rules jumping to them, then the
/// chains.
fn delete_chains(chains: &[&str]) -> Result<(), String> {
    for table in ["filter", "nat", "mangle"] {
        let Ok(out) = Command::new("iptables-save").args(["-t", table]).output() else {
            return Ok(());
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let present: Vec<&str> = chains
            .iter()
            .copied()
            .filter(|c| {
                text.lines()
                    .any(|l| l.strip_prefix(':').and_then(|r| r.split(' ').next()) == Some(c))
            })
            .collect();
        for line in text.lines() {
            let Some(rule) = line.strip_prefix("-A ") else {
                continue;
            };
            let Ok(words) = split_words(rule) else {
                continue;
            };
            let in_chain = present.contains(&words[0].as_str());
            let jumps = words
                .iter()
                .skip_while(|w| *w != "-j")
                .nth(1)
                .is_some_and(|t| present.contains(&t.as_str()));
            if jumps && !in_chain {
                let mut args = vec!["-t".to_string(), table.into(), "-D".into()];
                args.extend(words);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                run(Path::new("iptables"), &args)?;
            }
        }
        for chain in present {
            run(Path::new("iptables"), &["-t", table, "-F", chain])?;
            run(Path::new("iptables"), &["-t", table, "-X", chain])?;
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
