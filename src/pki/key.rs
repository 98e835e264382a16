//! Keys: seeded entropy and a private key type that signs deterministically.
//!
//! Reproducibility: keys come from a ChaCha20 stream seeded per key name from `--seed` (or from the OS
//! when unseeded); ECDSA signatures use RFC 6979 (p256), RSA PKCS#1 v1.5 signatures are deterministic.
//! rcgen's own key types sign with randomized ECDSA and cannot take a seeded RNG, hence this `Key`.
//! RSA keys come from [`rsa_2048`] (why it is here: see there), many at once from [`generate_all`].

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};

use crypto_bigint::U1024;
use crypto_primes::hazmat::SmallFactorsSieve;

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
    /// A secret drawn from the OS once and never written: the state dirs of the hosts of one
    /// environment, rendered one after the other, draw the same keys for the same purposes (their
    /// CAs and service-account key agree), with the OS's strength.
    Shared([u8; 32]),
}

impl Entropy {
    /// A `Shared` secret from the OS.
    pub fn shared() -> Entropy {
        let mut secret = [0u8; 32];
        ChaCha20Rng::from_entropy().fill_bytes(&mut secret);
        Entropy::Shared(secret)
    }

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
            Entropy::Shared(secret) => {
                let mut h = Sha256::new();
                h.update(b"kubeunit/shared/v1\0");
                h.update(secret);
                h.update(purpose.as_bytes());
                ChaCha20Rng::from_seed(h.finalize().into())
            }
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
            Algorithm::Rsa2048 => Key::from_rsa(rsa_2048(&mut rng)?),
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

/// Keys for many purposes at once, one thread per core taking the next purpose whenever it is done
/// with one (RSA search times vary a lot). The result is in the order of `purposes`, whichever
/// thread made a key; a seeded key depends on its purpose only, so the keys are the same on any
/// number of cores.
pub fn generate_all(
    alg: Algorithm,
    entropy: &Entropy,
    purposes: &[String],
) -> Vec<Result<Key, PkiError>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(purposes.len());
    if workers <= 1 {
        return purposes
            .iter()
            .map(|p| Key::generate(alg, entropy, p))
            .collect();
    }
    let next = AtomicUsize::new(0);
    let mut keys: Vec<Option<Result<Key, PkiError>>> = purposes.iter().map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut made = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(purpose) = purposes.get(i) else {
                            return made;
                        };
                        made.push((i, Key::generate(alg, entropy, purpose)));
                    }
                })
            })
            .collect();
        for h in handles {
            match h.join() {
                Ok(made) => made.into_iter().for_each(|(i, key)| keys[i] = Some(key)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    keys.into_iter()
        .zip(purposes)
        .map(|(key, purpose)| {
            key.unwrap_or_else(|| Err(PkiError::Worker(format!("no key made for {purpose}"))))
        })
        .collect()
}

/// The bits of each RSA-2048 prime.
const PRIME_BITS: NonZeroU32 = NonZeroU32::new(1024).expect("nonzero");
/// The RSA public exponent (what every Kubernetes tool writes).
const RSA_E: u32 = 65537;

/// RSA-2048 with e = 65537 from `rng`: two 1024-bit primes found by crypto-primes' sieve and its
/// Baillie-PSW test, put together by the rsa crate (d, CRT values, validation).
///
/// Why this is hand-written: `gen` makes 19 RSA keys for dev, and the generators at hand took
/// ~120 ms of CPU a key (the rsa crate's: num-bigint-dig, 20 Miller-Rabin rounds) and ~150 ms
/// (OpenSSL 3's `Rsa::generate`); this takes ~25 ms. Only the choices of FIPS 186-5 A.1.3 are made here:
/// each start is read big-endian from the RNG's bytes (so a seed gives the same key on every
/// machine) with its two top bits set (n has exactly 2048 bits); p - 1 is coprime to e; p and q are
/// more than 2^924 apart. Changing any of this changes every seeded RSA key (a unit test pins one).
fn rsa_2048(rng: &mut ChaCha20Rng) -> Result<rsa::RsaPrivateKey, PkiError> {
    let mut fermat = Fermat::new()?;
    let p = rsa_prime(rng, &mut fermat)?;
    let q = loop {
        let q = rsa_prime(rng, &mut fermat)?;
        let distance = if p > q { &p - &q } else { &q - &p };
        if distance.bits() > PRIME_BITS.get() as usize - 100 {
            break q;
        }
    };
    Ok(rsa::RsaPrivateKey::from_p_q(
        p,
        q,
        rsa::BigUint::from(RSA_E),
    )?)
}

/// A 1024-bit prime p with gcd(p - 1, e) = 1: the first one the sieve passes from a random start.
fn rsa_prime(rng: &mut ChaCha20Rng, fermat: &mut Fermat) -> Result<rsa::BigUint, PkiError> {
    loop {
        let mut start = [0u8; 128];
        rng.fill_bytes(&mut start);
        start[0] |= 0xc0;
        let sieve = SmallFactorsSieve::new(U1024::from_be_slice(&start), PRIME_BITS, false)
            .map_err(PkiError::Prime)?;
        for candidate in sieve {
            let bytes = candidate.to_be_bytes();
            let bytes = bytes.as_ref();
            // e is prime: gcd(p - 1, e) = 1 unless p = 1 mod e.
            let rem = bytes
                .iter()
                .fold(0u32, |r, b| (r * 256 + u32::from(*b)) % RSA_E);
            if rem != 1
                && fermat.passes(bytes)?
                && crypto_primes::is_prime(crypto_primes::Flavor::Any, &candidate)
            {
                return Ok(rsa::BigUint::from_bytes_be(bytes));
            }
        }
        // The sieve ran up to 2^1024 without a prime: a new start.
    }
}

/// Fermat's test to base 2 by OpenSSL: every prime passes it, and all but a vanishing few of the
/// composites the sieve lets through (~40 a prime) fail it, at half the cost of crypto-bigint's
/// exponentiation, so that the Baillie-PSW test runs about once a prime. It only filters: which
/// candidate is prime is crypto-primes' decision, so the keys are the same without it.
struct Fermat {
    ctx: openssl::bn::BigNumContext,
    two: openssl::bn::BigNum,
}

impl Fermat {
    fn new() -> Result<Fermat, PkiError> {
        Ok(Fermat {
            ctx: openssl::bn::BigNumContext::new()?,
            two: openssl::bn::BigNum::from_u32(2)?,
        })
    }

    /// 2^(m-1) = 1 (mod m), for an odd m > 3 in big-endian bytes.
    fn passes(&mut self, m: &[u8]) -> Result<bool, PkiError> {
        let modulus = openssl::bn::BigNum::from_slice(m)?;
        let mut exponent = openssl::bn::BigNum::from_slice(m)?;
        exponent.sub_word(1)?;
        // The exponent of the prime that is kept is secret: OpenSSL's constant-time path.
        exponent.set_const_time();
        let mut power = openssl::bn::BigNum::new()?;
        power.mod_exp(&self.two, &exponent, &modulus, &mut self.ctx)?;
        Ok(power.num_bits() == 1)
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

#[cfg(test)]
mod tests {
    use rsa::traits::{PrivateKeyParts, PublicKeyParts};

    use super::*;

    fn rsa(key: &Key) -> &rsa::RsaPrivateKey {
        match key {
            Key::Rsa(k, _) => k,
            Key::P256(..) => panic!("not an RSA key"),
        }
    }

    /// What every consumer of an RSA-2048 key relies on: 2048-bit n = p q, e = 65537, consistent
    /// d and CRT values, and a PKCS#1 signature that verifies.
    fn assert_valid_rsa_2048(key: &Key) {
        let k = rsa(key);
        k.validate().expect("valid RSA key");
        assert_eq!(k.n().bits(), 2048);
        assert_eq!(k.e(), &rsa::BigUint::from(65537u32));
        let [p, q] = k.primes() else {
            panic!("two primes")
        };
        assert_eq!((p.bits(), q.bits()), (1024, 1024));
        assert_eq!(&(p * q), k.n());
        let msg = b"kubeunit";
        let sig = rcgen::SigningKey::sign(key, msg).expect("sign");
        let verifying = rsa::pkcs1v15::VerifyingKey::<Sha256>::new(k.to_public_key());
        let sig = rsa::pkcs1v15::Signature::try_from(sig.as_slice()).expect("signature");
        rsa::signature::Verifier::verify(&verifying, msg, &sig).expect("signature verifies");
    }

    fn pem(key: &Key) -> String {
        key.private_pem().expect("PEM")
    }

    #[test]
    fn seeded_rsa_keys_are_deterministic_per_purpose() {
        let seed = Entropy::Seed(42);
        let a = Key::generate(Algorithm::Rsa2048, &seed, "key:ca").unwrap();
        let b = Key::generate(Algorithm::Rsa2048, &seed, "key:ca").unwrap();
        let other = Key::generate(Algorithm::Rsa2048, &seed, "key:apiserver").unwrap();
        let other_seed = Key::generate(Algorithm::Rsa2048, &Entropy::Seed(43), "key:ca").unwrap();
        assert_eq!(pem(&a), pem(&b));
        assert_ne!(pem(&a), pem(&other));
        assert_ne!(pem(&a), pem(&other_seed));
        for k in [&a, &other, &other_seed] {
            assert_valid_rsa_2048(k);
        }
        // Read back as written.
        assert_eq!(pem(&Key::from_pem(&pem(&a)).unwrap()), pem(&a));
    }

    /// The derivation is pinned: the same seed gives this key on every machine and with every
    /// build. A change here changes every seeded RSA state dir; make it only on purpose.
    #[test]
    fn seeded_rsa_key_is_the_recorded_one() {
        let key = Key::generate(Algorithm::Rsa2048, &Entropy::Seed(42), "key:ca").unwrap();
        assert_eq!(
            hex::encode(Sha256::digest(pem(&key))),
            "34fc57e55fdc33f74ca434eb06dbb14738e9068f59f6d2ff28b659ca0298b3ba",
            "the seeded RSA key derivation changed"
        );
    }

    #[test]
    fn os_rsa_keys_are_valid_and_distinct() {
        let a = Key::generate(Algorithm::Rsa2048, &Entropy::Os, "key:ca").unwrap();
        let b = Key::generate(Algorithm::Rsa2048, &Entropy::Os, "key:ca").unwrap();
        assert_valid_rsa_2048(&a);
        assert_valid_rsa_2048(&b);
        assert_ne!(rsa(&a).n(), rsa(&b).n());
        assert!(rsa(&a)
            .primes()
            .iter()
            .all(|p| !rsa(&b).primes().contains(p)));
    }

    #[test]
    fn generate_all_keeps_the_order_of_purposes() {
        let purposes: Vec<String> = (0..7).map(|i| format!("key:k{i}")).collect();
        for alg in [Algorithm::Rsa2048, Algorithm::EcdsaP256] {
            let seed = Entropy::Seed(7);
            let one_by_one: Vec<String> = purposes
                .iter()
                .map(|p| pem(&Key::generate(alg, &seed, p).unwrap()))
                .collect();
            for _ in 0..2 {
                let all: Vec<String> = generate_all(alg, &seed, &purposes)
                    .into_iter()
                    .map(|k| pem(&k.unwrap()))
                    .collect();
                assert_eq!(all, one_by_one, "{alg:?}");
            }
        }
        let os = generate_all(Algorithm::Rsa2048, &Entropy::Os, &purposes[..3]);
        let moduli: std::collections::BTreeSet<_> = os
            .iter()
            .map(|k| rsa(k.as_ref().unwrap()).n().clone())
            .collect();
        assert_eq!(moduli.len(), 3, "OS keys are distinct");
        assert!(generate_all(Algorithm::Rsa2048, &Entropy::Os, &[]).is_empty());
    }
}
