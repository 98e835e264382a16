//! A generated state dir at run time, through systemd: `preflight` (checks before anything starts),
//! `start` (components in dependency waves as their needs become healthy, then their hooks), `stop`,
//! `status`, and what they share: the loaded environment, health `probe`s, the `addons`
//! and `images` hooks (image `archive`s) and journal tails.

pub mod addons;
pub mod archive;
mod build_info;
pub mod certs;
pub mod cleanup;
pub mod departed;
pub mod egress;
mod env;
pub mod hooks;
pub mod hosts_sync;
pub mod images;
pub mod kubeconfig;
mod memory;
pub mod own_connections;
pub mod preflight;
pub mod probe;
pub mod start;
pub mod status;
pub mod stop;
pub mod usable;
pub(crate) mod versions;

pub use env::{debugger_address, installed, journal_tail, running_units, units_up, Env};
pub use start::{start, Progress, StartReport, Timing, Until};
pub use status::{certificates_expiring, kubernetes_version, status, ComponentStatus};
pub use stop::{stop, stop_with, Ending, StopReport};
