//! What version a binary is, and what upstream's skew policy says of going from one to another:
//! the binary's Go build info when it names its component's module at a release, else what its
//! `--version` prints (`Kubernetes v1.36.3`, `etcd Version: 3.6.16`).

use std::cmp::Ordering;
use std::fmt;
use std::path::Path;

use super::build_info;

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

    /// Whether `self` is a pre-release (`-rc.1`), which comes before its release.
    fn is_pre_release(&self) -> bool {
        self.word
            .strip_prefix('v')
            .unwrap_or(&self.word)
            .split('+')
            .next()
            .is_some_and(|w| w.contains('-'))
    }
}

impl Ord for Version {
    /// By number, then a pre-release before its release (semver; pre-releases by their text).
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.is_pre_release(), other.is_pre_release()) {
                (false, false) => Ordering::Equal,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                (true, true) => self.rest.cmp(&other.rest),
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

/// What the binary at `path` (with its leading arguments: a multi-call binary's component) is:
/// its build info's release when its main module is `module`, else what `--version` prints. The
/// error says why there is no answer (it cannot be run, or printed no version).
pub fn of_binary(path: &Path, leading: &[String], module: &str) -> Result<Version, String> {
    if let Some(release) = build_info::main_module(path)
        .filter(|m| !module.is_empty() && m.path == module)
        .and_then(|m| m.release().and_then(Version::parse))
    {
        return Ok(release);
    }
    let out = std::process::Command::new(path)
        .args(leading)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Version::find_in(&text).ok_or_else(|| {
        format!(
            "`--version` printed no version: {:?}",
            text.lines().next().unwrap_or("").trim()
        )
    })
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
