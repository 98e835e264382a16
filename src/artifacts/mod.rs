//! plan -> artifacts: every file of the state dir, built in memory as a `state::Tree` (PKI,
//! kubeconfigs, component files, units, the resolved profile). Nothing here writes to disk; the only
//! reads are of the previous state (keys and certificates to keep) and of files the profile names.

mod files;
mod generated;
mod kubeconfigs;
mod own_user;
mod pki;
mod units;

use std::collections::BTreeMap;

use crate::components::{Component, COMPONENTS};
use crate::error::{Error, FieldError};
use crate::pki::Renewal;
use crate::render::Renderer;
use crate::spec::{paths, Plan};
use crate::state::manifest::sha256_file;
use crate::state::{Previous, Tree, MODE_PUBLIC, MODE_SECRET};

use generated::put;
pub use generated::{Generated, Options};

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
    build(table, plan, old, opts, None)
}

/// `generate`, with the leaf certificates `renewal` names issued anew (`certs renew`): the same
/// pipeline, so the kubeconfigs embedding them follow and everything else comes out as `gen`'s.
pub fn generate_renewing(
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    renewal: &Renewal,
) -> Result<Generated, Error> {
    build(COMPONENTS, plan, old, opts, Some(renewal))
}

fn build(
    table: &[Component],
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    renewal: Option<&Renewal>,
) -> Result<Generated, Error> {
    let renderer = Renderer::new();
    let mut g = Generated {
        tree: Tree::new(),
        cert_digests: BTreeMap::new(),
        certs: Vec::new(),
        inputs: BTreeMap::new(),
        notes: Vec::new(),
        renewed: BTreeMap::new(),
    };
    let specs = crate::pki::specs(plan);
    let keys = pki::keys(plan, old, opts, &specs)?;
    let certs = pki::certificates(plan, old, opts, renewal, &specs, keys.certs, &mut g)?;
    let secrets = pki::secrets(plan, old, opts, keys.sa, &mut g)?;
    kubeconfigs::kubeconfigs(plan, &renderer, &certs, &mut g)?;
    files::component_files(table, plan, &secrets, &renderer, &mut g)?;
    units::units(table, plan, &renderer, &mut g)?;
    for image in &plan.profile.images {
        let digest = sha256_file(image).map_err(|e| {
            Error::field(
                "profile",
                FieldError::new(
                    "images",
                    image.display(),
                    format!("cannot read the image archive: {e}"),
                    "build it (scripts/build-test-binaries.sh builds the pinned ones) or fix the path",
                ),
            )
        })?;
        g.inputs.insert(image.display().to_string(), digest);
    }
    let resolved = plan.resolved_profile();
    // Component env values may be secrets: the profile that records them is private then (as is
    // the manifest, `Manifest::mode`).
    let has_env = resolved.components.values().any(|c| !c.env.is_empty());
    put(
        &mut g.tree,
        paths::PROFILE,
        resolved.to_yaml().into_bytes(),
        if has_env { MODE_SECRET } else { MODE_PUBLIC },
    );
    Ok(g)
}

#[cfg(test)]
mod tests;
