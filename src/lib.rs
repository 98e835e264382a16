//! kubeunit: a real single-host Kubernetes environment, rendered into a state directory and run by
//! systemd. The pipeline is profile -> plan -> artifacts -> state dir -> systemd.

pub mod artifacts;
pub mod bootstrap;
pub mod cli;
pub mod components;
pub mod environment;
pub mod error;
pub mod health;
pub mod pki;
pub mod plan;
pub mod profile;
pub mod render;
pub mod state;
pub mod systemd;
pub mod unitfile;

use artifacts::{Generated, Options};
use error::Error;
use plan::Plan;
use state::{Existing, WriteSummary};

/// `kubeunit gen`: render the plan and write it into its state dir (keeping keys and CAs already there).
pub fn gen(plan: &Plan, opts: &Options) -> Result<(Generated, WriteSummary), Error> {
    state::prepare_dir(&plan.state_dir)?;
    let old = Existing::load(&plan.state_dir)?;
    let generated = artifacts::generate(plan, &old, opts)?;
    let manifest = state::manifest_for(plan, &generated);
    let summary = state::write(&plan.state_dir, &old, &generated.tree, &manifest)?;
    Ok((generated, summary))
}
