//! What can go wrong making keys and certificates.

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating an RSA key: {0}")]
    Generate(#[from] rsa::Error),
    #[error("encoding a key: {0}")]
    Encode(String),
    #[error("not a P-256 or RSA private key in PEM")]
    Parse,
    #[error("SAN {san}: {reason}")]
    San { san: String, reason: String },
    #[error("validity out of range: {0}")]
    Validity(String),
    #[error("{0}")]
    Certificate(#[from] rcgen::Error),
}
