//! Release downloads as the projects publish them, made from the binaries built here: the tree a
//! mirror of dl.k8s.io and of the GitHub release pages serves, with checksum files in each
//! project's own format. Written down here from the projects' release pages, apart from
//! kubeunit's table (src/fetch/sources.rs), so that a wrong entry there fails against it.
//! Built once into the test cache (`releases-<versions>/`, a `.complete` stamp); a test's docroot
//! gets hard links (`link_into`), so that it can break its own copy of a file.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::{built_dir, cache_dir, kubernetes_bin_dir, pinned};

/// Each source's base below the mirror's root (as `https://MIRROR/<base>`).
pub const BASES: &[(&str, &str)] = &[
    ("kubernetes", "dl.k8s.io/release"),
    ("etcd", "github.com/etcd-io/etcd/releases/download"),
    (
        "containerd",
        "github.com/containerd/containerd/releases/download",
    ),
    ("runc", "github.com/opencontainers/runc/releases/download"),
    (
        "cni-plugins",
        "github.com/containernetworking/plugins/releases/download",
    ),
    (
        "registry",
        "github.com/distribution/distribution/releases/download",
    ),
];

pub const K8S_BINARIES: &[&str] = &[
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "kubectl",
];

fn sha256(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    hex::encode(Sha256::digest(bytes))
}

fn version(key: &str) -> String {
    pinned(key)[0].clone()
}

/// The mirror tree, built once: by one thread of this process (the mutex) and one process at a time
/// (an flock next to it).
pub fn tree() -> PathBuf {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_thread = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let lock_path = cache_dir().join(".releases.lock");
    let lock = std::fs::File::create(&lock_path).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    build_tree()
}

fn build_tree() -> PathBuf {
    let k8s = version("KUBERNETES_VERSIONS");
    let key = format!(
        "releases-{k8s}-etcd-{}-containerd-{}-runc-{}-cni-{}-registry-{}",
        version("ETCD_VERSION"),
        version("CONTAINERD_VERSION"),
        version("RUNC_VERSION"),
        version("CNI_PLUGINS_VERSION"),
        version("REGISTRY_VERSION"),
    );
    let dir = cache_dir().join(&key);
    if dir.join(".complete").exists() {
        return dir;
    }
    let tmp = cache_dir().join(format!("{key}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    kubernetes(&tmp, &k8s);
    etcd(&tmp);
    containerd(&tmp);
    runc(&tmp);
    cni(&tmp);
    registry(&tmp);
    std::fs::write(tmp.join(".complete"), "").unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).unwrap();
    dir
}

fn release_dir(root: &Path, source: &str, version: &str) -> PathBuf {
    let base = BASES.iter().find(|(s, _)| *s == source).unwrap().1;
    let d = root.join(base).join(version);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// dl.k8s.io: each binary with a .sha256 of the bare digest (and a .sha512, as published).
fn kubernetes(root: &Path, version: &str) {
    let d = release_dir(root, "kubernetes", version).join("bin/linux/amd64");
    std::fs::create_dir_all(&d).unwrap();
    let built = kubernetes_bin_dir();
    for b in K8S_BINARIES {
        let to = d.join(b);
        std::fs::copy(built.join(b), &to).unwrap();
        std::fs::write(d.join(format!("{b}.sha256")), sha256(&to)).unwrap();
        let bytes = std::fs::read(&to).unwrap();
        std::fs::write(
            d.join(format!("{b}.sha512")),
            hex::encode(sha2::Sha512::digest(bytes)),
        )
        .unwrap();
    }
}

/// A gzipped tar of `files` (source path, path in the archive) at `to`.
fn tarball(to: &Path, files: &[(PathBuf, String)]) {
    let stage = to.with_extension("stage");
    let _ = std::fs::remove_dir_all(&stage);
    for (from, at) in files {
        let dest = stage.join(at);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from, &dest).unwrap();
    }
    let names: Vec<&str> = files.iter().map(|(_, at)| at.as_str()).collect();
    let out = Command::new("tar")
        .arg("-C")
        .arg(&stage)
        .args(["--owner=0", "--group=0", "-czf"])
        .arg(to)
        .args(&names)
        .output()
        .unwrap();
    assert!(out.status.success(), "tar: {}", super::text(&out));
    std::fs::remove_dir_all(&stage).unwrap();
}

/// A `sha256sum`-style line.
fn line(file: &Path) -> String {
    format!(
        "{}  {}\n",
        sha256(file),
        file.file_name().unwrap().to_string_lossy()
    )
}

/// etcd: etcd-VERSION-linux-amd64.tar.gz (a directory of that name), listed in SHA256SUMS with the
/// release's other files.
fn etcd(root: &Path) {
    let v = version("ETCD_VERSION");
    let d = release_dir(root, "etcd", &v);
    let built = built_dir("etcd-");
    let top = format!("etcd-{v}-linux-amd64");
    let files: Vec<(PathBuf, String)> = ["etcd", "etcdctl", "etcdutl"]
        .iter()
        .map(|b| (built.join(b), format!("{top}/{b}")))
        .collect();
    let archive = d.join(format!("{top}.tar.gz"));
    tarball(&archive, &files);
    let other = "0".repeat(64);
    let sums = format!(
        "{other}  etcd-{v}-darwin-arm64.zip\n{}{other}  etcd-{v}-linux-arm64.tar.gz\n",
        line(&archive)
    );
    std::fs::write(d.join("SHA256SUMS"), sums).unwrap();
}

/// containerd: containerd-N-linux-amd64.tar.gz (bin/...) and its own .sha256sum.
fn containerd(root: &Path) {
    let v = version("CONTAINERD_VERSION");
    let d = release_dir(root, "containerd", &v);
    let built = built_dir("containerd-");
    let files: Vec<(PathBuf, String)> = ["containerd", "containerd-shim-runc-v2", "ctr"]
        .iter()
        .map(|b| (built.join(b), format!("bin/{b}")))
        .collect();
    let archive = d.join(format!("containerd-{}-linux-amd64.tar.gz", &v[1..]));
    tarball(&archive, &files);
    std::fs::write(archive.with_extension("gz.sha256sum"), line(&archive)).unwrap();
}

/// runc: runc.amd64, listed in runc.sha256sum with the other architectures' files.
fn runc(root: &Path) {
    let v = version("RUNC_VERSION");
    let d = release_dir(root, "runc", &v);
    let bin = d.join("runc.amd64");
    std::fs::copy(built_dir("runc-").join("runc"), &bin).unwrap();
    let other = "1".repeat(64);
    let sums = format!("{other}  runc.arm64\n{}{other}  runc.tar.xz\n", line(&bin));
    std::fs::write(d.join("runc.sha256sum"), sums).unwrap();
}

/// CNI plugins: cni-plugins-linux-amd64-VERSION.tgz (./PLUGIN at its top) and its .sha256.
fn cni(root: &Path) {
    let v = version("CNI_PLUGINS_VERSION");
    let d = release_dir(root, "cni-plugins", &v);
    let built = built_dir("cni-plugins-");
    let files: Vec<(PathBuf, String)> = ["bridge", "host-local", "loopback", "portmap"]
        .iter()
        .map(|b| (built.join(b), format!("./{b}")))
        .collect();
    let archive = d.join(format!("cni-plugins-linux-amd64-{v}.tgz"));
    tarball(&archive, &files);
    std::fs::write(archive.with_extension("tgz.sha256"), line(&archive)).unwrap();
}

/// distribution: registry_N_linux_amd64.tar.gz (registry at its top) and a .sha256 of the digest.
fn registry(root: &Path) {
    let v = version("REGISTRY_VERSION");
    let d = release_dir(root, "registry", &v);
    let files = vec![(
        built_dir("registry-").join("registry"),
        "registry".to_string(),
    )];
    let archive = d.join(format!("registry_{}_linux_amd64.tar.gz", &v[1..]));
    tarball(&archive, &files);
    std::fs::write(archive.with_extension("gz.sha256"), sha256(&archive)).unwrap();
}

/// Hard links of the tree in `docroot` (a file the test replaces leaves the tree's as it was).
pub fn link_into(docroot: &Path) {
    let out = Command::new("cp")
        .arg("-al")
        .arg(format!("{}/.", tree().display()))
        .arg(docroot)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp -al: {}", super::text(&out));
}

/// Replace a docroot file with `contents` (a new file: the tree's stays as it was).
pub fn replace(path: &Path, contents: &[u8]) {
    let _ = std::fs::remove_file(path);
    std::fs::write(path, contents).unwrap();
}

/// `--set fetch.mirrors.SOURCE=URL` for every source, at `url` (the mirror's root), and its checksum
/// files trusted (`fetch.checksums`): the release pages' are on the internet, which no test reaches.
pub fn mirror_sets(url: &str) -> Vec<String> {
    BASES
        .iter()
        .flat_map(|(source, base)| {
            [
                "--set".to_string(),
                format!("fetch.mirrors.{source}={url}/{base}"),
                "--set".to_string(),
                format!("fetch.checksums.{source}={url}/{base}"),
            ]
        })
        .collect()
}

/// The built file a fetched binary must equal, by set and name.
pub fn built_file(source: &str, name: &str) -> PathBuf {
    match source {
        "kubernetes" => kubernetes_bin_dir().join(name),
        "etcd" => built_dir("etcd-").join(name),
        "containerd" => built_dir("containerd-").join(name),
        "runc" => built_dir("runc-").join("runc"),
        "cni-plugins" => built_dir("cni-plugins-").join(name),
        "registry" => built_dir("registry-").join("registry"),
        other => panic!("no source {other}"),
    }
}
