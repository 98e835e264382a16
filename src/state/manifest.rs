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
    /// Files outside the state dir the environment uses as they are (image archives) -> sha256.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
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

/// sha256 of a file, read in pieces (image archives are large).
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(path)?;
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

impl Manifest {
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
        }
    }
}
