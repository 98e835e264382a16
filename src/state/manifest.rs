//! `manifest.json`: every file `gen` wrote with its hash and mode, and the digest of each
//! certificate's inputs (to reissue exactly what changed).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::root::parts;
use super::tree::{Tree, MODE_PUBLIC, MODE_SECRET};
use crate::spec::paths::{is_in, MANAGED_DIRS, PROFILE};

/// A path a manifest or journal may name: inside the managed directories, or the profile.
pub fn owned_path(rel: &str) -> bool {
    parts(rel).is_ok() && (rel == PROFILE || is_in(rel, MANAGED_DIRS))
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub kubeunit_version: String,
    pub name: String,
    pub state_dir: PathBuf,
    pub files: BTreeMap<String, FileEntry>,
    /// Certificate name -> digest of the inputs it was issued from.
    pub certs: BTreeMap<String, String>,
    /// Files outside the state dir the environment uses as they are (image archives) -> sha256.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    pub profile: serde_json::Value,
    /// Certificate name -> its renewal, for the leaf certificates `certs renew` issued (valid from
    /// then, not from the epoch) that `gen` keeps. Absent from a fresh `gen`'s manifest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub renewed: BTreeMap<String, Renewed>,
}

/// A certificate `certs renew` issued.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Renewed {
    /// Its NotBefore (RFC 3339).
    pub not_before: String,
    /// The epoch `gen` issued at then (RFC 3339): with an explicit `pki.epoch`, a `gen` at another
    /// epoch reissues it at that one, as it would a certificate issued at the epoch.
    pub epoch: String,
}

impl Renewed {
    pub fn new(not_before: time::OffsetDateTime, epoch: time::OffsetDateTime) -> Renewed {
        Renewed {
            not_before: rfc3339(not_before),
            epoch: rfc3339(epoch),
        }
    }

    /// Whether it was renewed while `gen` issued at `epoch`.
    pub fn at_epoch(&self, epoch: time::OffsetDateTime) -> bool {
        self.epoch == rfc3339(epoch)
    }
}

/// RFC 3339 text of a time (UTC), as the manifest and JSON output write it.
pub fn rfc3339(t: time::OffsetDateTime) -> String {
    t.to_offset(time::UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileEntry {
    pub sha256: String,
    /// Octal, e.g. "0600".
    pub mode: String,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 of a file, read in pieces (image archives are large).
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path)?;
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

impl Manifest {
    /// Its file mode: private (0600) when the profile it records holds component environment
    /// values (they may be secrets), else 0644.
    pub fn mode(&self) -> u32 {
        let has_env = self
            .profile
            .get("components")
            .and_then(|c| c.as_object())
            .is_some_and(|cs| {
                cs.values().any(|c| {
                    c.get("env")
                        .and_then(|e| e.as_object())
                        .is_some_and(|e| !e.is_empty())
                })
            });
        if has_env {
            MODE_SECRET
        } else {
            MODE_PUBLIC
        }
    }

    /// Paths it lists that are not kubeunit's to write (outside the managed dirs and the profile,
    /// or leaving the state dir): an edited manifest.
    pub fn foreign_paths(&self) -> Vec<&str> {
        self.files
            .keys()
            .map(String::as_str)
            .filter(|p| !owned_path(p))
            .collect()
    }

    pub fn new(
        name: &str,
        state_dir: PathBuf,
        tree: &Tree,
        certs: BTreeMap<String, String>,
        inputs: BTreeMap<String, String>,
        profile: serde_json::Value,
    ) -> Manifest {
        Manifest {
            kubeunit_version: env!("CARGO_PKG_VERSION").into(),
            name: name.into(),
            state_dir,
            files: tree
                .iter()
                .map(|(path, a)| {
                    (
                        path.clone(),
                        FileEntry {
                            sha256: sha256_hex(&a.bytes),
                            mode: format!("{:04o}", a.mode),
                        },
                    )
                })
                .collect(),
            certs,
            inputs,
            profile,
            renewed: BTreeMap::new(),
        }
    }
}
