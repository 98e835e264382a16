//! `kubeunit gen`: render a profile into a state dir, or `--check` one.

use std::fmt;
use std::path::PathBuf;

use super::common::{default_state_dir, lock_wait, print_json, say, Output};
use crate::artifacts::{Generated, Options};
use crate::components;
use crate::error::{Error, FieldError};
use crate::pipeline;
use crate::pki::{Decision, Entropy};
use crate::spec::profile::PortSpec;
use crate::spec::{auto, host, paths, HostFacts, Plan};
use crate::state::{self, Access, Difference, WriteSummary};

pub const AFTER_HELP: &str = "Examples:
  kubeunit gen --profile dev
  kubeunit gen --profile ./my-profile.yaml --state-dir /srv/k8s
  kubeunit gen --profile ci --set network.serviceCIDR=10.96.0.0/16 --set logging.verbosity=4
  SOURCE_DATE_EPOCH=1767225600 kubeunit gen --seed 42   # byte-identical output
  kubeunit gen --check                                   # exit 1 if the state dir differs
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
    /// Read nothing of this machine: no interface address, no clock, no SOURCE_DATE_EPOCH. The
    /// profile (or --set) gives pki.epoch and, unless it binds a non-loopback address,
    /// network.advertiseAddress. For builds whose output must not depend on where they run.
    #[arg(long)]
    pub hermetic: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn exec(args: Args) -> Result<i32, Error> {
    let mut sets = Vec::new();
    if let Some(dir) = &args.bin_dir {
        sets.push(format!("binDir={}", dir.display()));
    }
    if args.user {
        sets.push("rootless=true".into());
    }
    sets.extend(args.sets.iter().cloned());
    let mut profile = pipeline::profile(args.profile.as_deref().unwrap_or("dev"), &sets)?;
    let dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| default_state_dir(&profile.name));
    let dir = host::absolute(&dir)?;
    // Readers share the lock: a `gen` in progress is waited for, not read half-way.
    let _lock = if args.check {
        state::lock::acquire(&dir, Access::Shared, false, lock_wait()?, &mut say)?
    } else {
        None
    };
    // `gen --check` without a profile checks the state dir against the profile it was generated from.
    if args.check && args.profile.is_none() && dir.join(paths::PROFILE).exists() {
        profile = pipeline::resolved_profile(&dir)?;
    }
    if args.hermetic && profile.ports == PortSpec::Auto {
        return Err(Error::field(
            "profile",
            FieldError::new(
                "ports",
                "auto",
                "--hermetic reads nothing of this machine, so it cannot tell which ports are free",
                "name the ports (--set ports.apiserver=N, ...; `kubeunit profile show base` lists them), or drop --hermetic",
            ),
        ));
    }
    // `auto` keeps what the state dir recorded (with --out: the new dir records nothing yet).
    let recorded_in = args.out.as_deref().unwrap_or(&dir);
    let recorded = recorded_in
        .join(paths::PROFILE)
        .exists()
        .then(|| pipeline::resolved_profile(recorded_in).ok())
        .flatten();
    auto::keep_recorded(&mut profile, recorded.as_ref());
    let mut picked = None;
    if profile.ports == PortSpec::Auto {
        // One port per port of the component table, in its order.
        let fields = components::port_fields();
        let size = fields.len() as u16;
        let ports =
            auto::port_block(&dir, &fields, host::port_free).ok_or_else(|| Error::Usage {
                message: format!(
                    "ports: auto found no block of {size} free ports in {}-{}",
                    auto::FIRST_PORT,
                    auto::FIRST_PORT + auto::blocks(size) * size - 1
                ),
                fix: "name the ports instead (--set ports.apiserver=N, ...)".into(),
            })?;
        picked = ports
            .all()
            .iter()
            .map(|(_, p)| *p)
            .min()
            .map(|first| (first, size));
        profile.ports = PortSpec::Fixed(ports);
    }
    let facts = if args.hermetic {
        if profile.pki.epoch.as_deref().is_none_or(str::is_empty) {
            return Err(Error::Usage {
                message: "--hermetic reads no clock and no SOURCE_DATE_EPOCH, and the profile sets no pki.epoch".into(),
                fix: "name the certificates' start: --set pki.epoch=2026-01-01T00:00:00Z (RFC 3339 or Unix seconds)".into(),
            });
        }
        HostFacts::none()
    } else {
        HostFacts::gather()
    };
    if !profile.hosts.is_empty() && profile.host.is_empty() && !args.check {
        return gen_hosts(&args, profile, &dir, &facts);
    }
    let plan = Plan::new(profile, &dir, &facts)?;
    let out = args.out.as_deref().map(host::absolute).transpose()?;
    if out.as_deref() == Some(plan.state_dir.as_path()) {
        return Err(Error::Usage {
            message: format!("--out {} is the state dir itself", plan.state_dir.display()),
            fix: "drop --out to write the state dir in place, or name another directory".into(),
        });
    }
    let opts = Options {
        entropy: args.seed.map(Entropy::Seed).unwrap_or(Entropy::Os),
        force: args.force,
    };
    if args.check {
        let check = CheckReport {
            state_dir: plan.state_dir.clone(),
            differences: pipeline::check(&plan, &opts)?,
            overrides: binary_overrides(&plan),
        };
        match args.output {
            Output::Json => print_json(&serde_json::json!({
                "stateDir": check.state_dir,
                "ok": check.differences.is_empty(),
                "differences": check.differences,
                "overrides": check.overrides,
            })),
            Output::Text => print!("{check}"),
        }
        return Ok(if check.differences.is_empty() { 0 } else { 1 });
    }
    let (generated, mut summary) =
        pipeline::gen(&plan, &opts, out.as_deref(), lock_wait()?, &mut say)?;
    summary.notes.extend(validity_warning(&plan, &generated));
    if let Some((first, size)) = picked {
        summary.notes.push(format!(
            "ports: auto picked {first}-{} (free now; recorded in profile.yaml, kept by a later gen with ports: auto)",
            first + size - 1
        ));
    }
    let report = GenReport {
        out: out.as_deref(),
        plan: &plan,
        generated: &generated,
        summary: &summary,
    };
    match args.output {
        Output::Json => print_json(&serde_json::json!({
            "stateDir": plan.state_dir,
            "out": out,
            "name": plan.name(),
            "instance": plan.instance,
            "unitPrefix": plan.unit_prefix(),
            "ports": plan.ports,
            "written": summary.written,
            "unchanged": summary.unchanged,
            "removed": summary.removed,
            "notes": generated.notes.iter().chain(&summary.notes).collect::<Vec<_>>(),
            "certificates": generated
                .certs
                .iter()
                .map(|(path, d)| format!("{path}: {}", d.as_str()))
                .collect::<Vec<_>>(),
        })),
        Output::Text => print!("{report}"),
    }
    Ok(0)
}

/// `gen --out DIR` of a profile with hosts: a state dir per host, `DIR/HOST`, each planned for
/// the state dir it will be imported to (`--state-dir`, the same on every host), all drawn from one
/// entropy so that their CAs and shared keys agree. Every host is planned and rendered before any
/// is written, and no host's directory may exist yet.
fn gen_hosts(
    args: &Args,
    profile: crate::spec::Profile,
    dir: &std::path::Path,
    facts: &HostFacts,
) -> Result<i32, Error> {
    let Some(out) = args.out.as_deref() else {
        return Err(Error::Usage {
            message: format!(
                "the profile has hosts ({}): gen renders a state dir for each",
                crate::spec::hosts::names(&profile.hosts).join(", ")
            ),
            fix: "pass --out DIR: each host's state dir goes to DIR/HOST, which `kubeunit import DIR/HOST` puts in place on that host".into(),
        });
    };
    let out = host::absolute(out)?;
    let opts = Options {
        entropy: args.seed.map(Entropy::Seed).unwrap_or_else(Entropy::shared),
        force: args.force,
    };
    let mut plans = Vec::new();
    for h in &profile.hosts {
        let mut p = profile.clone();
        p.host = h.name.clone();
        let plan = Plan::new(p, dir, facts)?;
        let target = out.join(&h.name);
        // Nothing at all there, not even a link (a dangling one reads as missing otherwise).
        if std::fs::symlink_metadata(&target).is_ok() {
            return Err(Error::state(
                &target,
                "exists already; gen writes each host's state dir anew",
                "pass a new or empty directory to --out",
            ));
        }
        plans.push((plan, target));
    }
    let mut written = Vec::new();
    for (plan, target) in &plans {
        let (generated, summary) =
            pipeline::gen(plan, &opts, Some(target), lock_wait()?, &mut say)?;
        written.push((plan, target, generated, summary));
    }
    match args.output {
        Output::Json => print_json(&serde_json::json!({
            "stateDir": dir,
            "out": out,
            "name": profile.name,
            "hosts": written.iter().map(|(plan, target, _, summary)| serde_json::json!({
                "host": plan.profile.host,
                "out": target,
                "written": summary.written.len(),
            })).collect::<Vec<_>>(),
        })),
        Output::Text => {
            for (plan, target, generated, summary) in &written {
                let roles: Vec<&str> = plan
                    .this_host()
                    .map(|h| h.roles.iter().map(|r| r.as_str()).collect())
                    .unwrap_or_default();
                println!(
                    "host {} ({}): {} files in {} ({} certificates)",
                    plan.profile.host,
                    roles.join(", "),
                    summary.written.len(),
                    target.display(),
                    generated.certs.len()
                );
            }
            println!(
                "next, on each host: kubeunit import {}/HOST --state-dir {} && kubeunit start --state-dir {}",
                out.display(),
                dir.display(),
                dir.display()
            );
        }
    }
    Ok(0)
}

/// Certificates that are not valid now (an old SOURCE_DATE_EPOCH or pki.epoch, or one in the
/// future) make an environment that cannot start: said loudly, since reproducible output may want
/// exactly that. Renewed certificates (`certs renew`, kept by this gen) start at their renewal:
/// when every leaf is one, the epoch says nothing about them.
fn validity_warning(plan: &Plan, generated: &Generated) -> Option<String> {
    let all_renewed = crate::pki::specs(plan)
        .iter()
        .filter(|s| s.usage != crate::pki::Usage::Ca)
        .all(|s| generated.renewed.contains_key(&s.name));
    if all_renewed {
        return None;
    }
    let now = time::OffsetDateTime::now_utc();
    let end = time::Duration::try_from(plan.cert_validity)
        .ok()
        .and_then(|d| plan.epoch.checked_add(d))?;
    let source = if plan
        .profile
        .pki
        .epoch
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        "pki.epoch"
    } else {
        "SOURCE_DATE_EPOCH or today"
    };
    if end <= now {
        Some(format!(
            "WARNING: the certificates expired at {end} (start {} from {source}, pki.certValidity {}): components will refuse them; set a later epoch, or a longer validity",
            plan.epoch, plan.profile.pki.cert_validity
        ))
    } else if plan.epoch > now {
        Some(format!(
            "WARNING: the certificates are not valid before {} ({source}): components will refuse them until then",
            plan.epoch
        ))
    } else {
        None
    }
}

struct GenReport<'a> {
    out: Option<&'a std::path::Path>,
    plan: &'a Plan,
    generated: &'a Generated,
    summary: &'a WriteSummary,
}

impl fmt::Display for GenReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (plan, g, s) = (self.plan, self.generated, self.summary);
        let written_to = match self.out {
            Some(out) => format!("{} (for {})", out.display(), plan.state_dir.display()),
            None => plan.state_dir.display().to_string(),
        };
        writeln!(
            f,
            "environment '{}' in {written_to}: {} files written, {} unchanged, {} removed",
            plan.name(),
            s.written.len(),
            s.unchanged,
            s.removed.len()
        )?;
        for note in g.notes.iter().chain(&s.notes) {
            writeln!(f, "note: {note}")?;
        }
        writeln!(
            f,
            "certificates: {} created, {} reissued, {} kept",
            g.count(Decision::Created),
            g.count(Decision::Reissued),
            g.count(Decision::Kept)
        )?;
        match self.out {
            Some(out) => writeln!(
                f,
                "next: kubeunit import {} --state-dir {}",
                out.display(),
                plan.state_dir.display()
            ),
            None => writeln!(
                f,
                "next: kubeunit start --state-dir {}",
                plan.state_dir.display()
            ),
        }
    }
}

/// Components the profile points at another binary than binDir's (`restart --binary` records
/// them there): not differences, but worth saying.
fn binary_overrides(plan: &Plan) -> Vec<String> {
    plan.profile
        .components
        .iter()
        .filter(|(name, c)| {
            let on = crate::components::find(name).is_some_and(|t| t.is_enabled(&plan.profile));
            on && !c.binary.is_empty()
        })
        .map(|(name, c)| format!("components.{name}.binary={}", c.binary))
        .collect()
}

struct CheckReport {
    state_dir: PathBuf,
    differences: Vec<Difference>,
    overrides: Vec<String>,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = self.state_dir.display();
        let overrides = |f: &mut fmt::Formatter<'_>| {
            self.overrides
                .iter()
                .try_for_each(|o| writeln!(f, "  override  {o}"))
        };
        if self.differences.is_empty() {
            writeln!(f, "{dir}: matches its manifest and profile")?;
            return overrides(f);
        }
        writeln!(f, "{dir}: {} difference(s)", self.differences.len())?;
        overrides(f)?;
        for d in &self.differences {
            writeln!(f, "  {:<9} {}", d.kind.as_str(), d.path)?;
        }
        writeln!(
            f,
            "run `kubeunit gen` to bring the state dir back in line (keys and CAs are kept)"
        )
    }
}
