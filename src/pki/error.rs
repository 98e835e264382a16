//! What can go wrong making keys and certificates.

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating an RSA key: {0}")]
    Generate(#[from] rsa::Error),
    #[error("searching an RSA prime: {0}")]
    Prime(crypto_primes::Error),
    #[error("searching an RSA prime (OpenSSL): {0}")]
    Bignum(#[from] openssl::error::ErrorStack),
    #[error("generating keys: {0}")]
    Worker(String),
    #[error("encoding a key: {0}")]
    Encode(String),
    #[error("not a P-256 or RSA private key in PEM")]
    Parse,
    #[error("SAN {san}: {reason}")]
    San { san: String, reason: String },
    #[error("certificate {name}: {count} groups (O attributes), at most 2 can be issued")]
    Groups { name: String, count: usize },
    #[error("validity out of range: {0}")]
    Validity(String),
    #[error("{0}")]
    Certificate(#[from] rcgen::Error),
}
