//! kubeunit: a real single-host Kubernetes environment, rendered into a state directory and run by
//! systemd. The pipeline is profile -> plan -> artifacts -> state dir -> systemd.

pub mod artifacts;
pub mod cli;
pub mod components;
pub mod error;
pub mod pki;
pub mod plan;
pub mod profile;
pub mod render;
pub mod state;
