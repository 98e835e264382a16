//! Hostile input and hostile surroundings: state dirs that are not kubeunit's, manifests and trees
//! that point outside, concurrent and interrupted runs, values that try to break out of the files
//! they land in. Every refusal is checked for its exit code, its message and an unchanged state dir.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

const ADVERTISE: &str = "network.advertiseAddress=192.0.2.10";

/// `kubeunit gen --profile ci` into `dir`, with the fixed advertise address and extra args.
fn gen(dir: &Path, extra: &[&str]) -> Output {
    run(kubeunit()
        .args(["gen", "--profile", "ci", "--set", ADVERTISE, "--state-dir"])
        .arg(dir)
        .args(extra))
}

fn check(dir: &Path) -> Output {
    run(kubeunit().args(["gen", "--check", "--state-dir"]).arg(dir))
}

/// Exit code 2, every needle in the output.
fn refused(out: &Output, needles: &[&str]) {
    let t = text(out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    for n in needles {
        assert!(t.contains(n), "expected {n:?} in:\n{t}");
    }
    assert!(t.contains("fix:"), "{t}");
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Contents and modes (not mtimes) of every file below `dir`.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    snapshot(dir)
        .into_iter()
        .map(|(p, (b, m, _))| (p, b, m))
        .collect()
}

/// The CA certificate and key of `dir` belong together (openssl's reading of both).
fn ca_pair_matches(dir: &Path, name: &str) -> bool {
    let pk = run(Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(dir.join(format!("pki/{name}.key"))));
    let cert = run(Command::new("openssl")
        .args(["x509", "-pubkey", "-noout", "-in"])
        .arg(dir.join(format!("pki/{name}.crt"))));
    pk.status.success() && cert.status.success() && pk.stdout == cert.stdout
}

/// Every file below `dir` whose name marks it as temporary or as a journal.
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir)
        .into_keys()
        .filter(|p| {
            let n = p.to_string_lossy();
            n.contains(".kubeunit-tmp") || n.contains("journal")
        })
        .collect()
}

// 1. Nothing is touched before the target is known to be a state dir.

/// Puts `/`'s mode back and removes what kubeunit may have left there, should the code regress.
struct RootGuard(u32);

impl Drop for RootGuard {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions("/", std::fs::Permissions::from_mode(self.0));
        let _ = std::fs::remove_file("/.lock");
    }
}

#[test]
fn the_root_directory_is_refused_untouched() {
    let guard = RootGuard(mode(Path::new("/")));
    let before = std::fs::read_dir("/").unwrap().count();
    let out = gen(Path::new("/"), &[]);
    refused(&out, &["state dir /", "not a kubeunit state dir"]);
    assert_eq!(mode(Path::new("/")), guard.0, "/ keeps its mode");
    assert_eq!(std::fs::read_dir("/").unwrap().count(), before);
    assert!(!Path::new("/.lock").exists() && !Path::new("/pki").exists());
}

#[test]
fn shared_and_foreign_directories_are_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    // A sticky, world-writable directory holding another user's file.
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let theirs = shared.join("theirs.txt");
    std::fs::write(&theirs, "not yours").unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let before = contents(&shared);
    refused(
        &gen(&shared, &[]),
        &["not a kubeunit state dir", "theirs.txt"],
    );
    assert_eq!(mode(&shared), 0o1777);
    assert_eq!(contents(&shared), before);

    // Empty, it is still a shared directory: kubeunit would make it private.
    std::fs::remove_file(&theirs).unwrap();
    refused(&gen(&shared, &[]), &["shared directory (mode 1777)"]);
    assert_eq!(mode(&shared), 0o1777);
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);

    // An empty directory of another user.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&other, Some(65534), Some(65534)).unwrap();
    refused(&gen(&other, &[]), &["owned by uid 65534"]);
    assert_eq!(mode(&other), 0o755);
    assert_eq!(std::fs::metadata(&other).unwrap().uid(), 65534);
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 0);

    // An empty directory of ours is adopted (and made private).
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(gen(&mine, &[]).status.success());
    assert_eq!(mode(&mine), 0o700);
}

// 2. Every path stays inside the state dir.

#[test]
fn a_manifest_pointing_outside_deletes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/state");
    assert!(gen(&dir, &[]).status.success());
    let victim = tmp.path().join("x");
    std::fs::write(&victim, "keep me").unwrap();
    for evil in ["../../x", &victim.to_string_lossy()] {
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        m["files"][evil] = serde_json::json!({"sha256": "00", "mode": "0644"});
        std::fs::write(dir.join("manifest.json"), m.to_string()).unwrap();
        let before = contents(&dir);
        // A changed profile: gen would remove files the manifest lists and the tree lacks.
        refused(
            &gen(&dir, &["--set", "logging.verbosity=4"]),
            &[
                "manifest.json lists paths that are not kubeunit's files",
                evil,
            ],
        );
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me", "{evil}");
        assert_eq!(contents(&dir), before, "{evil}");
        refused(&check(&dir), &[evil]);
        // --force ignores the broken manifest and regenerates; the file outside stays.
        assert!(gen(&dir, &["--force"]).status.success());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert!(check(&dir).status.success(), "{}", text(&check(&dir)));
    }
}

#[test]
fn links_inside_the_state_dir_are_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("ca.key"), "not a key").unwrap();
    assert!(gen(&dir, &[]).status.success());
    // A linked directory where kubeunit keeps keys.
    std::fs::rename(dir.join("pki"), tmp.path().join("pki.real")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("pki")).unwrap();
    let before = contents(&dir);
    refused(&gen(&dir, &[]), &["pki is a symbolic link"]);
    refused(&check(&dir), &["pki is a symbolic link"]);
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    assert_eq!(std::fs::read(outside.join("ca.key")).unwrap(), b"not a key");
    assert_eq!(contents(&dir), before);
    // A linked key file.
    std::fs::remove_file(dir.join("pki")).unwrap();
    std::fs::rename(tmp.path().join("pki.real"), dir.join("pki")).unwrap();
    std::fs::remove_file(dir.join("pki/ca.key")).unwrap();
    std::os::unix::fs::symlink(outside.join("ca.key"), dir.join("pki/ca.key")).unwrap();
    refused(&gen(&dir, &[]), &["pki/ca.key is a symbolic link"]);
    assert_eq!(std::fs::read(outside.join("ca.key")).unwrap(), b"not a key");
}

// 3. One writer at a time.

#[test]
fn concurrent_gens_leave_one_consistent_state_dir() {
    for round in 0..3 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let spawn = || {
            kubeunit()
                .args(["gen", "--profile", "ci", "--set", ADVERTISE, "--state-dir"])
                .arg(&dir)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        assert!(a.status.success(), "{round}: {}", text(&a));
        assert!(b.status.success(), "{round}: {}", text(&b));
        for ca in ["ca", "front-proxy-ca", "etcd/ca"] {
            assert!(
                ca_pair_matches(&dir, ca),
                "{round}: {ca} cert and key differ"
            );
        }
        let out = check(&dir);
        assert!(out.status.success(), "{round}: {}", text(&out));
        let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        assert!(
            !manifest.contains(".lock"),
            "the lock is not in the manifest"
        );
        assert_eq!(mode(&dir.join(".lock")), 0o600);
    }
}

#[test]
fn a_held_lock_is_waited_for_then_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    let lock = std::fs::File::open(dir.join(".lock")).unwrap();
    lock.lock().unwrap();
    let before = contents(&dir);
    let me = format!("PID {}", std::process::id());
    let with_timeout = |args: &[&str]| {
        run(kubeunit()
            .env("KUBEUNIT_LOCK_TIMEOUT", "1")
            .args(args)
            .arg("--state-dir")
            .arg(&dir))
    };
    for args in [
        &["gen", "--profile", "ci", "--set", ADVERTISE][..],
        &["start"],
        &["stop"],
        &["restart", "etcd"],
        &["destroy", "--all"],
        &["gen", "--check"],
    ] {
        let t0 = std::time::Instant::now();
        let out = with_timeout(args);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {t}");
        assert!(
            t.contains("is locked by") && t.contains(&me) && t.contains("KUBEUNIT_LOCK_TIMEOUT"),
            "{args:?}: {t}"
        );
        assert!(t.contains("waiting for"), "{args:?} says it waits: {t}");
        assert!(
            t0.elapsed() >= std::time::Duration::from_secs(1),
            "{args:?} waited"
        );
    }
    assert_eq!(contents(&dir), before);
    // Released, the next gen goes ahead (and a bad timeout is bad input).
    drop(lock);
    assert!(gen(&dir, &[]).status.success());
    let out = run(kubeunit()
        .env("KUBEUNIT_LOCK_TIMEOUT", "soon")
        .args(["stop", "--state-dir"])
        .arg(&dir));
    refused(&out, &["KUBEUNIT_LOCK_TIMEOUT"]);
}

// 5. A gen killed at any instant is completed or repaired by the next one.

/// Kill `gen` (a first one, or a forced re-gen that replaces every key) at write step `n` in a fresh
/// state dir; the next plain gen must repair it. Returns whether the kill happened (false: `gen`
/// has fewer steps).
fn kill_then_repair(forced: bool, n: u32) -> bool {
    // On tmpfs when there is one: a gen syncs every file it writes.
    let tmp = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let dir = tmp.path().join("state");
    let extra: &[&str] = if forced {
        assert!(gen(&dir, &[]).status.success());
        &["--force"]
    } else {
        &[]
    };
    let out = run(kubeunit()
        .env("KUBEUNIT_TEST_KILL_AT", n.to_string())
        .args(["gen", "--profile", "ci", "--set", ADVERTISE, "--state-dir"])
        .arg(&dir)
        .args(extra));
    let killed = out.status.code().is_none();
    if killed && forced && n > 1 {
        // An interrupted re-gen shows in --check until the next gen.
        let out = check(&dir);
        assert_eq!(out.status.code(), Some(1), "step {n}: {}", text(&out));
    }
    let repaired = gen(&dir, &[]);
    assert!(
        repaired.status.success(),
        "forced {forced}, killed at step {n}: {}",
        text(&repaired)
    );
    assert!(
        leftovers(&dir).is_empty(),
        "step {n}: {:?}",
        leftovers(&dir)
    );
    let out = check(&dir);
    assert!(
        out.status.success(),
        "forced {forced}, step {n}: {}",
        text(&out)
    );
    assert!(ca_pair_matches(&dir, "ca"), "forced {forced}, step {n}");
    killed
}

#[test]
fn a_gen_killed_at_any_step_is_repaired_by_the_next() {
    for forced in [false, true] {
        // Every 11th step, then one by one to the last (its last renames, the manifest, the
        // journal's removal): each of the last 5 steps is killed.
        let mut last_killed = 1;
        assert!(
            kill_then_repair(forced, 1),
            "forced {forced}: step 1 not killed"
        );
        while kill_then_repair(forced, last_killed + 11) {
            last_killed += 11;
        }
        let mut steps = last_killed;
        while kill_then_repair(forced, steps + 1) {
            steps += 1;
        }
        assert!(steps > 20, "forced {forced}: a gen has only {steps} steps");
        for last in steps - 4..=steps {
            assert!(
                kill_then_repair(forced, last),
                "forced {forced}: step {last} of {steps} not killed"
            );
        }
        eprintln!("forced {forced}: {steps} steps, the last 5 and every 11th killed and repaired");
    }
}

// 4. Key material that data depends on is never dropped.

#[test]
fn encryption_and_service_account_keys_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    let key = std::fs::read(dir.join("pki/encryption.key")).unwrap();
    let sa = std::fs::read(dir.join("pki/sa.key")).unwrap();
    let off = gen(&dir, &["--set", "encryption.enabled=false"]);
    assert!(off.status.success(), "{}", text(&off));
    assert!(text(&off).contains("pki/encryption.key: kept although encryption is off"));
    assert_eq!(std::fs::read(dir.join("pki/encryption.key")).unwrap(), key);
    assert!(!dir.join("config/encryption-config.yaml").exists());
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("\"pki/encryption.key\""));
    assert!(check(&dir).status.success(), "{}", text(&check(&dir)));
    // Back on: the same key encrypts again. Another algorithm keeps the service-account key.
    assert!(gen(&dir, &["--set", "pki.algorithm=rsa-2048"])
        .status
        .success());
    assert_eq!(std::fs::read(dir.join("pki/encryption.key")).unwrap(), key);
    let config = std::fs::read_to_string(dir.join("config/encryption-config.yaml")).unwrap();
    assert!(config.contains(String::from_utf8_lossy(&key).trim()));
    assert_eq!(std::fs::read(dir.join("pki/sa.key")).unwrap(), sa);

    // An unreadable key is refused, not replaced.
    for (file, loses) in [
        ("pki/encryption.key", "Secret"),
        ("pki/sa.key", "service-account token"),
    ] {
        let saved = std::fs::read(dir.join(file)).unwrap();
        std::fs::write(dir.join(file), "garbage\n").unwrap();
        let before = contents(&dir);
        refused(&gen(&dir, &[]), &[file, loses, "--force"]);
        assert_eq!(contents(&dir), before, "{file}");
        std::fs::write(dir.join(file), saved).unwrap();
    }
}

// 8. No silent surprises.

#[test]
fn a_ca_pair_that_does_not_match_is_refused_not_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    let key = std::fs::read(dir.join("pki/ca.key")).unwrap();
    let p384 = tmp.path().join("p384.key");
    let made = run(Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-384",
            "-out",
        ])
        .arg(&p384));
    assert!(made.status.success(), "{}", text(&made));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            std::fs::read(dir.join("pki/etcd/ca.key")).unwrap(),
            "does not belong to the key",
        ),
        (
            std::fs::read(&p384).unwrap(),
            "not a P-256 or RSA private key",
        ),
    ];
    for (other, needle) in cases {
        std::fs::write(dir.join("pki/ca.key"), other).unwrap();
        let before = contents(&dir);
        refused(
            &gen(&dir, &[]),
            &["pki/ca.crt and pki/ca.key", needle, "--force"],
        );
        assert_eq!(contents(&dir), before, "{needle}");
    }
    std::fs::remove_file(dir.join("pki/ca.key")).unwrap();
    refused(&gen(&dir, &[]), &["the certificate has no key"]);
    // A missing certificate is reissued with the CA's own key.
    std::fs::write(dir.join("pki/ca.key"), &key).unwrap();
    std::fs::remove_file(dir.join("pki/ca.crt")).unwrap();
    let out = gen(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("pki/ca.crt was missing: reissued with the CA's key"));
    assert_eq!(std::fs::read(dir.join("pki/ca.key")).unwrap(), key);
    assert!(ca_pair_matches(&dir, "ca"));

    // A CA the user brings with another algorithm is used, and said so.
    let mine = tmp.path().join("mine");
    std::fs::create_dir_all(mine.join("pki")).unwrap();
    let made = run(Command::new("openssl")
        .current_dir(mine.join("pki"))
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
        ])
        .args(["ca.crt", "-subj", "/CN=my-ca", "-days", "3650", "-addext"])
        .arg("basicConstraints=critical,CA:TRUE"));
    assert!(made.status.success(), "{}", text(&made));
    let ca = std::fs::read(mine.join("pki/ca.crt")).unwrap();
    let out = gen(&mine, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("its key is rsa-2048"), "{}", text(&out));
    assert_eq!(std::fs::read(mine.join("pki/ca.crt")).unwrap(), ca);
}

#[test]
fn a_state_dir_belongs_to_one_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let cp = ["--profile", "control-plane", "--set", ADVERTISE];
    assert!(
        run(kubeunit().arg("gen").args(cp).arg("--state-dir").arg(&dir))
            .status
            .success()
    );
    let before = contents(&dir);
    let control_plane_etcd = unit(&dir, "etcd");
    refused(
        &gen(&dir, &[]),
        &["belongs to environment 'control-plane'", "'ci'", "--force"],
    );
    assert_eq!(contents(&dir), before);
    let out = gen(&dir, &["--force"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(unit(&dir, "etcd").starts_with("kubeunit-ci"));
    assert!(dir.join("units").join(unit(&dir, "etcd")).exists());
    assert!(!dir.join("units").join(control_plane_etcd).exists());
}

#[test]
fn a_new_epoch_reissues_certificates_and_an_expired_one_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &["--set", "pki.epoch=2026-01-01T00:00:00Z"])
        .status
        .success());
    let ca = std::fs::read(dir.join("pki/ca.crt")).unwrap();
    let out = gen(&dir, &["--set", "pki.epoch=2026-02-01T00:00:00Z"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("pki/ca.crt: kept; it starts at"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(dir.join("pki/ca.crt")).unwrap(), ca);
    let start = run(Command::new("openssl")
        .args(["x509", "-noout", "-startdate", "-in"])
        .arg(dir.join("pki/apiserver.crt")));
    assert_eq!(
        String::from_utf8_lossy(&start.stdout).trim(),
        "notBefore=Feb  1 00:00:00 2026 GMT"
    );
    // Certificates that ended before today: generated, and said loudly.
    let old = tmp.path().join("old");
    let out = gen(&old, &["--set", "pki.epoch=2000-01-01T00:00:00Z"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("WARNING: the certificates expired at"),
        "{}",
        text(&out)
    );
}

#[test]
fn network_addresses_that_cannot_work_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    let before = contents(&dir);
    for (set, needles) in [
        (
            "network.dnsIP=10.0.0.1",
            &["network.dnsIP", "`kubernetes` Service"][..],
        ),
        ("network.dnsIP=10.0.0.255", &["network.dnsIP", "broadcast"]),
        (
            "network.advertiseAddress=127.0.0.1",
            &["network.advertiseAddress", "loopback"],
        ),
        (
            "network.advertiseAddress=0.0.0.0",
            &["network.advertiseAddress", "unspecified"],
        ),
        (
            "network.advertiseAddress=::1",
            &["network.advertiseAddress", "loopback"],
        ),
        (
            "network.advertiseAddress=224.0.0.1",
            &["network.advertiseAddress", "multicast"],
        ),
        (
            "network.bindAddress=ff02::1",
            &["network.bindAddress", "multicast"],
        ),
    ] {
        refused(&gen(&dir, &["--set", set]), needles);
        assert_eq!(contents(&dir), before, "{set}");
    }
}

// 6. No input panics.

#[test]
fn validity_and_epoch_out_of_range_are_input_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    for (set, needles) in [
        (
            "pki.certValidity=600000y",
            &["pki.certValidity", "9999-12-31"][..],
        ),
        ("pki.caValidity=9000y", &["pki.caValidity", "9999-12-31"]),
        ("pki.epoch=253402300799", &["pki.caValidity", "9999-12-31"]),
        ("pki.epoch=-1", &["pki.epoch", "1970"]),
        ("pki.epoch=99999999999999", &["pki.epoch", "not a time"]),
    ] {
        refused(&gen(&dir, &["--set", set]), needles);
        assert!(!dir.exists(), "{set} created the state dir");
    }
    let out = run(kubeunit()
        .env("SOURCE_DATE_EPOCH", "253402300799")
        .args(["gen", "--profile", "ci", "--set", ADVERTISE, "--state-dir"])
        .arg(&dir));
    refused(&out, &["SOURCE_DATE_EPOCH"]);
}

// 7. Values reach YAML, kubeconfigs and units only as the values they are.

#[test]
fn names_that_would_break_out_of_their_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    let before = contents(&dir);
    let long = format!("node.name={}", "a".repeat(300));
    for (set, field) in [
        ("featureGates.Evil\nusers=true", "featureGates"),
        (
            "components.etcd.featureGates.A-B=true",
            "components.etcd.featureGates",
        ),
        ("node.name=evil\nusers: []", "node.name"),
        ("node.name=../x", "node.name"),
        ("node.name=My Node", "node.name"),
        (long.as_str(), "node.name"),
        ("components.etcd.env.1BAD=x", "components.etcd.env"),
        ("components.etcd.env.A-B=x", "components.etcd.env"),
        (
            "components.etcd.extraArgs.a b=x",
            "components.etcd.extraArgs",
        ),
        (
            "apiserver.admissionPlugins=[\"Evil\\nX\"]",
            "apiserver.admissionPlugins",
        ),
        ("binDir=\"/usr/local/bin\\n[Install]\"", "binDir"),
        ("binDir=/opt/it's", "binDir"),
        (
            "components.etcd.binary=\"etcd\\u0000\"",
            "components.etcd.binary",
        ),
    ] {
        refused(&gen(&dir, &["--set", set]), &[field, "fix:"]);
        assert_eq!(contents(&dir), before, "{set}");
    }
    let out = gen(&tmp.path().join("new\nline"), &[]);
    refused(&out, &["control characters"]);
}

#[test]
fn awkward_values_reach_units_quoted() {
    let tmp = tempfile::tempdir().unwrap();
    // A percent sign in the state dir's path, comment characters at the start of arguments, a
    // dollar and a newline in values.
    let dir = tmp.path().join("100%state");
    let bin = executable_bin_dir(tmp.path());
    let out = gen(
        &dir,
        &[
            "--bin-dir",
            bin.to_str().unwrap(),
            "--set",
            "components.etcd.binaryArgs=['#not-a-comment', ';nor-this', ';']",
            "--set",
            "components.etcd.extraArgs.log-outputs=\"a$b\\nc\"",
            "--set",
            "components.etcd.env.GODEBUG=x=1 $HOME",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let unit_path = dir.join("units").join(unit(&dir, "etcd"));
    let verify = run(Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit_path));
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}",
        text(&verify)
    );
    let unit = kubeunit::unit::UnitFile::read(&unit_path).unwrap();
    let (_, argv, _) = unit.exec_start().unwrap();
    assert_eq!(&argv[1..4], ["#not-a-comment", ";nor-this", ";"]);
    assert!(
        argv.contains(&"--log-outputs=a$$b\nc".to_string()),
        "{argv:?}"
    );
    let env_file = match unit.get("EnvironmentFiles") {
        Some(kubeunit::unit::Value::EnvFiles(f)) => f[0].0.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(env_file, dir.join("env/etcd.env").to_string_lossy());
}

// 9. Secrets stay in private files; a policy file is a policy.

#[test]
fn env_values_make_the_profile_and_manifest_private() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    assert_eq!(mode(&dir.join("profile.yaml")), 0o644);
    assert_eq!(mode(&dir.join("manifest.json")), 0o644);
    assert!(gen(&dir, &["--set", "components.etcd.env.TOKEN=s3cret"])
        .status
        .success());
    for f in ["profile.yaml", "manifest.json", "env/etcd.env"] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }
    let out = run(kubeunit().args(["gen", "--check", "--state-dir"]).arg(&dir));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn an_audit_policy_file_must_be_a_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let policy = tmp.path().join("policy.yaml");
    for (body, needle) in [
        ("just: text\n", "apiVersion is not audit.k8s.io/v1"),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\n",
            "no list of rules",
        ),
        (
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n",
            "rule 1",
        ),
        ("{{{", "not YAML"),
    ] {
        std::fs::write(&policy, body).unwrap();
        let set = format!("audit.policy={}", policy.display());
        refused(&gen(&dir, &["--set", &set]), &["audit.policy", needle]);
        assert!(!dir.exists());
    }
    let good = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";
    std::fs::write(&policy, good).unwrap();
    let set = format!("audit.policy={}", policy.display());
    assert!(gen(&dir, &["--set", &set]).status.success());
    assert_eq!(
        std::fs::read_to_string(dir.join("config/audit-policy.yaml")).unwrap(),
        good
    );
}

// 10. The unit-file reader agrees with systemd.

/// What systemd-analyze verify makes of `ExecStart=VALUE`: the command path it would run (it
/// reports it as not executable), or None when it refuses or warns about the line.
fn systemd_reads(dir: &Path, value: &str) -> Option<Vec<u8>> {
    let unit = dir.join("probe.service");
    std::fs::write(&unit, format!("[Service]\nType=exec\nExecStart={value}\n")).unwrap();
    let out = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit));
    let err = out.stderr;
    let text = String::from_utf8_lossy(&err);
    if text.contains("probe.service:3") || text.contains("bad unit file setting") {
        return None;
    }
    let start = b"Command ";
    let end = b" is not executable";
    let i = err.windows(start.len()).position(|w| w == start)? + start.len();
    let j = err.windows(end.len()).position(|w| w == end)?;
    Some(err[i..j].to_vec())
}

#[test]
fn the_unit_reader_agrees_with_systemd_analyze() {
    let tmp = tempfile::tempdir().unwrap();
    for value in [
        "/nonexistent/a",
        "/nonexistent/a\\x41\\101\\u00e9\\U0001F600",
        "/nonexistent/a\\xc3\\xa9",
        "\"/nonexistent/a b\"",
        "/nonexistent/x'a b'c",
        "/nonexistent/a\u{a0}b c",
        "/nonexistent/a\\s\\'\\\"",
        "/nonexistent/a%%b",
        "/nonexistent/a ; ",
        "; /nonexistent/a",
        "/nonexistent/a \\; b",
        "/nonexistent/a\\q",
        "/nonexistent/a\\e",
        "/nonexistent/a\\x00",
        "/nonexistent/a\\u0000",
        "/nonexistent/a\\400",
        "/nonexistent/a\\18",
        "/nonexistent/a\\;",
        "/nonexistent/a\"b",
        "/nonexistent/a ; /nonexistent/b",
    ] {
        let ours = kubeunit::unit::parse(
            Path::new("/s/probe.service"),
            &format!("[Service]\nType=exec\nExecStart={value}\n"),
        )
        .ok()
        .and_then(|u| u.exec_start().map(|(p, _, _)| p.clone().into_bytes()));
        assert_eq!(ours, systemd_reads(tmp.path(), value), "ExecStart={value}");
    }
    // systemd passes raw bytes that are not UTF-8; a transient unit cannot carry them: refused.
    assert_eq!(
        systemd_reads(tmp.path(), "/nonexistent/a\\xff"),
        Some(b"/nonexistent/a\xff".to_vec())
    );
    assert!(kubeunit::unit::parse(
        Path::new("/s/probe.service"),
        "[Service]\nExecStart=/nonexistent/a\\xff\n"
    )
    .is_err());
}

// Security defaults.

#[test]
fn profiling_is_off_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    for c in ["kube-apiserver", "kube-controller-manager"] {
        let unit = std::fs::read_to_string(dir.join("units").join(unit(&dir, c))).unwrap();
        assert!(unit.contains("--profiling=false"), "{c}");
    }
    let scheduler = std::fs::read_to_string(dir.join("config/scheduler-config.yaml")).unwrap();
    assert!(
        scheduler.contains("\nenableProfiling: false\n"),
        "{scheduler}"
    );
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("pki/ca.key")), 0o600);
}

// Properties.

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]
    /// Arbitrary `--set` values on an existing state dir: gen renders (exit 0) or refuses the input
    /// (exit 2) and leaves the state dir as it was; it never panics (exit 101). What it renders is
    /// whole: `gen --check` agrees, the same gen again changes nothing, and nothing is written
    /// beside the state dir.
    #[test]
    fn arbitrary_sets_render_or_leave_the_state_dir_alone(
        key in proptest::sample::select(vec![
            "node.name", "network.dnsIP", "network.extraSANs", "pki.certValidity", "pki.epoch",
            "featureGates.X", "components.etcd.env.E", "components.etcd.binaryArgs",
            "components.etcd.extraArgs.f", "binDir", "ports.apiserver", "name",
        ]),
        // No NUL: a command line cannot carry one (the library-level property test covers it).
        value in "\\PC{0,300}|[\\x01-\\x7f]{0,300}|(\\.\\./|/|-|[0-9]|[a-z]){0,40}",
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        assert!(gen(&dir, &[]).status.success());
        let before = contents(&dir);
        let out = gen(&dir, &["--set", &format!("{key}={value}")]);
        let beside: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        proptest::prop_assert!(beside == [std::ffi::OsString::from("state")], "written beside: {:?}", beside);
        match out.status.code() {
            Some(0) => {
                let checked = check(&dir);
                proptest::prop_assert!(checked.status.success(), "gen --check after it: {}", text(&checked));
                let rendered = contents(&dir);
                let again = gen(&dir, &["--set", &format!("{key}={value}")]);
                proptest::prop_assert!(again.status.success(), "the same gen again: {}", text(&again));
                proptest::prop_assert!(contents(&dir) == rendered, "the same gen again changed the state dir");
            }
            Some(2) => proptest::prop_assert!(contents(&dir) == before, "{}", text(&out)),
            other => proptest::prop_assert!(false, "exit {:?}: {}", other, text(&out)),
        }
    }
}

/// Every command that takes a component name (found from `--help`: a COMPONENT argument) refuses one
/// the environment does not have with exit 2, naming the valid ones, before it looks for systemd
/// (this host has none), dlv or journalctl, and without touching the state dir.
#[test]
fn every_command_refuses_an_unknown_component() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s");
    assert!(gen(&state, &[]).status.success());
    let before = contents(&state);
    let sd = state.to_str().unwrap();
    let help = text(&run(kubeunit().arg("--help")));
    let commands: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert!(commands.len() > 15, "commands from --help: {commands:?}");
    let mut taking = Vec::new();
    for command in &commands {
        let usage = text(&run(kubeunit().args([command, "--help"])));
        let usage = usage
            .lines()
            .find(|l| l.starts_with("Usage:"))
            .unwrap_or("");
        if !usage.contains("COMPONENT") {
            continue;
        }
        taking.push(command.clone());
        let out = run(kubeunit().args([command, "--state-dir", sd, "kube-nothing"]));
        refused(
            &out,
            &[
                "no component 'kube-nothing'",
                "use one of: etcd, kube-apiserver",
            ],
        );
    }
    taking.sort();
    assert_eq!(
        taking,
        ["cmdline", "debug", "hook", "logs", "restart", "wait"],
        "the commands that take a component name"
    );
    // debug --stop goes another way to the unit.
    refused(
        &run(kubeunit().args(["debug", "--stop", "--state-dir", sd, "kube-nothing"])),
        &["no component 'kube-nothing'"],
    );
    assert_eq!(contents(&state), before, "the state dir is unchanged");
}

/// The commands that need no systemd to judge their input (wait, hook, install, uninstall,
/// kubeconfig): wrong components, roots, binaries and files are refused with exit 2, before anything
/// is read from systemd or written anywhere.
#[test]
fn operations_refuse_bad_input_before_touching_anything() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s");
    assert!(gen(&state, &[]).status.success());
    let before = contents(&state);
    let sd = state.to_str().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let root_s = root.to_str().unwrap();
    for (args, needles) in [
        (
            vec!["wait", "--state-dir", sd, "kubelet"],
            vec!["no component 'kubelet'"],
        ),
        (
            vec!["hook", "--state-dir", sd, "nope"],
            vec!["no component 'nope'"],
        ),
        (
            vec!["cmdline", "--state-dir", sd, "kubelet@nowhere"],
            vec!["no component 'kubelet@nowhere'", "use one of: etcd"],
        ),
        (
            vec!["hook", "--state-dir", sd, "kube-scheduler"],
            vec!["has no start hook"],
        ),
        (
            vec!["install", "--state-dir", sd, "--root", "rel"],
            vec!["--root rel"],
        ),
        (
            vec![
                "install",
                "--state-dir",
                sd,
                "--root",
                root_s,
                "--kubeunit",
                "k u",
            ],
            vec!["--kubeunit"],
        ),
        (
            vec!["uninstall", "--state-dir", sd, "--root", "/nonexistent"],
            vec!["--root /nonexistent"],
        ),
        (
            vec!["kubeconfig", "--state-dir", sd, "--write", root_s],
            vec!["not a regular file"],
        ),
        (
            vec![
                "kubeconfig",
                "--state-dir",
                sd,
                "--write",
                &format!("{sd}/kubeconfig/x"),
            ],
            vec!["inside the state dir"],
        ),
    ] {
        refused(&run(kubeunit().args(&args)), &needles);
    }
    for args in [
        vec!["wait", "--state-dir", "/nonexistent/state"],
        vec![
            "install",
            "--state-dir",
            "/nonexistent/state",
            "--root",
            root_s,
        ],
        vec!["kubeconfig", "--state-dir", "/nonexistent/state"],
    ] {
        assert_eq!(
            run(kubeunit().args(&args)).status.code(),
            Some(2),
            "{args:?}"
        );
    }
    assert_eq!(contents(&state), before, "the state dir is unchanged");
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "nothing installed"
    );

    // Into a root being built: exactly the target's files, and uninstall takes them all out again.
    let out = run(kubeunit().args([
        "install",
        "--state-dir",
        sd,
        "--root",
        root_s,
        "--kubeunit",
        "/usr/local/bin/kubeunit",
        "-o",
        "json",
    ]));
    assert!(out.status.success(), "{}", text(&out));
    let units = root.join("etc/systemd/system");
    let prefix = unit_prefix(&state);
    let link = units.join(format!("multi-user.target.wants/{prefix}.target"));
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        Path::new(&format!("/etc/systemd/system/{prefix}.target"))
    );
    let scheduler = std::fs::read_to_string(units.join(format!(
        "{}.d/50-kubeunit-install.conf",
        unit(&state, "kube-scheduler")
    )))
    .unwrap();
    assert!(
        scheduler.contains(&format!(
            "ExecStartPost=/usr/local/bin/kubeunit wait --state-dir {sd} --timeout 870 kube-scheduler"
        )),
        "{scheduler}"
    );
    // A drop-in of the user's next to ours stays, with its directory.
    let mine = units.join(format!("{}.d/90-mine.conf", unit(&state, "etcd")));
    std::fs::write(&mine, "[Service]\nNice=1\n").unwrap();
    let out = run(kubeunit().args(["uninstall", "--state-dir", sd, "--root", root_s]));
    assert!(out.status.success(), "{}", text(&out));
    let left: Vec<PathBuf> = walkdir::WalkDir::new(&root)
        .into_iter()
        .flatten()
        .filter(|e| !e.file_type().is_dir())
        .map(|e| e.into_path())
        .collect();
    assert_eq!(left, vec![mine]);
    // start's --wait takes its two values only, clap's usage error (exit 2) naming them.
    let out = run(kubeunit().args(["start", "--state-dir", sd, "--wait", "ready\n"]));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains("--wait") && t.contains("usable") && t.contains("healthy"),
        "{t}"
    );
    assert_eq!(contents(&state), before, "the state dir is unchanged");
}

/// Merges into one kubeconfig from many processes at once lose no entry (kubectl's PATH.lock), and a
/// lock left by a killed writer is named, not broken, with the file untouched.
#[test]
fn concurrent_kubeconfig_merges_lose_nothing_and_a_stale_lock_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["a", "b", "c", "d", "e", "f"];
    for n in names {
        let out = gen(&dir.path().join(n), &["--set", &format!("name={n}")]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let config = dir.path().join("kube/config");
    let children: Vec<_> = names
        .iter()
        .flat_map(|n| [n, n])
        .map(|n| {
            kubeunit()
                .args(["kubeconfig", "--write"])
                .arg(&config)
                .arg("--state-dir")
                .arg(dir.path().join(n))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let doc: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let mut contexts: Vec<&str> = doc["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    contexts.sort();
    assert_eq!(contexts, names, "one context per environment, none lost");
    assert!(!dir.path().join("kube/config.lock").exists());

    let before = std::fs::read(&config).unwrap();
    std::fs::write(dir.path().join("kube/config.lock"), "").unwrap();
    let out = run(kubeunit()
        .args(["kubeconfig", "--remove", "--write"])
        .arg(&config)
        .arg("--state-dir")
        .arg(dir.path().join("a")));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("config.lock"), "{}", text(&out));
    assert_eq!(std::fs::read(&config).unwrap(), before);
}

#[test]
fn hermetic_refuses_ports_auto_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("built");
    let state = tmp.path().join("state");
    // A profile file that says `ports: auto` is refused as `--set ports=auto` is.
    let profile = tmp.path().join("auto.yaml");
    std::fs::write(&profile, "extends: ci\nports: auto\n").unwrap();
    let file = profile.to_str().unwrap();
    for extra in [
        ["--profile", "ci", "--set", "ports=auto"],
        ["--profile", file, "--set", "logging.verbosity=2"],
    ] {
        let out = run(kubeunit()
            .args([
                "gen",
                "--hermetic",
                "--seed",
                "1",
                "--set",
                "pki.epoch=2026-01-01T00:00:00Z",
                // --hermetic reads no fetch cache: the binaries' directory is given.
                "--bin-dir",
                "/usr/local/bin",
            ])
            .args(["--set", ADVERTISE, "--state-dir"])
            .arg(&state)
            .arg("--out")
            .arg(&out_dir)
            .args(extra));
        refused(&out, &["ports", "auto", "--hermetic"]);
        assert!(!out_dir.exists() && !state.exists(), "nothing written");
    }
    // A hand-edited profile.yaml with `ports: auto` is not started on guesses: gen resolves it.
    let dir = tmp.path().join("edited");
    assert!(gen(&dir, &[]).status.success());
    let yaml = std::fs::read_to_string(dir.join("profile.yaml")).unwrap();
    let start = yaml.find("ports:\n").unwrap();
    let end = start + yaml[start..].find("\npki:").unwrap();
    std::fs::write(
        dir.join("profile.yaml"),
        format!("{}ports: auto{}", &yaml[..start], &yaml[end..]),
    )
    .unwrap();
    let status = run(kubeunit().args(["status", "--state-dir"]).arg(&dir));
    refused(&status, &["ports", "kubeunit gen"]);
    // ...which picks ports again (the check says so), and records them.
    assert_eq!(check(&dir).status.code(), Some(1));
    assert!(gen(&dir, &["--set", "ports=auto"]).status.success());
    let yaml = std::fs::read_to_string(dir.join("profile.yaml")).unwrap();
    let port: u16 = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("etcdClient: "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no etcdClient port recorded:\n{yaml}"));
    // The auto range (spec::auto): 12000-20999.
    assert!((12000..21000).contains(&port), "etcdClient {port}");
}

/// `man --out-dir` naming a file: refused with exit 2, the file untouched.
#[test]
fn man_refuses_an_out_dir_that_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "mine\n").unwrap();
    let out = run(kubeunit().arg("man").arg("--out-dir").arg(&file));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("is not a directory"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine\n");
}

// 9. Hostile inputs of every kind: links, sizes, special files, bytes that are not text, a full disk.

/// `dir` holds what `before` recorded (naming the paths that differ, not their bytes).
fn assert_unchanged(before: &[(PathBuf, Vec<u8>, u32)], dir: &Path, what: &str) {
    let after = contents(dir);
    let mut differ: Vec<&Path> = before
        .iter()
        .filter(|b| !after.contains(b))
        .chain(after.iter().filter(|a| !before.contains(a)))
        .map(|e| e.0.as_path())
        .collect();
    differ.dedup();
    assert!(
        differ.is_empty(),
        "{what}: changed in {}: {differ:?}",
        dir.display()
    );
}

/// A `--state-dir` that is a symbolic link is refused by every command (exit 2, naming where it
/// points), and nothing changes; a link among its parents is a system's layout and is used.
#[test]
fn a_state_dir_that_is_a_link_is_refused_and_a_linked_parent_is_used() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    assert!(gen(&real, &[]).status.success());
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let before = contents(&real);
    let sd = link.to_str().unwrap();
    for args in [
        &[
            "gen",
            "--profile",
            "ci",
            "--set",
            ADVERTISE,
            "--state-dir",
            sd,
        ][..],
        &["gen", "--check", "--state-dir", sd],
        &["cmdline", "kube-apiserver", "--state-dir", sd],
        &["kubeconfig", "--state-dir", sd],
        &["status", "--state-dir", sd],
        &["stop", "--state-dir", sd],
        &["destroy", "--state-dir", sd],
        &["certs", "check-expiration", "--state-dir", sd],
    ] {
        let out = run(kubeunit().args(args));
        refused(
            &out,
            &[
                &format!("state dir {sd}: is a symbolic link (to {})", real.display()),
                &format!("--state-dir {}", real.display()),
            ],
        );
        assert_unchanged(&before, &real, &format!("{args:?}"));
    }
    // Through a linked parent: gen and its check work.
    let parent = tmp.path().join("parent");
    std::os::unix::fs::symlink(tmp.path(), &parent).unwrap();
    let through = parent.join("other");
    let out = gen(&through, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(check(&through).status.success());
    assert!(tmp.path().join("other/manifest.json").is_file());
}

/// Profiles that are too big, alias bombs, special files and bytes that are not UTF-8 are refused
/// at once (exit 2, naming the file and why), and an existing state dir stays as it was.
#[test]
fn hostile_profiles_are_refused_at_once_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    let before = contents(&dir);
    let big = tmp.path().join("big.yaml");
    let mut body = String::from("name: ci\nextends: ci\nfeatureGates:\n");
    while body.len() < 3 << 20 {
        body.push_str(&format!("  Gate{}: true\n", body.len()));
    }
    std::fs::write(&big, body).unwrap();
    let bomb = tmp.path().join("bomb.yaml");
    let mut yaml = String::from("name: ci\nextends: ci\na0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let p = i - 1;
        yaml.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    std::fs::write(&bomb, yaml).unwrap();
    let fifo = tmp.path().join("fifo.yaml");
    assert!(run(Command::new("mkfifo").arg(&fifo)).status.success());
    let binary = tmp.path().join("binary.yaml");
    std::fs::write(&binary, b"name: ci\nextends: ci\nnode:\n  name: \xff\xfe\n").unwrap();
    let directory = tmp.path().join("dir.yaml");
    std::fs::create_dir(&directory).unwrap();
    for (profile, needles) in [
        (&big, &["more than a profile's limit of 1048576"][..]),
        (&bomb, &["repetition limit exceeded"]),
        (&fifo, &["not a regular file (a FIFO)"]),
        (&binary, &["not UTF-8 text"]),
        (&directory, &["not a regular file (a directory)"]),
    ] {
        let started = std::time::Instant::now();
        let mut cmd = kubeunit();
        cmd.args(["gen", "--profile"])
            .arg(profile)
            .args(["--set", ADVERTISE, "--state-dir"])
            .arg(&dir);
        let out = run(&mut cmd);
        let mut needles = needles.to_vec();
        let name = profile.display().to_string();
        needles.push(&name);
        refused(&out, &needles);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{name}: refused only after {:?}",
            started.elapsed()
        );
        assert_unchanged(&before, &dir, &name);
    }
    // A --set value of 100 kB (near a command line's limit for one argument) and one with bytes
    // that are not UTF-8: rendered or refused, never a panic, and the refusal changes nothing.
    let huge = format!("components.etcd.env.HUGE={}", "v".repeat(100_000));
    let out = gen(&dir, &["--set", &huge]);
    assert!(matches!(out.status.code(), Some(0 | 2)), "{}", text(&out));
    assert!(gen(&dir, &[]).status.success());
    let before = contents(&dir);
    let out = run(kubeunit()
        .args(["gen", "--profile", "ci", "--set", ADVERTISE, "--set"])
        .arg(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"node.name=\xff"))
        .arg("--state-dir")
        .arg(&dir));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_unchanged(&before, &dir, "a --set that is not UTF-8");
}

/// Files of the state dir that cannot be read as what they are (garbage, a FIFO, bytes that are not
/// UTF-8) are refused by the commands that read them, naming the file and the fix (exit 2), with
/// the state dir unchanged; `gen` with a profile writes a managed file again.
#[test]
fn unreadable_state_files_are_named_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &[]).status.success());
    let sd = dir.to_str().unwrap().to_string();
    let good = contents(&dir);
    enum Bad {
        Bytes(&'static [u8]),
        Fifo,
    }
    for (file, bad, needles) in [
        (
            "manifest.json",
            Bad::Bytes(b"{{{ not json"),
            &["manifest.json is unreadable", "--force"][..],
        ),
        (
            "profile.yaml",
            Bad::Bytes(b"{{{ not: [yaml"),
            &["profile.yaml: is not a profile", "kubeunit gen --state-dir"],
        ),
        (
            "profile.yaml",
            Bad::Bytes(b"name: \xff\n"),
            &["profile.yaml: cannot be read", "not UTF-8"],
        ),
        (
            "profile.yaml",
            Bad::Fifo,
            &["profile.yaml: cannot be read", "not a regular file"],
        ),
        (
            "pki/ca.key",
            Bad::Fifo,
            &["pki/ca.key is a symbolic link or special file"],
        ),
    ] {
        let path = dir.join(file);
        std::fs::remove_file(&path).unwrap();
        match bad {
            Bad::Bytes(b) => std::fs::write(&path, b).unwrap(),
            Bad::Fifo => assert!(run(Command::new("mkfifo").arg(&path)).status.success()),
        }
        let before = contents(&dir);
        let readers: Vec<Vec<&str>> = match file {
            // Read by gen (its previous files) and gen --check; the others read profile.yaml.
            "manifest.json" | "pki/ca.key" => vec![vec!["gen", "--check", "--state-dir", &sd]],
            _ => vec![
                vec!["gen", "--check", "--state-dir", &sd],
                vec!["cmdline", "etcd", "--state-dir", &sd],
                vec!["kubeconfig", "--state-dir", &sd],
            ],
        };
        for args in readers {
            let started = std::time::Instant::now();
            let out = run(kubeunit().args(&args));
            refused(&out, needles);
            assert!(started.elapsed() < std::time::Duration::from_secs(20));
            assert_unchanged(&before, &dir, &format!("{file}: {args:?}"));
        }
        let out = gen(&dir, &[]);
        let special = matches!(bad, Bad::Fifo);
        if file == "profile.yaml" && !special {
            // gen writes it: made again from the profile given.
            assert!(out.status.success(), "{file}: {}", text(&out));
            assert_unchanged(&good, &dir, &format!("{file} written again"));
        } else {
            let gen_says = if special {
                &[" is a symbolic link or special file"][..]
            } else {
                needles
            };
            refused(&out, gen_says);
            assert_unchanged(&before, &dir, &format!("{file}: gen"));
            std::fs::remove_file(&path).unwrap();
            let (_, bytes, mode) = good.iter().find(|e| e.0 == Path::new(file)).unwrap();
            std::fs::write(&path, bytes).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode)).unwrap();
        }
    }
}

/// A small filesystem mounted for a test, unmounted with it.
struct SmallFs(PathBuf);

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = run(Command::new("umount").arg("-l").arg(&self.0));
    }
}

/// A gen that fills the disk stops with the error (exit 1: the disk, not the input) and leaves the
/// state dir as it was: its temp files and journal rolled back at once, not at the next gen.
#[test]
fn a_full_disk_leaves_the_state_dir_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let out = run(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&mnt));
    assert!(out.status.success(), "mount a tmpfs: {}", text(&out));
    let _fs = SmallFs(mnt.clone());
    let dir = mnt.join("state");
    assert!(gen(&dir, &[]).status.success());
    let before = contents(&dir);
    // Fill it but for a few kB: less than a forced gen rewrites.
    let filler = mnt.join("filler");
    let out = run(Command::new("sh").arg("-c").arg(format!(
        "dd if=/dev/zero of={} bs=1k count=$(( $(df -k --output=avail {} | tail -1) - 16 ))",
        filler.display(),
        mnt.display()
    )));
    assert!(out.status.success(), "{}", text(&out));
    let out = gen(&dir, &["--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("No space left on device"),
        "{}",
        text(&out)
    );
    assert_unchanged(&before, &dir, "the state dir after the full disk");
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    // With room again, the same gen goes through.
    std::fs::remove_file(&filler).unwrap();
    let out = gen(&dir, &["--force"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(check(&dir).status.success());
}

/// etcd as a user of its own (the cis profile's `etcd.user`): a name that is none, or one that would
/// write a second line into its unit, and a data dir its sandbox cannot bind in (below /run, with
/// ':', with a newline, longer than a path can be) are refused naming the field, before anything
/// is written; the state dir stays as it was.
#[test]
fn an_own_user_and_its_sandbox_refuse_what_cannot_work() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    assert!(gen(&dir, &["--set", "etcd.user=etcd"]).status.success());
    let before = contents(&dir);
    let huge_user = format!("etcd.user={}", "e".repeat(100_000));
    let huge_dir = format!("dataDir=/var/lib/{}", "d/".repeat(5_000));
    for (set, field) in [
        (huge_user.as_str(), "etcd.user"),
        ("etcd.user=\"etcd\\nUser=root\"", "etcd.user"),
        ("etcd.user=../etcd", "etcd.user"),
        ("etcd.user=0etcd", "etcd.user"),
        ("etcd.user=et cd", "etcd.user"),
        ("dataDir=/run/kubeunit-data", "dataDir"),
        ("dataDir=/etc/kubeunit", "dataDir"),
        ("dataDir=/var/lib/a:b", "dataDir"),
        ("dataDir=\"/var/lib/a\\nb\"", "dataDir"),
        (huge_dir.as_str(), "dataDir"),
    ] {
        let out = gen(&dir, &["--set", "etcd.user=etcd", "--set", set]);
        refused(&out, &[field]);
        assert_eq!(contents(&dir), before, "{}", &set[..set.len().min(60)]);
    }
}
