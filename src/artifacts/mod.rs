//! plan -> artifacts: every file of the state dir, built in memory as a `state::Tree` (PKI,
//! kubeconfigs, component files, units, the resolved profile). Nothing here writes to disk; the only
//! reads are of the previous state (keys and certificates to keep) and of files the profile names.

mod files;
mod kubeconfigs;
mod pki;
mod units;

use std::collections::BTreeMap;

use crate::components::{Component, COMPONENTS};
use crate::error::Error;
use crate::pki::{Decision, Entropy};
use crate::render::Renderer;
use crate::spec::{paths, Plan};
use crate::state::{Artifact, Previous, Tree, MODE_PUBLIC};

pub struct Generated {
    pub tree: Tree,
    /// Certificate name -> spec digest (stored in the manifest to decide reissues).
    pub cert_digests: BTreeMap<String, String>,
    /// What happened to each certificate (by path), in table order.
    pub certs: Vec<(String, Decision)>,
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

/// Every artifact of `plan`, keeping what `old` has that is still right.
pub fn generate(plan: &Plan, old: &Previous, opts: &Options) -> Result<Generated, Error> {
    generate_with(COMPONENTS, plan, old, opts)
}

/// `generate` over another component table (tests add components of their own).
pub fn generate_with(
    table: &[Component],
    plan: &Plan,
    old: &Previous,
    opts: &Options,
) -> Result<Generated, Error> {
    let renderer = Renderer::new();
    let mut g = Generated {
        tree: Tree::new(),
        cert_digests: BTreeMap::new(),
        certs: Vec::new(),
    };
    let certs = pki::certificates(plan, old, opts, &mut g)?;
    let secrets = pki::secrets(plan, old, opts, &mut g)?;
    kubeconfigs::kubeconfigs(plan, &renderer, &certs, &mut g)?;
    files::component_files(table, plan, &secrets, &renderer, &mut g)?;
    units::units(table, plan, &renderer, &mut g)?;
    let profile = plan.resolved_profile().to_yaml();
    put(
        &mut g.tree,
        paths::PROFILE,
        profile.into_bytes(),
        MODE_PUBLIC,
    );
    Ok(g)
}

fn put(tree: &mut Tree, path: &str, bytes: Vec<u8>, mode: u32) {
    tree.insert(path.to_string(), Artifact { bytes, mode });
}

#[cfg(test)]
mod tests;
