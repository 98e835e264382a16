//! Keys: seeded entropy and a private key type that signs deterministically.
//!
//! Reproducibility: keys come from a ChaCha20 stream seeded per key name from `--seed` (or from the OS
//! when unseeded); ECDSA signatures use RFC 6979 (p256), RSA PKCS#1 v1.5 signatures are deterministic.
//! rcgen's own key types sign with randomized ECDSA and cannot take a seeded RNG, hence this `Key`.

use p256::pkcs8::{EncodePublicKey, LineEnding};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rcgen::{PublicKeyData, SignatureAlgorithm};
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey, EncodeRsaPublicKey};
use sha2::{Digest, Sha256};

use super::error::PkiError;
use crate::spec::profile::Algorithm;

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
    pub fn generate(alg: Algorithm, entropy: &Entropy, purpose: &str) -> Result<Key, PkiError> {
        let mut rng = entropy.rng(purpose);
        match alg {
            Algorithm::EcdsaP256 => Ok(Key::from_p256(p256::ecdsa::SigningKey::random(&mut rng))),
            Algorithm::Rsa2048 => Key::from_rsa(rsa::RsaPrivateKey::new(&mut rng, 2048)?),
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

    fn from_rsa(k: rsa::RsaPrivateKey) -> Result<Key, PkiError> {
        let der = k
            .to_public_key()
            .to_pkcs1_der()
            .map_err(|e| PkiError::Encode(e.to_string()))?
            .as_bytes()
            .to_vec();
        Ok(Key::Rsa(Box::new(k), der))
    }

    /// Parse a PEM private key kubeunit wrote (SEC1 EC or PKCS#1 RSA; PKCS#8 accepted too).
    pub fn from_pem(pem: &str) -> Result<Key, PkiError> {
        use p256::pkcs8::DecodePrivateKey;
        if pem.contains("BEGIN EC PRIVATE KEY") {
            let sk = p256::SecretKey::from_sec1_pem(pem).map_err(|_| PkiError::Parse)?;
            return Ok(Key::from_p256(sk.into()));
        }
        if pem.contains("BEGIN RSA PRIVATE KEY") {
            return rsa::RsaPrivateKey::from_pkcs1_pem(pem)
                .map_err(|_| PkiError::Parse)
                .and_then(Key::from_rsa);
        }
        if let Ok(sk) = p256::SecretKey::from_pkcs8_pem(pem) {
            return Ok(Key::from_p256(sk.into()));
        }
        rsa::RsaPrivateKey::from_pkcs8_pem(pem)
            .map_err(|_| PkiError::Parse)
            .and_then(Key::from_rsa)
    }

    pub fn algorithm_kind(&self) -> Algorithm {
        match self {
            Key::P256(..) => Algorithm::EcdsaP256,
            Key::Rsa(..) => Algorithm::Rsa2048,
        }
    }

    /// Private key PEM: SEC1 for EC, PKCS#1 for RSA (what kubeadm writes; every component reads it).
    pub fn private_pem(&self) -> Result<String, PkiError> {
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
                .map_err(|e| PkiError::Encode(e.to_string()))?;
                pem_rfc7468::encode_string("EC PRIVATE KEY", LineEnding::LF, &der)
                    .map_err(|e| PkiError::Encode(e.to_string()))
            }
            Key::Rsa(k, _) => k
                .to_pkcs1_pem(LineEnding::LF)
                .map(|z| z.to_string())
                .map_err(|e| PkiError::Encode(e.to_string())),
        }
    }

    /// SubjectPublicKeyInfo PEM (`sa.pub`; kube-apiserver's --service-account-key-file wants this).
    pub fn public_pem(&self) -> Result<String, PkiError> {
        match self {
            Key::P256(k, _) => k
                .verifying_key()
                .to_public_key_pem(LineEnding::LF)
                .map_err(|e| PkiError::Encode(e.to_string())),
            Key::Rsa(k, _) => k
                .to_public_key()
                .to_public_key_pem(LineEnding::LF)
                .map_err(|e| PkiError::Encode(e.to_string())),
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
