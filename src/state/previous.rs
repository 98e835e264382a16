//! What a previous `gen` left in the state dir: read-only access for the keys, CAs and certificates
//! to keep. Every read goes through `Root` (no path outside the state dir, no links).

use std::path::{Path, PathBuf};

use super::manifest::{sha256_hex, Manifest, Renewed};
use super::root::Root;
use crate::error::Error;
use crate::spec::paths::MANIFEST;

/// What a previous `gen` left in the state dir.
pub struct Previous {
    pub dir: PathBuf,
    root: Option<Root>,
    pub manifest: Option<Manifest>,
}

impl Previous {
    /// Read the state dir's manifest (a missing dir is an empty state). A manifest that cannot be
    /// read, or that lists paths outside kubeunit's files, is refused. Whether the directory may be
    /// a state dir at all is `state::dir::inspect`'s to say.
    pub fn load(dir: &Path) -> Result<Previous, Error> {
        Previous::load_with(dir, false)
    }

    /// `load`; with `ignore_manifest_errors` (gen --force) a broken manifest is treated as absent.
    pub fn load_with(dir: &Path, ignore_manifest_errors: bool) -> Result<Previous, Error> {
        let root = match Root::open(dir) {
            Ok(r) => Some(r),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(Error::state(
                    dir,
                    format!("cannot open it: {e}"),
                    "check the directory's permissions (run as its owner or as root)",
                ))
            }
        };
        let manifest = match root.as_ref().map(|r| r.read(MANIFEST)) {
            None => None,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => None,
            Some(Err(_)) if ignore_manifest_errors => None,
            Some(Err(e)) => {
                return Err(Error::state(
                    dir,
                    format!("cannot read {MANIFEST}: {e}"),
                    "check the directory's permissions (run as its owner or as root)",
                ))
            }
            Some(Ok(bytes)) => match parse(dir, &bytes) {
                Ok(m) => Some(m),
                Err(_) if ignore_manifest_errors => None,
                Err(e) => return Err(e),
            },
        };
        Ok(Previous {
            dir: dir.to_path_buf(),
            root,
            manifest,
        })
    }

    pub fn root(&self) -> Option<&Root> {
        self.root.as_ref()
    }

    pub fn read_bytes(&self, rel: &str) -> Option<Vec<u8>> {
        self.root.as_ref()?.read(rel).ok()
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        String::from_utf8(self.read_bytes(rel)?).ok()
    }

    /// Whether anything (even an unreadable file) is at `rel`.
    pub fn exists(&self, rel: &str) -> bool {
        self.root
            .as_ref()
            .is_some_and(|r| !matches!(r.stat(rel), Ok(None)))
    }

    /// The file is on disk exactly as the manifest recorded it.
    pub fn intact(&self, rel: &str) -> bool {
        let Some(entry) = self.manifest.as_ref().and_then(|m| m.files.get(rel)) else {
            return false;
        };
        self.read_bytes(rel)
            .is_some_and(|b| sha256_hex(&b) == entry.sha256)
    }

    pub fn cert_digest(&self, name: &str) -> Option<String> {
        self.manifest.as_ref()?.certs.get(name).cloned()
    }

    /// The recorded renewal of a certificate (`certs renew`), if it was renewed.
    pub fn renewed(&self, name: &str) -> Option<&Renewed> {
        self.manifest.as_ref()?.renewed.get(name)
    }
}

fn parse(dir: &Path, bytes: &[u8]) -> Result<Manifest, Error> {
    let fix = "restore it, or regenerate everything with `kubeunit gen --force` (which ignores it)";
    let m = serde_json::from_slice::<Manifest>(bytes)
        .map_err(|e| Error::state(dir, format!("{MANIFEST} is unreadable: {e}"), fix))?;
    let foreign = m.foreign_paths();
    if !foreign.is_empty() {
        return Err(Error::state(
            dir,
            format!(
                "{MANIFEST} lists paths that are not kubeunit's files ({}): it was edited",
                foreign.join(", ")
            ),
            fix,
        ));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_naming_paths_outside_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("state");
        std::fs::create_dir(&d).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        for evil in ["../victim", "/etc/passwd", "pki/../../victim", "notes.txt"] {
            let m = serde_json::json!({
                "kubeunitVersion": "0", "name": "x", "stateDir": d, "certs": {}, "profile": null,
                "files": { evil: { "sha256": "00", "mode": "0644" } },
            });
            std::fs::write(d.join(MANIFEST), m.to_string()).unwrap();
            let e = Previous::load(&d).err().unwrap();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(evil), "{e}");
            let forced = Previous::load_with(&d, true).unwrap();
            assert!(forced.manifest.is_none(), "--force ignores it");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
