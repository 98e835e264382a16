//! `gen` as one request: the profile with its overrides, `ports: auto`, `--hermetic`, `--check`,
//! `--out` and a profile with hosts, resolved here into a plan and carried out by the functions of
//! the pipeline above. The CLI only builds a `GenRequest` and prints the `GenOutcome`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::artifacts::{Generated, Options};
use crate::components;
use crate::error::{Error, FieldError};
use crate::pki::{Decision, Entropy};
use crate::spec::profile::PortSpec;
use crate::spec::{auto, host, paths, resolve, HostFacts, Plan, Profile};
use crate::state::{self, Access, Difference, WriteSummary};

/// What `kubeunit gen` was asked for.
#[derive(Debug, Clone, Default)]
pub struct GenRequest {
    /// A built-in profile or a path [default: dev; with `check`: the state dir's own profile.yaml].
    pub profile: Option<String>,
    /// [default: `host::default_state_dir` of the profile's name]
    pub state_dir: Option<PathBuf>,
    /// `--set` overrides, in order (`--bin-dir` and `--user` are sets too).
    pub sets: Vec<String>,
    pub seed: Option<u64>,
    pub force: bool,
    pub check: bool,
    pub out: Option<PathBuf>,
    pub hermetic: bool,
    /// `KUBEUNIT_OFFLINE`: `Some(true)` the profile's `offline: true`, whatever it says;
    /// `Some(false)` as the profile says; `None` as well, except that a state dir made offline
    /// stays offline (`keep_offline`).
    pub offline: Option<bool>,
    /// How long to wait for another command's lock on the state dir.
    pub lock_wait: Duration,
}

/// What `gen` did: checked a state dir, wrote one, or wrote one per host.
pub enum GenOutcome {
    Checked(CheckReport),
    /// Boxed: a plan is large next to the other two.
    Written(Box<GenReport>),
    Hosts(HostsReport),
}

impl GenOutcome {
    /// 1 when a check found differences.
    pub fn exit_code(&self) -> i32 {
        match self {
            GenOutcome::Checked(c) if !c.differences.is_empty() => 1,
            _ => 0,
        }
    }

    /// `-o json`.
    pub fn json(&self) -> serde_json::Value {
        match self {
            GenOutcome::Checked(c) => c.json(),
            GenOutcome::Written(r) => r.json(),
            GenOutcome::Hosts(h) => h.json(),
        }
    }
}

impl fmt::Display for GenOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenOutcome::Checked(c) => c.fmt(f),
            GenOutcome::Written(r) => r.fmt(f),
            GenOutcome::Hosts(h) => h.fmt(f),
        }
    }
}

/// Carry out a `gen` request. `on_wait` hears about a lock being waited for.
pub fn gen(req: &GenRequest, on_wait: &mut dyn FnMut(&str)) -> Result<GenOutcome, Error> {
    // --hermetic reads nothing of this machine: not the fetch cache either.
    let cache = (!req.hermetic)
        .then(crate::fetch::cache::default_dir)
        .flatten();
    let mut profile = super::profile_with_binaries(
        req.profile.as_deref().unwrap_or("dev"),
        &req.sets,
        cache.as_deref(),
    )?;
    let dir = req
        .state_dir
        .clone()
        .unwrap_or_else(|| host::default_state_dir(&profile.name));
    // With --out it is a path of another host, not of this machine.
    let dir = match req.out {
        None => host::local_state_dir(&dir)?,
        Some(_) => host::absolute(&dir)?,
    };
    // Readers share the lock: a `gen` in progress is waited for, not read half-way.
    let _lock = if req.check {
        state::lock::acquire(&dir, Access::Shared, false, req.lock_wait, on_wait)?
    } else {
        None
    };
    // `gen --check` without a profile checks the state dir against the profile it was generated from.
    if req.check && req.profile.is_none() && dir.join(paths::PROFILE).exists() {
        profile = super::resolved_profile(&dir)?;
    }
    profile.offline |= req.offline == Some(true);
    let recorded = recorded_profile(req, &dir);
    let offline_change = keep_offline(req, &mut profile, recorded.as_ref());
    let picked = resolve_ports(req, &mut profile, &dir, recorded.as_ref())?;
    let facts = host_facts(req, &profile)?;
    if !profile.hosts.is_empty() && profile.host.is_empty() && !req.check {
        return gen_hosts(req, profile, &dir, &facts, on_wait).map(GenOutcome::Hosts);
    }
    let plan = Plan::new(profile, &dir, &facts)?;
    let out = req.out.as_deref().map(host::absolute).transpose()?;
    if out.as_deref() == Some(plan.state_dir.as_path()) {
        return Err(Error::Usage {
            message: format!("--out {} is the state dir itself", plan.state_dir.display()),
            fix: "drop --out to write the state dir in place, or name another directory".into(),
        });
    }
    let opts = Options {
        entropy: req.seed.map(Entropy::Seed).unwrap_or(Entropy::Os),
        force: req.force,
    };
    if req.check {
        return Ok(GenOutcome::Checked(CheckReport {
            state_dir: plan.state_dir.clone(),
            differences: super::check(&plan, &opts)?,
            overrides: binary_overrides(&plan),
        }));
    }
    let (generated, mut summary) =
        super::gen(&plan, &opts, out.as_deref(), req.lock_wait, on_wait)?;
    summary.notes.extend(validity_warning(&plan, &generated));
    summary.notes.extend(offline_note(&plan));
    summary.notes.extend(offline_change);
    if let Some((first, size)) = picked {
        summary.notes.push(format!(
            "ports: auto picked {first}-{} (free now; recorded in profile.yaml, kept by a later gen with ports: auto)",
            first + size - 1
        ));
    }
    Ok(GenOutcome::Written(Box::new(GenReport {
        out,
        plan,
        generated,
        summary,
    })))
}

/// The profile the state dir recorded (with --out: the new dir's, which records nothing yet).
fn recorded_profile(req: &GenRequest, dir: &Path) -> Option<Profile> {
    let recorded_in = req.out.as_deref().unwrap_or(dir);
    recorded_in
        .join(paths::PROFILE)
        .exists()
        .then(|| super::resolved_profile(recorded_in).ok())
        .flatten()
}

/// Offline is sticky: a state dir made offline stays offline when it is rendered again from a
/// profile that does not say otherwise (`offline: false` is every built-in profile's default), until
/// `KUBEUNIT_OFFLINE=0` or `--set offline=false` says so. A change either way is a note.
fn keep_offline(
    req: &GenRequest,
    profile: &mut Profile,
    recorded: Option<&Profile>,
) -> Option<String> {
    let was = recorded?.offline;
    let said = req.offline.is_some()
        || req.sets.iter().any(|s| {
            s.split_once('=')
                .is_some_and(|(k, _)| k.trim() == "offline")
        });
    if was && !profile.offline && !said {
        profile.offline = true;
    }
    match (was, profile.offline) {
        (false, true) => Some(
            "offline now (it was online): nothing leaves this machine, network.egress off and addons.corednsForward \"\"".into(),
        ),
        (true, false) => Some(
            "online now (it was offline): network.egress and addons.corednsForward as the profile says; KUBEUNIT_OFFLINE=1 makes it offline again".into(),
        ),
        _ => None,
    }
}

/// `ports: auto`: what the state dir recorded, else a free block now (its first port and size).
/// `--hermetic` cannot tell which ports are free.
fn resolve_ports(
    req: &GenRequest,
    profile: &mut Profile,
    dir: &Path,
    recorded: Option<&Profile>,
) -> Result<Option<(u16, u16)>, Error> {
    if req.hermetic && profile.ports == PortSpec::Auto {
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
    // `auto` keeps what the state dir recorded.
    auto::keep_recorded(profile, recorded);
    if profile.ports != PortSpec::Auto {
        return Ok(None);
    }
    // One port per port of the component table, in its order.
    let fields = components::port_fields();
    let size = fields.len() as u16;
    let ports = auto::port_block(dir, &fields, host::port_free).ok_or_else(|| Error::Usage {
        message: format!(
            "ports: auto found no block of {size} free ports in {}-{}",
            auto::FIRST_PORT,
            auto::FIRST_PORT + auto::blocks(size) * size - 1
        ),
        fix: "name the ports instead (--set ports.apiserver=N, ...)".into(),
    })?;
    let first = ports.all().iter().map(|(_, p)| *p).min();
    profile.ports = PortSpec::Fixed(ports);
    Ok(first.map(|first| (first, size)))
}

/// This machine's facts, with the DNS names among the hosts' addresses looked up (once each, for
/// every host's plan), or none with `--hermetic` (which then needs the profile's pki.epoch, and
/// each name's address in the profile).
fn host_facts(req: &GenRequest, profile: &Profile) -> Result<HostFacts, Error> {
    if !req.hermetic {
        let mut facts = HostFacts::gather();
        facts.host_addresses = resolve::lookup(profile, &resolve::System)?;
        return Ok(facts);
    }
    if profile.pki.epoch.as_deref().is_none_or(str::is_empty) {
        return Err(Error::Usage {
            message: "--hermetic reads no clock and no SOURCE_DATE_EPOCH, and the profile sets no pki.epoch".into(),
            fix: "name the certificates' start: --set pki.epoch=2026-01-01T00:00:00Z (RFC 3339 or Unix seconds)".into(),
        });
    }
    let unresolved = resolve::hermetic_errors(profile);
    if !unresolved.is_empty() {
        return Err(Error::fields("profile", unresolved));
    }
    Ok(HostFacts::none())
}

/// `gen --out DIR` of a profile with hosts: a state dir per host, `DIR/HOST`, each planned for
/// the state dir it will be imported to (`--state-dir`, the same on every host), all drawn from one
/// entropy so that their CAs and shared keys agree. Every host is planned and checked before any
/// is written: either no host's directory exists yet, or every one holds that host's state dir
/// from an earlier `--out`, which is rendered again keeping its keys (an upgrade across hosts).
fn gen_hosts(
    req: &GenRequest,
    profile: Profile,
    dir: &Path,
    facts: &HostFacts,
    on_wait: &mut dyn FnMut(&str),
) -> Result<HostsReport, Error> {
    let Some(out) = req.out.as_deref() else {
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
        entropy: req.seed.map(Entropy::Seed).unwrap_or_else(Entropy::shared),
        force: req.force,
    };
    let mut plans = Vec::new();
    for h in &profile.hosts {
        let mut p = profile.clone();
        p.host = h.name.clone();
        let plan = Plan::new(p, dir, facts)?;
        let target = out.join(&h.name);
        plans.push((plan, target));
    }
    // Every host's dir anew, or every one rendered again over the earlier `--out` (keys kept):
    // some of both would give hosts CAs that do not agree. Nothing at all there, not even a link,
    // is a new one (a dangling link reads as missing otherwise).
    let exists: Vec<bool> = plans
        .iter()
        .map(|(_, t)| std::fs::symlink_metadata(t).is_ok())
        .collect();
    let again = exists.iter().all(|e| *e);
    if again {
        for (plan, target) in &plans {
            super::check_host_again(plan, target)?;
        }
    } else {
        if let Some((_, target)) = plans.iter().zip(&exists).find(|(_, e)| **e).map(|(p, _)| p) {
            let missing = plans
                .iter()
                .zip(&exists)
                .find(|(_, e)| !**e)
                .map(|(p, _)| &p.1);
            return Err(Error::state(
                target,
                format!(
                    "exists, and {} does not: gen renders every host's state dir anew, or every one again",
                    missing.map(|m| m.display().to_string()).unwrap_or_default()
                ),
                "pass the --out of the earlier gen with every host's dir in it (they keep their keys), or a new or empty directory",
            ));
        }
    }
    let mut hosts = Vec::new();
    for (plan, target) in plans {
        let (generated, summary) = if again {
            super::gen_host_again(&plan, &opts, &target, req.lock_wait, on_wait)?
        } else {
            super::gen(&plan, &opts, Some(&target), req.lock_wait, on_wait)?
        };
        hosts.push(HostWritten {
            host: plan.profile.host.clone(),
            roles: plan
                .this_host()
                .map(|h| h.roles.iter().map(|r| r.as_str().to_string()).collect())
                .unwrap_or_default(),
            out: target,
            files: summary.written.len(),
            certificates: generated.certs.len(),
        });
    }
    Ok(HostsReport {
        state_dir: dir.to_path_buf(),
        out,
        name: profile.name,
        hosts,
    })
}

/// Certificates that are not valid now (an old SOURCE_DATE_EPOCH or pki.epoch, or one in the
/// future) make an environment that cannot start: said loudly, since reproducible output may want
/// exactly that. Renewed certificates (`certs renew`, kept by this gen) start at their renewal:
/// when every leaf is one, the epoch says nothing about them.
/// What `offline` overrode, when the profile asked for more (egress or CoreDNS forwarding).
fn offline_note(plan: &Plan) -> Option<String> {
    let p = &plan.profile;
    let asked: Vec<String> = [
        (p.network.egress != plan.egress.spec()).then(|| "network.egress".to_string()),
        (p.addons.coredns_forward != plan.coredns_forward)
            .then(|| "addons.corednsForward".to_string()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !p.offline || asked.is_empty() {
        return None;
    }
    Some(format!(
        "offline (KUBEUNIT_OFFLINE=1 or offline: true): {} overridden, so that nothing leaves this machine (network.egress off, addons.corednsForward \"\"); KUBEUNIT_OFFLINE=0 or --set offline=false (and the profile's offline: false) lets them out",
        asked.join(" and ")
    ))
}

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

/// Components the profile points at another binary than binDir's (`restart --binary` records
/// them there): not differences, but worth saying.
fn binary_overrides(plan: &Plan) -> Vec<String> {
    plan.profile
        .components
        .iter()
        .filter(|(name, c)| {
            let on = components::find(name).is_some_and(|t| t.is_enabled(&plan.profile));
            on && !c.binary.is_empty()
        })
        .map(|(name, c)| format!("components.{name}.binary={}", c.binary))
        .collect()
}

/// A state dir written (in place, or to `--out` for its state dir).
pub struct GenReport {
    pub out: Option<PathBuf>,
    pub plan: Plan,
    pub generated: Generated,
    pub summary: WriteSummary,
}

impl GenReport {
    fn json(&self) -> serde_json::Value {
        let (plan, generated, summary) = (&self.plan, &self.generated, &self.summary);
        serde_json::json!({
            "stateDir": plan.state_dir,
            "out": self.out,
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
        })
    }
}

impl fmt::Display for GenReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (plan, g, s) = (&self.plan, &self.generated, &self.summary);
        let written_to = match &self.out {
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
        match &self.out {
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

/// `gen --check`: how the state dir differs from its manifest and profile.
pub struct CheckReport {
    pub state_dir: PathBuf,
    pub differences: Vec<Difference>,
    pub overrides: Vec<String>,
}

impl CheckReport {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "stateDir": self.state_dir,
            "ok": self.differences.is_empty(),
            "differences": self.differences,
            "overrides": self.overrides,
        })
    }
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

/// One host's state dir of `gen --out DIR` with hosts.
pub struct HostWritten {
    pub host: String,
    pub roles: Vec<String>,
    pub out: PathBuf,
    pub files: usize,
    pub certificates: usize,
}

/// `gen --out DIR` of a profile with hosts.
pub struct HostsReport {
    pub state_dir: PathBuf,
    pub out: PathBuf,
    pub name: String,
    pub hosts: Vec<HostWritten>,
}

impl HostsReport {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "stateDir": self.state_dir,
            "out": self.out,
            "name": self.name,
            "hosts": self.hosts.iter().map(|h| serde_json::json!({
                "host": h.host,
                "out": h.out,
                "written": h.files,
            })).collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for HostsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for h in &self.hosts {
            writeln!(
                f,
                "host {} ({}): {} files in {} ({} certificates)",
                h.host,
                h.roles.join(", "),
                h.files,
                h.out.display(),
                h.certificates
            )?;
        }
        writeln!(
            f,
            "next, on each host: kubeunit import {}/HOST --state-dir {} && kubeunit start --state-dir {}",
            self.out.display(),
            self.state_dir.display(),
            self.state_dir.display()
        )
    }
}
