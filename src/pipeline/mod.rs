//! The pipeline, in one place: profile -> plan -> artifacts -> state dir. `gen`, `gen --check` and
//! `start`'s preflight all go through these functions; nothing else loads, validates or generates.

pub mod binaries;
pub mod request;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::artifacts::{self, Generated, Options};
use crate::components::{self, COMPONENTS};
use crate::error::{Error, FieldErrors};
use crate::pki;
use crate::spec::{self, paths, HostFacts, Plan, Profile, Source};
use crate::state::{self, Access, DiffKind, Difference, Found, Manifest, Previous, WriteSummary};

/// Load a profile (a built-in name or a file) with `--set` overrides, and validate all of it.
pub fn profile(name_or_path: &str, sets: &[String]) -> Result<Profile, Error> {
    let (source, profile) = spec::load::layered(name_or_path, sets)?;
    validated(&source, profile)
}

/// `profile`, with what an empty binDir leaves to the release binaries fetched into `cache` filled
/// in (`binaries`): what `gen` renders.
pub fn profile_with_binaries(
    name_or_path: &str,
    sets: &[String],
    cache: Option<&Path>,
) -> Result<Profile, Error> {
    let (source, profile) = spec::load::layered(name_or_path, sets)?;
    let fills = binaries::fills(&profile, cache)?;
    if fills.is_empty() {
        return validated(&source, profile);
    }
    // The user's sets first: the fills only name fields those left empty.
    let sets: Vec<String> = sets.iter().cloned().chain(fills).collect();
    let (source, profile) = spec::load::layered(name_or_path, &sets)?;
    validated(&source, profile)
}

/// The resolved profile a state dir was generated from (read without following links).
pub fn resolved_profile(state_dir: &Path) -> Result<Profile, Error> {
    resolved_profile_with(state_dir, &[])
}

/// `resolved_profile` with `--set` overrides on top, validated like any profile (`upgrade --set`).
pub fn resolved_profile_with(state_dir: &Path, sets: &[String]) -> Result<Profile, Error> {
    let path = state_dir.join(paths::PROFILE);
    // gen writes it: a state dir's profile.yaml that cannot be read is made again by gen, not
    // fixed by hand or swapped for another profile.
    let regenerate = || {
        format!(
            "generate the state dir again: kubeunit gen --state-dir {} --profile PROFILE (the one it was made from)",
            state_dir.display()
        )
    };
    let text = state::root::Root::open(state_dir)
        .and_then(|r| r.read_string(paths::PROFILE))
        .map_err(|e| Error::state(&path, format!("cannot be read: {e}"), regenerate()))?;
    let (source, profile) = spec::load::resolved_with(&path, &text, sets).map_err(|e| match e {
        // With sets, a wrong field is more likely theirs: the error names it.
        Error::Profile(errors) if sets.is_empty() => {
            let why: Vec<String> = (errors.errors.iter())
                .map(|f| format!("field '{}': {}", f.field, f.message))
                .collect();
            Error::state(
                &path,
                format!("is not a profile: {}", why.join("; ")),
                regenerate(),
            )
        }
        other => other,
    })?;
    // gen fills these in (`binaries`): a state dir names its binaries by absolute paths.
    for (field, empty) in [
        ("binDir", profile.bin_dir.as_os_str().is_empty()),
        (
            "containerd.cniBinDir",
            profile.containerd.cni_bin_dir.as_os_str().is_empty(),
        ),
    ] {
        if empty {
            return Err(Error::field(
                path.display().to_string(),
                crate::error::FieldError::new(
                    field,
                    "\"\"",
                    "empty in a state dir, where gen has filled in a directory",
                    "generate the state dir again with `kubeunit gen`",
                ),
            ));
        }
    }
    validated(&source, profile)
}

/// Every wrong field at once: the schema's checks and the component table's.
fn validated(source: &Source, mut profile: Profile) -> Result<Profile, Error> {
    let mut errors = spec::validate::validate(&profile);
    errors.extend(components::validate(COMPONENTS, &profile));
    if errors.is_empty() {
        // The table's order, whatever order the profile wrote: `profile.yaml` records it.
        if let spec::profile::PortSpec::Fixed(ports) = &profile.ports {
            profile.ports =
                spec::profile::PortSpec::Fixed(ports.ordered(&components::port_fields()));
        }
        Ok(profile)
    } else {
        Err(Error::Profile(FieldErrors {
            source_name: source.to_string(),
            errors,
        }))
    }
}

/// The plan of a generated state dir (for `start` and the other run-time commands).
pub fn plan_of(state_dir: &Path, host: &HostFacts) -> Result<Plan, Error> {
    if std::fs::symlink_metadata(state_dir.join(paths::PROFILE)).is_err() {
        return Err(Error::state(
            state_dir,
            format!("no {}: not a generated state dir", paths::PROFILE),
            format!(
                "run `kubeunit gen --state-dir {}` first",
                state_dir.display()
            ),
        ));
    }
    Plan::new(resolved_profile(state_dir)?, state_dir, host)
}

/// What the previous run left in `dir` (the state dir, or where `gen --out` writes it), and every
/// artifact the plan wants now.
pub fn render(plan: &Plan, dir: &Path, opts: &Options) -> Result<(Previous, Generated), Error> {
    let previous = Previous::load_with(dir, opts.force)?;
    let generated = artifacts::generate(plan, &previous, opts)?;
    Ok((previous, generated))
}

/// `kubeunit gen`: render the plan and write it into its state dir (keeping keys and CAs already
/// there), or with `out` into that new directory instead, rendered for the state dir it will be
/// copied to (a Nix build's output). Nothing is touched before the directory is known to be new,
/// empty or a state dir; the rest happens under its lock (waiting up to `wait`), after completing
/// whatever an interrupted `gen` left.
pub fn gen(
    plan: &Plan,
    opts: &Options,
    out: Option<&Path>,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<(Generated, WriteSummary), Error> {
    let dir = out.unwrap_or(&plan.state_dir);
    let found = state::dir::inspect(dir)?;
    if out.is_some() && found == Found::Ours {
        // Its keys would be kept and its paths are another state dir's: only a fresh one is clear.
        return Err(Error::state(
            dir,
            "already holds a state dir; --out writes a new one",
            "pass a new or empty directory to --out (or drop --out to update a state dir in place)",
        ));
    }
    render_into(plan, opts, dir, found, wait, on_wait)
}

/// `gen --out` of an environment across hosts again, over the earlier one: host `out` keeps its
/// keys and certificates (as a state dir rendered in place does), for an upgrade or a changed
/// setting, and `kubeunit import` on the host takes it as an update. `check_host_again` first.
pub fn gen_host_again(
    plan: &Plan,
    opts: &Options,
    out: &Path,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<(Generated, WriteSummary), Error> {
    check_host_again(plan, out)?;
    render_into(plan, opts, out, Found::Ours, wait, on_wait)
}

/// Only a state dir of this environment and host, for the same state dir, is rendered over.
pub fn check_host_again(plan: &Plan, out: &Path) -> Result<(), Error> {
    let found = state::dir::inspect(out)?;
    let previous = Previous::load(out)?;
    let recorded = previous.manifest.as_ref().filter(|_| found == Found::Ours);
    let host_of = |m: &state::Manifest| {
        m.profile
            .get("host")
            .and_then(|h| h.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let same = recorded.is_some_and(|m| {
        m.name == plan.name() && m.state_dir == plan.state_dir && host_of(m) == plan.profile.host
    });
    if same {
        return Ok(());
    }
    Err(Error::state(
        out,
        format!(
            "is not host '{}' of environment '{}' for {}: {}",
            plan.profile.host,
            plan.name(),
            plan.state_dir.display(),
            recorded
                .map(|m| format!(
                    "it holds host '{}' of '{}' for {}",
                    host_of(m),
                    m.name,
                    m.state_dir.display()
                ))
                .unwrap_or_else(|| "it holds no state dir".into())
        ),
        "pass the --out of the earlier gen of this environment (and the same --state-dir), or a new directory",
    ))
}

fn render_into(
    plan: &Plan,
    opts: &Options,
    dir: &Path,
    found: Found,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<(Generated, WriteSummary), Error> {
    write_state_dir(
        dir,
        found,
        wait,
        on_wait,
        |_| {
            let (previous, generated) = render(plan, dir, opts)?;
            same_environment(plan, &previous, opts)?;
            let manifest = manifest_of(plan, &generated)?;
            Ok((previous, manifest, generated))
        },
        |generated| &generated.tree,
    )
}

/// Write a tree into `dir` (new, empty or a state dir, as `found` says) the one way `gen` and
/// `import` share: created, locked (waiting up to `wait`), an interrupted write completed, then
/// `prepare` says what is there and what goes in (previous run, manifest, and what `tree` reads the
/// tree from), and the journaled write. A directory created for this is removed again when
/// anything fails before the write begins.
fn write_state_dir<T>(
    dir: &Path,
    found: Found,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
    prepare: impl FnOnce(&state::Root) -> Result<(Previous, Manifest, T), Error>,
    tree: impl Fn(&T) -> &state::Tree,
) -> Result<(T, WriteSummary), Error> {
    let undo = state::dir::Undo::before_create(dir, found);
    let mut wrote = false;
    let result = state::dir::create(dir).and_then(|()| {
        let (root, _lock) = state::lock::acquire(dir, Access::Exclusive, true, wait, on_wait)?
            .ok_or_else(|| Error::Internal("no lock file after creating it".into()))?;
        let recovered = state::recover(&root)?;
        let (previous, manifest, value) = prepare(&root)?;
        wrote = true;
        let mut summary = state::write(&root, &previous, tree(&value), &manifest)?;
        summary.notes.extend(recovered);
        Ok((value, summary))
    });
    if result.is_err() && !wrote {
        undo.run();
    }
    result
}

/// `kubeunit import`: the state dir at `src`, generated elsewhere for `dst` (`gen --out`, a Nix
/// build), checked against its manifest and written into `dst` with the modes it records, through
/// the same locked, journaled write as `gen`. `dst` must be new, empty, that same state dir
/// already (importing again restores it: modes, removed or edited files), or the same environment
/// rendered before (an update: `rendered_again`). `dst` defaults to the
/// state dir it was generated for. Returns that manifest and what was written.
pub fn import(
    src: &Path,
    dst: Option<&Path>,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<(Manifest, WriteSummary), Error> {
    let (tree, manifest) = state::import::read(src)?;
    let dst = dst.unwrap_or(&manifest.state_dir);
    if manifest.state_dir != dst {
        return Err(Error::state(
            src,
            format!(
                "was generated for {} (its units and configs name files there), not {}",
                manifest.state_dir.display(),
                dst.display()
            ),
            format!(
                "import it without --state-dir (to {}), or generate it for this place: kubeunit gen --state-dir {} --out DIR",
                manifest.state_dir.display(),
                dst.display()
            ),
        ));
    }
    let found = state::dir::inspect(dst)?;
    let prepare = |root: &state::Root| {
        let previous = Previous::load(dst)?;
        let fresh = root
            .walk("")
            .map_err(Error::io(dst, "list"))?
            .iter()
            .all(|e| e.rel == paths::LOCK || e.kind == state::root::Kind::Dir);
        match &previous.manifest {
            Some(m) if *m == manifest => {}
            // This environment rendered again (a renewal, a changed setting): an update, which
            // keeps the data below (etcd's, the kubelet's), as `gen` does.
            Some(m) if rendered_again(m, &manifest) => {}
            None if fresh => {}
            _ => {
                return Err(Error::state(
                    dst,
                    format!(
                        "already holds {}; importing would replace its keys",
                        previous
                            .manifest
                            .as_ref()
                            .map(|m| format!("environment '{}'", m.name))
                            .unwrap_or_else(|| "files".into())
                    ),
                    format!(
                        "remove it first (kubeunit destroy --all --state-dir {}), or keep it",
                        dst.display()
                    ),
                ))
            }
        }
        Ok((previous, manifest.clone(), tree))
    };
    let (_, summary) = write_state_dir(dst, found, wait, on_wait, prepare, |tree| tree)?;
    Ok((manifest, summary))
}

/// Whether `new` is the environment `old` is, rendered again: the same name and the same CA
/// certificates (`gen --force` or another seed makes new ones, whose keys would replace these and
/// leave the data unreadable).
fn rendered_again(old: &Manifest, new: &Manifest) -> bool {
    let cas = |m: &Manifest| -> BTreeMap<String, String> {
        m.files
            .iter()
            .filter(|(rel, _)| rel.starts_with("pki/") && rel.ends_with("ca.crt"))
            .map(|(rel, f)| (rel.clone(), f.sha256.clone()))
            .collect()
    };
    let old_cas = cas(old);
    old.name == new.name && old_cas.contains_key("pki/ca.crt") && old_cas == cas(new)
}

/// The manifest of what `generated` will write.
fn manifest_of(plan: &Plan, generated: &Generated) -> Result<Manifest, Error> {
    let profile = serde_json::to_value(plan.resolved_profile())
        .map_err(|e| Error::Internal(format!("profile as JSON: {e}")))?;
    let mut manifest = Manifest::new(
        plan.name(),
        plan.state_dir.clone(),
        &generated.tree,
        generated.cert_digests.clone(),
        generated.inputs.clone(),
        profile,
    );
    manifest.renewed = generated.renewed.clone();
    Ok(manifest)
}

/// The leaf certificates `names` asks `certs renew` for (`all`: every leaf of the environment,
/// every node's), in table order; a node after the first's by `<row>@<node>`, as its instances are
/// named. Unknown names, CAs (renewing one would make every certificate it signed useless: `gen
/// --force` replaces the PKI) and certificates of disabled components are refused.
pub fn renewable(plan: &Plan, names: &[String]) -> Result<Vec<String>, Error> {
    let specs = pki::specs(plan);
    let leaves: Vec<&str> = specs
        .iter()
        .filter(|s| s.usage != pki::Usage::Ca)
        .map(|s| s.name.as_str())
        .collect();
    if names.is_empty() {
        return Err(Error::Usage {
            message: "no certificate named".into(),
            fix: format!("name certificates or `all`: {}", leaves.join(", ")),
        });
    }
    let mut wanted: Vec<&str> = Vec::new();
    for name in names {
        if name == "all" {
            wanted.extend(&leaves);
            continue;
        }
        if let Some(spec) = specs.iter().find(|s| &s.name == name) {
            if spec.usage == pki::Usage::Ca {
                return Err(Error::Usage {
                    message: format!(
                        "{name} is a CA: certs renew re-issues leaf certificates from the existing CAs and never replaces a CA"
                    ),
                    fix: format!(
                        "renew the certificates it signed (kubeunit certs renew all); a new CA takes `kubeunit gen --force --state-dir {}`, which replaces the whole PKI",
                        plan.state_dir.display()
                    ),
                });
            }
            wanted.push(&spec.name);
            continue;
        }
        // A further node's certificate (`kubelet@worker-1`) is of its row.
        let row = name.split_once('@').map_or(name.as_str(), |(row, _)| row);
        let disabled = pki::CERTS
            .iter()
            .find(|c| c.name == row)
            .and_then(|c| match c.when {
                pki::When::Component(comp) => Some(comp),
                pki::When::Always => None,
            })
            // An enabled one's row is there: the node is not.
            .filter(|comp| !plan.enabled(comp));
        return Err(Error::Usage {
            message: match disabled {
                Some(comp) => format!(
                    "no certificate '{name}' in environment '{}': it exists for {comp}, which is not enabled",
                    plan.name()
                ),
                None => format!("no certificate '{name}' in environment '{}'", plan.name()),
            },
            fix: format!("name one of: {}, or all", leaves.join(", ")),
        });
    }
    Ok(leaves
        .into_iter()
        .filter(|l| wanted.contains(l))
        .map(String::from)
        .collect())
}

/// `gen` of a state dir again from `profile` (its own, changed: `restart --binary`, `upgrade --set`):
/// what is there stays (keys, certificates), anything new is issued from the OS's randomness.
pub fn regen(
    profile: Profile,
    dir: &Path,
    wait: Duration,
    on_wait: &mut dyn FnMut(&str),
) -> Result<WriteSummary, Error> {
    let plan = Plan::new(profile, dir, &HostFacts::gather())?;
    let opts = Options {
        entropy: pki::Entropy::Os,
        force: false,
    };
    gen(&plan, &opts, None, wait, on_wait).map(|(_, summary)| summary)
}

/// `kubeunit certs renew`: re-issue the leaf certificates `renewal` names from the existing CAs and
/// keys, through the same pipeline as `gen` (the state dir's profile -> plan -> artifacts), so the
/// kubeconfigs embedding them are rewritten and the manifest records them (`gen --check` finds
/// what it found before; a later `gen` keeps them). The caller holds the state dir's exclusive
/// lock. A state dir that differs from what `gen` would write in more than the user's own edits
/// (`start` uses those as they are: edited units and addons, files that are not kubeunit's) is
/// refused untouched: renewing must not also write whatever else changed. The user's edits stay.
pub fn renew(plan: &Plan, renewal: &pki::Renewal) -> Result<(Generated, WriteSummary), Error> {
    let opts = Options {
        entropy: pki::Entropy::Os,
        force: false,
    };
    let (edits, differences): (Vec<Difference>, Vec<Difference>) = check(plan, &opts)?
        .into_iter()
        .partition(Difference::is_users_edit);
    if !differences.is_empty() {
        let list: Vec<String> = differences
            .iter()
            .take(8)
            .map(|d| format!("{} {}", d.kind.as_str(), d.path))
            .collect();
        let more = differences.len().saturating_sub(list.len());
        return Err(Error::state(
            &plan.state_dir,
            format!(
                "differs from what `gen` would write ({}{}): renewing would write that too",
                list.join(", "),
                if more > 0 { format!(", {more} more") } else { String::new() }
            ),
            format!(
                "see `kubeunit gen --check --state-dir {dir}`, bring it in line with `kubeunit gen --profile {dir}/profile.yaml --state-dir {dir}` (keys and CAs are kept), then renew",
                dir = plan.state_dir.display()
            ),
        ));
    }
    let root = state::Root::open(&plan.state_dir).map_err(Error::io(&plan.state_dir, "open"))?;
    let previous = Previous::load(&plan.state_dir)?;
    let generated = artifacts::generate_renewing(plan, &previous, &opts, renewal)?;
    // The manifest records what kubeunit generates; an edited file stays as the user left it.
    let manifest = manifest_of(plan, &generated)?;
    let mut tree = generated.tree.clone();
    for edit in edits.iter().filter(|d| d.kind == DiffKind::Tampered) {
        let ours = tree.get_mut(&edit.path);
        match (ours, previous.read_bytes(&edit.path)) {
            (Some(artifact), Some(bytes)) => artifact.bytes = bytes,
            _ => {
                return Err(Error::Internal(format!(
                    "{}: edited, but not generated or not readable",
                    edit.path
                )))
            }
        }
    }
    let summary = state::write(&root, &previous, &tree, &manifest)?;
    Ok((generated, summary))
}

/// A state dir belongs to one environment: another profile's `gen` would rename it (and remove the
/// first one's units) unless forced.
fn same_environment(plan: &Plan, previous: &Previous, opts: &Options) -> Result<(), Error> {
    let Some(m) = &previous.manifest else {
        return Ok(());
    };
    if opts.force {
        return Ok(());
    }
    if m.name == plan.name() {
        // Another instance renames every unit: the running ones would be left behind.
        let instance = m
            .profile
            .get("instance")
            .and_then(|i| i.as_str())
            .unwrap_or("");
        if instance == plan.instance {
            return Ok(());
        }
        return Err(Error::state(
            &plan.state_dir,
            format!(
                "its units are named for instance {instance:?}; generating instance {:?} would rename them (and leave the running ones behind)",
                plan.instance
            ),
            format!(
                "keep the recorded instance (--set instance=auto, or leave it out), or pass --force after `kubeunit stop --state-dir {}`",
                plan.state_dir.display()
            ),
        ));
    }
    Err(Error::state(
        &plan.state_dir,
        format!(
            "belongs to environment '{}'; generating '{}' into it would rename it and remove the units of '{}'",
            m.name,
            plan.name(),
            m.name
        ),
        format!(
            "give '{}' its own --state-dir, or pass --force to turn this state dir into '{}'",
            plan.name(),
            plan.name()
        ),
    ))
}

/// `kubeunit gen --check` and `start`'s preflight: how the state dir differs from its manifest and
/// from what `gen` would write now. The caller holds the state dir's lock (shared or exclusive).
pub fn check(plan: &Plan, opts: &Options) -> Result<Vec<Difference>, Error> {
    if state::dir::inspect(&plan.state_dir)? != Found::Ours {
        return Err(Error::state(
            &plan.state_dir,
            format!("no {}: not generated by kubeunit", paths::MANIFEST),
            "run `kubeunit gen` first",
        ));
    }
    let (previous, generated) = render(plan, &plan.state_dir, opts)?;
    state::check(
        &plan.state_dir,
        &previous,
        &generated.tree,
        &generated.inputs,
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::pki::Entropy;

    /// Fields a `--set` may aim at, a few of each kind, and some that do not exist.
    const KEYS: &[&str] = &[
        "name",
        "binDir",
        "dataDir",
        "node.name",
        "network.serviceCIDR",
        "network.podCIDR",
        "network.dnsIP",
        "network.dnsDomain",
        "network.advertiseAddress",
        "network.bindAddress",
        "network.extraSANs",
        "ports.apiserver",
        "pki.algorithm",
        "pki.caValidity",
        "pki.certValidity",
        "pki.epoch",
        "featureGates.X",
        "components.etcd.env.E",
        "components.etcd.extraArgs.f",
        "components.etcd.binaryArgs",
        "components.etcd.binary",
        "components.kube-apiserver.featureGates.G",
        "audit.policy",
        "apiserver.admissionPlugins",
        "logging.verbosity",
        "encryption.enabled",
        "addons.corednsImage",
        "addons.corednsForward",
        "addons.defaultStorageClass",
        "addons.storageProvisioner",
        "addons.localPathImage",
        "addons.localPathHelperImage",
        "addons.metricsServer",
        "addons.metricsServerImage",
        "addons.loadBalancer",
        "addons.loadBalancerPool",
        "addons.metallbControllerImage",
        "addons.metallbSpeakerImage",
        "addons.gateway",
        "addons.traefikImage",
        "network.egress",
        "network.ipFamily",
        "network.podCIDRv6",
        "network.serviceCIDRv6",
        "offline",
        "versions.kubernetes",
        "nope.nothing",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Arbitrary `--set` values never panic: the pipeline renders, or refuses the input (exit 2).
        #[test]
        fn arbitrary_sets_render_or_are_bad_input(
            sets in proptest::collection::vec((0..KEYS.len(), any::<String>()), 1..4)
        ) {
            let sets: Vec<String> = sets
                .iter()
                .map(|(k, v)| format!("{}={v}", KEYS[*k]))
                .chain(["network.advertiseAddress=192.0.2.10".to_string()])
                .collect();
            let host = HostFacts {
                address_v4: None,
                address_v6: None,
                epoch: time::OffsetDateTime::UNIX_EPOCH,
                state_home: None,
                host_addresses: Default::default(),
            };
            let result = profile("ci", &sets)
                .and_then(|p| Plan::new(p, Path::new("/nonexistent/state"), &host))
                .and_then(|plan| {
                    let opts = Options { entropy: Entropy::Seed(1), force: false };
                    render(&plan, &plan.state_dir, &opts).map(|_| ())
                });
            if let Err(e) = result {
                prop_assert_eq!(e.exit_code(), 2, "{:?}: {}", sets, e);
            }
        }
    }

    #[test]
    fn ports_are_recorded_in_the_tables_order_whatever_order_a_profile_wrote() {
        let fields = components::port_fields();
        let reversed: Vec<String> = fields
            .iter()
            .rev()
            .enumerate()
            .map(|(i, f)| format!("{f}: {}", 20000 + i))
            .collect();
        let p = profile("ci", &[format!("ports={{{}}}", reversed.join(", "))]).unwrap();
        let spec::profile::PortSpec::Fixed(ports) = &p.ports else {
            panic!("ports are numbers");
        };
        let order: Vec<&str> = ports.all().iter().map(|(f, _)| *f).collect();
        assert_eq!(order, fields);
        assert_eq!(ports.get(fields[0]), Some(20000 + fields.len() as u16 - 1));
        // Unknown or missing fields are refused, all at once.
        let e = profile("ci", &["ports={apiserver: 7443, nope: 1}".to_string()]).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("ports.nope") && msg.contains("ports.etcdClient"),
            "{msg}"
        );
        assert_eq!(e.exit_code(), 2);
    }
}
