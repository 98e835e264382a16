//! Operations on an existing environment, one module per operation, each called by the thin
//! command of the same name in `cli` (as cargo's `ops`): `upgrade` (with `--drain`), etcd
//! `snapshot`s (save, list, restore), `restart` of one component, `debug` (one component under
//! dlv), `install` and `uninstall` (persistent units that bring the environment up at boot).
//!
//! The lifecycle (preflight, start, stop, status and what they share) is `run`'s. An operation uses
//! `run` as any command does; `run` never uses an operation (`tests/it/layering.rs` checks the
//! arrow).

pub mod debug;
pub mod install;
pub mod restart;
pub mod snapshot;
pub mod upgrade;

pub use debug::{debug, stop_debug, DebugReport, DebugRequest};
pub use restart::restart;
