//! What the artifact stage produces, and how its steps add to it.

use std::collections::BTreeMap;

use crate::pki::{Decision, Entropy};
use crate::state::{Artifact, Renewed, Tree};

pub struct Generated {
    pub tree: Tree,
    /// Certificate name -> spec digest (stored in the manifest to decide reissues).
    pub cert_digests: BTreeMap<String, String>,
    /// What happened to each certificate (by path), in table order.
    pub certs: Vec<(String, Decision)>,
    /// Files outside the state dir used as they are (image archives): path -> sha256.
    pub inputs: BTreeMap<String, String>,
    /// Decisions the user should hear about (a CA kept against the profile, a key kept, ...).
    pub notes: Vec<String>,
    /// Renewed certificates (`certs renew`, now or before and kept since), for the manifest.
    pub renewed: BTreeMap<String, Renewed>,
}

impl Generated {
    /// How many certificates got `decision`.
    pub fn count(&self, decision: Decision) -> usize {
        self.certs.iter().filter(|(_, d)| *d == decision).count()
    }
}

pub struct Options {
    pub entropy: Entropy,
    /// Replace CAs and keys too.
    pub force: bool,
}

pub(super) fn put(tree: &mut Tree, path: &str, bytes: Vec<u8>, mode: u32) {
    tree.insert(path.to_string(), Artifact { bytes, mode });
}
