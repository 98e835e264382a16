//! Image archives, as `ctr images import` reads them: a docker archive (`docker save`: manifest.json,
//! image configs, layers) or an OCI image layout in a tar (oci-layout, index.json, blobs/). `check`
//! reads one whole and says what is wrong with it before anything is imported; `names` reads only
//! what names its images, the way containerd names them on import.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Metadata files (manifests, configs, index.json) larger than this are refused; layers may be any
/// size and are never held in memory.
const METADATA_LIMIT: u64 = 4 << 20;

/// An archive `check` accepted.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Archive {
    pub path: PathBuf,
    pub format: Format,
    /// The names containerd gives its images on import (`ctr images ls`), e.g.
    /// `docker.io/library/busybox:1.37` for a `busybox:1.37` of `docker save`.
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    DockerArchive,
    OciLayout,
}

/// What is wrong with an image archive.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("cannot read it: {0}")]
    Unreadable(std::io::Error),
    #[error("not a regular file")]
    NotAFile,
    #[error("not a tar archive, or a damaged one: {0}")]
    NotTar(String),
    #[error("{entry} is cut short ({read} of {size} bytes): the archive is truncated")]
    Truncated { entry: String, read: u64, size: u64 },
    #[error("neither a docker archive (no manifest.json) nor an OCI image layout (no oci-layout and index.json)")]
    UnknownFormat,
    #[error("{file} is not valid: {why}")]
    BadMetadata { file: String, why: String },
    #[error("{file} is missing (named by {by})")]
    Missing { file: String, by: String },
    #[error("{file} does not match {digest}: the archive is damaged")]
    Damaged { file: String, digest: String },
    #[error("image name {name:?}: {why}")]
    BadName { name: String, why: String },
    #[error("it names no image (containerd would call it import-DATE:TAG)")]
    Unnamed,
}

impl Problem {
    pub fn fix(&self) -> &'static str {
        match self {
            Problem::Unreadable(_) | Problem::NotAFile => {
                "give the path of a readable image archive file"
            }
            Problem::Unnamed | Problem::BadName { .. } => {
                "name the image when writing the archive: docker save -o FILE NAME:TAG, or skopeo copy SOURCE docker-archive:FILE:NAME:TAG"
            }
            _ => {
                "write the archive again: docker save -o FILE IMAGE, skopeo copy SOURCE docker-archive:FILE:NAME:TAG (or oci-archive:...), or ctr images export FILE NAME"
            }
        }
    }
}

/// A regular file of the archive.
struct Member {
    size: u64,
    /// Its SHA-256 (hex), when the whole archive was read (`check`).
    sha256: Option<String>,
    /// The first bytes (compression magic).
    head: Vec<u8>,
    /// Its content, when it is small enough to be metadata.
    data: Option<Vec<u8>>,
}

/// Why a member could not be read to its end.
enum MemberError {
    Read(std::io::Error),
    /// The bytes read before the archive ended.
    Truncated(u64),
}

/// Read one file of the archive to its end: its first bytes (what kind of file it is), its sha256
/// when `verify`, and its data when `keep` (metadata, small).
fn read_member(
    entry: &mut impl Read,
    size: u64,
    verify: bool,
    keep: bool,
) -> Result<Member, MemberError> {
    let mut hasher = verify.then(Sha256::new);
    let mut data = keep.then(Vec::new);
    let mut head = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut read = 0u64;
    loop {
        let n = entry.read(&mut buf).map_err(MemberError::Read)?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        if head.len() < 8 {
            head.extend(chunk.iter().take(8 - head.len()));
        }
        if let Some(h) = &mut hasher {
            h.update(chunk);
        }
        if let Some(d) = &mut data {
            d.extend_from_slice(chunk);
        }
        read += n as u64;
    }
    if read < size {
        return Err(MemberError::Truncated(read));
    }
    Ok(Member {
        size,
        sha256: hasher.map(|h| hex::encode(h.finalize())),
        head,
        data,
    })
}

/// The files and links of an archive, by their cleaned path.
struct Contents {
    files: BTreeMap<String, Member>,
    links: BTreeMap<String, String>,
}

impl Contents {
    /// Read the tar at `path`; `verify` reads (and hashes) every byte, else only what is small
    /// enough to be metadata and the rest is skipped.
    fn read(path: &Path, verify: bool) -> Result<Contents, Problem> {
        let meta = std::fs::metadata(path).map_err(Problem::Unreadable)?;
        if !meta.is_file() {
            return Err(Problem::NotAFile);
        }
        let file = std::fs::File::open(path).map_err(Problem::Unreadable)?;
        let reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut tar = tar::Archive::new(reader);
        let mut out = Contents {
            files: BTreeMap::new(),
            links: BTreeMap::new(),
        };
        // The tar reader's messages quote what it read: garbage, in a file that is no tar.
        let not_tar = |e: std::io::Error| {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or("").trim();
            Problem::NotTar(line.chars().take(120).collect())
        };
        for entry in tar.entries_with_seek().map_err(not_tar)? {
            let mut entry = entry.map_err(not_tar)?;
            let raw = entry
                .path()
                .map_err(not_tar)?
                .to_string_lossy()
                .into_owned();
            let name = clean(&raw);
            let kind = entry.header().entry_type();
            if kind.is_symlink() || kind.is_hard_link() {
                let target = entry
                    .link_name()
                    .map_err(not_tar)?
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default();
                // A symlink points relative to its directory; a hard link names an archive path.
                let target = if kind.is_symlink() && !target.starts_with('/') {
                    let dir = name.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                    clean(&format!("{dir}/{target}"))
                } else {
                    clean(&target)
                };
                out.links.insert(name, target);
                continue;
            }
            if !(kind.is_file() || kind == tar::EntryType::Continuous) {
                continue;
            }
            let size = entry.size();
            let keep = size <= METADATA_LIMIT;
            if !verify && !keep {
                out.files.insert(
                    name,
                    Member {
                        size,
                        sha256: None,
                        head: vec![],
                        data: None,
                    },
                );
                continue;
            }
            let member = read_member(&mut entry, size, verify, keep).map_err(|e| match e {
                MemberError::Read(e) => not_tar(e),
                MemberError::Truncated(read) => Problem::Truncated {
                    entry: raw.clone(),
                    read,
                    size,
                },
            })?;
            out.files.insert(name, member);
        }
        Ok(out)
    }

    /// The file at `name`, through the links on the way (a few hops: `docker save` links layers
    /// that several images share).
    fn get(&self, name: &str) -> Option<(&str, &Member)> {
        let mut name = clean(name);
        for _ in 0..8 {
            if let Some((key, m)) = self.files.get_key_value(&name) {
                return Some((key.as_str(), m));
            }
            name = self.links.get(&name)?.clone();
        }
        None
    }

    /// A file's content, parsed as JSON.
    fn json<T: serde::de::DeserializeOwned>(&self, name: &str, by: &str) -> Result<T, Problem> {
        let missing = || Problem::Missing {
            file: name.to_string(),
            by: by.to_string(),
        };
        let (_, m) = self.get(name).ok_or_else(missing)?;
        let data = m.data.as_deref().ok_or_else(|| Problem::BadMetadata {
            file: name.to_string(),
            why: format!("{} bytes, more than metadata ever is", m.size),
        })?;
        serde_json::from_slice(data).map_err(|e| Problem::BadMetadata {
            file: name.to_string(),
            why: e.to_string(),
        })
    }
}

/// A path inside the archive without `./`, leading `/` and `..` (as containerd's importer cleans it).
fn clean(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// Read the whole archive at `path` and check it: a tar, a known format, every manifest, config and
/// layer of this platform present, every blob matching its digest, every image name valid.
pub fn check(path: &Path) -> Result<Archive, Problem> {
    let contents = Contents::read(path, true)?;
    inspect(path, &contents, true)
}

/// The names containerd gives the images of the archive at `path` on import, reading only its
/// metadata (an archive that was imported already: `start`'s registry load).
pub fn names(path: &Path) -> Result<Vec<String>, Problem> {
    let contents = Contents::read(path, false)?;
    inspect(path, &contents, false).map(|a| a.names)
}

fn inspect(path: &Path, contents: &Contents, verify: bool) -> Result<Archive, Problem> {
    let has = |n: &str| contents.get(n).is_some();
    let (format, names) = if has("oci-layout") && has("index.json") {
        (Format::OciLayout, oci(contents, verify)?)
    } else if has("manifest.json") {
        (Format::DockerArchive, docker(contents, verify)?)
    } else {
        return Err(Problem::UnknownFormat);
    };
    Ok(Archive {
        path: path.to_path_buf(),
        format,
        names,
    })
}

#[derive(Deserialize)]
struct DockerManifest {
    #[serde(rename = "Config")]
    config: String,
    #[serde(rename = "RepoTags", default)]
    repo_tags: Option<Vec<String>>,
    #[serde(rename = "Layers", default)]
    layers: Vec<String>,
}

#[derive(Deserialize)]
struct ImageConfig {
    #[serde(default)]
    rootfs: Option<RootFs>,
}

#[derive(Deserialize)]
struct RootFs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

/// A docker archive: each image's config and layers there; names are its RepoTags, normalized.
fn docker(c: &Contents, verify: bool) -> Result<Vec<String>, Problem> {
    let manifests: Vec<DockerManifest> = c.json("manifest.json", "the archive")?;
    if manifests.is_empty() {
        return Err(Problem::BadMetadata {
            file: "manifest.json".into(),
            why: "it lists no image".into(),
        });
    }
    let mut names = Vec::new();
    for m in &manifests {
        let by = "manifest.json";
        if verify {
            let config_file = present(c, &m.config, by)?;
            digest_in_name(c, config_file)?;
            let config: ImageConfig = c.json(&m.config, by)?;
            let diff_ids = config.rootfs.map(|r| r.diff_ids).unwrap_or_default();
            for (i, layer) in m.layers.iter().enumerate() {
                let file = present(c, layer, by)?;
                digest_in_name(c, file)?;
                // An uncompressed layer is what its diff_id hashes.
                let member = &c.files[file];
                if let (Some(diff_id), Some(sum)) = (diff_ids.get(i), &member.sha256) {
                    let compressed = [
                        &[0x1f, 0x8b][..],
                        &[0x28, 0xb5, 0x2f, 0xfd],
                        b"BZh",
                        &[0xfd, b'7', b'z', b'X', b'Z'],
                    ]
                    .iter()
                    .any(|magic| member.head.starts_with(magic));
                    if !compressed && diff_id.strip_prefix("sha256:") != Some(sum.as_str()) {
                        return Err(Problem::Damaged {
                            file: layer.clone(),
                            digest: diff_id.clone(),
                        });
                    }
                }
            }
        }
        for tag in m.repo_tags.iter().flatten() {
            let normalized = Reference::parse(tag).map_err(|why| Problem::BadName {
                name: tag.clone(),
                why: why.to_string(),
            })?;
            names.push(normalized.to_string());
        }
    }
    Ok(names)
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    platform: Option<Platform>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Platform {
    #[serde(default)]
    os: String,
    #[serde(default)]
    architecture: String,
}

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

/// An OCI layout: every blob index.json leads to (for this platform) there and matching its
/// digest; names from the annotations, as containerd takes them.
fn oci(c: &Contents, verify: bool) -> Result<Vec<String>, Problem> {
    let _: serde_json::Value = c.json("oci-layout", "the archive")?;
    let index: Index = c.json("index.json", "the archive")?;
    let mut names = Vec::new();
    for d in &index.manifests {
        if verify {
            descriptor(c, d, "index.json", 0)?;
        }
        if let Some(name) = oci_name(&d.annotations) {
            Reference::parse(&name).map_err(|why| Problem::BadName {
                name: name.clone(),
                why: why.to_string(),
            })?;
            names.push(name);
        }
    }
    Ok(names)
}

/// The name containerd's import (without --base-name) gives an image of index.json: its
/// `io.containerd.image.name`, else an `org.opencontainers.image.ref.name` that is a whole
/// reference, each taken as it is; a bare tag gets a made-up name (`import-DATE:TAG`): none here.
fn oci_name(annotations: &BTreeMap<String, String>) -> Option<String> {
    let whole = |n: &&String| n.contains(['/', ':', '@']);
    annotations
        .get("io.containerd.image.name")
        .filter(whole)
        .or_else(|| {
            annotations
                .get("org.opencontainers.image.ref.name")
                .filter(whole)
        })
        .cloned()
}

const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// A blob and, for an index or manifest, what it leads to.
fn descriptor(c: &Contents, d: &Descriptor, by: &str, depth: usize) -> Result<(), Problem> {
    let bad = |why: String| Problem::BadMetadata {
        file: by.to_string(),
        why,
    };
    if depth > 8 {
        return Err(bad("indexes nest too deep".into()));
    }
    let Some((algorithm, hex)) = d.digest.split_once(':') else {
        return Err(bad(format!("{:?} is not a digest", d.digest)));
    };
    let file = format!("blobs/{algorithm}/{hex}");
    let (_, member) = c.get(&file).ok_or_else(|| Problem::Missing {
        file: file.clone(),
        by: by.to_string(),
    })?;
    let damaged = || Problem::Damaged {
        file: file.clone(),
        digest: d.digest.clone(),
    };
    if d.size != 0 && d.size != member.size {
        return Err(damaged());
    }
    if algorithm == "sha256" && member.sha256.as_deref().is_some_and(|s| s != hex) {
        return Err(damaged());
    }
    if INDEX_TYPES.contains(&d.media_type.as_str()) {
        let index: Index = c.json(&file, by)?;
        for child in &index.manifests {
            // Only this platform's images are imported (ctr's default): others may be left out.
            let ours = child
                .platform
                .as_ref()
                .is_none_or(|p| p.os == "linux" && p.architecture == go_arch());
            if ours || c.get(&blob_path(&child.digest)).is_some() {
                descriptor(c, child, &file, depth + 1)?;
            }
        }
    } else if MANIFEST_TYPES.contains(&d.media_type.as_str()) {
        let manifest: Manifest = c.json(&file, by)?;
        descriptor(c, &manifest.config, &file, depth + 1)?;
        // A foreign layer (with URLs) is fetched from there, not carried.
        for layer in manifest.layers.iter().filter(|l| l.urls.is_empty()) {
            descriptor(c, layer, &file, depth + 1)?;
        }
    }
    Ok(())
}

fn blob_path(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

/// `name` is in the archive (through links); its path there.
fn present<'c>(c: &'c Contents, name: &str, by: &str) -> Result<&'c str, Problem> {
    c.get(name)
        .map(|(path, _)| path)
        .ok_or_else(|| Problem::Missing {
            file: name.to_string(),
            by: by.to_string(),
        })
}

/// A file named by its digest (`<hex>.json`, `blobs/sha256/<hex>`) hashes to it.
fn digest_in_name(c: &Contents, file: &str) -> Result<(), Problem> {
    let base = file.rsplit('/').next().unwrap_or(file);
    let hex = base.strip_suffix(".json").unwrap_or(base);
    let named = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    match c.files.get(file).and_then(|m| m.sha256.as_deref()) {
        Some(sum) if named && sum != hex.to_ascii_lowercase() => Err(Problem::Damaged {
            file: file.to_string(),
            digest: format!("sha256:{hex}"),
        }),
        _ => Ok(()),
    }
}

/// This machine's architecture as Go and OCI name it (what images and containerd's platform say).
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// An image reference as Docker (and containerd's import) normalizes it: `busybox` is
/// `docker.io/library/busybox:latest` (distribution/reference's ParseDockerRef).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Registry host, with its port: `registry.k8s.io`, `docker.io`, `localhost:5000`.
    pub domain: String,
    /// Repository path inside the registry: `e2e-test-images/agnhost`, `library/busybox`.
    pub path: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.domain, self.path)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl Reference {
    /// distribution/reference's grammar and Docker's normalization, by oci-spec (a digest wins over
    /// a tag, as ParseDockerRef has it; neither means `:latest`).
    pub fn parse(s: &str) -> Result<Reference, oci_spec::distribution::ParseError> {
        let r: oci_spec::distribution::Reference = s.parse()?;
        let digest = r.digest().map(String::from);
        let tag = match (&digest, r.tag()) {
            (Some(_), _) => None,
            (None, t) => Some(t.unwrap_or("latest").to_string()),
        };
        Ok(Reference {
            domain: r.registry().to_string(),
            path: r.repository().to_string(),
            tag,
            digest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_normalized_as_docker_does() {
        let n = |s: &str| Reference::parse(s).map(|r| r.to_string());
        assert_eq!(n("busybox").unwrap(), "docker.io/library/busybox:latest");
        assert_eq!(n("foo/bar:1").unwrap(), "docker.io/foo/bar:1");
        assert_eq!(
            n("index.docker.io/library/x:2").unwrap(),
            "docker.io/library/x:2"
        );
        for same in [
            "registry.k8s.io/pause:3.10.2",
            "registry.k8s.io/e2e-test-images/agnhost:2.63.0",
            "kubeunit.local/busybox:1.35.0",
            "localhost:5000/a/b__c.d-e:v1_x",
            "198.18.0.2:5000/x:1",
        ] {
            assert_eq!(n(same).unwrap(), same);
        }
        let digest = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            n(&format!("x:1@{digest}")).unwrap(),
            format!("docker.io/library/x@{digest}")
        );
        let r = Reference::parse("registry.k8s.io/e2e-test-images/agnhost:2.63.0").unwrap();
        assert_eq!(
            (r.domain.as_str(), r.path.as_str(), r.tag.as_deref()),
            ("registry.k8s.io", "e2e-test-images/agnhost", Some("2.63.0"))
        );
        for bad in [
            "",
            "Busybox",
            "x:",
            "x:-1",
            "a//b",
            "x@sha256:12",
            "a_/b",
            "-a",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    /// A tar of (name, bytes) regular files.
    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn sha(b: &[u8]) -> String {
        hex::encode(Sha256::digest(b))
    }

    /// A docker archive as scripts/docker-archive.py writes it.
    fn docker_archive(tag: &str) -> Vec<u8> {
        let layer = tar_of(&[("hello", b"hi\n")]);
        let config = format!(
            r#"{{"architecture":"amd64","os":"linux","rootfs":{{"type":"layers","diff_ids":["sha256:{}"]}}}}"#,
            sha(&layer)
        );
        let config_name = format!("{}.json", sha(config.as_bytes()));
        let layer_name = format!("{}/layer.tar", sha(&layer));
        let manifest = format!(
            r#"[{{"Config":"{config_name}","RepoTags":["{tag}"],"Layers":["{layer_name}"]}}]"#
        );
        tar_of(&[
            ("manifest.json", manifest.as_bytes()),
            (&config_name, config.as_bytes()),
            (&layer_name, &layer),
        ])
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn a_docker_archive_is_checked_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let good = docker_archive("busybox:1.37");
        let a = check(&write(dir.path(), "a.tar", &good)).unwrap();
        assert_eq!(a.format, Format::DockerArchive);
        assert_eq!(a.names, ["docker.io/library/busybox:1.37"]);
        assert_eq!(
            names(&dir.path().join("a.tar")).unwrap(),
            ["docker.io/library/busybox:1.37"]
        );

        let problem = |bytes: &[u8]| check(&write(dir.path(), "b.tar", bytes)).unwrap_err();
        assert!(matches!(
            check(&dir.path().join("missing.tar")),
            Err(Problem::Unreadable(_))
        ));
        assert!(matches!(check(dir.path()), Err(Problem::NotAFile)));
        assert!(matches!(problem(b"not an archive\n"), Problem::NotTar(_)));
        assert!(matches!(problem(&vec![7u8; 4096]), Problem::NotTar(_)));
        assert!(matches!(
            problem(&good[..good.len() / 2]),
            Problem::Truncated { .. } | Problem::NotTar(_) | Problem::Missing { .. }
        ));
        assert!(matches!(problem(&[]), Problem::UnknownFormat));
        // A flipped byte in the layer: it no longer hashes to its diff_id.
        let mut flipped = good.clone();
        let at = flipped.windows(3).position(|w| w == b"hi\n").unwrap();
        flipped[at] = b'H';
        assert!(matches!(problem(&flipped), Problem::Damaged { .. }));
        // A layer manifest.json names that is not there.
        let manifest = br#"[{"Config":"c.json","RepoTags":["x:1"],"Layers":["l.tar"]}]"#;
        let only = tar_of(&[("manifest.json", manifest), ("c.json", b"{}")]);
        assert!(
            matches!(problem(&only), Problem::Missing { ref file, .. } if file == "l.tar"),
            "{}",
            problem(&only)
        );
        let bad_tag = docker_archive("Busybox:1");
        assert!(matches!(problem(&bad_tag), Problem::BadName { .. }));
    }

    #[test]
    fn an_oci_layout_is_checked_for_this_platform_and_named_as_containerd_does() {
        let dir = tempfile::tempdir().unwrap();
        let layer = b"layer bytes".to_vec();
        let config = br#"{"architecture":"amd64","os":"linux"}"#.to_vec();
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:{}","size":{}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:{}","size":{}}}]}}"#,
            sha(&config),
            config.len(),
            sha(&layer),
            layer.len()
        );
        // A multi-platform index of which only this platform's image is in the archive.
        let nested = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:{}","size":{},"platform":{{"os":"linux","architecture":"{}"}}}},{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:{}","size":1,"platform":{{"os":"linux","architecture":"elsewhere"}}}}]}}"#,
            sha(manifest.as_bytes()),
            manifest.len(),
            go_arch(),
            "b".repeat(64)
        );
        let index = |name: &str| {
            format!(
                r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:{}","size":{},"annotations":{{"org.opencontainers.image.ref.name":"{name}"}}}}]}}"#,
                sha(nested.as_bytes()),
                nested.len()
            )
        };
        let blob = |b: &[u8]| format!("blobs/sha256/{}", sha(b));
        let files = |index: String, layer: &[u8]| {
            tar_of(&[
                ("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#),
                ("index.json", index.as_bytes()),
                (&blob(nested.as_bytes()), nested.as_bytes()),
                (&blob(manifest.as_bytes()), manifest.as_bytes()),
                (&blob(&config), &config),
                (&format!("blobs/sha256/{}", sha(b"layer bytes")), layer),
            ])
        };
        let path = write(
            dir.path(),
            "a.tar",
            &files(index("kubeunit.local/app:1"), &layer),
        );
        let a = check(&path).unwrap();
        assert_eq!(a.format, Format::OciLayout);
        assert_eq!(a.names, ["kubeunit.local/app:1"]);
        // A bare tag: containerd makes up a name, so none here.
        let path = write(dir.path(), "b.tar", &files(index("1"), &layer));
        assert!(check(&path).unwrap().names.is_empty());
        // A layer that is not what its digest says.
        let path = write(
            dir.path(),
            "c.tar",
            &files(index("kubeunit.local/app:1"), b"other bytes"),
        );
        assert!(matches!(check(&path), Err(Problem::Damaged { .. })));
    }
}
