//! Issuing: certificate parameters from a spec, deterministic serials, and whether a certificate of
//! the previous run is kept, reissued or created.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyIdMethod, KeyUsagePurpose, PublicKeyData, SanType, SerialNumber,
};
use sha2::{Digest, Sha256};

use super::error::PkiError;
use super::key::Key;
use super::table::{CertSpec, Usage};
use crate::spec::profile::Algorithm;
use crate::spec::Plan;

/// What `gen` did with a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// There was none.
    Created,
    /// The previous one is still right (same inputs, intact on disk; a CA whose key matches).
    Kept,
    /// The previous one's inputs changed, or it was altered.
    Reissued,
    /// `certs renew` issued it anew from its key and CA, valid from now.
    Renewed,
}

/// A renewal of leaf certificates (`kubeunit certs renew`): the named ones are issued again with
/// their keys and CAs, valid from `at` (not from the epoch: a renewal is for certificates running
/// out, so its validity starts when it is made) for `pki.certValidity`.
#[derive(Debug, Clone)]
pub struct Renewal {
    pub names: std::collections::BTreeSet<String>,
    /// When it happens: NotBefore is this time in whole seconds, the serial derives from all of it.
    pub at: time::OffsetDateTime,
}

/// What the previous run left of one certificate.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prior {
    /// Its certificate is in the state dir (and `--force` was not given).
    pub exists: bool,
    /// Its key is the previous run's and still usable (a CA's matches its certificate).
    pub key_reused: bool,
    /// The digest of its inputs is the one the manifest recorded.
    pub same_inputs: bool,
    /// The file is on disk as the manifest recorded it.
    pub intact: bool,
    /// The profile names a pki.epoch other than the certificate's start.
    pub epoch_moved: bool,
}

/// The policy: CAs survive re-runs (only `--force` replaces them) and a CA the user put in place is
/// used as is; a leaf is kept while its inputs are the same and it is intact on disk.
pub fn decide(usage: Usage, prior: &Prior) -> Decision {
    match (prior.exists, usage) {
        (true, Usage::Ca) if prior.key_reused => Decision::Kept,
        // The CA certificate went missing: a new one for the same key.
        (false, Usage::Ca) if prior.key_reused => Decision::Reissued,
        (true, Usage::Ca) | (false, _) => Decision::Created,
        (true, _) if prior.same_inputs && prior.intact && !prior.epoch_moved => Decision::Kept,
        (true, _) => Decision::Reissued,
    }
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Created => "created",
            Decision::Kept => "kept",
            Decision::Reissued => "reissued",
            Decision::Renewed => "renewed",
        }
    }
}

/// The parameters of a certificate (without validity start), hashed into the manifest so that a
/// re-run of `gen` reissues exactly the certificates whose inputs changed.
pub fn spec_digest(
    spec: &CertSpec,
    plan: &Plan,
    key: &Key,
    issuer_cert_pem: Option<&str>,
) -> String {
    let mut h = Sha256::new();
    let validity = if spec.usage == Usage::Ca {
        &plan.profile.pki.ca_validity
    } else {
        &plan.profile.pki.cert_validity
    };
    h.update(serde_json::to_vec(spec).unwrap_or_default());
    h.update(validity.as_bytes());
    h.update(key.spki_der());
    h.update(issuer_cert_pem.unwrap_or("").as_bytes());
    hex::encode(h.finalize())
}

fn key_id(key: &impl PublicKeyData) -> Vec<u8> {
    Sha256::digest(key.subject_public_key_info())[..20].to_vec()
}

fn params_for(
    spec: &CertSpec,
    plan: &Plan,
    key: &Key,
    digest: &str,
    renewal: Option<&Renewal>,
) -> Result<CertificateParams, PkiError> {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    // rcgen keeps one value per DN type (a map), so a second group goes in as O's raw OID, which
    // rcgen counts as another type. A third has no way in; no row of the table has one, and one
    // that did would be refused here rather than issued without it.
    let o_types = [
        DnType::OrganizationName,
        DnType::CustomDnType(vec![2, 5, 4, 10]),
    ];
    if spec.orgs.len() > o_types.len() {
        return Err(PkiError::Groups {
            name: spec.name.clone(),
            count: spec.orgs.len(),
        });
    }
    for (ty, org) in o_types.into_iter().zip(&spec.orgs) {
        dn.push(ty, org.as_str());
    }
    dn.push(DnType::CommonName, spec.cn.as_str());
    p.distinguished_name = dn;
    let validity = if spec.usage == Usage::Ca {
        plan.ca_validity
    } else {
        plan.cert_validity
    };
    let start = match renewal {
        Some(r) => renewal_start(r.at),
        None => plan.epoch,
    };
    p.not_before = start;
    // Plan::new checked that the end fits from the epoch; checked here too rather than trusted.
    p.not_after = time::Duration::try_from(validity)
        .ok()
        .and_then(|d| start.checked_add(d))
        .filter(|end| end.year() <= 9999)
        .ok_or_else(|| PkiError::Validity(format!("{start} + {validity:?}")))?;
    let mut serial = Sha256::new();
    serial.update(digest.as_bytes());
    // A renewed certificate has the same inputs as the one it replaces, but a serial of its own.
    if let Some(r) = renewal {
        serial.update(b"\0renewed\0");
        serial.update(r.at.unix_timestamp_nanos().to_be_bytes());
    }
    let mut serial: Vec<u8> = serial.finalize()[..16].to_vec();
    serial[0] = (serial[0] & 0x7f) | 0x40; // positive, fixed length
    p.serial_number = Some(SerialNumber::from_slice(&serial));
    p.key_identifier_method = KeyIdMethod::PreSpecified(key_id(key));
    p.use_authority_key_identifier_extension = spec.ca.is_some();
    match spec.usage {
        Usage::Ca => {
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.key_usages = vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
            ];
        }
        usage => {
            p.is_ca = IsCa::ExplicitNoCa;
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            if key.algorithm_kind() == Algorithm::Rsa2048 {
                p.key_usages.push(KeyUsagePurpose::KeyEncipherment);
            }
            p.extended_key_usages = match usage {
                Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
                Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
                _ => vec![
                    ExtendedKeyUsagePurpose::ServerAuth,
                    ExtendedKeyUsagePurpose::ClientAuth,
                ],
            };
        }
    }
    p.subject_alt_names = spec
        .sans
        .iter()
        .map(|s| match s.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => s
                .clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|e| PkiError::San {
                    san: s.clone(),
                    reason: e.to_string(),
                }),
        })
        .collect::<Result<_, _>>()?;
    Ok(p)
}

/// A CA ready to sign: its certificate PEM and an rcgen issuer.
pub struct Ca {
    pub cert_pem: String,
    pub issuer: Issuer<'static, Key>,
}

impl Ca {
    /// An existing CA (kubeunit's or the user's own), taking subject and key identifier from its certificate.
    pub fn from_existing(cert_pem: &str, key: Key) -> Result<Ca, PkiError> {
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(Ca {
            cert_pem: cert_pem.to_string(),
            issuer,
        })
    }
}

/// Issue `spec` with `key`: self-signed for a CA spec, else signed by `ca`.
pub fn issue(
    spec: &CertSpec,
    plan: &Plan,
    key: Key,
    digest: &str,
    ca: Option<&Ca>,
) -> Result<(String, Key), PkiError> {
    issue_renewing(spec, plan, key, digest, ca, None)
}

/// `issue`, valid from the renewal's time instead of the epoch when `renewal` is given.
pub fn issue_renewing(
    spec: &CertSpec,
    plan: &Plan,
    key: Key,
    digest: &str,
    ca: Option<&Ca>,
    renewal: Option<&Renewal>,
) -> Result<(String, Key), PkiError> {
    let params = params_for(spec, plan, &key, digest, renewal)?;
    let cert = match ca {
        None => params.self_signed(&key),
        Some(ca) => params.signed_by(&key, &ca.issuer),
    }?;
    Ok((cert.pem(), key))
}

/// A renewed certificate's NotBefore: the renewal's time in whole seconds (X.509 time has no
/// fractions), so never after the moment it was made. No backdating as kubeadm does (5 minutes):
/// every component runs on this host's clock, and a validity of a few minutes (tests) would be gone.
pub fn renewal_start(at: time::OffsetDateTime) -> time::OffsetDateTime {
    at.replace_nanosecond(0).unwrap_or(at)
}

/// What `certs check-expiration` shows of a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub not_before: time::OffsetDateTime,
    pub not_after: time::OffsetDateTime,
    /// Serial number, lowercase hex.
    pub serial: String,
    /// Issuer and subject distinguished names (RFC 4514-like text).
    pub issuer: String,
    pub subject: String,
}

/// Read a certificate PEM.
pub fn inspect(cert_pem: &str) -> Result<CertInfo, PkiError> {
    let bad = |what: &str| PkiError::Encode(format!("not a PEM certificate: {what}"));
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).map_err(|e| bad(&e.to_string()))?;
    let cert = pem.parse_x509().map_err(|e| bad(&e.to_string()))?;
    let time = |t: x509_parser::time::ASN1Time| {
        time::OffsetDateTime::from_unix_timestamp(t.timestamp()).map_err(|e| bad(&e.to_string()))
    };
    Ok(CertInfo {
        not_before: time(cert.validity().not_before)?,
        not_after: time(cert.validity().not_after)?,
        serial: hex::encode(cert.raw_serial()),
        issuer: cert.issuer().to_string(),
        subject: cert.subject().to_string(),
    })
}

/// Whether `cert_pem` carries a valid signature of the CA certificate `ca_pem`'s key.
pub fn signed_by(cert_pem: &str, ca_pem: &str) -> bool {
    let parse = |pem: &str| {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .ok()
            .map(|(_, p)| p)
    };
    let (Some(cert), Some(ca)) = (parse(cert_pem), parse(ca_pem)) else {
        return false;
    };
    let (Ok(cert), Ok(ca)) = (cert.parse_x509(), ca.parse_x509()) else {
        return false;
    };
    cert.verify_signature(Some(ca.public_key())).is_ok()
}

/// The start of a certificate's validity.
pub fn not_before(cert_pem: &str) -> Option<time::OffsetDateTime> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    time::OffsetDateTime::from_unix_timestamp(cert.validity().not_before.timestamp()).ok()
}

/// Whether a certificate PEM carries exactly this key (a user may bring their own CA pair).
pub fn cert_matches_key(cert_pem: &str, key: &Key) -> bool {
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()) else {
        return false;
    };
    let Ok(cert) = pem.parse_x509() else {
        return false;
    };
    cert.public_key().raw == key.spki_der().as_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_reissue_or_create() {
        let all = Prior {
            exists: true,
            key_reused: true,
            same_inputs: true,
            intact: true,
            epoch_moved: false,
        };
        let cases = [
            (Usage::Ca, all, Decision::Kept),
            // A CA is kept whatever its inputs (the user's own CA has none recorded) ...
            (
                Usage::Ca,
                Prior {
                    same_inputs: false,
                    intact: false,
                    ..all
                },
                Decision::Kept,
            ),
            // ... unless its key is not reused (--force; a mismatch is refused before): made anew.
            (
                Usage::Ca,
                Prior {
                    key_reused: false,
                    ..all
                },
                Decision::Created,
            ),
            (Usage::Server, all, Decision::Kept),
            (
                Usage::Client,
                Prior {
                    same_inputs: false,
                    ..all
                },
                Decision::Reissued,
            ),
            (
                Usage::ServerClient,
                Prior {
                    intact: false,
                    ..all
                },
                Decision::Reissued,
            ),
            // A new explicit epoch reissues a leaf, and leaves a CA as it is (reported by the caller).
            (
                Usage::Server,
                Prior {
                    epoch_moved: true,
                    ..all
                },
                Decision::Reissued,
            ),
            (
                Usage::Ca,
                Prior {
                    epoch_moved: true,
                    ..all
                },
                Decision::Kept,
            ),
            // A missing CA certificate is reissued with the CA's key.
            (
                Usage::Ca,
                Prior {
                    exists: false,
                    ..all
                },
                Decision::Reissued,
            ),
            (Usage::Client, Prior::default(), Decision::Created),
            (Usage::Ca, Prior::default(), Decision::Created),
        ];
        for (usage, prior, want) in cases {
            assert_eq!(decide(usage, &prior), want, "{usage:?} {prior:?}");
        }
    }
}

#[cfg(test)]
mod subject_tests {
    use super::*;
    use crate::pki::key::Entropy;

    /// A client identity in two groups has an O attribute for each, each its own RDN (as
    /// Kubernetes reads a certificate's groups), though rcgen keeps one value per DN type.
    #[test]
    fn several_groups_become_several_o_attributes() {
        let plan = Plan::for_tests("dev", &[]);
        let mut spec = crate::pki::table::specs(&plan)
            .into_iter()
            .find(|s| s.name == "admin")
            .expect("the admin row");
        spec.orgs = vec!["system:masters".into(), "team-a".into()];
        let key = || Key::generate(Algorithm::EcdsaP256, &Entropy::Seed(1), "test").unwrap();
        let (pem, _) = issue(&spec, &plan, key(), "digest", None).unwrap();
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let cert = pem.parse_x509().unwrap();
        let orgs: Vec<&str> = cert
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(orgs, ["system:masters", "team-a"]);
        assert_eq!(
            cert.subject().iter().count(),
            3,
            "an RDN each: 2 O and the CN"
        );
        // A third group is refused, not dropped.
        spec.orgs.push("team-b".into());
        let refused = issue(&spec, &plan, key(), "digest", None).map(|_| ());
        assert!(
            matches!(refused, Err(PkiError::Groups { count: 3, .. })),
            "{refused:?}"
        );
    }
}
