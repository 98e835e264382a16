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

/// Import every archive; returns the image references containerd reports for each.
pub fn import(plan: &Plan, containerd: &Component) -> Result<Vec<String>, Error> {
    let ctr = ctr(plan, containerd);
    let mut imported = Vec::new();
    for archive in archives(plan) {
        let out = std::process::Command::new(&ctr)
            .arg("--address")
            .arg(&plan.containerd_socket)
            .args(["--namespace", "k8s.io", "images", "import"])
            .arg(&archive)
            .output()
            .map_err(|e| Error::Preflight {
                message: format!("cannot run {}: {e}", ctr.display()),
                fix: "install ctr next to the containerd binary (containerd's build makes both)"
                    .into(),
            })?;
        if !out.status.success() {
            return Err(Error::Start(format!(
                "importing {} into containerd failed: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // ctr prints a line "REF<TAB>saved" per image, among progress lines.
        let text = String::from_utf8_lossy(&out.stdout);
        imported.extend(text.lines().filter_map(|l| {
            let mut words = l.split_whitespace();
            let reference = words.next()?;
            (words.next() == Some("saved")).then(|| reference.to_string())
        }));
    }
    Ok(imported)
}
