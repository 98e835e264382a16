//! The test CA of one simulated internet and its sites' server certificates (rcgen, ECDSA P-256 keys
//! from kubeunit's own key type): valid for two days from an hour ago, each for its site's address and
//! names.

use std::path::Path;

use kubeunit::pki::{Entropy, Key};
use kubeunit::spec::profile::Algorithm;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyIdMethod, KeyUsagePurpose, SerialNumber,
};
use sha2::{Digest, Sha256};

use super::{slot_addr, SITES};

/// The test CA and a certificate for each site (its address and names), into `dir`.
pub(super) fn issue_certificates(dir: &Path, slot: u8) {
    let now = time::OffsetDateTime::now_utc();
    let params = |cn: String, sans: Vec<String>, key: &Key| {
        let mut p = CertificateParams::new(sans).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.not_before = now - time::Duration::hours(1);
        p.not_after = now + time::Duration::days(2);
        let mut serial = Entropy::Os.bytes("serial", 16);
        serial[0] &= 0x7f;
        p.serial_number = Some(SerialNumber::from_slice(&serial));
        let spki = Sha256::digest(key.spki_der());
        p.key_identifier_method = KeyIdMethod::PreSpecified(spki[..20].to_vec());
        p
    };
    let key = |purpose: &str| Key::generate(Algorithm::EcdsaP256, &Entropy::Os, purpose).unwrap();
    let ca_key = key("ca");
    let mut ca = params(
        format!("kubeunit simulated internet CA, slot {slot}"),
        vec![],
        &ca_key,
    );
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    let issuer = Issuer::new(ca, &ca_key);
    for r in SITES {
        let leaf_key = key(&format!("{:?}", r.site));
        let addr = slot_addr(slot, r.offset).to_string();
        let sans: Vec<String> = std::iter::once(addr.clone())
            .chain(r.names.iter().map(|n| n.to_string()))
            .collect();
        let mut leaf = params(addr, sans, &leaf_key);
        leaf.is_ca = IsCa::ExplicitNoCa;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.use_authority_key_identifier_extension = true;
        let cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
        let base = dir.join(format!("{:?}", r.site).to_lowercase());
        std::fs::write(base.with_extension("pem"), cert.pem()).unwrap();
        std::fs::write(base.with_extension("key"), leaf_key.private_pem().unwrap()).unwrap();
    }
}
