//! The ImportImages hook: image archives into containerd's `k8s.io` namespace (the CRI's), with the
//! `ctr` that ships with the containerd binary, so pods run without a registry.

use std::path::{Path, PathBuf};

use crate::components::Component;
use crate::error::Error;
use crate::spec::{paths, Plan};

/// Every archive to import: the profile's `images`, then `STATE/images/*.tar` by name.
pub fn archives(plan: &Plan) -> Vec<PathBuf> {
    let mut out = plan.profile.images.clone();
    let dir = plan.state_dir.join(paths::IMAGES);
    let mut dropped: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "tar"))
                .collect()
        })
        .unwrap_or_default();
    dropped.sort();
    out.extend(dropped);
    out
}

/// `ctr` next to the containerd binary (containerd's release and build put them side by side).
fn ctr(plan: &Plan, containerd: &Component) -> PathBuf {
    let binary = containerd.binary_path(plan);
    binary.parent().unwrap_or(Path::new("/")).join("ctr")
}

/// `ctr` with the environment's socket and the CRI's namespace.
fn ctr_command(plan: &Plan, ctr: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(ctr);
    cmd.arg("--address")
        .arg(&plan.containerd_socket)
        .args(["--namespace", "k8s.io"]);
    cmd
}

fn cannot_run(ctr: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::Preflight {
        message: format!("cannot run {}: {e}", ctr.display()),
        fix: "install ctr next to the containerd binary (containerd's build makes both)".into(),
    }
}

/// Image references in the namespace (digest-only names left out).
fn references(plan: &Plan, ctr: &Path) -> Result<Vec<String>, Error> {
    let out = ctr_command(plan, ctr)
        .args(["images", "ls", "-q"])
        .output()
        .map_err(cannot_run(ctr))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("sha256:"))
        .map(String::from)
        .collect())
}

/// Import every archive; returns the references that were not in containerd before. (ctr's own
/// progress output is for terminals; the image list is what counts.)
pub fn import(plan: &Plan, containerd: &Component) -> Result<Vec<String>, Error> {
    let ctr = ctr(plan, containerd);
    let before = references(plan, &ctr)?;
    for archive in archives(plan) {
        let out = ctr_command(plan, &ctr)
            .args(["images", "import"])
            .arg(&archive)
            .output()
            .map_err(cannot_run(&ctr))?;
        if !out.status.success() {
            return Err(Error::Start(format!(
                "importing {} into containerd failed: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    let mut imported = references(plan, &ctr)?;
    imported.retain(|r| !before.contains(r));
    Ok(imported)
}
