//! The state dir in memory: relative path -> bytes and mode.

use std::collections::BTreeMap;

pub const MODE_PUBLIC: u32 = 0o644;
pub const MODE_SECRET: u32 = 0o600;
/// A unit or config file: no secret, yet read by root's components alone (the CIS benchmark's
/// "600 or more restrictive" for unit, config and kubeconfig files). The same mode as a secret.
pub const MODE_PRIVATE: u32 = 0o600;
/// A script a component runs by its path (a credential helper).
pub const MODE_EXECUTABLE: u32 = 0o755;

#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub bytes: Vec<u8>,
    pub mode: u32,
}

/// Relative path -> content. BTreeMap: a stable order everywhere it is listed or hashed.
pub type Tree = BTreeMap<String, Artifact>;
