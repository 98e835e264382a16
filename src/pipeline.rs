//! The pipeline, in one place: profile -> plan -> artifacts -> state dir. `gen`, `gen --check` and
//! `start`'s preflight all go through these functions; nothing else loads, validates or generates.

use std::path::Path;

use crate::artifacts::{self, Generated, Options};
use crate::components::{self, COMPONENTS};
use crate::error::{Error, FieldErrors};
use crate::spec::{self, paths, HostFacts, Plan, Profile, Source};
use crate::state::{self, Difference, Manifest, Previous, WriteSummary};

/// Load a profile (a built-in name or a file) with `--set` overrides, and validate all of it.
pub fn profile(name_or_path: &str, sets: &[String]) -> Result<Profile, Error> {
    let (source, profile) = spec::load::layered(name_or_path, sets)?;
    validated(&source, profile)
}

/// The resolved profile a state dir was generated from.
pub fn resolved_profile(state_dir: &Path) -> Result<Profile, Error> {
    let (source, profile) = spec::load::resolved(&state_dir.join(paths::PROFILE))?;
    validated(&source, profile)
}

/// Every wrong field at once: the schema's checks and the component table's.
fn validated(source: &Source, profile: Profile) -> Result<Profile, Error> {
    let mut errors = spec::validate::validate(&profile);
    errors.extend(components::validate(COMPONENTS, &profile));
    if errors.is_empty() {
        Ok(profile)
    } else {
        Err(Error::Profile(FieldErrors {
            source_name: source.to_string(),
            errors,
        }))
    }
}

/// The plan of a generated state dir (for `start` and the other run-time commands).
pub fn plan_of(state_dir: &Path, host: &HostFacts) -> Result<Plan, Error> {
    if !state_dir.join(paths::PROFILE).exists() {
        return Err(Error::state(
            state_dir,
            format!("no {}: not a generated state dir", paths::PROFILE),
            format!(
                "run `kubeunit gen --state-dir {}` first",
                state_dir.display()
            ),
        ));
    }
    Plan::new(resolved_profile(state_dir)?, state_dir, host)
}

/// What the previous run left, and every artifact the plan wants now.
pub fn render(plan: &Plan, opts: &Options) -> Result<(Previous, Generated), Error> {
    let previous = Previous::load(&plan.state_dir)?;
    let generated = artifacts::generate(plan, &previous, opts)?;
    Ok((previous, generated))
}

/// `kubeunit gen`: render the plan and write it into its state dir (keeping keys and CAs already there).
pub fn gen(plan: &Plan, opts: &Options) -> Result<(Generated, WriteSummary), Error> {
    state::prepare_dir(&plan.state_dir)?;
    let (previous, generated) = render(plan, opts)?;
    let profile = serde_json::to_value(plan.resolved_profile())
        .map_err(|e| Error::Internal(format!("profile as JSON: {e}")))?;
    let manifest = Manifest::new(
        plan.name(),
        plan.state_dir.clone(),
        &generated.tree,
        generated.cert_digests.clone(),
        generated.inputs.clone(),
        profile,
    );
    let summary = state::write(&plan.state_dir, &previous, &generated.tree, &manifest)?;
    Ok((generated, summary))
}

/// `kubeunit gen --check` and `start`'s preflight: how the state dir differs from its manifest and
/// from what `gen` would write now.
pub fn check(plan: &Plan, opts: &Options) -> Result<Vec<Difference>, Error> {
    let (previous, generated) = render(plan, opts)?;
    state::check(
        &plan.state_dir,
        &previous,
        &generated.tree,
        &generated.inputs,
    )
}
