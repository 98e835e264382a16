//! Joining later: a host that a running environment across hosts did not know when it was
//! rendered joins it with a bootstrap token, as `kubeadm join` does. Its kubelet authenticates with
//! the token, asks for its client certificate by a CSR (TLS bootstrapping), which
//! kube-controller-manager approves for the token's group (addons/rbac.yaml.hbs binds it), and
//! rotates it after. What a token is (kubeadm's format and Secret) is said here once: `gen` checks a
//! host's token file against it, `kubeunit token` makes and lists tokens.

use std::fmt;

/// The group the tokens of `kubeunit token create` put their users in (kubeadm's is
/// `system:bootstrappers:kubeadm:default-node-token`): the bindings that let a joining kubelet ask
/// for its certificate, and have it approved, are this group's.
pub const GROUP: &str = "system:bootstrappers:kubeunit:default-node-token";

/// Where tokens live (kube-apiserver's bootstrap token authenticator reads them there).
pub const NAMESPACE: &str = "kube-system";

/// A bootstrap token, `ID.SECRET`: 6 and 16 characters of `[a-z0-9]`, as Kubernetes defines it
/// (the Secret `bootstrap-token-ID` holds both).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub id: String,
    pub secret: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a bootstrap token: want ID.SECRET, 6 and 16 characters of a-z and 0-9 (what `kubeunit token create` prints)")]
pub struct NotAToken;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

impl Token {
    pub fn parse(text: &str) -> Result<Token, NotAToken> {
        let (id, secret) = text.trim().split_once('.').ok_or(NotAToken)?;
        let ok = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| ALPHABET.contains(&b));
        if !ok(id, 6) || !ok(secret, 16) {
            return Err(NotAToken);
        }
        Ok(Token {
            id: id.into(),
            secret: secret.into(),
        })
    }

    /// A new token from the operating system's random source: a token is a password, never derived
    /// from a profile's seed.
    pub fn random() -> Token {
        use rand_core::{OsRng, RngCore};
        let pick = |len: usize| -> String {
            (0..len)
                .map(|_| {
                    // Rejection sampling: 252 is the largest multiple of 36 below 256.
                    loop {
                        let b = (OsRng.next_u32() & 0xff) as u8;
                        if b < 252 {
                            return ALPHABET[(b % 36) as usize] as char;
                        }
                    }
                })
                .collect()
        };
        Token {
            id: pick(6),
            secret: pick(16),
        }
    }

    /// The Secret's name.
    pub fn secret_name(&self) -> String {
        format!("bootstrap-token-{}", self.id)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.id, self.secret)
    }
}

// Never the secret half in a log or a panic.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token({}.****)", self.id)
    }
}

/// A token file's problem, for `hosts[i].join.tokenFile`: None when it holds a token.
pub fn token_file_problem(file: &std::path::Path) -> Option<String> {
    if !file.is_absolute() {
        return Some("not an absolute path".into());
    }
    // A token file is a line; a larger one is no token (and is not read whole).
    match std::fs::metadata(file) {
        Ok(m) if !m.is_file() => return Some("not a regular file".into()),
        Ok(m) if m.len() > 4096 => return Some(format!("{} bytes: no token file", m.len())),
        Err(e) => return Some(format!("cannot read it: {e}")),
        Ok(_) => {}
    }
    match std::fs::read_to_string(file) {
        Ok(t) => Token::parse(&t).err().map(|e| e.to_string()),
        Err(e) => Some(format!("cannot read it: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_as_kubernetes_defines_them() {
        let t = Token::parse("abcdef.0123456789abcdef\n").unwrap();
        assert_eq!(t.id, "abcdef");
        assert_eq!(t.secret_name(), "bootstrap-token-abcdef");
        assert_eq!(t.to_string(), "abcdef.0123456789abcdef");
        for bad in [
            "",
            "abcdef",
            "abcdef.0123456789abcde",
            "abcdeF.0123456789abcdef",
            "abcde.0123456789abcdefg",
            "abc/ef.0123456789abcdef",
            "abcdef.0123456789abcdef.x",
            "abcdef.0123456789abcd\nf",
        ] {
            assert_eq!(Token::parse(bad), Err(NotAToken), "{bad:?}");
        }
    }

    #[test]
    fn random_tokens_parse_and_differ() {
        let a = Token::random();
        let b = Token::random();
        assert_eq!(Token::parse(&a.to_string()).unwrap(), a);
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(&a.secret));
    }

    #[test]
    fn token_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, "abcdef.0123456789abcdef\n").unwrap();
        assert_eq!(token_file_problem(&good), None);
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "password\n").unwrap();
        assert!(token_file_problem(&bad)
            .unwrap()
            .contains("not a bootstrap token"));
        let huge = dir.path().join("huge");
        std::fs::write(&huge, "a".repeat(100_000)).unwrap();
        assert!(token_file_problem(&huge).unwrap().contains("no token file"));
        assert!(token_file_problem(std::path::Path::new("rel"))
            .unwrap()
            .contains("absolute"));
        assert!(token_file_problem(dir.path()).unwrap().contains("regular"));
        assert!(token_file_problem(&dir.path().join("none"))
            .unwrap()
            .contains("cannot read"));
    }
}
