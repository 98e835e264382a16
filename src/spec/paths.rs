//! Every path inside a state dir, in one place (kubeadm keeps its file names in constants.go). All are
//! relative to the state dir; the data dir (runtime data: etcd, audit log, kubelet) is separate.

/// The resolved profile the state dir was generated from.
pub const PROFILE: &str = "profile.yaml";
/// What `gen` wrote: file hashes and modes, certificate digests.
pub const MANIFEST: &str = "manifest.json";
/// The lock `gen`, `start`, `stop`, `restart` and `destroy` hold (flock; empty, never in the manifest).
pub const LOCK: &str = ".lock";
/// What a `gen` in progress is writing (see `state::write`); gone once it has finished.
pub const JOURNAL: &str = ".kubeunit-journal.json";
/// Default data dir, when the profile names none.
pub const DATA: &str = "data";
/// Default snapshot dir, in the data dir (`etcd.snapshot.dir`).
pub const SNAPSHOTS: &str = "snapshots";
pub const UNITS: &str = "units";
pub const ADDONS: &str = "addons";
/// Image archives a user drops in; `start` imports them with the profile's `images`.
pub const IMAGES: &str = "images";
pub const SA_KEY: &str = "pki/sa.key";
pub const SA_PUB: &str = "pki/sa.pub";
pub const ENCRYPTION_KEY: &str = "pki/encryption.key";
/// kube-apiserver's encryption config, which holds that key.
pub const ENCRYPTION_CONFIG: &str = "config/encryption-config.yaml";
/// A host that joins later: its copy of the bootstrap token (0600), which profile.yaml names.
pub const JOIN_TOKEN: &str = "config/join-token";
/// A host that joins later: the kubelet's bootstrap kubeconfig, with the token (0600).
pub const BOOTSTRAP_KUBECONFIG: &str = "kubeconfig/bootstrap-kubelet.kubeconfig";

/// The config files of the nodes after the first, a directory each (`node_file`).
pub const NODES: &str = "nodes";

/// Directories whose every file kubeunit writes (runtime data lives elsewhere).
pub const MANAGED_DIRS: &[&str] = &["pki", "kubeconfig", "config", UNITS, "env", ADDONS, NODES];
/// Directories whose files users may edit (or add to) and `start` uses as they are.
pub const EDITABLE_DIRS: &[&str] = &[UNITS, ADDONS];

/// The name a snapshot has while etcdctl writes it (hidden, and never a `*.db`).
pub fn unfinished_snapshot(name: &str) -> String {
    format!(".{name}.tmp")
}

/// Whether a file is a snapshot being written, or one whose save was ended (etcdctl's own
/// `.part` of it included): `stop` deletes those it finds in the snapshot dir.
pub fn is_unfinished_snapshot(file_name: &str) -> bool {
    file_name.starts_with('.')
        && (file_name.ends_with(".db.tmp") || file_name.ends_with(".db.tmp.part"))
}

/// `pki/<name>.crt` (names may hold a directory: `etcd/ca`).
pub fn cert(name: &str) -> String {
    format!("pki/{name}.crt")
}

pub fn key(name: &str) -> String {
    format!("pki/{name}.key")
}

pub fn kubeconfig(identity: &str) -> String {
    format!("kubeconfig/{identity}.kubeconfig")
}

pub fn unit(unit_name: &str) -> String {
    format!("{UNITS}/{unit_name}")
}

pub fn addon(file: &str) -> String {
    format!("{ADDONS}/{file}")
}

/// A config file of node `node` (one after the first), by the path the first node's has:
/// `nodes/<node>/<rel>`.
pub fn node_file(node: &str, rel: &str) -> String {
    format!("{NODES}/{node}/{rel}")
}

/// A component's environment (0600, never in the unit itself).
pub fn env_file(component: &str) -> String {
    format!("env/{component}.env")
}

/// Whether `rel` lies in one of `dirs`.
pub fn is_in(rel: &str, dirs: &[&str]) -> bool {
    dirs.iter()
        .any(|d| rel.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
}

/// A registry cache's own directory of config files (`config.yml`, `password`, `certs/`), by the
/// registry name it caches: a per-upstream component's files name `{upstream}`, which
/// `upstream_file` fills in.
pub const REGISTRY_CACHE_DIR: &str = "config/registry-cache/{upstream}";
/// The file `gen` writes a cache's upstream password to (0600), which `profile.yaml` names.
pub const REGISTRY_CACHE_PASSWORD: &str = "config/registry-cache/{upstream}/password";

/// `rel` of the cache of registry name `upstream` (`{upstream}` in it replaced).
pub fn upstream_file(upstream: &str, rel: &str) -> String {
    rel.replace("{upstream}", upstream)
}
