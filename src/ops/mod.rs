//! Operations on an existing environment, one module per operation, each called by the thin
//! command of the same name in `cli` (as cargo's `ops`): `upgrade` (with `--drain`), etcd
//! `snapshot`s (save, list, restore).
//!
//! The lifecycle (preflight, start, stop, status and what they share) is `run`'s. An operation uses
//! `run` as any command does; `run` never uses an operation (`tests/it/layering.rs` checks the
//! arrow).

pub mod snapshot;
pub mod upgrade;
