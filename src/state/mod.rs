//! The state directory as files: whether a directory may be one (`dir`), safe access below it
//! (`root`: no path leaves it, no link is followed), the lock writers hold (`lock`), the tree of
//! artifacts `gen` builds, what a previous run left (`previous`), the manifest of what kubeunit wrote
//! (`manifest`), crash-safe writes through a journal (`write`) and the comparison behind
//! `gen --check` and `start`'s preflight (`check`).
//!
//! Layout (`spec::paths`): `pki/`, `kubeconfig/`, `config/`, `units/`, `env/`, `addons/` (generated,
//! listed in `manifest.json` with their sha256), `profile.yaml` (the resolved profile), `.lock` and
//! `data/` (runtime data, not listed).

pub mod check;
pub mod dir;
mod faults;
pub mod hosts;
pub mod import;
pub mod lock;
pub mod manifest;
pub mod previous;
pub mod root;
mod tree;
pub mod write;

pub use check::{check, DiffKind, Difference};
pub use dir::Found;
pub use lock::{Access, Lock};
pub use manifest::{Manifest, Renewed};
pub use previous::Previous;
pub use root::Root;
pub use tree::{Artifact, Tree, MODE_EXECUTABLE, MODE_PRIVATE, MODE_PUBLIC, MODE_SECRET};
pub use write::{recover, write, WriteSummary};
