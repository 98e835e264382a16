//! Hostile input and hostile surroundings: state dirs that are not kubeunit's, manifests and trees
//! that point outside, concurrent and interrupted runs, values that try to break out of the files
//! they land in. Every refusal is checked for its exit code, its message and an unchanged state dir.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

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
        // Every 11th step, then each of the last ones (last renames, manifest, journal removal).
        let mut n = 1;
        while kill_then_repair(forced, n) {
            n += 11;
        }
        assert!(n > 20, "a gen has more steps than {n}");
        for last in n.saturating_sub(5)..n {
            kill_then_repair(forced, last);
        }
    }
}
