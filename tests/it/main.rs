//! The integration tests, one binary (as uv and cargo have it): one module per area, `common` shared.
//! Every area drives the real `kubeunit` binary; most boot systemd in containers
//! (`common::container`). `scripts/test.sh` runs one area after another, two tests at a time:
//!   cargo test --test it                      everything, in one process
//!   cargo test --test it control_plane::      one area
//!   cargo test --test it golden:: -- --exact golden::every_profile_renders_the_recorded_state_dir

mod common;

mod certs;
mod cis;
mod conformance;
mod control_plane;
mod debug;
mod docs;
mod dual_stack;
mod egress;
mod equivalence;
mod fetch;
mod gen;
mod golden;
mod host_names;
mod hostile;
mod hosts;
mod install;
mod internet;
mod layering;
mod load_balancer;
mod multi;
mod nix;
mod node;
mod registry;
mod rootless;
mod snapshot;
mod systemd_etcd;
mod upgrade;
mod vms;
