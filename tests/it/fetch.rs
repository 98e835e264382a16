//! `kubeunit fetch` against the simulated internet (common::internet: an HTTPS file server in a
//! network namespace of its own, under a test CA that SSL_CERT_FILE names), serving release
//! downloads made from the binaries built here, each in its project's layout and checksum format
//! (common::releases). Every file fetched equals what was published, a second fetch asks nothing,
//! a changed cache is caught, each kind of broken download is refused with the cache left as it
//! was, two fetches at once download once, and dev comes up from the fetched set with no binDir.
//! Nothing leaves this host: the default-route interface's packet counter reads 0.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::container::{offline_images, Container, Env};
use crate::common::internet::{push_archive, Fault, Internet, Site};
use crate::common::ports::Ports;
use crate::common::releases::{self, BASES, K8S_BINARIES};
use crate::common::*;

/// A cache and the simulated mirror it fetches from.
struct Mirror {
    net: Internet,
    cache: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Mirror {
    fn start(slot: u8) -> Mirror {
        let net = Internet::start(slot);
        releases::link_into(&net.docroot());
        let tmp = tempfile::tempdir().unwrap();
        Mirror {
            net,
            cache: tmp.path().join("cache"),
            _tmp: tmp,
        }
    }

    /// `kubeunit fetch --profile PROFILE ARGS...` from this mirror (profile keys) into the cache.
    fn command(&self, profile: &str, args: &[&str]) -> Command {
        let mut cmd = kubeunit();
        cmd.args(["fetch", "--profile", profile])
            .args(releases::mirror_sets(&self.net.files_url()))
            .args(args)
            .env("KUBEUNIT_CACHE_DIR", &self.cache)
            .env("SSL_CERT_FILE", self.net.ca_pem())
            .env("KUBEUNIT_FETCH_TIMEOUT", "5")
            // Online, toward the simulated internet only (scripts/test.sh exports 1).
            .env("KUBEUNIT_OFFLINE", "0");
        for (source, _) in BASES {
            for var in ["MIRROR", "CHECKSUMS"] {
                cmd.env_remove(format!(
                    "KUBEUNIT_{var}_{}",
                    source.to_uppercase().replace('-', "_")
                ));
            }
        }
        cmd
    }

    fn fetch(&self, profile: &str, args: &[&str]) -> Output {
        run(&mut self.command(profile, args))
    }

    /// The path of a release file below the mirror's root, and its URL path.
    fn file(&self, source: &str, rel: &str) -> (PathBuf, String) {
        let base = BASES.iter().find(|(s, _)| *s == source).unwrap().1;
        let url_path = format!("/{base}/{rel}");
        (self.net.docroot().join(&url_path[1..]), url_path)
    }

    /// Set dirs and staging dirs in the cache.
    fn sets(&self) -> Vec<String> {
        let mut found = Vec::new();
        for sub in ["bin", "tmp"] {
            if let Ok(entries) = std::fs::read_dir(self.cache.join(sub)) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    // A set's lock file stays (empty; the kernel holds the lock).
                    if !name.ends_with(".lock") {
                        found.push(format!("{sub}/{name}"));
                    }
                }
            }
        }
        found.sort();
        found
    }
}

fn k8s() -> String {
    pinned("KUBERNETES_VERSIONS")[0].clone()
}

fn etcd_archive() -> String {
    let v = pinned("ETCD_VERSION")[0].clone();
    format!("{v}/etcd-{v}-linux-amd64.tar.gz")
}

/// Each file of each fetched set equals the built file it was made from.
fn assert_same_as_built(cache: &Path) {
    let bin = cache.join("bin");
    let mut checked = 0;
    for e in std::fs::read_dir(&bin).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((source, _)) = BASES
            .iter()
            .find(|(s, _)| name.strip_prefix(s).is_some_and(|v| v.starts_with("-v")))
        else {
            continue;
        };
        for f in std::fs::read_dir(e.path()).unwrap().flatten() {
            let file = f.file_name().to_string_lossy().into_owned();
            if file.starts_with('.') {
                continue;
            }
            let built = releases::built_file(source, &file);
            assert!(
                std::fs::read(f.path()).unwrap() == std::fs::read(&built).unwrap(),
                "{} differs from {}",
                f.path().display(),
                built.display()
            );
            let mode =
                std::os::unix::fs::PermissionsExt::mode(&f.metadata().unwrap().permissions());
            assert_eq!(mode & 0o777, 0o755, "{}", f.path().display());
            checked += 1;
        }
    }
    assert!(checked > 0, "no fetched file in {}", bin.display());
}

#[test]
fn a_fetch_checks_every_file_and_a_second_asks_nothing() {
    let m = Mirror::start(7);
    let out = m.fetch("control-plane", &["-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sets: Vec<(String, bool)> = json["sets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source"].as_str().unwrap().to_string(),
                s["cached"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sets,
        [
            ("kubernetes".to_string(), false),
            ("etcd".to_string(), false)
        ]
    );
    assert_same_as_built(&m.cache);
    // Each file was asked for once, after its checksum file.
    let asked = m.net.file_requests();
    for b in K8S_BINARIES {
        let (_, file) = m.file("kubernetes", &format!("{}/bin/linux/amd64/{b}", k8s()));
        let sums = format!("{file}.sha256");
        let at = |p: &str| asked.iter().position(|r| r == p);
        assert!(
            at(&sums) < at(&file) && at(&file).is_some(),
            "{file}: {asked:?}"
        );
        assert_eq!(asked.iter().filter(|r| **r == file).count(), 1, "{asked:?}");
    }
    // A second fetch finds both sets, checks them and asks nothing.
    let before = asked.len();
    let out = m.fetch("control-plane", &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("cached"), "{}", text(&out));
    assert_eq!(
        m.net.file_requests().len(),
        before,
        "{:?}",
        m.net.file_requests()
    );

    // A set from another origin (as a mirror's would be, here the stamp says so) or of another
    // architecture is not "in the cache": fetched again, saying why, and replaced in place.
    let stamp_path = m.cache.join(format!("bin/kubernetes-{}/.fetched", k8s()));
    let stamp_text = std::fs::read_to_string(&stamp_path).unwrap();
    let mut stamp: serde_json::Value = serde_json::from_str(&stamp_text).unwrap();
    let base = stamp["base"].as_str().unwrap().to_string();
    assert!(base.starts_with("https://"), "{stamp_text}");
    assert_eq!(stamp["arch"], "amd64", "{stamp_text}");
    for (field, value, says) in [
        (
            "base",
            "https://mirror.example/kubernetes",
            "it came from https://mirror.example/kubernetes, not ",
        ),
        (
            "arch",
            "arm64",
            "it holds arm64 binaries, this host runs amd64",
        ),
    ] {
        stamp[field] = value.into();
        std::fs::write(&stamp_path, stamp.to_string()).unwrap();
        let asked_before = m.net.file_requests().len();
        let out = m.fetch("control-plane", &[]);
        let t = text(&out);
        assert!(out.status.success(), "{field}: {t}");
        assert!(
            t.contains(says) && t.contains("fetching it again"),
            "{field}: {t}"
        );
        assert!(
            m.net.file_requests().len() > asked_before,
            "{field}: nothing asked again"
        );
        let now: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stamp_path).unwrap()).unwrap();
        assert_eq!(
            (now["base"].as_str(), now["arch"].as_str()),
            (Some(base.as_str()), Some("amd64"))
        );
        stamp = now;
        assert_same_as_built(&m.cache);
    }
    assert_eq!(
        m.sets().iter().filter(|s| s.starts_with("tmp/")).count(),
        0,
        "the replaced set stays in tmp/: {:?}",
        m.sets()
    );

    // A cached binary changed: refused (exit 2) naming it and the fix; --refresh restores it.
    let kubelet = m.cache.join(format!("bin/kubernetes-{}/kubelet", k8s()));
    let mut bytes = std::fs::read(&kubelet).unwrap();
    bytes.extend_from_slice(b"changed");
    std::fs::write(&kubelet, bytes).unwrap();
    let out = m.fetch("control-plane", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains(&kubelet.display().to_string()) && t.contains("--refresh"),
        "{t}"
    );
    let out = m.fetch("control-plane", &["--refresh"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_same_as_built(&m.cache);
    // A link in a binary's place (even to the same bytes) and a missing binary: refused alike.
    std::fs::remove_file(&kubelet).unwrap();
    std::os::unix::fs::symlink(releases::built_file("kubernetes", "kubelet"), &kubelet).unwrap();
    let out = m.fetch("control-plane", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no longer a regular file"),
        "{}",
        text(&out)
    );
    std::fs::remove_file(&kubelet).unwrap();
    let out = m.fetch("control-plane", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&kubelet.display().to_string()),
        "{}",
        text(&out)
    );
    let out = m.fetch("control-plane", &["--refresh"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_same_as_built(&m.cache);
    assert_eq!(
        m.sets().iter().filter(|s| s.starts_with("tmp/")).count(),
        0,
        "{:?}",
        m.sets()
    );
    a_lying_mirror_is_only_a_location(&m);
    assert_eq!(m.net.packets_out(), 0, "packets left by the default route");
}

/// A mirror that lies: etcd's archive changed (a gzip member more: it still unpacks to the same
/// files), with a checksum file that matches it. Its checksum file is not taken: the checksums come
/// from the release page (here the copy mirror_sets trusts, `fetch.checksums`), and the set is
/// refused, the cached one kept. Only when the user names the mirror's own checksum files as
/// trusted is its archive taken.
fn a_lying_mirror_is_only_a_location(m: &Mirror) {
    use sha2::Digest;
    use std::io::Write;
    let etcd_v = pinned("ETCD_VERSION")[0].clone();
    let base = BASES.iter().find(|(s, _)| *s == "etcd").unwrap().1;
    let (true_base, _) = m.file("etcd", "");
    let evil_base = m.net.docroot().join("evil").join(base);
    std::fs::create_dir_all(evil_base.parent().unwrap()).unwrap();
    let out = Command::new("cp")
        .arg("-al")
        .arg(&true_base)
        .arg(&evil_base)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp -al: {}", text(&out));
    let archive = etcd_archive();
    let mut lie = std::fs::read(true_base.join(&archive)).unwrap();
    let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    member.write_all(b"a lie").unwrap();
    lie.extend(member.finish().unwrap());
    releases::replace(&evil_base.join(&archive), &lie);
    let name = archive.rsplit('/').next().unwrap();
    let sums_path = evil_base.join(format!("{etcd_v}/SHA256SUMS"));
    let sums: String = std::fs::read_to_string(&sums_path)
        .unwrap()
        .lines()
        .map(|l| match l.ends_with(name) {
            true => format!("{}  {name}\n", hex::encode(sha2::Sha256::digest(&lie))),
            false => format!("{l}\n"),
        })
        .collect();
    releases::replace(&sums_path, sums.as_bytes());
    let evil = format!("{}/evil/{base}", m.net.files_url());
    let cached_etcd = || {
        std::fs::read_dir(m.cache.join("bin"))
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("etcd-v"))
            .map(|e| std::fs::read(e.path().join("etcd")).unwrap())
    };
    let before = cached_etcd();
    let mirror = format!("fetch.mirrors.etcd={evil}");
    let out = m.fetch("control-plane", &["--set", &mirror]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "the lying mirror: {t}");
    let true_sums = format!("{}/{base}/{etcd_v}/SHA256SUMS", m.net.files_url());
    assert!(t.contains(&true_sums) && t.contains("says"), "{t}");
    assert_eq!(cached_etcd(), before, "the cached etcd changed");
    let asked_evil_sums = || {
        m.net
            .file_requests()
            .iter()
            .filter(|r| r.ends_with(&format!("/evil/{base}/{etcd_v}/SHA256SUMS")))
            .count()
    };
    assert_eq!(
        asked_evil_sums(),
        0,
        "the mirror's checksum file was asked for"
    );
    // The user trusts the mirror's checksum files (KUBEUNIT_CHECKSUMS_ETCD would say the same): taken.
    let trusted = format!("fetch.checksums.etcd={evil}");
    let out = m.fetch("control-plane", &["--set", &mirror, "--set", &trusted]);
    assert!(out.status.success(), "the mirror trusted: {}", text(&out));
    assert_eq!(asked_evil_sums(), 1);
}

/// One broken download: what the mirror does wrong, the exit code, and words the error must have.
struct Case {
    name: &'static str,
    exit: i32,
    words: &'static [&'static str],
}

#[test]
fn each_broken_download_is_refused_and_leaves_the_cache_as_it_was() {
    let m = Mirror::start(8);
    let (sums, _) = m.file("etcd", &format!("{}/SHA256SUMS", pinned("ETCD_VERSION")[0]));
    let (_, archive) = m.file("etcd", &etcd_archive());
    let (apiserver_sums, apiserver_sums_url) = m.file(
        "kubernetes",
        &format!("{}/bin/linux/amd64/kube-apiserver.sha256", k8s()),
    );
    let (_, scheduler) = m.file(
        "kubernetes",
        &format!("{}/bin/linux/amd64/kube-scheduler", k8s()),
    );
    let original = |p: &Path| std::fs::read(p).unwrap();
    let sums_text = original(&sums);
    let apiserver_sums_text = original(&apiserver_sums);
    let cases = [
        // etcd comes after Kubernetes: its six binaries were downloaded and checked, and still
        // nothing of them is left.
        Case {
            name: "wrong checksum",
            exit: 2,
            words: &["etcd-v", "sha256", "says", "fix: use another mirror"],
        },
        Case {
            name: "truncated",
            exit: 1,
            words: &["truncated", "fix: run kubeunit fetch again"],
        },
        Case {
            name: "404",
            exit: 2,
            words: &["kube-scheduler", "HTTP 404", "fix: check the version"],
        },
        Case {
            name: "hang",
            exit: 1,
            words: &["kube-apiserver.sha256", "no answer in time", "fix:"],
        },
        // A byte every 29 s keeps every read inside --timeout 30; the file's deadline ends it.
        Case {
            name: "trickle",
            exit: 1,
            words: &["etcd-", "not downloaded within 40 s", "--deadline", "fix:"],
        },
        Case {
            name: "missing checksum file",
            exit: 2,
            words: &["kube-apiserver.sha256", "not there", "cannot check", "fix:"],
        },
    ];
    for case in &cases {
        match case.name {
            "wrong checksum" => {
                let text = String::from_utf8(sums_text.clone()).unwrap();
                let wrong: String = text
                    .lines()
                    .map(|l| {
                        if l.ends_with(".tar.gz") && l.contains("linux-amd64") {
                            format!(
                                "{}  {}\n",
                                "e".repeat(64),
                                l.split_whitespace().nth(1).unwrap()
                            )
                        } else {
                            format!("{l}\n")
                        }
                    })
                    .collect();
                releases::replace(&sums, wrong.as_bytes());
            }
            "truncated" => m.net.fault(&archive, Fault::Truncate),
            "trickle" => m.net.fault(&archive, Fault::Trickle(29)),
            "404" => m.net.fault(&scheduler, Fault::NotFound),
            "hang" => m.net.fault(&apiserver_sums_url, Fault::Hang),
            "missing checksum file" => std::fs::remove_file(&apiserver_sums).unwrap(),
            _ => unreachable!(),
        }
        let args: &[&str] = match case.name {
            "trickle" => &["--timeout", "30", "--deadline", "40"],
            _ => &[],
        };
        let out = m.fetch("control-plane", args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(case.exit), "{}: {t}", case.name);
        for w in case.words {
            assert!(t.contains(w), "{}: no {w:?} in:\n{t}", case.name);
        }
        assert!(!t.contains("panicked"), "{t}");
        assert_eq!(
            m.sets(),
            Vec::<String>::new(),
            "{}: the cache changed",
            case.name
        );
        // Undo it for the next case.
        releases::replace(&sums, &sums_text);
        releases::replace(&apiserver_sums, &apiserver_sums_text);
        for path in [&archive, &scheduler, &apiserver_sums_url] {
            m.net.fault(path, Fault::None);
        }
    }
    // The mirror mended, the same cache takes the sets.
    let out = m.fetch("control-plane", &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_same_as_built(&m.cache);
    assert_eq!(m.net.packets_out(), 0, "packets left by the default route");
}

#[test]
fn two_fetches_at_once_download_each_file_once() {
    let m = Mirror::start(9);
    let children: Vec<_> = (0..2)
        .map(|_| {
            m.command("control-plane", &[])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let asked = m.net.file_requests();
    let (_, kubelet) = m.file("kubernetes", &format!("{}/bin/linux/amd64/kubelet", k8s()));
    assert_eq!(
        asked.iter().filter(|r| **r == kubelet).count(),
        1,
        "{asked:?}"
    );
    assert_same_as_built(&m.cache);
    assert_eq!(m.net.packets_out(), 0, "packets left by the default route");
}

#[test]
fn a_fetch_killed_midway_leaves_no_set_and_the_next_one_completes() {
    let m = Mirror::start(11);
    // etcd's archive hangs: the fetch has staged Kubernetes and waits there, to be killed.
    let (_, archive) = m.file("etcd", &etcd_archive());
    m.net.fault(&archive, Fault::Hang);
    let mut child = m
        .command("control-plane", &[])
        .env("KUBEUNIT_FETCH_TIMEOUT", "600")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        "the fetch to ask for etcd's archive",
        std::time::Duration::from_secs(120),
        || m.net.file_requests().contains(&archive),
    );
    let staged = m.sets();
    assert!(
        staged.iter().any(|s| s.starts_with("tmp/kubernetes-")),
        "{staged:?}"
    );
    // A second fetch meanwhile waits for the first's lock, and says whose.
    let said = m.cache.with_file_name("second-fetch.err");
    let mut second = m
        .command("control-plane", &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    let holder = format!("another fetch (PID {})", child.id());
    wait_for(
        "the second fetch to say whose lock it waits for",
        std::time::Duration::from_secs(60),
        || std::fs::read_to_string(&said).is_ok_and(|t| t.contains(&holder)),
    );
    second.kill().unwrap();
    second.wait().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !m.sets().iter().any(|s| s.starts_with("bin/")),
        "a killed fetch put a set in place: {:?}",
        m.sets()
    );
    // The next fetch removes what the killed one staged, and completes.
    m.net.fault(&archive, Fault::None);
    let out = m.fetch("control-plane", &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_same_as_built(&m.cache);
    assert_eq!(
        m.sets().iter().filter(|s| s.starts_with("tmp/")).count(),
        0,
        "{:?}",
        m.sets()
    );
    assert_eq!(m.net.packets_out(), 0, "packets left by the default route");
}

/// Arguments, environment, and what the error must say.
type BadInput = (Vec<String>, Vec<(&'static str, String)>, &'static str);

#[test]
fn bad_input_is_refused_before_any_request() {
    let m = Mirror::start(12);
    let file = m.cache.with_file_name("a-file");
    std::fs::write(&file, "").unwrap();
    let huge = "9".repeat(40);
    let long_url = format!("--mirror=etcd=https://x.invalid/{}", "a".repeat(100_000));
    let cases: Vec<BadInput> = vec![
        (vec!["--timeout".into(), huge.clone()], vec![], "--timeout"),
        (
            vec![],
            vec![("KUBEUNIT_FETCH_TIMEOUT", huge.clone())],
            "--timeout",
        ),
        (vec!["--deadline".into(), "0".into()], vec![], "--deadline"),
        (
            vec![],
            vec![("KUBEUNIT_FETCH_DEADLINE", huge)],
            "--deadline",
        ),
        (
            vec!["--mirror".into(), "nope=https://x.invalid".into()],
            vec![],
            "no such source",
        ),
        (
            vec!["--mirror".into(), "etcd=http://x.invalid".into()],
            vec![],
            "https://",
        ),
        (
            vec!["--mirror".into(), "etcd=https://x.invalid/a\nb".into()],
            vec![],
            "https://",
        ),
        (
            vec![long_url.replace("https://", "ftp://")],
            vec![],
            "https://",
        ),
        (
            vec!["--set".into(), "versions.kubernetes=v1.36.3/../../x".into()],
            vec![],
            "not a release version",
        ),
        (
            vec!["--set".into(), "versions.etcd=3.5".into()],
            vec![],
            "names no release",
        ),
        (
            vec!["--set".into(), "fetch.mirrors.etcd=https://a b".into()],
            vec![],
            "fetch.mirrors.etcd",
        ),
        (
            vec![
                "--set".into(),
                "fetch.checksums.etcd=http://sums.invalid".into(),
            ],
            vec![],
            "fetch.checksums.etcd",
        ),
        (
            vec![],
            vec![("KUBEUNIT_CHECKSUMS_ETCD", "ftp://sums.invalid".into())],
            "KUBEUNIT_CHECKSUMS_ETCD",
        ),
        (
            vec!["--cache-dir".into(), file.display().to_string()],
            vec![],
            "not a directory",
        ),
        (
            vec![],
            vec![("SSL_CERT_FILE", file.display().to_string())],
            "SSL_CERT_FILE",
        ),
        // Offline stays offline: fetch asks nothing.
        (
            vec![],
            vec![("KUBEUNIT_OFFLINE", "1".into())],
            "offline (KUBEUNIT_OFFLINE=1)",
        ),
        (
            vec!["--set".into(), "offline=true".into()],
            vec![],
            "offline (the profile's offline: true)",
        ),
    ];
    for (args, env, words) in cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = m.command("control-plane", &argv);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = run(&mut cmd);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {t}");
        assert!(t.contains(words), "{args:?} {env:?}: no {words:?} in {t}");
        assert!(!t.contains("panicked"), "{t}");
    }
    assert_eq!(m.net.file_requests(), Vec::<String>::new());
    assert_eq!(m.sets(), Vec::<String>::new());
    assert_eq!(m.net.packets_out(), 0, "packets left by the default route");
}

#[test]
fn the_pinned_releases_are_the_versions_the_tests_build() {
    // fetch downloads what the suite is run against (scripts/versions.env builds the same).
    let out = run(kubeunit().args(["fetch", "--help"]));
    assert!(out.status.success());
    for (source, key) in [
        ("kubernetes", "KUBERNETES_VERSIONS"),
        ("etcd", "ETCD_VERSION"),
        ("containerd", "CONTAINERD_VERSION"),
        ("runc", "RUNC_VERSION"),
        ("cni-plugins", "CNI_PLUGINS_VERSION"),
        ("registry", "REGISTRY_VERSION"),
    ] {
        let s = kubeunit::fetch::sources::find(source).unwrap();
        assert_eq!(s.version, pinned(key)[0], "{source}");
    }
}

#[test]
fn dev_comes_up_from_the_fetched_binaries() {
    // A connected machine, simulated: the binaries come from the release mirror, pause and CoreDNS
    // from registry.k8s.io's stand-in and "nginx" from docker.io's, through the node's caches. No
    // image archive is given.
    let _turn = node_lock();
    let m = Mirror::start(10);
    let k8s_io = m.net.registry_on(Site::Registry, None);
    let hub = m.net.registry_on(Site::DockerHub, None);
    let agent = m.net.agent(std::time::Duration::from_secs(60));
    for archive in offline_images() {
        let (registry, repo, tag) = match Path::new(&archive).file_stem().and_then(|s| s.to_str()) {
            Some("pause") => (
                &k8s_io,
                "pause".to_string(),
                pinned("PAUSE_IMAGE")[0]
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .to_string(),
            ),
            Some("coredns") => (
                &k8s_io,
                "coredns/coredns".to_string(),
                pinned("COREDNS_VERSION")[0].clone(),
            ),
            // The busybox test image stands in for docker.io's nginx.
            _ => (&hub, "library/nginx".to_string(), "latest".to_string()),
        };
        push_archive(&agent, registry, &repo, &tag, Path::new(&archive), None);
    }
    let c = Container::boot_node("fetch-dev");
    let cache = c.work.join("cache");
    let ca = c.work.join("sim-ca.pem");
    std::fs::copy(m.net.ca_pem(), &ca).unwrap();
    let profile = c.work.join("connected.yaml");
    std::fs::write(
        &profile,
        format!(
            "extends: dev\nregistries:\n  mirrors:\n    docker.io: {{endpoint: [https://{hub}]}}\n    registry.k8s.io: {{endpoint: [https://{k8s_io}]}}\n  configs:\n    {hub}: {{tls: {{caFile: {ca}}}}}\n    {k8s_io}: {{tls: {{caFile: {ca}}}}}\n",
            ca = ca.display()
        ),
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_kubeunit");
    let cache_env = format!("KUBEUNIT_CACHE_DIR={}", cache.display());
    let ports = Ports::allocate();
    let state = c.work.join("dev");
    // Online (the harness's containers are offline otherwise), toward the simulated internet only.
    let mut argv: Vec<String> = [&cache_env, exe, "gen", "--profile"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.push(profile.display().to_string());
    argv.push("--state-dir".into());
    argv.push(state.display().to_string());
    argv.extend(ports.sets());
    // CoreDNS answers for the cluster only.
    argv.extend(["--set".to_string(), "addons.corednsForward=".into()]);
    // `offline` is KUBEUNIT_OFFLINE's value for this gen; its output.
    let gen_with = |offline: &str, extra: &[String]| {
        let switch = format!("KUBEUNIT_OFFLINE={offline}");
        let mut all: Vec<&str> = vec!["env", &switch];
        all.extend(argv.iter().map(String::as_str));
        all.extend(extra.iter().map(String::as_str));
        let out = c.run(&all);
        assert!(out.status.success(), "gen ({switch}): {}", text(&out));
        text(&out)
    };
    let gen = || {
        gen_with("0", &[]);
    };
    let env = Env {
        c: &c,
        state: state.clone(),
        kubectl: cache.join(format!("bin/kubernetes-{}/kubectl", k8s())),
    };

    // Nothing fetched yet: start names the missing binary and `kubeunit fetch`, and starts nothing.
    gen();
    let out = env.ku(&["start", "--timeout", "60"]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains(&cache.display().to_string()) && t.contains("kubeunit fetch"),
        "{t}"
    );
    assert_eq!(
        c.list_units(&format!("{}*", unit_prefix(&state))),
        "",
        "nothing started"
    );

    // Then README.md's connected quick start, command by command, against the simulated internet:
    // a command this test does not know how to follow fails it, so the README cannot drift.
    let mut fetched = String::new();
    let mut started = String::new();
    let t0 = std::time::Instant::now();
    for line in readme_connected_quick_start() {
        match line.as_str() {
            // The kubeunit under test is this build.
            "cargo install --path ." => {}
            // From the release mirror, on this host into the container's cache.
            "kubeunit fetch" => {
                let out = run(m.command("dev", &[]).env("KUBEUNIT_CACHE_DIR", &cache));
                assert!(out.status.success(), "fetch: {}", text(&out));
                fetched = text(&out);
                assert_same_as_built(&cache);
            }
            // dev with the simulated registries as its mirrors (connected.yaml extends dev).
            "kubeunit gen --profile dev && kubeunit start" => {
                gen();
                let unit = std::fs::read_to_string(
                    state.join("units").join(unit(&state, "kube-apiserver")),
                )
                .unwrap();
                assert!(
                    unit.contains(&format!("ExecStart={}/bin/kubernetes-", cache.display())),
                    "{unit}"
                );
                let out = env.ku(&["start", "--timeout", "180"]);
                started = text(&out);
                assert!(out.status.success(), "start: {started}");
                assert!(
                    started.contains("CoreDNS ready behind kube-dns"),
                    "{started}"
                );
                eprintln!(
                    "from an empty cache to DNS answering: {:.1}s",
                    t0.elapsed().as_secs_f64()
                );
            }
            // As start printed it, for this state dir.
            l if l.starts_with("export KUBECONFIG=/var/lib/kubeunit/dev/") => {
                let printed = format!(
                    "export KUBECONFIG={}",
                    state.join("kubeconfig/admin.kubeconfig").display()
                );
                assert!(
                    started.contains(&printed),
                    "start did not print {printed:?}:\n{started}"
                );
            }
            // kubectl where fetch put it, in the directory its listing names.
            l if l.starts_with("export PATH=~/.cache/kubeunit/bin/kubernetes-") => {
                let dir = format!("bin/kubernetes-{}", k8s());
                assert!(
                    l.contains(&format!("/{dir}:")),
                    "README names another version: {l}"
                );
                assert!(fetched.contains(&dir), "fetch listed no {dir}:\n{fetched}");
                assert!(cache.join(&dir).join("kubectl").is_file());
            }
            "kubectl create deployment web --image=nginx" => {
                env.kubectl_ok(&["create", "deployment", "web", "--image=nginx"]);
                wait_for(
                    "the pod of docker.io's nginx Running",
                    std::time::Duration::from_secs(120),
                    || {
                        let phases = env.kubectl_ok(&[
                            "get",
                            "pods",
                            "-l",
                            "app=web",
                            "-o",
                            "jsonpath={.items[*].status.phase}",
                        ]);
                        phases == "Running"
                    },
                );
                let asked = m.net.requests(Site::DockerHub);
                assert!(
                    asked
                        .iter()
                        .any(|r| r.contains("/v2/library/nginx/manifests/latest")),
                    "{asked:?}"
                );
                // The README's lifecycle: `kubeunit list` shows it running.
                let listed = env.ku_ok(&["list", "-o", "json"]);
                assert!(listed.contains("\"status\": \"running\""), "{listed}");
            }
            "kubeunit destroy --all" => {
                // Read before destroy removes the profile.yaml it comes from.
                let prefix = unit_prefix(&state);
                env.ku_ok(&["destroy", "--all"]);
                assert!(!state.exists(), "destroy --all left {}", state.display());
                assert_eq!(c.list_units(&format!("{prefix}*")), "");
            }
            other => panic!("README.md's connected quick start has {other:?}: follow it here"),
        }
    }
    assert!(!started.is_empty(), "the quick start started nothing");
    let asked = m.net.registry_requests();
    for repo in ["/v2/pause/manifests/", "/v2/coredns/coredns/manifests/"] {
        assert!(
            asked.iter().any(|r| r.contains(repo)),
            "{repo} not pulled: {asked:?}"
        );
    }

    // README.md's offline quick start: scripts/up.sh renders dev offline with the imported images,
    // where a public image does not pull, and names one switch that makes it pull. Its gen, then
    // the switch as the README writes it, here toward the simulated internet.
    let switch = readme_offline_switch();
    let up_sh =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/up.sh"))
            .unwrap();
    assert!(
        up_sh.contains("export KUBEUNIT_OFFLINE=${KUBEUNIT_OFFLINE-1}"),
        "scripts/up.sh no longer takes KUBEUNIT_OFFLINE from its environment (offline by default)"
    );
    let images = vec![
        "--set".to_string(),
        format!("images=[{}]", offline_images().join(",")),
    ];
    gen_with("1", &images);
    let out = env.ku(&["start", "--timeout", "180"]);
    assert!(out.status.success(), "start offline: {}", text(&out));
    let asked_before = m.net.requests(Site::DockerHub).len();
    env.kubectl_ok(&["create", "deployment", "web", "--image=nginx"]);
    wait_for(
        "offline: docker.io's nginx refused a pull",
        std::time::Duration::from_secs(120),
        || {
            let waiting = env.kubectl_ok(&[
                "get",
                "pods",
                "-l",
                "app=web",
                "-o",
                "jsonpath={.items[*].status.containerStatuses[*].state.waiting.reason}",
            ]);
            waiting.contains("ErrImagePull") || waiting.contains("ImagePullBackOff")
        },
    );
    assert_eq!(
        m.net.requests(Site::DockerHub).len(),
        asked_before,
        "offline, a pull reached docker.io's stand-in"
    );
    let switched = gen_with(switch.trim_start_matches("KUBEUNIT_OFFLINE="), &images);
    assert!(switched.contains("online now"), "{switched}");
    let out = env.ku(&["start", "--timeout", "180"]);
    assert!(out.status.success(), "start after {switch}: {}", text(&out));
    // A new pod, not the old one's pull backoff (up to 5 minutes).
    env.kubectl_ok(&["delete", "pods", "-l", "app=web", "--wait=false"]);
    wait_for(
        &format!("after {switch}: docker.io's nginx Running"),
        std::time::Duration::from_secs(120),
        || {
            !env.kubectl_ok(&[
                "get",
                "pods",
                "-l",
                "app=web",
                "--field-selector=status.phase=Running",
                "-o",
                "name",
            ])
            .is_empty()
        },
    );
    assert!(m.net.requests(Site::DockerHub).len() > asked_before);
    env.ku_ok(&["destroy", "--all"]);
    assert_eq!(m.net.packets_out(), 0, "packets left by the default route");
}

/// The switch that README.md's offline quick start names for public images: the `KUBEUNIT_OFFLINE=...`
/// it writes before `scripts/up.sh`.
fn readme_offline_switch() -> String {
    let section = readme_section("Quick start, offline");
    let switch = section
        .split('`')
        .find_map(|code| code.strip_suffix(" scripts/up.sh"))
        .expect("the offline quick start names `KUBEUNIT_OFFLINE=... scripts/up.sh`");
    assert!(
        switch.starts_with("KUBEUNIT_OFFLINE=") && !switch.contains(' '),
        "{switch:?}"
    );
    switch.to_string()
}

/// The commands of README.md's connected quick start (its first shell block), comments cut.
fn readme_connected_quick_start() -> Vec<String> {
    let section = readme_section("Quick start, connected");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next());
    block
        .expect("a sh block in it")
        .lines()
        .map(|l| l.split(" #").next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// README.md's section `## TITLE`, up to the next section.
fn readme_section(title: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    readme
        .split(&format!("## {title}\n"))
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_else(|| panic!("README.md has a section \"{title}\""))
        .to_string()
}
