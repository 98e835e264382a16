//! Joining later: a host that a running environment across hosts did not know when it was
//! rendered joins it with a bootstrap token, as `kubeadm join` does. Its kubelet authenticates with
//! the token, asks for its client certificate by a CSR (TLS bootstrapping), which
//! kube-controller-manager approves for the token's group (addons/rbac.yaml.hbs binds it), and
//! rotates it after. What a token is (kubeadm's format and Secret) is said here once: `gen` checks a
//! host's token file against it, `kubeunit token` makes and lists tokens.

use std::fmt;

use super::profile::{HostEntry, Join, Nodes, Profile};

/// The group the tokens of `kubeunit token create` put their users in (kubeadm's is
/// `system:bootstrappers:kubeadm:default-node-token`): the bindings that let a joining kubelet ask
/// for its certificate, and have it approved, are this group's.
pub const GROUP: &str = "system:bootstrappers:kubeunit:default-node-token";

/// Where tokens live (kube-apiserver's bootstrap token authenticator reads them there).
pub const NAMESPACE: &str = "kube-system";

/// What a joined node publishes on its own Node (the kubelet's start hook, with the node's own
/// bootstrapped credentials) for the other hosts to route to it (`kubeunit hosts sync`): its host's
/// address on the hosts' network, its pod network and its node link.
pub const ANNOTATION_ADDRESS: &str = "kubeunit.dev/host-address";
pub const ANNOTATION_POD_CIDR: &str = "kubeunit.dev/pod-cidr";
pub const ANNOTATION_LINK_NET: &str = "kubeunit.dev/link-net";

/// The file (in the kubelet's cert dir) where a joined node's kubelet keeps its current client
/// certificate and key, in one PEM file: what its kube-proxy and kubeunit's own calls present.
pub const KUBELET_CLIENT_PEM: &str = "kubelet-client-current.pem";

/// Whether a host joins later by token (`hosts[i].join`).
pub fn joins(h: &HostEntry) -> bool {
    h.join.is_some()
}

/// Whether the host a profile is the view of joins later.
pub fn joins_here(p: &Profile) -> bool {
    !p.host.is_empty() && p.hosts.iter().any(|h| h.name == p.host && joins(h))
}

/// The hosts that `p`'s host sees, as a mask over `p.hosts`: every host given its certificates,
/// and itself. A host that joins later is no other host's: their state dirs do not name it (they
/// are the same with or without it, and need not be rendered again); they route to it once it has
/// joined (`kubeunit hosts sync`, from what it publishes on its Node).
pub fn seen(p: &Profile) -> Vec<bool> {
    p.hosts
        .iter()
        .map(|h| !joins(h) || h.name == p.host)
        .collect()
}

/// The `join` of the host `p` is the view of, with its index in `hosts:`, if it joins later.
pub fn here(p: &Profile) -> Option<(usize, &Join)> {
    p.hosts.iter().enumerate().find_map(|(i, h)| match &h.join {
        Some(j) if h.name == p.host => Some((i, j)),
        _ => None,
    })
}

/// `items` (one per host, in host order) without those whose `seen` is false.
pub fn keep_seen<T>(seen: &[bool], items: Vec<T>) -> Vec<T> {
    if items.len() != seen.len() {
        return items;
    }
    items
        .into_iter()
        .zip(seen)
        .filter_map(|(item, keep)| keep.then_some(item))
        .collect()
}

/// `p` as its host sees it (`seen`), with `hosts` and `nodes` (one per host of `p`, resolved
/// from every host: what a host sees keeps the pod networks it has in the whole profile): its
/// hosts, and the list of their nodes if it has one.
pub fn seen_from<H, N>(mut p: Profile, hosts: Vec<H>, nodes: Vec<N>) -> (Profile, Vec<H>, Vec<N>) {
    let seen = seen(&p);
    p.hosts = keep_seen(&seen, std::mem::take(&mut p.hosts));
    if let Nodes::List(list) = &mut p.nodes {
        *list = keep_seen(&seen, std::mem::take(list));
    }
    (p, keep_seen(&seen, hosts), keep_seen(&seen, nodes))
}

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
    use crate::spec::Plan;

    /// `ha` with host `i` joining with token file `file` ("TOKEN": a good one).
    fn ha(dir: &std::path::Path, i: usize, file: &str) -> Profile {
        let token = dir.join("token");
        std::fs::write(&token, "abcdef.0123456789abcdef\n").unwrap();
        let (_, mut p) = crate::spec::load::layered("ha", &[]).unwrap_or_else(|e| panic!("{e}"));
        let ca = dir.join("ca.crt");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        p.hosts[i].join = Some(crate::spec::profile::Join {
            token_file: file.replace("TOKEN", &token.to_string_lossy()).into(),
            ca_file: ca,
        });
        p
    }

    fn fields(p: &Profile) -> Vec<String> {
        crate::spec::hosts::errors(p)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn only_a_worker_listed_last_with_a_token_joins() {
        let dir = tempfile::tempdir().unwrap();
        let good = ha(dir.path(), 4, "TOKEN");
        assert_eq!(fields(&good), Vec::<String>::new());
        // A control-plane host, and one listed before hosts that do not join.
        let cp = fields(&ha(dir.path(), 2, "TOKEN"));
        assert_eq!(cp.len(), 2, "{cp:?}");
        assert!(
            cp[0].contains("hosts[2].join") && cp[0].contains("only a worker"),
            "{cp:?}"
        );
        assert!(
            cp[1].contains("hosts[2].join") && cp[1].contains("before host \"worker-1\""),
            "{cp:?}"
        );
        let early = fields(&ha(dir.path(), 3, "TOKEN"));
        assert!(
            early.len() == 1 && early[0].contains("hosts[3].join"),
            "{early:?}"
        );
        // A token file that is not one, or is not there.
        for (file, why) in [("/nowhere/token", "cannot read"), ("relative", "absolute")] {
            let bad = fields(&ha(dir.path(), 4, file));
            assert!(
                bad.len() == 1
                    && bad[0].contains("hosts[4].join.tokenFile")
                    && bad[0].contains(why),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_joining_host_is_no_other_hosts_and_sees_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let plan = |p: &Profile, host: &str| {
            let mut p = p.clone();
            p.host = host.into();
            p.instance = String::new();
            Plan::new(
                p,
                std::path::Path::new("/s"),
                &crate::spec::HostFacts::none(),
            )
            .unwrap()
        };
        let with = ha(dir.path(), 4, "TOKEN");
        let mut without = with.clone();
        without.hosts.truncate(4);
        // The other hosts' view is the same with or without it: its profile.yaml too.
        for host in ["cp-1", "worker-1"] {
            let (a, b) = (plan(&with, host), plan(&without, host));
            assert_eq!(a.hosts, b.hosts, "{host}");
            assert!(!a.joins());
            assert_eq!(
                serde_yaml_ng::to_string(&a.resolved_profile()).unwrap(),
                serde_yaml_ng::to_string(&b.resolved_profile()).unwrap(),
                "{host}"
            );
        }
        // It sees every host, its pod network the one it has in the whole profile, and records
        // its own copy of the token, never the token.
        let w2 = plan(&with, "worker-2");
        assert!(w2.joins());
        assert_eq!(w2.hosts.len(), 5);
        assert_eq!(w2.node().pod_cidr.to_string(), "10.88.4.0/24");
        let recorded = serde_yaml_ng::to_string(&w2.resolved_profile()).unwrap();
        assert!(
            recorded.contains("tokenFile: /s/config/join-token")
                && recorded.contains("caFile: /s/pki/ca.crt"),
            "{recorded}"
        );
        assert!(!recorded.contains("0123456789abcdef"), "{recorded}");
        // Two that join: neither sees the other, and each keeps its pod network.
        let mut two = with.clone();
        let mut w3 = two.hosts[4].clone();
        w3.name = "worker-3".into();
        w3.address = "198.19.254.23".into();
        two.hosts.push(w3);
        let (w2, w3) = (plan(&two, "worker-2"), plan(&two, "worker-3"));
        assert_eq!(w2.hosts.len(), 5);
        assert!(w3.hosts.iter().all(|h| h.name != "worker-2"));
        assert_eq!(w3.node().pod_cidr.to_string(), "10.88.5.0/24");
    }

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
