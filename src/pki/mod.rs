//! PKI: the certificate table (`table`, kubeadm's certlist.go as data), keys that sign
//! deterministically (`key`), and issuing with the keep/reissue/create decision (`issue`).

mod error;
pub mod issue;
pub mod key;
mod table;

pub use error::PkiError;
pub use issue::{Ca, CertInfo, Decision, Renewal};
pub use key::{generate_all, Entropy, Key};
pub use table::{
    check_tree, specs, specs_of, Cert, CertSpec, Cn, Sans, Scope, TreeError, Usage, When, CERTS,
};

/// Key material other than certificates that config files embed.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// base64 of the 32-byte key that encrypts Secrets in etcd (when encryption is enabled).
    pub encryption_key: Option<String>,
}
