//! Published checksum files, read as the projects write them: a bare digest (dl.k8s.io's
//! `.sha256` and `.sha512`), or `sha256sum`-style lines of a digest and a file name (etcd's
//! SHA256SUMS, runc's runc.sha256sum, containerd's `.sha256sum`). The digest's length says its
//! algorithm.

use sha2::{Digest as _, Sha256, Sha512};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Digest {
    Sha256([u8; 32]),
    Sha512(Vec<u8>),
}

impl Digest {
    pub fn algorithm(&self) -> &'static str {
        match self {
            Digest::Sha256(_) => "sha256",
            Digest::Sha512(_) => "sha512",
        }
    }

    pub fn hex(&self) -> String {
        match self {
            Digest::Sha256(d) => hex::encode(d),
            Digest::Sha512(d) => hex::encode(d),
        }
    }

    /// A hasher of the same algorithm.
    pub fn hasher(&self) -> Hasher {
        match self {
            Digest::Sha256(_) => Hasher::Sha256(Sha256::new()),
            Digest::Sha512(_) => Hasher::Sha512(Box::new(Sha512::new())),
        }
    }

    fn from_hex(text: &str) -> Option<Digest> {
        let bytes = hex::decode(text).ok()?;
        match bytes.len() {
            32 => bytes.try_into().ok().map(Digest::Sha256),
            64 => Some(Digest::Sha512(bytes)),
            _ => None,
        }
    }
}

pub enum Hasher {
    Sha256(Sha256),
    Sha512(Box<Sha512>),
}

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    pub fn finish(self) -> Digest {
        match self {
            Hasher::Sha256(h) => Digest::Sha256(h.finalize().into()),
            Hasher::Sha512(h) => Digest::Sha512(h.finalize().to_vec()),
        }
    }
}

/// What is wrong with a checksum file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSums {
    #[error("it is not there (HTTP {0}), and kubeunit uses no download it cannot check")]
    Missing(u16),
    #[error("it lists no digest for {0}")]
    NoEntry(String),
    #[error("it lists {0} twice, with different digests")]
    Ambiguous(String),
    #[error("it is neither a digest nor lines of `DIGEST  FILE`")]
    Unreadable,
}

/// The digest that the checksum file `text` gives for the file named `file` (its last path
/// segment). A file of one bare digest gives it for whatever it sits next to.
pub fn digest_for(text: &str, file: &str) -> Result<Digest, BadSums> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let [only] = lines.as_slice() {
        if let Some(d) = Digest::from_hex(only) {
            return Ok(d);
        }
    }
    let mut found: Option<Digest> = None;
    let mut readable = false;
    for line in &lines {
        let Some((digest, name)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        let Some(digest) = Digest::from_hex(digest) else {
            continue;
        };
        readable = true;
        // `sha256sum -b` marks binary mode with `*`; some lists name the file with a path.
        let name = name.trim_start().trim_start_matches('*');
        if name.rsplit('/').next() != Some(file) {
            continue;
        }
        match &found {
            Some(d) if *d != digest => return Err(BadSums::Ambiguous(file.to_string())),
            _ => found = Some(digest),
        }
    }
    match found {
        Some(d) => Ok(d),
        None if readable => Err(BadSums::NoEntry(file.to_string())),
        None => Err(BadSums::Unreadable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "4db32e3bc06dd0999e2171f76a87c1cffed8369475ec7aa7abee9023635670fb";
    const B: &str = "5a70e3b323caa05e4c87f2669686d34c10c557ea59233e611acd6ee330877e79";

    #[test]
    fn a_bare_digest_is_the_files() {
        let d = digest_for(&format!("{A}\n"), "kubelet").unwrap();
        assert_eq!(d.hex(), A);
        assert_eq!(d.algorithm(), "sha256");
        let long = "ab".repeat(64);
        assert_eq!(digest_for(&long, "x").unwrap().algorithm(), "sha512");
    }

    #[test]
    fn a_list_gives_the_line_of_the_file() {
        let text = format!("{B}  runc.arm64\n{A}  runc.amd64\n{B} *runc.tar.xz\n");
        assert_eq!(digest_for(&text, "runc.amd64").unwrap().hex(), A);
        assert_eq!(digest_for(&text, "runc.tar.xz").unwrap().hex(), B);
        let pathed = format!("{A}  ./dist/etcd-v3.6.16-linux-amd64.tar.gz\n");
        assert_eq!(
            digest_for(&pathed, "etcd-v3.6.16-linux-amd64.tar.gz")
                .unwrap()
                .hex(),
            A
        );
    }

    #[test]
    fn a_list_without_the_file_or_with_it_twice_is_refused() {
        let text = format!("{B}  runc.arm64\n");
        assert_eq!(
            digest_for(&text, "runc.amd64"),
            Err(BadSums::NoEntry("runc.amd64".into()))
        );
        let twice = format!("{A}  x\n{B}  x\n");
        assert_eq!(digest_for(&twice, "x"), Err(BadSums::Ambiguous("x".into())));
        assert_eq!(
            digest_for("<html>not found</html>", "x"),
            Err(BadSums::Unreadable)
        );
        assert_eq!(digest_for("", "x"), Err(BadSums::Unreadable));
        // A digest of the wrong length is no digest.
        assert_eq!(digest_for("abcd  x", "x"), Err(BadSums::Unreadable));
    }

    #[test]
    fn hashing_gives_the_known_digest() {
        let d = Digest::Sha256([0; 32]);
        let mut h = d.hasher();
        h.update(b"abc");
        assert_eq!(
            h.finish().hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
