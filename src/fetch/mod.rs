//! `kubeunit fetch`: the official release binaries of a profile's versions, downloaded from their
//! projects' release pages (or a mirror of them), each checked against the checksum file published
//! next to it, and kept by version in the user's cache (`cache`). `gen` with an empty `binDir` uses
//! them. Fetching is all or nothing: every set is staged and checked before any is put in place,
//! so a failure leaves the cache as it was.
//!
//! Nothing here knows a profile: callers name the versions (`wanted`) and mirrors.

pub mod cache;
pub mod checksum;
mod download;
pub mod sources;
mod unpack;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use checksum::{BadSums, Digest};
pub use sources::{Source, SOURCES};

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: HTTP {status}.\n  fix: {}", status_fix(*status))]
    Status { url: String, status: u16 },
    #[error("{url}: no answer in time (the server hangs).\n  fix: check the mirror (--mirror NAME=URL, KUBEUNIT_MIRROR_<NAME>, fetch.mirrors), or wait longer with --timeout")]
    Hung { url: String },
    #[error("{url}: not downloaded within {seconds} s (the server sends too slowly, or trickles).\n  fix: use a faster mirror (--mirror NAME=URL), or allow longer with --deadline SECONDS (KUBEUNIT_FETCH_DEADLINE)")]
    Deadline { url: String, seconds: u64 },
    #[error("{url}: {reason}.\n  fix: check the network, the mirror's address and its certificate (SSL_CERT_FILE names a CA bundle to trust, HTTPS_PROXY a proxy)")]
    Transport { url: String, reason: String },
    #[error("{url}: the connection ended after {got} of {announced} bytes (a truncated download).\n  fix: run kubeunit fetch again; if it keeps failing, use another mirror")]
    Truncated {
        url: String,
        got: u64,
        announced: u64,
    },
    #[error("{url}: larger than {limit} bytes, more than any release file.\n  fix: check the mirror: it does not serve the release")]
    TooLarge { url: String, limit: u64 },
    #[error("{url}: its {algorithm} is {got}, but {sums} says {expected}: it is not the file that was published.\n  fix: use another mirror (--mirror NAME=URL), or check this one's copy of the release")]
    Mismatch {
        url: String,
        sums: String,
        algorithm: &'static str,
        expected: String,
        got: String,
    },
    #[error("{sums}: the checksum file of {file}: {problem}.\n  fix: use a mirror that serves the release's checksum files next to its files")]
    Sums {
        sums: String,
        file: String,
        problem: BadSums,
    },
    #[error("{url}: not the release archive kubeunit knows: {reason}.\n  fix: check the version, or use another mirror")]
    Archive { url: String, reason: String },
    #[error("{path}: {what}.\n  fix: the set in {} changed after it was fetched: fetch it again with `kubeunit fetch --refresh`", .dir.display())]
    Tampered {
        path: PathBuf,
        what: String,
        dir: PathBuf,
    },
    #[error("{path}: cannot {op}: {source}.\n  fix: check free space and permissions there")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    #[error(
        "{path}: not a directory.\n  fix: remove it, or name another cache with KUBEUNIT_CACHE_DIR"
    )]
    NotADir { path: PathBuf },
    #[error("SSL_CERT_FILE {path}: {reason}.\n  fix: name a PEM bundle of CA certificates, or unset SSL_CERT_FILE")]
    CaFile { path: PathBuf, reason: String },
    /// A version, mirror or source name given wrong.
    #[error("{field}: {message} (value: {value}).\n  fix: {fix}")]
    Input {
        field: String,
        value: String,
        message: String,
        fix: String,
    },
    #[error("internal error (please report it): {0}")]
    Internal(String),
}

fn status_fix(status: u16) -> &'static str {
    match status {
        404 | 410 => "check the version (is it released?) and the mirror's layout: it must be the release page's (--mirror NAME=URL)",
        401 | 403 => "the server refuses it: check the mirror and its access",
        _ => "try again later, or use another mirror (--mirror NAME=URL)",
    }
}

impl FetchError {
    pub fn io(path: &Path, op: &'static str, source: std::io::Error) -> FetchError {
        FetchError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }

    fn input(field: &str, value: &str, message: &str, fix: impl Into<String>) -> FetchError {
        FetchError::Input {
            field: field.into(),
            value: value.into(),
            message: message.into(),
            fix: fix.into(),
        }
    }

    /// 2 when the user must change something (a version, a mirror, the cache), 1 when it may pass
    /// if tried again (the network, a cut connection, the disk).
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            FetchError::Status { .. }
                | FetchError::Mismatch { .. }
                | FetchError::Sums { .. }
                | FetchError::Archive { .. }
                | FetchError::Tampered { .. }
                | FetchError::NotADir { .. }
                | FetchError::CaFile { .. }
                | FetchError::Input { .. }
        )
    }
}

/// One set to fetch: a source at a version, from a base URL (its own or a mirror), checked
/// against the checksum files under `sums_base` (its release page's, or a source the user trusts:
/// never a mirror's only because it serves the files).
#[derive(Debug, Clone)]
pub struct Wanted {
    pub source: &'static Source,
    pub version: String,
    pub base: String,
    pub sums_base: String,
}

pub struct Request {
    pub cache: PathBuf,
    pub wanted: Vec<Wanted>,
    /// How long any one wait (connect, response, a read) may take.
    pub timeout: Duration,
    /// How long one file's download may take in all: a server that trickles a byte just inside
    /// `timeout` is given up on, not waited for for days (holding the set's lock).
    pub deadline: Duration,
    /// Fetch even what the cache holds (a changed set is replaced).
    pub refresh: bool,
}

/// What fetch tells as it goes.
pub enum Event<'a> {
    Cached {
        wanted: &'a Wanted,
        dir: &'a Path,
    },
    /// The cache holds the set from another origin or architecture (`why`): fetched again.
    Replacing {
        wanted: &'a Wanted,
        dir: &'a Path,
        why: &'a str,
    },
    /// Another process holds the set's lock (its PID, when it wrote one): this one waits.
    Waiting {
        wanted: &'a Wanted,
        lock: &'a Path,
        holder: Option<u32>,
    },
    Downloading {
        url: &'a str,
    },
    Progress {
        bytes: u64,
        total: Option<u64>,
    },
    Verified {
        url: &'a str,
        digest: &'a Digest,
        bytes: u64,
        seconds: f64,
    },
    Installed {
        wanted: &'a Wanted,
        dir: &'a Path,
    },
}

/// What one set came to.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fetched {
    pub source: &'static str,
    pub version: String,
    pub dir: PathBuf,
    /// Already in the cache (and unchanged): nothing was requested.
    pub cached: bool,
    /// Bytes downloaded for it.
    pub bytes: u64,
    pub files: Vec<String>,
}

/// Fetch every wanted set that the cache does not hold; all or nothing.
pub fn fetch(req: &Request, on: &mut dyn FnMut(Event)) -> Result<Vec<Fetched>, FetchError> {
    let arch = arch()?;
    // In the table's order, always: two fetches never wait for each other's locks crosswise.
    let mut wanted: Vec<&Wanted> = req.wanted.iter().collect();
    wanted.sort_by_key(|w| SOURCES.iter().position(|s| s.name == w.source.name));
    let mut locks = Vec::new();
    let mut staged = Vec::new();
    let mut done = Vec::new();
    let client = download::Client::new(req.timeout, req.deadline)?;
    for w in wanted {
        locks.push(cache::lock(
            &req.cache,
            w.source.name,
            &w.version,
            &mut |lock, holder| {
                on(Event::Waiting {
                    wanted: w,
                    lock,
                    holder,
                })
            },
        )?);
        let dir = cache::set_dir(&req.cache, w.source.name, &w.version);
        if !req.refresh {
            if let Some(stamp) = cache::complete(&dir)? {
                // Checked files from another origin or architecture are not the set wanted: a
                // mirror's set is not taken for the release page's, nor arm64's for amd64's.
                match stamp.differs(&w.base, arch) {
                    None => {
                        on(Event::Cached {
                            wanted: w,
                            dir: &dir,
                        });
                        done.push(fetched(w, dir, &stamp, true, 0));
                        continue;
                    }
                    Some(why) => on(Event::Replacing {
                        wanted: w,
                        dir: &dir,
                        why: &why,
                    }),
                }
            }
        }
        let (tmp, stamp, bytes) = stage(&client, req, w, arch, on)?;
        staged.push((w, tmp, stamp, dir, bytes));
    }
    for (w, tmp, stamp, dir, bytes) in staged {
        cache::install(tmp, &stamp, &dir)?;
        on(Event::Installed {
            wanted: w,
            dir: &dir,
        });
        done.push(fetched(w, dir, &stamp, false, bytes));
    }
    Ok(done)
}

fn fetched(w: &Wanted, dir: PathBuf, stamp: &cache::Stamp, cached: bool, bytes: u64) -> Fetched {
    Fetched {
        source: w.source.name,
        version: w.version.clone(),
        dir,
        cached,
        bytes,
        files: stamp.files.keys().cloned().collect(),
    }
}

/// Download, check and unpack one set into a staging dir.
fn stage(
    client: &download::Client,
    req: &Request,
    w: &Wanted,
    arch: &str,
    on: &mut dyn FnMut(Event),
) -> Result<(tempfile::TempDir, cache::Stamp, u64), FetchError> {
    let tmp = cache::staging(&req.cache, w.source.name, &w.version)?;
    let mut stamp = cache::Stamp {
        source: w.source.name.into(),
        version: w.version.clone(),
        base: w.base.clone(),
        arch: arch.into(),
        files: BTreeMap::new(),
        downloads: BTreeMap::new(),
    };
    let mut total = 0;
    for d in w.source.downloads {
        let file = sources::expand(d.file, &w.version, arch);
        let url = format!("{}/{file}", w.base);
        let sums_url = format!(
            "{}/{}",
            w.sums_base,
            sources::expand(d.sums, &w.version, arch)
        );
        let name = file.rsplit('/').next().unwrap_or(&file).to_string();
        // The checksum first: a release without one is refused before its file is downloaded.
        let sums_error = |problem| FetchError::Sums {
            sums: sums_url.clone(),
            file: name.clone(),
            problem,
        };
        let text = match client.text(&sums_url) {
            Err(FetchError::Status { status, .. }) if status == 404 || status == 410 => {
                return Err(sums_error(BadSums::Missing(status)))
            }
            other => other?,
        };
        let expected = checksum::digest_for(&text, &name).map_err(sums_error)?;
        let download_path = tmp.path().join(format!(".download.{name}"));
        let got = download_checked(client, &url, &sums_url, &download_path, &expected, on)?;
        total += got;
        stamp.downloads.insert(
            url.clone(),
            format!("{}:{}", expected.algorithm(), expected.hex()),
        );
        unpack_download(
            d,
            &download_path,
            tmp.path(),
            &w.version,
            arch,
            &url,
            &mut stamp,
        )?;
    }
    Ok((tmp, stamp, total))
}

/// Download `url` to `path` and compare its digest with `expected`.
fn download_checked(
    client: &download::Client,
    url: &str,
    sums_url: &str,
    path: &Path,
    expected: &Digest,
    on: &mut dyn FnMut(Event),
) -> Result<u64, FetchError> {
    on(Event::Downloading { url });
    let t0 = Instant::now();
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| FetchError::io(path, "create", e))?;
    let got = client.to_file(url, &mut out, expected, &mut |bytes, total| {
        on(Event::Progress { bytes, total })
    })?;
    if got.digest != *expected {
        return Err(FetchError::Mismatch {
            url: url.into(),
            sums: sums_url.into(),
            algorithm: expected.algorithm(),
            expected: expected.hex(),
            got: got.digest.hex(),
        });
    }
    on(Event::Verified {
        url,
        digest: expected,
        bytes: got.bytes,
        seconds: t0.elapsed().as_secs_f64(),
    });
    Ok(got.bytes)
}

/// Put what a checked download gives into the staging dir, recording each file.
fn unpack_download(
    d: &sources::Download,
    download: &Path,
    staged: &Path,
    version: &str,
    arch: &str,
    url: &str,
    stamp: &mut cache::Stamp,
) -> Result<(), FetchError> {
    let names: Vec<String> = match &d.gives {
        sources::Gives::Binary(name) => {
            stamp
                .files
                .insert(name.to_string(), cache::place(download, staged, name)?);
            return Ok(());
        }
        sources::Gives::Archive(members) => {
            let members: Vec<(String, String)> = members
                .iter()
                .map(|(m, n)| (sources::expand(m, version, arch), n.to_string()))
                .collect();
            let unpacked = staged.join(".unpacked");
            std::fs::create_dir_all(&unpacked)
                .map_err(|e| FetchError::io(&unpacked, "create", e))?;
            unpack::archive(download, &members, &unpacked, url)?;
            let _ = std::fs::remove_file(download);
            members.into_iter().map(|(_, n)| n).collect()
        }
    };
    let unpacked = staged.join(".unpacked");
    for name in names {
        let placed = cache::place(&unpacked.join(&name), staged, &name)?;
        stamp.files.insert(name, placed);
    }
    std::fs::remove_dir(&unpacked).map_err(|e| FetchError::io(&unpacked, "remove", e))
}

fn arch() -> Result<&'static str, FetchError> {
    sources::arch().ok_or_else(|| {
        FetchError::input(
            "architecture",
            std::env::consts::ARCH,
            "no release binaries are published for it",
            "build the binaries from source and give binDir",
        )
    })
}

/// A release version as the projects tag them: `v` then three numbers, maybe a suffix
/// (`-rc.1`); `v` is added when missing. It names cache dirs and URLs, so nothing else passes.
pub fn release_version(field: &str, value: &str) -> Result<String, FetchError> {
    let v = if value.starts_with('v') {
        value.to_string()
    } else {
        format!("v{value}")
    };
    let (core, suffix) = match v[1..].split_once(['-', '+']) {
        Some((c, s)) => (c, Some(s)),
        None => (&v[1..], None),
    };
    let numbers = core.split('.').collect::<Vec<_>>();
    let ok = numbers.len() == 3
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()))
        && suffix.is_none_or(|s| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        });
    if ok {
        Ok(v)
    } else {
        Err(FetchError::input(
            field,
            value,
            "not a release version",
            "give a released version such as v1.36.3 (three numbers)",
        ))
    }
}

/// The version of `source` that a profile's `versions` value asks for: the pinned one when it
/// names none or a prefix of it (`v1.36`), else that exact release.
pub fn version_of(source: &Source, field: &str, asked: &str) -> Result<String, FetchError> {
    let asked = asked.trim();
    if asked.is_empty() {
        return Ok(source.version.to_string());
    }
    let with_v = if asked.starts_with('v') {
        asked.to_string()
    } else {
        format!("v{asked}")
    };
    if with_v.matches('.').count() < 2 {
        if source.version.starts_with(&format!("{with_v}.")) {
            return Ok(source.version.to_string());
        }
        return Err(FetchError::input(
            field,
            asked,
            &format!(
                "names no release to fetch (kubeunit pins {} {})",
                source.name, source.version
            ),
            format!("give a full version, e.g. {}", source.version),
        ));
    }
    release_version(field, asked)
}

/// The base URL of `source`: the first of `flag` (`--mirror`), `KUBEUNIT_MIRROR_<NAME>` and
/// `profile` (`fetch.mirrors`) that names one, else the project's own; with what chose it.
pub fn base_of(
    source: &Source,
    flag: Option<&str>,
    profile: Option<&str>,
) -> Result<(String, String), FetchError> {
    let env = sources::mirror_env(source.name);
    let from_env = std::env::var(&env).ok().filter(|v| !v.is_empty());
    let (base, origin) = match (flag, from_env, profile) {
        (Some(f), _, _) => (f.to_string(), format!("--mirror {}", source.name)),
        (None, Some(e), _) => (e, env),
        (None, None, Some(p)) => (p.to_string(), format!("fetch.mirrors.{}", source.name)),
        (None, None, None) => return Ok((source.base.to_string(), "release page".into())),
    };
    Ok((mirror_url(&origin, &base)?, origin))
}

/// Where `source`'s checksum files come from: `KUBEUNIT_CHECKSUMS_<SOURCE>`, else the profile's
/// `fetch.checksums`, else the release page. A mirror is only a location: a lying one would serve
/// a checksum file that matches its own binary.
pub fn sums_base_of(source: &Source, profile: Option<&str>) -> Result<String, FetchError> {
    let env = sources::checksums_env(source.name);
    match (std::env::var(&env).ok().filter(|v| !v.is_empty()), profile) {
        (Some(e), _) => mirror_url(&env, &e),
        (None, Some(p)) => mirror_url(&format!("fetch.checksums.{}", source.name), p),
        (None, None) => Ok(source.base.to_string()),
    }
}

/// A mirror's base URL: https, no spaces or controls; without a trailing `/`.
pub fn mirror_url(field: &str, value: &str) -> Result<String, FetchError> {
    let rest = value.strip_prefix("https://").unwrap_or_default();
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty()
        || value.chars().any(|c| c.is_whitespace() || c.is_control())
        || value.contains(['?', '#'])
    {
        return Err(FetchError::input(
            field,
            value,
            "not an https:// base URL",
            "give the URL the release layout sits under, e.g. https://mirror.example/dl.k8s.io/release",
        ));
    }
    Ok(value.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_releases_or_the_pinned_one() {
        let k8s = sources::find("kubernetes").unwrap();
        assert_eq!(version_of(k8s, "f", "").unwrap(), k8s.version);
        let minor = k8s.version.rsplit_once('.').unwrap().0;
        assert_eq!(version_of(k8s, "f", minor).unwrap(), k8s.version);
        assert_eq!(version_of(k8s, "f", "1.35.4").unwrap(), "v1.35.4");
        assert!(version_of(k8s, "f", "v1.20").is_err());
        for bad in [
            "v1.2.3/../../x",
            "../x",
            "v1.2.3\n",
            "v1.2",
            "v1.2.3.4",
            "v1.2.3-",
            "latest",
        ] {
            assert!(release_version("f", bad).is_err(), "{bad:?}");
        }
        assert_eq!(release_version("f", "v3.6.0-rc.5").unwrap(), "v3.6.0-rc.5");
    }

    #[test]
    fn a_mirror_is_an_https_base() {
        assert_eq!(
            mirror_url("m", "https://203.0.113.2/dl/").unwrap(),
            "https://203.0.113.2/dl"
        );
        for bad in [
            "http://x/",
            "https://",
            "https:///x",
            "ftp://x",
            "https://x/a b",
            "https://x/\n",
            "https://x/?a",
        ] {
            assert!(mirror_url("m", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn each_source_is_named_once_and_has_downloads() {
        let names = sources::names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        for s in SOURCES {
            assert!(!s.downloads.is_empty(), "{}", s.name);
            assert!(s.base.starts_with("https://"), "{}", s.name);
            release_version(s.name, s.version).unwrap();
        }
    }
}
