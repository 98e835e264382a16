//! PKI artifacts: a key and a certificate for every row of the certificate table (kept, reissued or
//! created against the previous run), the service-account key pair and the encryption key.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

use super::generated::{put, Generated, Options};
use crate::error::Error;
use crate::pki::issue::{self, Prior};
use crate::pki::{self, Ca, CertSpec, Decision, Key, PkiError, Secrets, Usage};
use crate::spec::{paths, Plan};
use crate::state::{Previous, MODE_PUBLIC, MODE_SECRET};

fn pki_err(plan: &Plan, rel: &str) -> impl FnOnce(PkiError) -> Error {
    let path = plan.state_dir.join(rel);
    move |e| Error::Artifact {
        path,
        message: e.to_string(),
        fix: "run `kubeunit gen --force` to replace the PKI".into(),
    }
}

/// The key of every certificate, and whether it is the previous run's: kept when it is still usable
/// (a CA's when it matches the CA certificate; a leaf's when it has the profile's algorithm), the
/// rest generated on every core, since RSA key generation is most of `gen`'s time.
fn reuse_or_generate_keys(
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    specs: &[CertSpec],
) -> Result<Vec<(Key, bool)>, Error> {
    let alg = plan.profile.pki.algorithm;
    let mut keys: Vec<Option<(Key, bool)>> = specs
        .iter()
        .map(|spec| {
            if opts.force {
                return None;
            }
            let key = Key::from_pem(&old.read(&paths::key(&spec.name))?).ok()?;
            let usable = if spec.usage == Usage::Ca {
                old.read(&paths::cert(&spec.name))
                    .is_some_and(|c| issue::cert_matches_key(&c, &key))
            } else {
                key.algorithm_kind() == alg
            };
            usable.then_some((key, true))
        })
        .collect();
    let missing: Vec<usize> = (0..specs.len()).filter(|i| keys[*i].is_none()).collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(missing.len().max(1));
    let generated: Vec<(usize, Result<Key, PkiError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let mine: Vec<usize> = missing.iter().copied().skip(w).step_by(workers).collect();
                s.spawn(move || {
                    mine.into_iter()
                        .map(|i| {
                            let purpose = format!("key:{}", specs[i].name);
                            (i, Key::generate(alg, &opts.entropy, &purpose))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for (i, key) in generated {
        let key = key.map_err(pki_err(plan, &paths::key(&specs[i].name)))?;
        keys[i] = Some((key, false));
    }
    keys.into_iter()
        .zip(specs)
        .map(|(k, spec)| k.ok_or_else(|| Error::Internal(format!("no key for {}", spec.name))))
        .collect()
}

/// Name -> (certificate PEM, private key PEM) of every issued certificate.
pub type Issued = BTreeMap<String, (String, String)>;

/// Every certificate of the table with its key, into `g`; returns them for the kubeconfigs.
pub fn certificates(
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    g: &mut Generated,
) -> Result<Issued, Error> {
    let specs = pki::specs(plan);
    let keys = reuse_or_generate_keys(plan, old, opts, &specs)?;
    let mut cas: BTreeMap<String, Ca> = BTreeMap::new();
    let mut issued = Issued::new();
    for (spec, (key, reused)) in specs.iter().zip(keys) {
        let crt = paths::cert(&spec.name);
        let key_path = paths::key(&spec.name);
        let old_cert = if opts.force { None } else { old.read(&crt) };
        let issuer =
            match spec.ca {
                None => None,
                Some(ca) => Some(cas.get(ca).ok_or_else(|| {
                    Error::Internal(format!("CA {ca} listed after {}", spec.name))
                })?),
            };
        let digest = issue::spec_digest(spec, plan, &key, issuer.map(|ca| ca.cert_pem.as_str()));
        let previous_digest = old.cert_digest(&spec.name);
        let prior = Prior {
            exists: old_cert.is_some(),
            key_reused: reused,
            same_inputs: previous_digest.as_deref() == Some(digest.as_str()),
            intact: old.intact(&crt),
        };
        let decision = issue::decide(spec.usage, &prior);
        // A kept CA keeps the digest it was issued with.
        let digest = match (decision, spec.usage) {
            (Decision::Kept, Usage::Ca) => previous_digest.unwrap_or_default(),
            _ => digest,
        };
        let (cert_pem, key) = match (decision, old_cert) {
            (Decision::Kept, Some(c)) => (c, key),
            _ => issue::issue(spec, plan, key, &digest, issuer).map_err(pki_err(plan, &crt))?,
        };
        g.certs.push((crt.clone(), decision));
        g.cert_digests.insert(spec.name.clone(), digest);
        let key_pem = key.private_pem().map_err(pki_err(plan, &key_path))?;
        put(
            &mut g.tree,
            &crt,
            cert_pem.clone().into_bytes(),
            MODE_PUBLIC,
        );
        put(
            &mut g.tree,
            &key_path,
            key_pem.clone().into_bytes(),
            MODE_SECRET,
        );
        if spec.usage == Usage::Ca {
            let ca = Ca::from_existing(&cert_pem, key).map_err(pki_err(plan, &crt))?;
            cas.insert(spec.name.clone(), ca);
        }
        issued.insert(spec.name.clone(), (cert_pem, key_pem));
    }
    Ok(issued)
}

/// The service-account signing key pair and the encryption key: kept across runs, since replacing
/// them invalidates every issued token and makes every stored Secret unreadable.
pub fn secrets(
    plan: &Plan,
    old: &Previous,
    opts: &Options,
    g: &mut Generated,
) -> Result<Secrets, Error> {
    let alg = plan.profile.pki.algorithm;
    let sa = match old.read(paths::SA_KEY).and_then(|p| Key::from_pem(&p).ok()) {
        Some(k) if !opts.force && k.algorithm_kind() == alg => k,
        _ => Key::generate(alg, &opts.entropy, "key:sa").map_err(pki_err(plan, paths::SA_KEY))?,
    };
    let sa_pub = sa.public_pem().map_err(pki_err(plan, paths::SA_PUB))?;
    let sa_key = sa.private_pem().map_err(pki_err(plan, paths::SA_KEY))?;
    put(&mut g.tree, paths::SA_KEY, sa_key.into_bytes(), MODE_SECRET);
    put(&mut g.tree, paths::SA_PUB, sa_pub.into_bytes(), MODE_PUBLIC);

    let mut secrets = Secrets::default();
    if plan.profile.encryption.enabled {
        let existing = old
            .read(paths::ENCRYPTION_KEY)
            .map(|k| k.trim().to_string())
            .filter(|k| !opts.force && B64.decode(k).map(|b| b.len() == 32).unwrap_or(false));
        let key = existing.unwrap_or_else(|| B64.encode(opts.entropy.bytes("encryption-key", 32)));
        put(
            &mut g.tree,
            paths::ENCRYPTION_KEY,
            format!("{key}\n").into_bytes(),
            MODE_SECRET,
        );
        secrets.encryption_key = Some(key);
    }
    Ok(secrets)
}
