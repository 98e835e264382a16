//! A generated state dir at run time, through systemd: the lifecycle of an environment and what it
//! shares.
//!
//! - `preflight`: checks before anything starts (`build_info`: a Go binary's main module, read
//!   without running it)
//! - `start`: components in dependency waves as their needs become healthy, then their `hooks` (the
//!   `addons`, with `hosts_sync`'s publish on a host that joined later; the `images` import, with
//!   image `archive`s checked first); nodes a later `gen` removed taken down (`departed`, also by
//!   `stop`); what it says of `egress`; the wait until the environment is `usable`; the admin
//!   `kubeconfig` merged
//! - `stop`: the slice stopped, a component's connections to itself ended (`own_connections`), the
//!   `cleanup` after
//! - `status`: units, `versions`, `memory`, certificates expiring (`certs`)
//! - shared: the loaded environment (`Env`), health `probe`s and journal tails
//!
//! Operations on an existing environment (upgrade, snapshots, restart, debug, install, tokens, ...)
//! are `ops`': they use this room, and nothing here uses them.

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
