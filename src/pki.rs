//! PKI: the certificate list (as data, like kubeadm's), keys, and issuing with rcgen.
//!
//! Reproducibility: keys come from a ChaCha20 stream seeded per key name from `--seed` (or from the OS
//! when unseeded); ECDSA signatures use RFC 6979 (p256), RSA PKCS#1 v1.5 signatures are deterministic;
//! serials are a hash of the certificate's spec and key. rcgen's own key types sign with randomized
//! ECDSA and cannot take a seeded RNG, hence the small `Key` signer below.

use std::net::IpAddr;

use p256::pkcs8::{EncodePublicKey, LineEnding};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyIdMethod, KeyUsagePurpose, PublicKeyData, SanType, SerialNumber, SignatureAlgorithm,
};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey, EncodeRsaPublicKey};
use sha2::{Digest, Sha256};

use crate::plan::Plan;
use crate::profile::Algorithm;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Usage {
    Ca,
    Server,
    Client,
    ServerClient,
}

/// One certificate of the environment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CertSpec {
    /// File stem under `pki/` (`etcd/server` -> `pki/etcd/server.crt` + `.key`).
    pub name: String,
    /// Issuing CA's name; `None` for a self-signed CA.
    pub ca: Option<&'static str>,
    pub cn: String,
    pub orgs: Vec<String>,
    pub usage: Usage,
    pub sans: Vec<String>,
    /// A kubeconfig `kubeconfig/<name>.kubeconfig` is written for this client certificate.
    pub kubeconfig: Option<&'static str>,
}

/// Every certificate the plan needs, CAs first. This list is the single place a certificate is defined.
pub fn cert_specs(plan: &Plan) -> Vec<CertSpec> {
    let node = plan.node_name.clone();
    let on = |c: &str| plan.enabled(c);
    let mut local_sans = vec![
        "localhost".to_string(),
        node.clone(),
        "127.0.0.1".into(),
        "::1".into(),
    ];
    for ip in [plan.bind, plan.advertise, plan.local] {
        if !ip.is_unspecified() {
            local_sans.push(ip.to_string());
        }
    }
    let domain = &plan.profile.network.dns_domain;
    let mut apiserver_sans = vec![
        "kubernetes".to_string(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        format!("kubernetes.default.svc.{domain}"),
        plan.first_service_ip.to_string(),
    ];
    apiserver_sans.extend(local_sans.iter().cloned());
    apiserver_sans.extend(plan.profile.network.extra_sans.iter().cloned());

    #[rustfmt::skip]
    let table: Vec<(bool, CertSpec)> = vec![
        (true, spec("ca", None, "kubernetes", &[], Usage::Ca, vec![], None)),
        (true, spec("front-proxy-ca", None, "front-proxy-ca", &[], Usage::Ca, vec![], None)),
        (true, spec("etcd/ca", None, "etcd-ca", &[], Usage::Ca, vec![], None)),
        (true, spec("apiserver", Some("ca"), "kube-apiserver", &[], Usage::Server, apiserver_sans, None)),
        (true, spec("apiserver-kubelet-client", Some("ca"), "kube-apiserver-kubelet-client", &[], Usage::Client, vec![], None)),
        (true, spec("apiserver-etcd-client", Some("etcd/ca"), "kube-apiserver-etcd-client", &[], Usage::Client, vec![], None)),
        (true, spec("front-proxy-client", Some("front-proxy-ca"), "front-proxy-client", &[], Usage::Client, vec![], None)),
        (true, spec("etcd/server", Some("etcd/ca"), &node, &[], Usage::ServerClient, local_sans.clone(), None)),
        (true, spec("etcd/peer", Some("etcd/ca"), &node, &[], Usage::ServerClient, local_sans.clone(), None)),
        (true, spec("etcd/healthcheck-client", Some("etcd/ca"), "kube-etcd-healthcheck-client", &[], Usage::Client, vec![], None)),
        (true, spec("admin", Some("ca"), "kubernetes-admin", &["system:masters"], Usage::Client, vec![], Some("admin"))),
        (on("kube-controller-manager"), spec("controller-manager", Some("ca"), "system:kube-controller-manager", &[], Usage::Client, vec![], Some("controller-manager"))),
        (on("kube-controller-manager"), spec("controller-manager-server", Some("ca"), "kube-controller-manager", &[], Usage::Server, local_sans.clone(), None)),
        (on("kube-scheduler"), spec("scheduler", Some("ca"), "system:kube-scheduler", &[], Usage::Client, vec![], Some("scheduler"))),
        (on("kube-scheduler"), spec("scheduler-server", Some("ca"), "kube-scheduler", &[], Usage::Server, local_sans.clone(), None)),
        (on("cloud-controller-manager"), spec("cloud-controller-manager", Some("ca"), "system:cloud-controller-manager", &[], Usage::Client, vec![], Some("cloud-controller-manager"))),
        (on("cloud-controller-manager"), spec("cloud-controller-manager-server", Some("ca"), "cloud-controller-manager", &[], Usage::Server, local_sans.clone(), None)),
        (on("kubelet"), spec("kubelet", Some("ca"), &format!("system:node:{node}"), &["system:nodes"], Usage::Server, local_sans.clone(), None)),
        (on("kubelet"), spec("kubelet-client", Some("ca"), &format!("system:node:{node}"), &["system:nodes"], Usage::Client, vec![], Some("kubelet"))),
        (on("kube-proxy"), spec("kube-proxy", Some("ca"), "system:kube-proxy", &[], Usage::Client, vec![], Some("kube-proxy"))),
    ];
    table
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, s)| s)
        .collect()
}

fn spec(
    name: &str,
    ca: Option<&'static str>,
    cn: &str,
    orgs: &[&str],
    usage: Usage,
    sans: Vec<String>,
    kubeconfig: Option<&'static str>,
) -> CertSpec {
    let mut uniq: Vec<String> = Vec::new();
    for s in sans {
        if !uniq.contains(&s) {
            uniq.push(s);
        }
    }
    CertSpec {
        name: name.into(),
        ca,
        cn: cn.into(),
        orgs: orgs.iter().map(|s| s.to_string()).collect(),
        usage,
        sans: uniq,
        kubeconfig,
    }
}

/// Source of key material: a seed (reproducible) or the OS.
#[derive(Debug, Clone, Copy)]
pub enum Entropy {
    Seed(u64),
    Os,
}

impl Entropy {
    /// An RNG for one purpose (`key:etcd/ca`, `encryption-key`, ...): independent streams per name.
    pub fn rng(&self, purpose: &str) -> ChaCha20Rng {
        match self {
            Entropy::Seed(seed) => {
                let mut h = Sha256::new();
                h.update(b"kubeunit/v1\0");
                h.update(seed.to_be_bytes());
                h.update(purpose.as_bytes());
                ChaCha20Rng::from_seed(h.finalize().into())
            }
            Entropy::Os => ChaCha20Rng::from_entropy(),
        }
    }

    pub fn bytes(&self, purpose: &str, n: usize) -> Vec<u8> {
        let mut out = vec![0; n];
        self.rng(purpose).fill_bytes(&mut out);
        out
    }
}

const P256_OID: sec1::der::asn1::ObjectIdentifier =
    sec1::der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");

/// A private key that signs deterministically.
pub enum Key {
    P256(p256::ecdsa::SigningKey, Vec<u8>),
    Rsa(Box<rsa::RsaPrivateKey>, Vec<u8>),
}

impl Key {
    pub fn generate(alg: Algorithm, entropy: &Entropy, purpose: &str) -> Result<Key, String> {
        let mut rng = entropy.rng(purpose);
        match alg {
            Algorithm::EcdsaP256 => Ok(Key::from_p256(p256::ecdsa::SigningKey::random(&mut rng))),
            Algorithm::Rsa2048 => rsa::RsaPrivateKey::new(&mut rng, 2048)
                .map_err(|e| e.to_string())
                .and_then(Key::from_rsa),
        }
    }

    fn from_p256(k: p256::ecdsa::SigningKey) -> Key {
        let point = k
            .verifying_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec();
        Key::P256(k, point)
    }

    fn from_rsa(k: rsa::RsaPrivateKey) -> Result<Key, String> {
        let der = k
            .to_public_key()
            .to_pkcs1_der()
            .map_err(|e| e.to_string())?
            .as_bytes()
            .to_vec();
        Ok(Key::Rsa(Box::new(k), der))
    }

    /// Parse a PEM private key kubeunit wrote (SEC1 EC or PKCS#1 RSA; PKCS#8 accepted too).
    pub fn from_pem(pem: &str) -> Result<Key, String> {
        use p256::pkcs8::DecodePrivateKey;
        if pem.contains("BEGIN EC PRIVATE KEY") {
            let sk = p256::SecretKey::from_sec1_pem(pem).map_err(|e| e.to_string())?;
            return Ok(Key::from_p256(sk.into()));
        }
        if pem.contains("BEGIN RSA PRIVATE KEY") {
            return rsa::RsaPrivateKey::from_pkcs1_pem(pem)
                .map_err(|e| e.to_string())
                .and_then(Key::from_rsa);
        }
        if let Ok(sk) = p256::SecretKey::from_pkcs8_pem(pem) {
            return Ok(Key::from_p256(sk.into()));
        }
        rsa::RsaPrivateKey::from_pkcs8_pem(pem)
            .map_err(|_| "not a P-256 or RSA private key in PEM".to_string())
            .and_then(Key::from_rsa)
    }

    pub fn algorithm_kind(&self) -> Algorithm {
        match self {
            Key::P256(..) => Algorithm::EcdsaP256,
            Key::Rsa(..) => Algorithm::Rsa2048,
        }
    }

    /// Private key PEM: SEC1 for EC, PKCS#1 for RSA (what kubeadm writes; every component reads it).
    pub fn private_pem(&self) -> Result<String, String> {
        match self {
            Key::P256(k, point) => {
                // p256 leaves out the curve parameters, which OpenSSL and Go's ParseECPrivateKey need.
                use sec1::der::Encode;
                let scalar = k.to_bytes();
                let der = sec1::EcPrivateKey {
                    private_key: &scalar,
                    parameters: Some(sec1::EcParameters::NamedCurve(P256_OID)),
                    public_key: Some(point),
                }
                .to_der()
                .map_err(|e| e.to_string())?;
                pem_rfc7468::encode_string("EC PRIVATE KEY", LineEnding::LF, &der)
                    .map_err(|e| e.to_string())
            }
            Key::Rsa(k, _) => k
                .to_pkcs1_pem(LineEnding::LF)
                .map(|z| z.to_string())
                .map_err(|e| e.to_string()),
        }
    }

    /// SubjectPublicKeyInfo PEM (`sa.pub`; kube-apiserver's --service-account-key-file wants this).
    pub fn public_pem(&self) -> Result<String, String> {
        match self {
            Key::P256(k, _) => k
                .verifying_key()
                .to_public_key_pem(LineEnding::LF)
                .map_err(|e| e.to_string()),
            Key::Rsa(k, _) => k
                .to_public_key()
                .to_public_key_pem(LineEnding::LF)
                .map_err(|e| e.to_string()),
        }
    }

    pub fn spki_der(&self) -> Vec<u8> {
        self.subject_public_key_info()
    }
}

impl PublicKeyData for Key {
    fn der_bytes(&self) -> &[u8] {
        match self {
            Key::P256(_, d) | Key::Rsa(_, d) => d,
        }
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        match self {
            Key::P256(..) => &rcgen::PKCS_ECDSA_P256_SHA256,
            Key::Rsa(..) => &rcgen::PKCS_RSA_SHA256,
        }
    }
}

impl rcgen::SigningKey for Key {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        use p256::ecdsa::signature::Signer;
        match self {
            Key::P256(k, _) => {
                let sig: p256::ecdsa::Signature = k.sign(msg);
                Ok(sig.to_der().as_bytes().to_vec())
            }
            Key::Rsa(k, _) => {
                let signer = rsa::pkcs1v15::SigningKey::<Sha256>::new((**k).clone());
                let sig: rsa::pkcs1v15::Signature = signer.sign(msg);
                Ok(rsa::signature::SignatureEncoding::to_vec(&sig))
            }
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
) -> Result<CertificateParams, String> {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    // rcgen keeps one value per DN type; several O attributes (several groups) need the raw OID.
    for org in &spec.orgs {
        dn.push(DnType::CustomDnType(vec![2, 5, 4, 10]), org.as_str());
    }
    dn.push(DnType::CommonName, spec.cn.as_str());
    p.distinguished_name = dn;
    let validity = if spec.usage == Usage::Ca {
        plan.ca_validity
    } else {
        plan.cert_validity
    };
    p.not_before = plan.epoch;
    p.not_after = plan.epoch + validity;
    let mut serial = Sha256::new();
    serial.update(digest.as_bytes());
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
                .map_err(|e| format!("SAN {s}: {e}")),
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
    pub fn from_existing(cert_pem: &str, key: Key) -> Result<Ca, String> {
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| e.to_string())?;
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
) -> Result<(String, Key), String> {
    let params = params_for(spec, plan, &key, digest)?;
    let cert = match ca {
        None => params.self_signed(&key),
        Some(ca) => params.signed_by(&key, &ca.issuer),
    }
    .map_err(|e| e.to_string())?;
    Ok((cert.pem(), key))
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
