//! kubeunit: a real single-host Kubernetes environment, rendered into a state directory and run by
//! systemd. One pipeline, and the modules in its order (each uses only the ones above it):
//!
//! - `systemd`: the D-Bus client and systemd's calendar expressions (it knows no kubeunit type)
//! - `fetch`: release binaries, downloaded, checked against their checksums and cached (it knows
//!   no profile; `spec` asks it which sources exist)
//! - `spec`: profile schema, loading, `--set`, validation, host facts, the plan
//! - `pki`: the certificate table, keys, issuing
//! - `render`: templates and systemd quoting
//! - `components`: the component table (flags, files, ports, probes, hooks)
//! - `state`: the state dir as files (tree, previous run, manifest, atomic writes, check)
//! - `artifacts`: plan -> tree (PKI, kubeconfigs, component files, units)
//! - `pipeline`: profile -> plan -> artifacts -> state dir, once, for gen, check and preflight
//! - `seed`: cloud-init seeds for the hosts of an environment across hosts, from their state dirs
//! - `unit`: unit files -> transient-unit properties
//! - `run`: a state dir at run time, the lifecycle (preflight, start and its hooks, stop, status,
//!   probes)
//! - `ops`: operations on an existing environment, one module each (upgrade, snapshot, restart,
//!   debug, install, addon switch, certificate restarts, tokens); they use `run`, never the other way
//! - `cis`: the CIS benchmark by kube-bench against a running environment (its config, its view)
//! - `cli`: one file per command

pub mod artifacts;
pub mod cis;
pub mod cli;
pub mod components;
pub mod error;
pub mod fetch;
pub mod ops;
pub mod pipeline;
pub mod pki;
pub mod render;
pub mod run;
pub mod seed;
pub mod spec;
pub mod state;
pub mod systemd;
pub mod unit;
