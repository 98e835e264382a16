//! etcd snapshots against real systemd, the pinned etcd (etcdctl, etcdutl) and Kubernetes: save ->
//! create an object -> restore brings back what was there before and drops what came after; the
//! scheduled snapshot's timer runs and its retention keeps the newest N; bad input changes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::container::{control_plane_args, gen_in, Container};
use crate::common::ports::Ports;
use crate::common::*;
use serde_json::Value;

struct Env<'a> {
    c: &'a Container,
    state: PathBuf,
    kubectl: PathBuf,
}

impl Env<'_> {
    fn ku(&self, args: &[&str]) -> Output {
        let mut argv: Vec<&str> = args.to_vec();
        let state = self.state.to_str().unwrap();
        // The state dir goes after the (sub)command words, before the rest.
        let at = argv
            .iter()
            .position(|a| a.starts_with('-') || a.starts_with('/'))
            .unwrap_or(argv.len());
        argv.splice(at..at, ["--state-dir", state]);
        self.c.kubeunit(&argv)
    }

    fn ku_ok(&self, args: &[&str]) -> String {
        let out = self.ku(args);
        assert!(out.status.success(), "kubeunit {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        run(Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(self.state.join("kubeconfig/admin.kubeconfig"))
            .args(args))
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn exists(&self, configmap: &str) -> bool {
        let out = self.kubectl(&["get", "configmap", configmap, "-o", "name"]);
        if out.status.success() {
            return true;
        }
        assert!(
            text(&out).contains("NotFound"),
            "kubectl get: {}",
            text(&out)
        );
        false
    }

    fn status(&self) -> Vec<Value> {
        let out = self.ku(&["status", "-o", "json"]);
        let rows: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        rows.as_array().unwrap().clone()
    }

    fn list(&self) -> Vec<Value> {
        let out = self.ku_ok(&["snapshot", "list", "-o", "json"]);
        serde_json::from_str::<Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn scheduled(&self) -> Vec<String> {
        self.list()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .filter(|n| n.starts_with("scheduled-"))
            .collect()
    }
}

fn configmap(name: &str) -> Vec<String> {
    [
        "create",
        "configmap",
        name,
        "--from-literal",
        &format!("made={name}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn restore_brings_back_the_past_and_the_timer_keeps_the_newest() {
    let ports = Ports::allocate();
    let c = Container::boot("snap");
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let mut args = control_plane_args(&version);
    for set in [
        "name=snap".to_string(),
        // Often enough to see the timer run during the test.
        "etcd.snapshot.schedule=*:*:0/20".into(),
        "etcd.snapshot.retention=2".into(),
        format!(
            "components.etcd-snapshot.binary={}",
            env!("CARGO_BIN_EXE_kubeunit")
        ),
    ] {
        args.push("--set".into());
        args.push(set);
    }
    let state = gen_in(&c, "snap", &ports, &args);
    let e = Env {
        c: &c,
        state: state.clone(),
        kubectl: cache_dir()
            .join("bin")
            .join(format!("kubernetes-{version}"))
            .join("kubectl"),
    };
    let out = e.ku(&["start"]);
    assert!(
        out.status.success(),
        "start: {}\n{}",
        text(&out),
        c.log_text()
    );

    // The timer runs (the service only now and then), and status says when it runs next. While
    // its service runs (it fires every 20 s), systemd has no next elapse yet: asked again then.
    let snapshot_row = || {
        e.status()
            .into_iter()
            .find(|r| r["component"] == "etcd-snapshot")
            .expect("an etcd-snapshot row")
    };
    let mut row = snapshot_row();
    wait_for_saying(
        "the timer waiting for its next run",
        Duration::from_secs(15),
        || {
            row = snapshot_row();
            let waiting = row["subState"] == "waiting" && row["nextRun"].is_string();
            (waiting, row.to_string())
        },
    );
    let prefix = unit_prefix(&state);
    let timer_units = format!("{prefix}-*.timer");
    assert_eq!(
        row["unit"],
        format!("{prefix}-etcd-snapshot.timer"),
        "{row}"
    );
    assert_eq!(row["healthy"], true, "{row}");
    assert!(
        row["nextRun"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{row}"
    );
    let timers = c.list_units(&timer_units);
    assert!(timers.contains("active waiting"), "{timers}");
    // restart takes the timer and its service down and up again; a second start changes nothing.
    e.ku_ok(&["restart", "etcd-snapshot"]);
    let timers = c.list_units(&timer_units);
    assert!(timers.contains("active waiting"), "{timers}");
    assert!(e.ku_ok(&["start"]).contains("already running"));
    // It fires by itself: a scheduled snapshot appears, and status shows the run. (Fired since the
    // restart: a snapshot the timer took before it, when start was quick, is no run of this timer.)
    let fired_since_restart = |e: &Env| {
        e.status()
            .into_iter()
            .find(|r| r["component"] == "etcd-snapshot")
            .is_some_and(|r| r["lastRun"].is_string())
    };
    wait_for(
        "the timer's first snapshot",
        Duration::from_secs(60),
        || !e.scheduled().is_empty() && fired_since_restart(&e),
    );
    let service = unit(&state, "etcd-snapshot");
    let service = service.as_str();
    // Its service, started directly three more times: the newest 2 are kept.
    let mut taken = e.scheduled();
    for _ in 0..3 {
        let out = c.run(&["systemctl", "start", service]);
        assert!(out.status.success(), "{}", text(&out));
        taken.extend(e.scheduled());
    }
    let kept = e.scheduled();
    assert_eq!(kept.len(), 2, "retention 2: {kept:?}");
    let mut newest: Vec<String> = taken.iter().chain(&kept).cloned().collect();
    newest.sort();
    newest.dedup();
    assert!(newest.len() >= 4, "four runs, four names: {newest:?}");
    assert_eq!(kept, newest[newest.len() - 2..], "the newest two are kept");
    for s in e.list() {
        assert!(s["revision"].as_i64().unwrap() > 1, "{s}");
        assert!(s["error"].is_null(), "{s}");
        let mode = std::fs::metadata(s["path"].as_str().unwrap())
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600,
            "{s}"
        );
    }
    let row = e
        .status()
        .into_iter()
        .find(|r| r["component"] == "etcd-snapshot")
        .unwrap();
    assert!(row["lastRun"].is_string(), "{row}");
    let status = e.ku_ok(&["status"]);
    assert!(
        status.contains(&format!(
            "etcd-snapshot ({prefix}-etcd-snapshot.timer): next run 20"
        )),
        "{status}"
    );
    let journal = c.run(&["journalctl", "-u", service, "--no-pager"]);
    assert!(text(&journal).contains("saved "), "{}", text(&journal));

    // save -> B -> restore: A is back, B is gone, everything healthy.
    e.kubectl_ok(
        &configmap("a")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let saved: Value =
        serde_json::from_str(&e.ku_ok(&["snapshot", "save", "--prefix", "before-b", "-o", "json"]))
            .unwrap();
    let file = saved["snapshot"]["path"].as_str().unwrap().to_string();
    assert!(
        Path::new(&file).starts_with(state.join("data/snapshots")),
        "{saved}"
    );
    assert!(file.contains("/before-b-"), "{file}");
    let revision = saved["snapshot"]["revision"].as_i64().unwrap();
    let listed = e.ku_ok(&["snapshot", "list"]);
    assert!(
        listed.contains("REVISION") && listed.contains(&format!(" {revision} ")),
        "{listed}"
    );
    e.kubectl_ok(
        &configmap("b")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(e.exists("a") && e.exists("b"));

    // Bad input first: nothing changes, the environment keeps running.
    let garbage = c.work.join("garbage.db");
    std::fs::write(&garbage, "not a snapshot\n").unwrap();
    let data_before = snapshot(&state.join("data/etcd"))
        .into_keys()
        .collect::<Vec<_>>();
    for (file, why) in [
        (garbage.to_str().unwrap(), "is not an etcd snapshot"),
        ("/no/such/snapshot.db", "No such file"),
        (state.join("data").to_str().unwrap(), "not a file"),
    ] {
        let out = e.ku(&["snapshot", "restore", file, "--yes"]);
        assert_eq!(out.status.code(), Some(2), "{file}: {}", text(&out));
        assert!(text(&out).contains(why), "{file}: {}", text(&out));
    }
    let out = e.ku(&["snapshot", "restore", &file]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--yes"), "{}", text(&out));
    assert!(e.status().iter().all(|r| r["healthy"] == true));
    assert!(e.exists("b"), "nothing was restored");
    assert!(!state.join("data/etcd.restore").exists());
    assert_eq!(
        snapshot(&state.join("data/etcd"))
            .into_keys()
            .collect::<Vec<_>>(),
        data_before
    );

    // An upgrade that stopped half-way left its record: the restored data is from before it, and
    // a later upgrade must not resume it (its snapshot, what it stopped).
    let record = state.join("data/upgrade.json");
    std::fs::write(
        &record,
        r#"{"snapshot": null, "steps": [["kube-apiserver", "v1.35.4", "v1.36.3"]]}"#,
    )
    .unwrap();
    let out = e.ku(&["snapshot", "restore", &file, "--yes"]);
    assert!(
        out.status.success(),
        "restore: {}\n{}",
        text(&out),
        c.log_text()
    );
    assert!(
        !record.exists(),
        "the upgrade's record stays after a restore"
    );
    assert!(
        text(&out).contains("the record of an upgrade that stopped half-way"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains(&format!("(revision {revision}")),
        "{}",
        text(&out)
    );
    assert!(e.exists("a"), "made before the snapshot");
    assert!(!e.exists("b"), "made after the snapshot");
    let rows = e.status();
    assert!(
        rows.iter().all(|r| r["healthy"] == true),
        "{}",
        serde_json::to_string_pretty(&rows).unwrap()
    );
    assert!(
        !state.join("data/etcd.restore").exists(),
        "the old data is gone"
    );
    // Revisions went up by a billion: watchers from before see a compaction, not old revisions.
    e.kubectl_ok(
        &configmap("c")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let rv: u64 = e
        .kubectl_ok(&[
            "get",
            "configmap",
            "c",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .parse()
        .unwrap();
    assert!(rv > 1_000_000_000, "resourceVersion {rv}");
    // The timer is back with the rest.
    assert!(c.list_units(&timer_units).contains("active waiting"));

    // A restore whose start fails (the API server's port taken while the environment is down)
    // is rolled back: etcd's data from before stays, and nothing of the restore is left.
    e.kubectl_ok(
        &configmap("d")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    e.ku_ok(&["stop"]);
    let squatter = std::net::TcpListener::bind(("127.0.0.1", ports.port("apiserver"))).unwrap();
    let out = e.ku(&["snapshot", "restore", &file, "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("rolled back") && text(&out).contains("is already in use"),
        "{}",
        text(&out)
    );
    drop(squatter);
    assert!(!state.join("data/etcd.restore").exists());
    e.ku_ok(&["start"]);
    assert!(
        e.exists("d") && e.exists("c"),
        "the data from before the failed restore"
    );

    // What a save killed mid-write (kill -9, or `stop` during the timer's run) left: `stop` deletes
    // it, and nothing else of the dir.
    let killed = state.join("data/snapshots/.scheduled-20261128T220300.051Z.db.tmp");
    std::fs::write(&killed, "half a snapshot").unwrap();
    std::fs::write(killed.with_extension("tmp.part"), "half").unwrap();
    let finished = e.list();
    let out = e.ku(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!killed.exists() && !killed.with_extension("tmp.part").exists());
    // The timer may have taken one more meanwhile, and retention 2 then pruned the oldest
    // scheduled one (CI, 2026-12-02): a finished snapshot may go only so, with 2 newer scheduled
    // ones in its place.
    let after = e.list();
    let name = |s: &Value| s["name"].as_str().unwrap().to_string();
    // From the same list (a second one could see another run of the timer).
    let scheduled_after: Vec<String> = after
        .iter()
        .map(name)
        .filter(|n| n.starts_with("scheduled-"))
        .collect();
    for s in &finished {
        let pruned_by_retention = name(s).starts_with("scheduled-")
            && scheduled_after.len() == 2
            && scheduled_after.iter().all(|n| *n > name(s));
        assert!(
            after.contains(s) || pruned_by_retention,
            "finished snapshot {} gone after stop: before {finished:?}, after {after:?}",
            name(s)
        );
    }
    assert_eq!(
        c.list_units(&format!("{prefix}-*")),
        "",
        "nothing left loaded"
    );
    // A snapshot needs etcd running: a clear error, no file.
    let before = e.list().len();
    let out = e.ku(&["snapshot", "save"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("kubeunit start"), "{}", text(&out));
    assert_eq!(e.list().len(), before);
    let leftovers: Vec<_> = std::fs::read_dir(state.join("data/snapshots"))
        .unwrap()
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Bad input to every snapshot command, without a systemd: exit 2, a fix, nothing changed.
#[test]
fn bad_input_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let bin = executable_bin_dir(tmp.path());
    // etcdctl and etcdutl next to etcd's binary.
    let etcd = format!(
        "components.etcd.binary={}",
        etcd_bin_dir().join("etcd").display()
    );
    gen_ok(
        &dir,
        &[
            "--profile",
            "control-plane",
            "--bin-dir",
            bin.to_str().unwrap(),
            "--set",
            &etcd,
        ],
    );
    let garbage = tmp.path().join("garbage.db");
    std::fs::write(&garbage, "not a snapshot\n").unwrap();
    let existing = tmp.path().join("exists.db");
    std::fs::write(&existing, "").unwrap();
    let before = snapshot(tmp.path());
    let d = dir.to_str().unwrap();
    let missing = tmp.path().join("never-generated");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "restore",
                garbage.to_str().unwrap(),
                "--yes",
                "--state-dir",
                d,
            ],
            "is not an etcd snapshot",
        ),
        (
            vec!["restore", "/no/such/file.db", "--yes", "--state-dir", d],
            "No such file",
        ),
        (
            vec!["restore", garbage.to_str().unwrap(), "--state-dir", d],
            "add --yes",
        ),
        (
            vec![
                "restore",
                garbage.to_str().unwrap(),
                "--yes",
                "--state-dir",
                missing.to_str().unwrap(),
            ],
            "not a generated state dir",
        ),
        (
            vec!["save", "--state-dir", missing.to_str().unwrap()],
            "not a generated state dir",
        ),
        (
            vec!["list", "--state-dir", missing.to_str().unwrap()],
            "not a generated state dir",
        ),
        (
            vec!["save", "--prefix", "../up", "--state-dir", d],
            "not a file-name word",
        ),
        (
            vec!["save", "--prune-to", "0", "--state-dir", d],
            "--prune-to 0",
        ),
        (
            vec!["save", existing.to_str().unwrap(), "--state-dir", d],
            "exists",
        ),
        (
            vec!["save", "/no/such/dir/x.db", "--state-dir", d],
            "no such directory",
        ),
    ];
    for (args, why) in cases {
        let out = run(kubeunit().arg("snapshot").args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains(why) && text(&out).contains("fix:"),
            "{args:?}: {}",
            text(&out)
        );
    }
    assert_eq!(snapshot(tmp.path()), before, "nothing changed");
    assert!(!missing.exists());

    // A wrong schedule or retention is refused by gen, naming the field, with nothing written.
    for (set, field) in [
        (
            "etcd.snapshot.schedule=every hour",
            "etcd.snapshot.schedule",
        ),
        ("etcd.snapshot.schedule=25:00", "etcd.snapshot.schedule"),
        ("etcd.snapshot.retention=0", "etcd.snapshot.retention"),
        ("etcd.snapshot.dir=relative", "etcd.snapshot.dir"),
        (
            "components.etcd-snapshot.enabled=true",
            "components.etcd-snapshot.enabled",
        ),
    ] {
        let out = run(kubeunit()
            .args(["gen", "--profile", "control-plane", "--state-dir"])
            .arg(&dir)
            .args(["--set", set]));
        assert_eq!(out.status.code(), Some(2), "{set}: {}", text(&out));
        assert!(
            text(&out).contains(field) && text(&out).contains("fix:"),
            "{set}: {}",
            text(&out)
        );
    }
    assert_eq!(snapshot(tmp.path()), before, "gen changed nothing");

    // `snapshot list` of an environment without snapshots says so.
    let out = run(kubeunit().args(["snapshot", "list", "--state-dir", d]));
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("no snapshots in"), "{}", text(&out));
    // Every snapshot command has examples.
    for sub in [vec![], vec!["save"], vec!["list"], vec!["restore"]] {
        let out = run(kubeunit().arg("snapshot").args(&sub).arg("--help"));
        assert!(text(&out).contains("Examples:"), "{sub:?}: {}", text(&out));
    }
}
