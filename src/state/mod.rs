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
mod tree;
pub mod write;

pub use check::{check, DiffKind, Difference};
pub use manifest::Manifest;
pub use previous::Previous;
pub use tree::{Artifact, Tree, MODE_PUBLIC, MODE_SECRET};
pub use write::{prepare_dir, write, write_atomic, WriteSummary};
