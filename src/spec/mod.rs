//! Stage 1 of the pipeline: what the user asked for. The profile schema, loading (`extends:`,
//! `--set`), validation, the host facts gathered at the edge, and the plan resolved from them.
//! Nothing here knows about components beyond their settings in the profile.

pub mod addons;
pub mod auto;
pub mod dual_stack;
pub mod egress;
pub mod host;
pub mod hosts;
pub mod join;
pub mod load;
pub mod load_balancer;
pub mod names;
pub mod nodes;
pub mod paths;
pub mod plan;
pub mod profile;
pub mod registries;
pub mod resolve;
pub mod set;
pub mod validate;

pub use host::HostFacts;
pub use load::Source;
pub use plan::Plan;
pub use profile::Profile;
