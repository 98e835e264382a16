//! What version a binary is, and what upstream's skew policy says of going from one to another:
//! the binary's Go build info when it names its component's module at a release, else what its
//! `--version` prints (`Kubernetes v1.36.3`, `etcd Version: 3.6.16`).

use std::cmp::Ordering;
use std::fmt;
use std::path::Path;

use super::build_info;
use crate::components::Skew;

/// A release version: `1.36.3`, or with a pre-release (`1.37.0-rc.1`), as a binary spelled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// After `-` (a pre-release) or `+` (build metadata), without it; empty for a release.
    pub rest: String,
    /// As the binary wrote it (`v1.36.3`).
    pub word: String,
}

impl Version {
    /// A word that is a version (`v1.36.3`, `3.6.16`, `v1.37.0-rc.1`, `v1.36.3+abc`); `None`
    /// otherwise.
    pub fn parse(word: &str) -> Option<Version> {
        let w = word.strip_prefix('v').unwrap_or(word);
        let end = w.find(['-', '+']).unwrap_or(w.len());
        let mut numbers = w[..end].split('.');
        let mut number = || -> Option<u64> {
            let n = numbers.next()?;
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| n.parse().ok())
                .flatten()
        };
        let (major, minor, patch) = (number()?, number()?, number()?);
        if numbers.next().is_some() {
            return None;
        }
        Some(Version {
            major,
            minor,
            patch,
            rest: w.get(end + 1..).unwrap_or_default().to_string(),
            word: word.to_string(),
        })
    }

    /// The first word of a `--version` output that is a version.
    pub fn find_in(text: &str) -> Option<Version> {
        text.split(|c: char| c.is_whitespace() || c == ',')
            .find_map(Version::parse)
    }

    /// Its pre-release (`rc.1` of `v1.37.0-rc.1+abc`), which comes before its release; `None` for
    /// a release (build metadata after `+` is no pre-release).
    fn pre_release(&self) -> Option<&str> {
        let w = self.word.strip_prefix('v').unwrap_or(&self.word);
        let w = w.split('+').next().unwrap_or_default();
        w.split_once('-').map(|(_, pre)| pre)
    }
}

/// Two pre-releases in semver's order (semver.org, item 11): identifier by identifier, numeric
/// ones by value and before alphanumeric ones, the others as ASCII text; a shorter list first
/// when it is a prefix of the longer. (`rc.10` after `rc.9`, `alpha` before `alpha.1`.)
fn cmp_pre_release(a: &str, b: &str) -> Ordering {
    let number = |id: &str| {
        (!id.is_empty() && id.bytes().all(|c| c.is_ascii_digit()))
            .then(|| id.parse::<u128>().ok())
            .flatten()
    };
    let (mut a, mut b) = (a.split('.'), b.split('.'));
    loop {
        let order = match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => match (number(x), number(y)) {
                (Some(m), Some(n)) => m.cmp(&n),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => x.cmp(y),
            },
        };
        if order != Ordering::Equal {
            return order;
        }
    }
}

impl Ord for Version {
    /// By number, then a pre-release before its release, pre-releases in semver's order.
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre_release(), other.pre_release()) {
                (None, None) => Ordering::Equal,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(a), Some(b)) => cmp_pre_release(a, b),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.word)
    }
}

/// Why going from one version to another is not an upgrade kubeunit makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Downgrade,
    /// More than one minor at once (upstream: "skipping MINOR versions when upgrading is
    /// unsupported"; etcd: "upgrade only one minor release at a time").
    SkippedMinor,
    /// Another major.
    OtherMajor,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::Downgrade => "is a downgrade",
            Refusal::SkippedMinor => "skips a minor version",
            Refusal::OtherMajor => "changes the major version",
        })
    }
}

/// Going from `running` to `target`: `None` when it is the same version or an upgrade by at most
/// one minor (any patch), the steps upstream's version skew policy supports.
pub fn refusal(running: &Version, target: &Version) -> Option<Refusal> {
    if target.major != running.major {
        return Some(Refusal::OtherMajor);
    }
    if target < running {
        return Some(Refusal::Downgrade);
    }
    (target.minor > running.minor + 1).then_some(Refusal::SkippedMinor)
}

/// Where `version` of a component stands against kube-apiserver's `api` when upstream's version
/// skew policy allows it `skew` (by minor version: any patch goes): `None` inside, else what is
/// wrong (`2 minor versions older than`).
pub fn skew_refusal(version: &Version, api: &Version, skew: Skew) -> Option<String> {
    if version.major != api.major {
        return Some("of another major version than".into());
    }
    let (minor, api_minor) = (version.minor, api.minor);
    let says = |n: u64, way: &str, allowed: u64| {
        let s = if n == 1 { "" } else { "s" };
        Some(format!(
            "{n} minor version{s} {way} than (upstream's version skew policy allows {allowed})"
        ))
    };
    if minor > api_minor + skew.newer {
        return says(minor - api_minor, "newer", skew.newer);
    }
    if minor + skew.older < api_minor {
        return says(api_minor - minor, "older", skew.older);
    }
    None
}

/// A command line's leading arguments: those before its first flag (a multi-call binary's
/// component, as `preflight` asks it).
pub fn leading(argv: &[String]) -> Vec<String> {
    argv.iter()
        .skip(1)
        .take_while(|a| !a.starts_with('-'))
        .cloned()
        .collect()
}

/// What the binary at `path` (with its leading arguments: a multi-call binary's component) is:
/// its build info's release when its main module is `module`, else what `--version` prints. The
/// error says why there is no answer (it cannot be run, or printed no version).
pub fn of_binary(path: &Path, leading: &[String], module: &str) -> Result<Version, String> {
    if let Some(release) = build_release(path, module).and_then(|r| Version::parse(&r)) {
        return Ok(release);
    }
    let text = version_output(path, leading)?;
    Version::find_in(&text).ok_or_else(|| {
        format!(
            "`--version` printed no version: {:?}",
            text.lines().next().unwrap_or("").trim()
        )
    })
}

/// The release the binary at `path` was built as, from its Go build info, when its main module is
/// `module` (what `--version` would print, without starting the binary).
pub fn build_release(path: &Path, module: &str) -> Option<String> {
    build_info::main_module(path)
        .filter(|m| !module.is_empty() && m.path == module)
        .and_then(|m| m.release().map(String::from))
}

/// What `PATH LEADING... --version` prints, stdout then stderr; the error when it cannot run.
pub fn version_output(path: &Path, leading: &[String]) -> Result<String, String> {
    let out = std::process::Command::new(path)
        .args(leading)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run it: {e}"))?;
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// What the process `pid` runs: its executable as it was started (`/proc/PID/exe` is that file
/// even when another has been put at its path since).
pub fn of_process(pid: u32, leading: &[String], module: &str) -> Result<Version, String> {
    of_binary(Path::new(&format!("/proc/{pid}/exe")), leading, module)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(word: &str) -> Version {
        Version::parse(word).unwrap_or_else(|| panic!("{word}"))
    }

    #[test]
    fn versions_are_found_in_what_binaries_print() {
        assert_eq!(
            Version::find_in("Kubernetes v1.36.3\n").unwrap().word,
            "v1.36.3"
        );
        let etcd = "etcd Version: 3.6.16\nGit SHA: Not provided\nGo Version: go1.24.9\n";
        assert_eq!(Version::find_in(etcd).unwrap().word, "3.6.16");
        assert_eq!(
            Version::find_in("containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7")
                .unwrap()
                .word,
            "v2.1.4"
        );
        for none in [
            "",
            "Kubernetes v1.36",
            "v1.36.3.4",
            "1..2",
            "go1.24.9",
            "v-1.2.3",
        ] {
            assert_eq!(Version::find_in(none), None, "{none}");
        }
    }

    #[test]
    fn versions_order_as_semver_does() {
        assert!(v("v1.36.3") > v("v1.35.4"));
        assert!(v("v1.36.10") > v("v1.36.9"));
        assert!(v("v1.37.0-rc.1") < v("v1.37.0"));
        assert!(v("v1.37.0-rc.2") > v("v1.37.0-rc.1"));
        assert!(v("v1.37.0-alpha.1") > v("v1.36.3"));
        // Pre-releases identifier by identifier, numbers by value (not as text: rc.10 > rc.9).
        assert!(v("v1.37.0-rc.10") > v("v1.37.0-rc.9"));
        assert!(v("v1.37.0-beta.0") > v("v1.37.0-alpha.3"));
        assert!(v("v1.37.0-alpha") < v("v1.37.0-alpha.1"));
        assert!(v("v1.37.0-alpha.1") < v("v1.37.0-alpha.beta"));
        assert!(v("v1.37.0-rc.1+abc") < v("v1.37.0"));
        assert_eq!(
            v("v1.37.0-rc.1+abc").cmp(&v("v1.37.0-rc.1")),
            Ordering::Equal
        );
        assert_eq!(v("1.36.3").cmp(&v("v1.36.3")), Ordering::Equal);
        // Build metadata is not a pre-release.
        assert_eq!(v("v1.36.3+abc").cmp(&v("v1.36.3")), Ordering::Equal);
    }

    #[test]
    fn the_skew_policy_allows_one_minor_up_and_any_patch() {
        for (from, to) in [
            ("v1.35.4", "v1.36.3"),
            ("v1.35.4", "v1.35.9"),
            ("v1.36.3", "v1.36.3"),
            ("v1.36.3", "v1.37.0-rc.1"),
            ("v1.37.0-rc.9", "v1.37.0-rc.10"),
            ("3.5.21", "3.6.16"),
        ] {
            assert_eq!(refusal(&v(from), &v(to)), None, "{from} -> {to}");
        }
        for (from, to, why) in [
            ("v1.36.3", "v1.35.4", Refusal::Downgrade),
            ("v1.36.3", "v1.36.2", Refusal::Downgrade),
            ("v1.37.0", "v1.37.0-rc.1", Refusal::Downgrade),
            ("v1.34.2", "v1.36.3", Refusal::SkippedMinor),
            ("v1.36.3", "v2.0.0", Refusal::OtherMajor),
            ("v1.36.3", "v0.36.3", Refusal::OtherMajor),
        ] {
            assert_eq!(refusal(&v(from), &v(to)), Some(why), "{from} -> {to}");
        }
    }

    #[test]
    fn skew_is_by_minor_version_both_ways() {
        let kubelet = Skew { older: 3, newer: 0 };
        let api = v("v1.36.0");
        // Any patch, older or newer, and up to three minors behind.
        for ok in ["v1.36.3", "v1.36.0", "v1.35.9", "v1.33.0", "v1.36.0-rc.1"] {
            assert_eq!(skew_refusal(&v(ok), &api, kubelet), None, "{ok}");
        }
        for (bad, says) in [
            (
                "v1.37.0",
                "1 minor version newer than (upstream's version skew policy allows 0)",
            ),
            (
                "v1.32.9",
                "4 minor versions older than (upstream's version skew policy allows 3)",
            ),
            ("v2.36.0", "of another major version than"),
        ] {
            assert_eq!(
                skew_refusal(&v(bad), &api, kubelet).as_deref(),
                Some(says),
                "{bad}"
            );
        }
        let controller = Skew { older: 1, newer: 0 };
        assert_eq!(skew_refusal(&v("v1.35.4"), &api, controller), None);
        assert!(skew_refusal(&v("v1.34.4"), &api, controller).is_some());
    }

    #[test]
    fn a_binary_is_asked_its_version_and_a_silent_one_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str, body: &str| {
            use std::os::unix::fs::PermissionsExt;
            let p = dir.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let kubelet = script(
            "kubelet",
            r#"[ "$1 $2" = "kubelet --version" ] && echo "Kubernetes v1.36.3""#,
        );
        assert_eq!(
            of_binary(&kubelet, &["kubelet".into()], "k8s.io/kubernetes")
                .unwrap()
                .word,
            "v1.36.3"
        );
        let silent = script("silent", "echo no idea");
        assert!(of_binary(&silent, &[], "").unwrap_err().contains("no idea"));
        let err = of_binary(&dir.path().join("missing"), &[], "").unwrap_err();
        assert!(err.starts_with("cannot run it"), "{err}");
    }
}
