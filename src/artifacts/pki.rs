//! PKI artifacts: a key and a certificate for every row of the certificate table (kept, reissued or
//! created against the previous run), the service-account key pair and the encryption key.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::generated::{put, Generated, Options};
use crate::error::Error;
use crate::pki::issue::{self, Prior};
use crate::pki::{self, Ca, CertSpec, Decision, Key, PkiError, Renewal, Secrets, Usage};
use crate::spec::profile::HostRole;
use crate::spec::{paths, Plan};
use crate::state::{Previous, Renewed, MODE_PUBLIC, MODE_SECRET};

fn pki_err(plan: &Plan, rel: &str) -> impl FnOnce(PkiError) -> Error {
    let path = plan.state_dir.join(rel);
    move |e| Error::Artifact {
        path,
        message: e.to_string(),
        fix: "run `kubeunit gen --force` to replace the PKI".into(),
    }
}

/// A CA pair (or key) already in the state dir that kubeunit must not replace on its own: the fix
/// names the pair and `--force`.
fn refuse_ca(plan: &Plan, name: &str, why: &str) -> Error {
    Error::state(
        &plan.state_dir,
        format!("pki/{name}.crt and pki/{name}.key: {why}; kubeunit does not replace a CA on its own"),
        format!(
            "put a matching pair there (ECDSA P-256 or RSA key in PEM), or pass --force to create a new {name} (every certificate it signed is reissued)"
        ),
    )
}

/// Every key `gen` signs with: each certificate's, with whether it is the previous run's, and the
/// service account's.
pub struct Keys {
    pub certs: CertKeys,
    pub sa: Key,
}

/// Each certificate's key, with whether it is the previous run's.
pub struct CertKeys {
    pub keys: Vec<(Key, bool)>,
    /// The CAs whose certificate is here without their key: across hosts, a host that is no
    /// control-plane host's (the key stays on those). Their key above is a stand-in that signs
    /// nothing: a certificate of theirs that would need issuing is refused.
    pub keyless: Vec<String>,
}

/// The keys of every certificate and the service account: a CA's is the previous run's when it
/// matches the CA certificate (or the certificate is missing: it is reissued with the same key), a
/// leaf's when it has the profile's algorithm, the service account's whenever it is there (see
/// `secrets`); the rest generated at once on every core, since RSA key generation is most of
/// `gen`'s time. A CA key that cannot be read, a CA certificate without its key, a pair that does
/// not match, and an unreadable service-account key are refused, not replaced.
pub fn keys(
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    specs: &[CertSpec],
) -> Result<Keys, Error> {
    let alg = plan.profile.pki.algorithm;
    let mut keys: Vec<Option<(Key, bool)>> = Vec::with_capacity(specs.len());
    let mut keyless = Vec::new();
    for spec in specs {
        if opts.force {
            keys.push(None);
            continue;
        }
        let key_rel = &spec.key_path;
        let crt_rel = &spec.cert_path;
        let key = old.read(key_rel).map(|pem| Key::from_pem(&pem));
        if spec.usage != Usage::Ca {
            keys.push(
                key.and_then(Result::ok)
                    .filter(|k| k.algorithm_kind() == alg)
                    .map(|k| (k, true)),
            );
            continue;
        }
        let cert = old.read(crt_rel);
        let key = match key {
            None if cert.is_some()
                && !old.exists(key_rel)
                && !plan.here_has(HostRole::ControlPlane) =>
            {
                keyless.push(spec.name.clone());
                None
            }
            None if old.exists(key_rel) => {
                return Err(refuse_ca(plan, &spec.name, "the key is not readable text"))
            }
            None if cert.is_some() => {
                return Err(refuse_ca(plan, &spec.name, "the certificate has no key"))
            }
            None => None,
            Some(Err(e)) => return Err(refuse_ca(plan, &spec.name, &format!("the key: {e}"))),
            Some(Ok(k)) => Some(k),
        };
        if let (Some(cert), Some(key)) = (&cert, &key) {
            if !issue::cert_matches_key(cert, key) {
                return Err(refuse_ca(
                    plan,
                    &spec.name,
                    "the certificate does not belong to the key (or is no certificate)",
                ));
            }
        }
        keys.push(key.map(|k| (k, true)));
    }
    let mut sa = existing_sa_key(plan, old, opts)?;

    // What is missing, in table order and the service account's last: (purpose, where it goes).
    let missing: Vec<(String, Option<usize>)> = (0..specs.len())
        .filter(|i| keys[*i].is_none())
        .map(|i| (key_purpose(plan, &specs[i]), Some(i)))
        .chain(sa.is_none().then(|| ("key:sa".to_string(), None)))
        .collect();
    let purposes: Vec<String> = missing.iter().map(|(p, _)| p.clone()).collect();
    let generated = pki::generate_all(alg, &opts.entropy, &purposes);
    for ((_, slot), key) in missing.into_iter().zip(generated) {
        match slot {
            Some(i) => {
                let key = key.map_err(pki_err(plan, &specs[i].key_path))?;
                // A keyless CA's stand-in counts as its own key: its certificate is kept.
                keys[i] = Some((key, keyless.contains(&specs[i].name)));
            }
            None => sa = Some(key.map_err(pki_err(plan, paths::SA_KEY))?),
        }
    }
    let certs = keys
        .into_iter()
        .zip(specs)
        .map(|(k, spec)| k.ok_or_else(|| Error::Internal(format!("no key for {}", spec.name))))
        .collect::<Result<_, _>>()?;
    let sa = sa.ok_or_else(|| Error::Internal("no service-account key".into()))?;
    Ok(Keys {
        certs: CertKeys {
            keys: certs,
            keyless,
        },
        sa,
    })
}

/// What a certificate's key is drawn for (`Entropy::rng`): its name; across hosts a leaf's is its
/// host's own too (every host's state dir is rendered with the same entropy, so that the CAs and
/// the service-account key agree: a leaf key of the same name must not be the same on two hosts).
fn key_purpose(plan: &Plan, spec: &CertSpec) -> String {
    match plan.this_host() {
        Some(host) if spec.usage != Usage::Ca => format!("key:{}/{}", host.name, spec.name),
        _ => format!("key:{}", spec.name),
    }
}

/// The previous run's service-account key unless --force: kept whatever the profile's algorithm
/// (see `secrets`); one that is there but unreadable is refused.
fn existing_sa_key(plan: &Plan, old: &Previous, opts: &Options) -> Result<Option<Key>, Error> {
    if opts.force || !old.exists(paths::SA_KEY) {
        return Ok(None);
    }
    let pem = old.read(paths::SA_KEY).unwrap_or_default();
    Key::from_pem(&pem).map(Some).map_err(|e| {
        refuse_key(
            plan,
            paths::SA_KEY,
            &e.to_string(),
            "every service-account token invalid",
        )
    })
}

/// Name -> (certificate PEM, private key PEM) of every issued certificate.
pub type Issued = BTreeMap<String, (String, String)>;

/// Every certificate of the table with its key, into `g`; returns them for the kubeconfigs.
pub fn certificates(
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    renewal: Option<&Renewal>,
    specs: &[CertSpec],
    keys: CertKeys,
    g: &mut Generated,
) -> Result<Issued, Error> {
    let CertKeys { keys, keyless } = keys;
    let run = Against {
        plan,
        old,
        opts,
        renewal,
    };
    // The table lists each CA before what it signs: a CA issued here signs the rows below it.
    let mut cas: BTreeMap<String, Ca> = BTreeMap::new();
    let mut issued = Issued::new();
    for (spec, (key, reused)) in specs.iter().zip(keys) {
        let crt = &spec.cert_path;
        let old_cert = if opts.force { None } else { old.read(crt) };
        let issuer =
            match spec.ca {
                None => None,
                Some(ca) => Some(cas.get(ca).ok_or_else(|| {
                    Error::Internal(format!("CA {ca} listed after {}", spec.name))
                })?),
            };
        let digest = issue::spec_digest(spec, plan, &key, issuer.map(|ca| ca.cert_pem.as_str()));
        let choice = Choice::of(run, spec, reused, digest, old_cert.as_deref());
        note_ca_choice(plan, spec, &key, &choice, &mut g.notes);
        record_renewal(plan, spec, &choice, &mut g.renewed);
        refuse_without_ca_key(plan, spec, choice.decision, &keyless)?;
        let (cert_pem, key) = match (choice.decision, old_cert) {
            (Decision::Kept, Some(c)) => (c, key),
            _ => issue::issue_renewing(spec, plan, key, &choice.digest, issuer, choice.renewing)
                .map_err(pki_err(plan, crt))?,
        };
        let key_pem = put_pair(
            plan,
            spec,
            choice.decision,
            choice.digest,
            &cert_pem,
            &key,
            g,
        )?;
        if spec.usage == Usage::Ca {
            let ca = Ca::from_existing(&cert_pem, key).map_err(pki_err(plan, crt))?;
            cas.insert(spec.name.clone(), ca);
        }
        issued.insert(spec.name.clone(), (cert_pem, key_pem));
    }
    Ok(issued)
}

/// What each certificate is decided against: the plan, the previous run, the options, and the
/// `certs renew` renewal if this run is one.
#[derive(Clone, Copy)]
struct Against<'a> {
    plan: &'a Plan,
    old: &'a Previous,
    opts: &'a Options,
    renewal: Option<&'a Renewal>,
}

/// What becomes of one certificate of the table (kept, reissued, created, renewed), with what
/// that takes: the digest to record, the renewals, and a start that pki.epoch moved from.
struct Choice<'a> {
    decision: Decision,
    /// The renewal that renews it now.
    renewing: Option<&'a Renewal>,
    /// Its earlier renewal (none with --force), which a kept certificate keeps.
    renewed_before: Option<&'a Renewed>,
    /// The digest of its inputs to record; a kept CA's is the one it was issued with.
    digest: String,
    /// The previous certificate's start, when an explicit pki.epoch moved away from it.
    moved_start: Option<time::OffsetDateTime>,
}

impl<'a> Choice<'a> {
    /// The choice for `spec`, with its key (`reused`: the previous run's), the digest of its
    /// inputs, and its previous certificate (none with --force).
    fn of(
        run: Against<'a>,
        spec: &CertSpec,
        reused: bool,
        digest: String,
        old_cert: Option<&str>,
    ) -> Choice<'a> {
        let Against {
            plan,
            old,
            opts,
            renewal,
        } = run;
        let explicit_epoch = plan
            .profile
            .pki
            .epoch
            .as_deref()
            .is_some_and(|e| !e.is_empty());
        let previous_digest = old.cert_digest(&spec.name);
        // An explicit pki.epoch that differs from the certificate's start reissues a leaf; a
        // renewed one started later on purpose, and moves when the epoch it was renewed at does.
        let starts = old_cert.and_then(issue::not_before);
        let renewed_before = old.renewed(&spec.name).filter(|_| !opts.force);
        let epoch_moved = explicit_epoch
            && match renewed_before {
                Some(r) => !r.at_epoch(plan.epoch),
                None => starts.is_some_and(|t| t != plan.epoch),
            };
        let prior = Prior {
            exists: old_cert.is_some(),
            key_reused: reused,
            same_inputs: previous_digest.as_deref() == Some(digest.as_str()),
            intact: old.intact(&spec.cert_path),
            epoch_moved,
        };
        let renewing = renewal
            .filter(|r| spec.usage != Usage::Ca && r.names.contains(&spec.name))
            .filter(|_| old_cert.is_some());
        let decision = match renewing {
            Some(_) => Decision::Renewed,
            None => issue::decide(spec.usage, &prior),
        };
        // A kept CA keeps the digest it was issued with.
        let digest = match (decision, spec.usage) {
            (Decision::Kept, Usage::Ca) => previous_digest.unwrap_or_default(),
            _ => digest,
        };
        Choice {
            decision,
            renewing,
            renewed_before,
            digest,
            moved_start: starts.filter(|_| epoch_moved),
        }
    }
}

/// What the user should hear about a CA: kept against the profile (its start is not pki.epoch,
/// its key not pki.algorithm), since only --force replaces a CA; or reissued for its key.
fn note_ca_choice(
    plan: &Plan,
    spec: &CertSpec,
    key: &Key,
    choice: &Choice,
    notes: &mut Vec<String>,
) {
    let crt = &spec.cert_path;
    match (choice.decision, spec.usage) {
        (Decision::Kept, Usage::Ca) => {
            if let Some(t) = choice.moved_start {
                notes.push(format!(
                    "{crt}: kept; it starts at {t}, not at pki.epoch (--force replaces the CA)"
                ));
            }
            if key.algorithm_kind() != plan.profile.pki.algorithm {
                notes.push(format!(
                    "{crt}: kept; its key is {}, the profile's pki.algorithm {} (leaf keys follow the profile)",
                    key.algorithm_kind().as_str(),
                    plan.profile.pki.algorithm.as_str()
                ));
            }
        }
        (Decision::Reissued, Usage::Ca) => {
            notes.push(format!("{crt} was missing: reissued with the CA's key"));
        }
        _ => {}
    }
}

/// The renewal the manifest records for the certificate: one made now, or the earlier one of a
/// certificate kept since (a reissued certificate is no longer renewed).
fn record_renewal(
    plan: &Plan,
    spec: &CertSpec,
    choice: &Choice,
    renewed: &mut BTreeMap<String, Renewed>,
) {
    match (choice.decision, choice.renewing, choice.renewed_before) {
        (Decision::Renewed, Some(r), _) => {
            let start = issue::renewal_start(r.at);
            renewed.insert(spec.name.clone(), Renewed::new(start, plan.epoch));
        }
        (Decision::Kept, _, Some(r)) => {
            renewed.insert(spec.name.clone(), r.clone());
        }
        _ => {}
    }
}

/// Across hosts, a host without a CA's key (`keyless`) cannot issue the CA or what it signs:
/// anything but keeping such a certificate is refused, with where to get it instead.
fn refuse_without_ca_key(
    plan: &Plan,
    spec: &CertSpec,
    decision: Decision,
    keyless: &[String],
) -> Result<(), Error> {
    let signer = if spec.usage == Usage::Ca {
        Some(spec.name.as_str())
    } else {
        spec.ca
    };
    match signer.filter(|ca| keyless.iter().any(|k| k == ca)) {
        Some(ca) if decision != Decision::Kept => Err(Error::state(
            &plan.state_dir,
            format!(
                "{} would be {}, but the key of its CA {ca} is on the control-plane hosts only",
                spec.cert_path,
                decision.as_str(),
            ),
            "render every host's state dir again from the profile with `kubeunit gen --out DIR`, and import this host's",
        )),
        _ => Ok(()),
    }
}

/// The certificate and its key into `g`, with its decision and digest; returns the key's PEM.
fn put_pair(
    plan: &Plan,
    spec: &CertSpec,
    decision: Decision,
    digest: String,
    cert_pem: &str,
    key: &Key,
    g: &mut Generated,
) -> Result<String, Error> {
    let crt = &spec.cert_path;
    g.certs.push((crt.clone(), decision));
    g.cert_digests.insert(spec.name.clone(), digest);
    let key_pem = key.private_pem().map_err(pki_err(plan, &spec.key_path))?;
    put(&mut g.tree, crt, cert_pem.as_bytes().to_vec(), MODE_PUBLIC);
    // A CA's key stays on the control-plane hosts (kube-controller-manager signs with it).
    if spec.usage != Usage::Ca || plan.here_has(HostRole::ControlPlane) {
        put(
            &mut g.tree,
            &spec.key_path,
            key_pem.clone().into_bytes(),
            MODE_SECRET,
        );
    }
    Ok(key_pem)
}

/// A key Secrets or tokens depend on that is there but unusable: refused, not replaced.
fn refuse_key(plan: &Plan, rel: &str, why: &str, loses: &str) -> Error {
    Error::state(
        &plan.state_dir,
        format!("{rel}: {why}; replacing it would make {loses}"),
        format!("restore {rel}, or pass --force to create a new one"),
    )
}

/// The service-account signing key pair and the encryption key: kept across runs (whatever the
/// profile's algorithm, and the encryption key even while encryption is off), since replacing them
/// invalidates every issued token and makes every stored Secret unreadable. Only --force replaces
/// them; one that is there but unreadable is refused.
pub fn secrets(
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    sa: Key,
    g: &mut Generated,
) -> Result<Secrets, Error> {
    // Across hosts only the control-plane hosts sign and check tokens, and store Secrets.
    if !plan.here_has(HostRole::ControlPlane) {
        return Ok(Secrets::default());
    }
    let sa_pub = sa.public_pem().map_err(pki_err(plan, paths::SA_PUB))?;
    let sa_key = sa.private_pem().map_err(pki_err(plan, paths::SA_KEY))?;
    put(&mut g.tree, paths::SA_KEY, sa_key.into_bytes(), MODE_SECRET);
    put(&mut g.tree, paths::SA_PUB, sa_pub.into_bytes(), MODE_PUBLIC);

    let existing = if opts.force || !old.exists(paths::ENCRYPTION_KEY) {
        None
    } else {
        let text = old.read(paths::ENCRYPTION_KEY).unwrap_or_default();
        let key = text.trim().to_string();
        if !B64.decode(&key).is_ok_and(|b| b.len() == 32) {
            return Err(refuse_key(
                plan,
                paths::ENCRYPTION_KEY,
                "not the base64 of a 32-byte key",
                "every Secret encrypted with it unreadable",
            ));
        }
        Some(key)
    };
    let mut secrets = Secrets::default();
    let key = match (plan.profile.encryption.enabled, existing) {
        (true, existing) => {
            let key =
                existing.unwrap_or_else(|| B64.encode(opts.entropy.bytes("encryption-key", 32)));
            secrets.encryption_key = Some(key.clone());
            Some(key)
        }
        (false, Some(key)) => {
            g.notes.push(format!(
                "{}: kept although encryption is off (Secrets stored while it was on need it; --force removes it)",
                paths::ENCRYPTION_KEY
            ));
            Some(key)
        }
        (false, None) => None,
    };
    if let Some(key) = key {
        put(
            &mut g.tree,
            paths::ENCRYPTION_KEY,
            format!("{key}\n").into_bytes(),
            MODE_SECRET,
        );
    }
    Ok(secrets)
}
