//! start/stop/status/logs against a real systemd (PID 1 in a container) with the pinned etcd:
//! an etcd-only environment, TLS with the generated certificates.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::container::{gen_in, Container};
use crate::common::ports::Ports;
use crate::common::*;

/// Generate an etcd-only environment `name` inside the container, on `ports`.
fn gen_etcd_env(c: &Container, name: &str, ports: &Ports) -> PathBuf {
    let profile = c.work.join(format!("{name}.yaml"));
    std::fs::write(
        &profile,
        format!(
            "name: {name}\ncomponents:\n  kube-apiserver: {{enabled: false}}\n  kube-controller-manager: {{enabled: false}}\n  kube-scheduler: {{enabled: false}}\n"
        ),
    )
    .unwrap();
    let args = [
        "--profile".to_string(),
        profile.to_string_lossy().into(),
        "--bin-dir".into(),
        etcd_bin_dir().to_string_lossy().into(),
    ];
    gen_in(c, name, ports, &args)
}

fn sd(state: &std::path::Path) -> Vec<String> {
    vec!["--state-dir".into(), state.to_string_lossy().into()]
}

fn ku(c: &Container, cmd: &str, state: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut argv: Vec<String> = vec![cmd.into()];
    argv.extend(sd(state));
    argv.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    c.kubeunit(&argv)
}

fn status_json(c: &Container, state: &std::path::Path) -> serde_json::Value {
    let out = ku(c, "status", state, &["-o", "json"]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("status json: {e}: {}", text(&out)))
}

fn etcdctl(
    c: &Container,
    state: &std::path::Path,
    ports: &Ports,
    args: &[&str],
) -> std::process::Output {
    let etcdctl = etcd_bin_dir().join("etcdctl");
    let pki = state.join("pki");
    let endpoint = format!("--endpoints=https://127.0.0.1:{}", ports.port("etcdClient"));
    let cacert = format!("--cacert={}", pki.join("etcd/ca.crt").display());
    let cert = format!("--cert={}", pki.join("apiserver-etcd-client.crt").display());
    let key = format!("--key={}", pki.join("apiserver-etcd-client.key").display());
    let mut argv = vec![etcdctl.to_str().unwrap(), &endpoint, &cacert, &cert, &key];
    argv.extend_from_slice(args);
    c.run(&argv)
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn etcd_lifecycle_start_status_logs_crash_restart_stop() {
    let ports = Ports::allocate();
    let c = Container::boot("lifecycle");
    let state = gen_etcd_env(&c, "et1", &ports);

    let t = Instant::now();
    let out = ku(&c, "start", &state, &[]);
    let start_secs = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "start: {}\n{}",
        text(&out),
        c.log_text()
    );
    let t_out = text(&out);
    assert!(
        t_out.contains("etcd") && t_out.contains("healthy after"),
        "{t_out}"
    );
    assert!(
        t_out.contains("export KUBECONFIG=") && t_out.contains("kubeunit stop"),
        "{t_out}"
    );
    eprintln!("measured: start of the etcd-only environment took {start_secs:.2}s");

    let st = status_json(&c, &state);
    let etcd = &st[0];
    assert_eq!(etcd["component"], "etcd");
    assert_eq!(etcd["activeState"], "active");
    assert_eq!(etcd["healthy"], true, "{st}");
    let pid = etcd["pid"].as_u64().unwrap();
    assert!(pid > 1, "{st}");
    // And systemd agrees, with the unit in the environment's slice.
    let show = c.run(&[
        "systemctl",
        "show",
        "-p",
        "MainPID,Slice,Type",
        &unit(&state, "etcd"),
    ]);
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains(&format!("MainPID={pid}"))
            && show.contains(&format!("Slice={}.slice", unit_prefix(&state)))
            && show.contains("Type=notify"),
        "{show}"
    );

    let logs = ku(&c, "logs", &state, &["etcd", "-n", "500"]);
    assert!(logs.status.success(), "{}", text(&logs));
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(
        logs.contains(&format!("{}-etcd", unit_prefix(&state)))
            && logs.contains("ready to serve client requests"),
        "{logs}"
    );

    // A key written before a crash survives it: systemd restarts etcd on its own.
    let put = etcdctl(&c, &state, &ports, &["put", "kubeunit-test", "survives"]);
    assert!(put.status.success(), "etcdctl put: {}", text(&put));
    let kill = c.run(&["kill", "-9", &pid.to_string()]);
    assert!(kill.status.success());
    wait_until("etcd restarted by systemd", Duration::from_secs(30), || {
        let st = status_json(&c, &state);
        st[0]["restarts"].as_u64() >= Some(1)
            && st[0]["healthy"] == true
            && st[0]["pid"].as_u64() != Some(pid)
    });
    let get = etcdctl(
        &c,
        &state,
        &ports,
        &["get", "kubeunit-test", "--print-value-only"],
    );
    assert_eq!(
        String::from_utf8_lossy(&get.stdout).trim(),
        "survives",
        "{}",
        text(&get)
    );

    // start on a running environment changes nothing.
    let before = c.list_units("kubeunit-et1*");
    let pid_before = status_json(&c, &state)[0]["pid"].clone();
    let out = ku(&c, "start", &state, &[]);
    assert!(
        out.status.success() && text(&out).contains("already running"),
        "{}",
        text(&out)
    );
    assert_eq!(before, c.list_units("kubeunit-et1*"));
    assert_eq!(pid_before, status_json(&c, &state)[0]["pid"]);

    // etcd accepts only mutual TLS: no client certificate, no answer.
    let etcdctl_bin = etcd_bin_dir().join("etcdctl");
    let anonymous = c.run(&[
        etcdctl_bin.to_str().unwrap(),
        &format!("--endpoints=https://127.0.0.1:{}", ports.port("etcdClient")),
        &format!("--cacert={}", state.join("pki/etcd/ca.crt").display()),
        "--dial-timeout=2s",
        "--command-timeout=3s",
        "get",
        "kubeunit-test",
    ]);
    assert!(
        !anonymous.status.success(),
        "etcd answered a client without a certificate"
    );

    let t = Instant::now();
    let out = ku(&c, "stop", &state, &["-o", "json"]);
    let stop_secs = t.elapsed().as_secs_f64();
    assert!(out.status.success(), "stop: {}", text(&out));
    eprintln!("measured: stop of the etcd-only environment took {stop_secs:.2}s");
    // What scripts read: the units stopped, no busy port.
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stop -o json ({e}): {}", text(&out)));
    assert_eq!(report["busyPorts"], serde_json::json!([]), "{report}");
    assert!(
        report["stopped"].as_array().is_some_and(|s| s
            .iter()
            .any(|u| u.as_str().is_some_and(|u| u.ends_with("-etcd.service")))),
        "{report}"
    );
    assert_eq!(c.list_units("kubeunit-et1*"), "", "no unit may remain");
    let procs = c.run(&["pgrep", "-x", "etcd"]);
    assert!(
        !procs.status.success(),
        "no etcd process may remain: {}",
        text(&procs)
    );
    let ss = c.run(&["ss", "-Htln"]);
    let ss = String::from_utf8_lossy(&ss.stdout);
    for p in [ports.port("etcdClient"), ports.port("etcdPeer")] {
        assert!(
            !ss.contains(&format!(":{p} ")),
            "port {p} still bound:\n{ss}"
        );
    }
    let st = status_json(&c, &state);
    assert_eq!(st[0]["activeState"], "inactive");
}

#[test]
fn busy_port_fails_before_anything_starts() {
    let ports = Ports::allocate();
    let c = Container::boot("busyport");
    let state = gen_etcd_env(&c, "et2", &ports);
    let client = ports.port("etcdClient");
    let peer = format!("http://127.0.0.1:{}", ports.spare(0));
    // Another etcd (plain HTTP) takes the environment's client port.
    let etcd = etcd_bin_dir().join("etcd");
    let blocker = c.run(&[
        "systemd-run",
        "--unit=port-blocker",
        "-p",
        "Type=notify",
        etcd.to_str().unwrap(),
        "--data-dir=/tmp/blocker",
        &format!("--listen-client-urls=http://127.0.0.1:{client}"),
        &format!("--advertise-client-urls=http://127.0.0.1:{client}"),
        &format!("--listen-peer-urls={peer}"),
        &format!("--initial-advertise-peer-urls={peer}"),
        &format!("--initial-cluster=default={peer}"),
    ]);
    assert!(blocker.status.success(), "{}", text(&blocker));
    let out = ku(&c, "start", &state, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains(&format!("port {client}")), "{t}");
    assert!(
        t.contains("ports.etcdClient") && t.contains("etcd") && t.contains("pid "),
        "owner named: {t}"
    );
    assert!(t.contains("fix:"), "{t}");
    assert_eq!(c.list_units("kubeunit-et2*"), "", "nothing may start");
}

#[test]
fn edited_unit_file_is_honoured_and_failed_units_are_reset() {
    let ports = Ports::allocate();
    let c = Container::boot("edited");
    let state = gen_etcd_env(&c, "et3", &ports);
    let etcd = unit(&state, "etcd");
    let unit_path = state.join("units").join(&etcd);
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(unit.contains("--snapshot-count=10000"));
    std::fs::write(
        &unit_path,
        unit.replace("--snapshot-count=10000", "--snapshot-count=4321"),
    )
    .unwrap();

    // A failed unit of the same name (left from an earlier run) is reset, not a blocker.
    let failed = c.run(&["systemd-run", &format!("--unit={etcd}"), "/bin/false"]);
    assert!(failed.status.success(), "{}", text(&failed));
    wait_until("the stand-in unit failed", Duration::from_secs(10), || {
        String::from_utf8_lossy(&c.run(&["systemctl", "is-failed", &etcd]).stdout).trim()
            == "failed"
    });

    let out = ku(&c, "start", &state, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("using your edited units/{etcd}")),
        "{}",
        text(&out)
    );
    let pid = status_json(&c, &state)[0]["pid"].as_u64().unwrap();
    let cmdline = c.run(&["cat", &format!("/proc/{pid}/cmdline")]);
    assert!(String::from_utf8_lossy(&cmdline.stdout).contains("--snapshot-count=4321"));

    // gen --check reports the edit; a tampered certificate blocks start.
    let check = c.kubeunit(&["gen", "--check", "--state-dir", state.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(1));
    assert!(
        text(&check).contains(&format!("tampered  units/{etcd}")),
        "{}",
        text(&check)
    );
    assert!(ku(&c, "stop", &state, &[]).status.success());
    std::fs::copy(
        state.join("pki/admin.crt"),
        state.join("pki/etcd/server.crt"),
    )
    .unwrap();
    let out = ku(&c, "start", &state, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("tampered pki/etcd/server.crt") && text(&out).contains("kubeunit gen"),
        "{}",
        text(&out)
    );
}

#[test]
fn component_that_fails_is_reported_with_its_journal_and_cleaned_up() {
    let ports = Ports::allocate();
    let c = Container::boot("failing");
    let state = gen_etcd_env(&c, "et4", &ports);
    let etcd = unit(&state, "etcd");
    let unit_path = state.join("units").join(&etcd);
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    std::fs::write(
        &unit_path,
        unit.replace("--snapshot-count=10000", "--no-such-flag=1"),
    )
    .unwrap();
    let out = ku(&c, "start", &state, &["--timeout", "30"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains(&format!("etcd ({etcd}) failed to start")), "{t}");
    assert!(
        t.contains("last 20 lines of its journal") && t.contains("no-such-flag"),
        "journal tail: {t}"
    );
    assert_eq!(
        c.list_units("kubeunit-et4*"),
        "",
        "a failed start leaves nothing behind"
    );
}

#[test]
fn two_environments_run_side_by_side_and_stop_independently() {
    let (ports_a, ports_b) = (Ports::allocate(), Ports::allocate());
    let c = Container::boot("sidebyside");
    let a = gen_etcd_env(&c, "eta", &ports_a);
    let b = gen_etcd_env(&c, "etb", &ports_b);
    for dir in [&a, &b] {
        let out = ku(&c, "start", dir, &[]);
        assert!(
            out.status.success(),
            "start {}: {}",
            dir.display(),
            text(&out)
        );
    }
    assert_eq!(status_json(&c, &a)[0]["healthy"], true);
    assert_eq!(status_json(&c, &b)[0]["healthy"], true);
    assert!(ku(&c, "stop", &a, &[]).status.success());
    assert_eq!(status_json(&c, &a)[0]["activeState"], "inactive");
    let sb = status_json(&c, &b);
    assert_eq!(
        sb[0]["healthy"], true,
        "stopping one environment must not touch the other: {sb}"
    );
    // status exit code: 3 when something is not running (like systemctl is-active), 0 when all is well.
    assert_eq!(ku(&c, "status", &a, &[]).status.code(), Some(3));
    assert_eq!(ku(&c, "status", &b, &[]).status.code(), Some(0));
    assert!(ku(&c, "stop", &b, &[]).status.success());
}

#[test]
fn bus_option_drives_a_containers_systemd_from_outside() {
    let ports = Ports::allocate();
    let c = Container::boot("busaddr");
    let state = gen_etcd_env(&c, "et6", &ports);
    // kubeunit on the host, systemd in the container.
    let bus = c.bus_address();
    let out = run(kubeunit()
        .args(["start", "--bus", &bus, "--state-dir"])
        .arg(&state));
    assert!(out.status.success(), "{}", text(&out));
    let inside = c.run(&["systemctl", "is-active", &unit(&state, "etcd")]);
    assert_eq!(String::from_utf8_lossy(&inside.stdout).trim(), "active");
    let out = run(kubeunit()
        .env("KUBEUNIT_BUS_ADDRESS", &bus)
        .args(["status", "-o", "json", "--state-dir"])
        .arg(&state));
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st[0]["healthy"], true);
    let out = run(kubeunit()
        .args(["stop", "--bus", &bus, "--state-dir"])
        .arg(&state));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(c.list_units("kubeunit-et6*"), "");
}

#[test]
fn restart_and_destroy() {
    let ports = Ports::allocate();
    let c = Container::boot("restart");
    let state = gen_etcd_env(&c, "et7", &ports);
    assert!(ku(&c, "start", &state, &[]).status.success());
    let pid = status_json(&c, &state)[0]["pid"].as_u64().unwrap();
    let out = ku(&c, "restart", &state, &["etcd"]);
    assert!(out.status.success(), "{}", text(&out));
    let st = status_json(&c, &state);
    assert_eq!(st[0]["healthy"], true);
    assert_ne!(st[0]["pid"].as_u64().unwrap(), pid);
    // A restart that preflight refuses (a tampered file of the state dir, one etcd does not read)
    // stops nothing: its checks run while the component still serves.
    let pid = st[0]["pid"].as_u64().unwrap();
    let admin = state.join("pki/admin.crt");
    let original = std::fs::read(&admin).unwrap();
    std::fs::copy(state.join("pki/ca.crt"), &admin).unwrap();
    let out = ku(&c, "restart", &state, &["etcd"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("tampered pki/admin.crt"),
        "{}",
        text(&out)
    );
    let st = status_json(&c, &state);
    assert_eq!(
        (st[0]["pid"].as_u64().unwrap(), &st[0]["healthy"]),
        (pid, &serde_json::Value::Bool(true)),
        "the refused restart stopped etcd"
    );
    std::fs::write(&admin, original).unwrap();
    // A name that is no component's is the user's to fix (exit 2).
    let out = ku(&c, "restart", &state, &["kube-dns"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("use one of: etcd"), "{}", text(&out));

    assert!(state.join("data/etcd").exists());
    let out = ku(&c, "destroy", &state, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!state.join("data").exists() && state.join("pki/ca.crt").exists());
    assert_eq!(c.list_units("kubeunit-et7*"), "");
    let out = ku(&c, "destroy", &state, &["--all"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!state.exists());
}

/// `destroy` deletes the runtime data the components own and nothing else, whatever dataDir a
/// (tampered) profile.yaml names.
#[test]
fn destroy_deletes_only_what_the_components_own() {
    let ports = Ports::allocate();
    let c = Container::boot("destroyowned");
    let state = gen_etcd_env(&c, "et8", &ports);
    let profile = state.join("profile.yaml");
    let original = std::fs::read_to_string(&profile).unwrap();
    let data_line = original
        .lines()
        .find(|l| l.starts_with("dataDir:"))
        .unwrap()
        .to_string();

    // A data dir holding the user's own file next to etcd's data.
    let mine = c.work.join("mine");
    std::fs::create_dir_all(mine.join("etcd/member")).unwrap();
    std::fs::write(mine.join("keep.txt"), "mine").unwrap();
    std::fs::write(
        &profile,
        original.replace(&data_line, &format!("dataDir: {}", mine.display())),
    )
    .unwrap();
    let out = ku(&c, "destroy", &state, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!mine.join("etcd").exists(), "etcd's data is deleted");
    assert_eq!(
        std::fs::read_to_string(mine.join("keep.txt")).unwrap(),
        "mine"
    );

    // The root, or a top-level directory: refused, nothing deleted.
    for data in ["/", "/srv"] {
        std::fs::write(
            &profile,
            original.replace(&data_line, &format!("dataDir: {data}")),
        )
        .unwrap();
        let out = ku(&c, "destroy", &state, &[]);
        assert_eq!(out.status.code(), Some(2), "{data}: {}", text(&out));
        assert!(text(&out).contains("not deleting it"), "{}", text(&out));
    }
    assert!(std::path::Path::new("/bin/sh").exists());
}

/// `destroy` kills the main processes at once, but what a unit runs once stopped (ExecStopPost=,
/// the registry caches' filter `down`) still runs to its end: here etcd died by itself and its
/// ExecStopPost= is running when destroy comes.
#[test]
fn destroy_lets_what_a_unit_runs_after_stopping_finish() {
    let ports = Ports::allocate();
    let c = Container::boot("stoppost");
    let state = gen_etcd_env(&c, "et9", &ports);
    let etcd = unit(&state, "etcd");
    let unit_path = state.join("units").join(&etcd);
    let marker = c.work.join("stop-post-ended");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let edited: String = unit
        .lines()
        .map(|l| {
            if l == "[Service]" {
                format!(
                    "{l}\nExecStopPost=/bin/sh -c 'sleep 3; touch {}'\n",
                    marker.display()
                )
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(edited.contains("ExecStopPost="), "{unit}");
    std::fs::write(&unit_path, edited).unwrap();
    let out = ku(&c, "start", &state, &[]);
    assert!(out.status.success(), "{}", text(&out));

    let pid = status_json(&c, &state)[0]["pid"].as_u64().unwrap();
    assert!(c.run(&["kill", "-9", &pid.to_string()]).status.success());
    wait_until(
        "etcd's ExecStopPost= running",
        Duration::from_secs(10),
        || {
            let show = c.run(&["systemctl", "show", "-p", "SubState", "--value", &etcd]);
            String::from_utf8_lossy(&show.stdout).trim() == "stop-post"
        },
    );
    let out = ku(&c, "destroy", &state, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        marker.exists(),
        "destroy killed etcd's ExecStopPost= before it ended"
    );
    assert_eq!(c.list_units("kubeunit-et9*"), "");
}
