//! Operations on an existing environment, one module per operation, each called by a thin command
//! in `cli` (as cargo's `ops`):
//!
//! - `addon_switch`: `addons enable|disable`, one addon switched in the state dir and, when the
//!   environment runs, in the cluster
//! - `certs`: `certs renew`'s restarts of the running components that use a renewed certificate
//! - `debug`: one component under dlv, and back
//! - `install`: `install` and `uninstall`, persistent units that bring the environment up at boot
//! - `restart`: one component stopped and started again from its unit file
//! - `snapshot`: etcd snapshots (save, list, restore)
//! - `token`: bootstrap tokens (create, list, delete) for hosts that join later
//! - `upgrade`: the running components to the versions of the state dir, one at a time (`--drain`)
//!
//! The lifecycle (preflight, start, stop, status and what they share) is `run`'s. An operation uses
//! `run` as any command does; `run` never uses an operation (`tests/it/layering.rs` checks the
//! arrow).

pub mod addon_switch;
pub mod certs;
pub mod debug;
pub mod install;
pub mod restart;
pub mod snapshot;
pub mod token;
pub mod upgrade;

pub use debug::{debug, stop_debug, DebugReport, DebugRequest};
pub use restart::restart;
