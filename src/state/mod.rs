//! The state directory as files: the tree of artifacts `gen` builds, what a previous run left
//! (`previous`), the manifest of what kubeunit wrote (`manifest`), atomic writes (`write`) and the
//! comparison behind `gen --check` and `start`'s preflight (`check`).
//!
//! Layout (`spec::paths`): `pki/`, `kubeconfig/`, `config/`, `units/`, `env/`, `addons/` (generated,
//! listed in `manifest.json` with their sha256), `profile.yaml` (the resolved profile) and `data/`
//! (runtime data, not listed).

pub mod check;
pub mod manifest;
pub mod previous;
pub mod write;

use std::collections::BTreeMap;

pub use check::{check, DiffKind, Difference};
pub use manifest::Manifest;
pub use previous::Previous;
pub use write::{prepare_dir, write, write_atomic, WriteSummary};

pub const MODE_PUBLIC: u32 = 0o644;
pub const MODE_SECRET: u32 = 0o600;

#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub bytes: Vec<u8>,
    pub mode: u32,
}

/// Relative path -> content. BTreeMap: a stable order everywhere it is listed or hashed.
pub type Tree = BTreeMap<String, Artifact>;
