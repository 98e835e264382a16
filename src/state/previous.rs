//! What a previous `gen` left in the state dir: read-only access for the keys, CAs and certificates
//! to keep.

use std::fs;
use std::path::{Path, PathBuf};

use super::manifest::{sha256_hex, Manifest};
use crate::error::Error;
use crate::spec::paths::MANIFEST;

/// What a previous `gen` left in the state dir.
pub struct Previous {
    pub dir: PathBuf,
    pub manifest: Option<Manifest>,
}

impl Previous {
    /// Read the state dir. A missing dir is an empty state; a dir with content but no manifest is
    /// refused (it is not ours), except one holding only `pki/` (a CA the user brings).
    pub fn load(dir: &Path) -> Result<Previous, Error> {
        let manifest_path = dir.join(MANIFEST);
        let manifest = match fs::read(&manifest_path) {
            Ok(bytes) => Some(serde_json::from_slice::<Manifest>(&bytes).map_err(|e| {
                Error::state(
                    dir,
                    format!("{MANIFEST} is unreadable: {e}"),
                    "restore it, or regenerate everything with `kubeunit gen --force`",
                )
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::state(
                    dir,
                    format!("cannot read {MANIFEST}: {e}"),
                    "check the directory's permissions (run as its owner or as root)",
                ))
            }
        };
        if manifest.is_none() {
            if let Ok(entries) = fs::read_dir(dir) {
                let foreign: Vec<String> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n != "pki")
                    .collect();
                if !foreign.is_empty() {
                    return Err(Error::state(
                        dir,
                        format!(
                            "exists, has no {MANIFEST} and holds other files ({}): not a kubeunit state dir",
                            foreign.join(", ")
                        ),
                        "pick a new or empty directory with --state-dir",
                    ));
                }
            }
        }
        Ok(Previous {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.dir.join(rel)).ok()
    }

    /// The file is on disk exactly as the manifest recorded it.
    pub fn intact(&self, rel: &str) -> bool {
        let Some(entry) = self.manifest.as_ref().and_then(|m| m.files.get(rel)) else {
            return false;
        };
        fs::read(self.dir.join(rel))
            .map(|b| sha256_hex(&b) == entry.sha256)
            .unwrap_or(false)
    }

    pub fn cert_digest(&self, name: &str) -> Option<String> {
        self.manifest.as_ref()?.certs.get(name).cloned()
    }
}
