//! `manifest.json`: every file `gen` wrote with its hash and mode, and the digest of each
//! certificate's inputs (to reissue exactly what changed).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::tree::Tree;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub kubeunit_version: String,
    pub name: String,
    pub state_dir: PathBuf,
    pub files: BTreeMap<String, FileEntry>,
    /// Certificate name -> digest of the inputs it was issued from.
    pub certs: BTreeMap<String, String>,
    pub profile: serde_json::Value,
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

impl Manifest {
    pub fn new(
        name: &str,
        state_dir: PathBuf,
        tree: &Tree,
        certs: BTreeMap<String, String>,
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
            profile,
        }
    }
}
