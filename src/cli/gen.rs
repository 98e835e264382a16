//! `kubeunit gen`: render a profile into a state dir, or `--check` one.

use std::path::PathBuf;

use super::common::{lock_wait, offline, print_json, say, Output};
use crate::error::Error;
use crate::pipeline::request::{gen, GenRequest};

pub const AFTER_HELP: &str = "Examples:
  kubeunit gen --profile dev
  kubeunit gen --profile ./my-profile.yaml --state-dir /srv/k8s
  kubeunit gen --profile ci --set network.serviceCIDR=10.96.0.0/16 --set logging.verbosity=4
  SOURCE_DATE_EPOCH=1767225600 kubeunit gen --seed 42   # byte-identical output
  kubeunit gen --check                                   # exit 1 if the state dir differs
  kubeunit gen --set network.egress=on                   # pods reach beyond this host (docs/node.md)
  KUBEUNIT_OFFLINE=1 kubeunit gen                        # nothing leaves this machine (profile: offline)
  kubeunit gen --hermetic --seed 7 --set pki.epoch=2026-01-01T00:00:00Z \
      --set network.advertiseAddress=10.0.0.5 --state-dir /var/lib/kubeunit/dev --out ./built
                                                         # a build (Nix): then `kubeunit import ./built`

Re-running gen keeps keys and CAs and reissues only the certificates whose inputs changed.";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Built-in profile name (dev, control-plane, ci) or a path to a YAML profile [default: dev; with
    /// --check: the state dir's own profile.yaml].
    #[arg(short, long)]
    pub profile: Option<String>,
    /// State directory [default: $KUBEUNIT_STATE_DIR, /var/lib/kubeunit/NAME as root, else $XDG_STATE_HOME/kubeunit/NAME].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Override a profile field by dotted path; repeatable (e.g. --set ports.apiserver=7443).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Directory of the component binaries (same as --set binDir=DIR).
    #[arg(long, env = "KUBEUNIT_BIN_DIR", value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Derive every key from this seed: same profile + seed + epoch = byte-identical state dir.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Replace CAs, keys and certificates instead of keeping them. This replaces the Secrets
    /// encryption key too: Secrets already stored in etcd become unreadable (destroy the data first).
    #[arg(long)]
    pub force: bool,
    /// Rootless: for the calling user's systemd manager (`--set rootless=true`); the control plane only.
    #[arg(long)]
    pub user: bool,
    /// Compare the state dir with its manifest and the profile; write nothing; exit 1 on any difference.
    #[arg(long, conflicts_with = "out")]
    pub check: bool,
    /// Write a new state dir into DIR instead, rendered for --state-dir (where `kubeunit import`
    /// puts it later): for builds such as Nix that produce it elsewhere.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Read nothing of this machine: no interface address, no clock, no SOURCE_DATE_EPOCH, no DNS
    /// name looked up. The profile (or --set) gives pki.epoch; network.advertiseAddress, unless
    /// it binds a non-loopback address; and for a host given by DNS name, its
    /// hosts[].resolvedAddress. For builds whose output must not depend on where they run.
    #[arg(long)]
    pub hermetic: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    // --bin-dir and --user are sets, before the user's own.
    let sets = args
        .bin_dir
        .iter()
        .map(|dir| format!("binDir={}", dir.display()))
        .chain(args.user.then(|| "rootless=true".to_string()))
        .chain(args.sets)
        .collect();
    let request = GenRequest {
        profile: args.profile,
        state_dir: args.state_dir,
        sets,
        seed: args.seed,
        force: args.force,
        check: args.check,
        out: args.out,
        hermetic: args.hermetic,
        offline: offline()?,
        lock_wait: lock_wait()?,
    };
    let outcome = gen(&request, &mut say)?;
    match args.output {
        Output::Json => print_json(&outcome.json()),
        Output::Text => print!("{outcome}"),
    }
    Ok(outcome.exit_code())
}
