//! `kubeunit certs check-expiration` and `kubeunit certs renew` on the control-plane profile against
//! real systemd (the nspawn container) and the pinned etcd and Kubernetes binaries, with
//! certificates valid for a few minutes: residual times, new serials verified (openssl) against the
//! unchanged CAs, exactly the components that use a renewed certificate restarted (InvocationID),
//! the new certificates served, the cluster healthy throughout. Then the bad inputs: exit 2 and
//! nothing changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::container::{control_plane_args, gen_in, Container};
use crate::common::ports::Ports;
use crate::common::*;

/// How long the leaf certificates of the running environment last: a few minutes, long enough for
/// a start and three renewals on a loaded machine.
const VALIDITY_SECS: i64 = 600;
/// The environment's name: unique to this test binary (other tests' containers share the host's
/// cgroup and network).
const ENV: &str = "kucerts";
const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn unix(rfc3339: &str) -> i64 {
    let t = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{rfc3339}: {e}"));
    t.unix_timestamp()
}

struct Env<'a> {
    c: &'a Container,
    state: PathBuf,
    kubectl: PathBuf,
    ports: &'a Ports,
}

impl Env<'_> {
    fn ku(&self, args: &[&str]) -> Output {
        let mut argv: Vec<&str> = args.to_vec();
        // After the subcommand(s): `certs renew NAME` takes --state-dir after `renew`.
        let at = if args[0] == "certs" { 2 } else { 1 };
        let state = self.state.to_str().unwrap();
        argv.splice(at..at, ["--state-dir", state]);
        self.c.kubeunit(&argv)
    }

    fn ku_ok(&self, args: &[&str]) -> String {
        let out = self.ku(args);
        assert!(
            out.status.success(),
            "kubeunit {args:?}: {}\n{}",
            text(&out),
            self.c.log_text()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ku_ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }

    /// Leaf certificate name -> its row of `certs check-expiration -o json`.
    fn leaves(&self) -> BTreeMap<String, serde_json::Value> {
        let j = self.json(&["certs", "check-expiration", "-o", "json"]);
        j["certificates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["name"].as_str().unwrap().to_string(), c.clone()))
            .collect()
    }

    fn unit(&self, component: &str) -> String {
        unit(&self.state, component)
    }

    /// Each component's InvocationID (new on every start of its unit).
    fn invocations(&self) -> BTreeMap<&'static str, String> {
        COMPONENTS
            .iter()
            .map(|comp| {
                let out = self.c.run(&[
                    "systemctl",
                    "show",
                    "-p",
                    "InvocationID",
                    "--value",
                    &self.unit(comp),
                ]);
                let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
                assert!(!id.is_empty(), "{comp}: no InvocationID: {}", text(&out));
                (*comp, id)
            })
            .collect()
    }

    fn readyz(&self) {
        let out = run(Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(self.state.join("kubeconfig/admin.kubeconfig"))
            .args(["get", "--raw", "/readyz"]));
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
            "kubectl get --raw /readyz: {}",
            text(&out)
        );
    }

    fn all_healthy(&self) {
        let st = self.json(&["status", "-o", "json"]);
        for row in st.as_array().unwrap() {
            assert_eq!(row["healthy"], true, "{row}");
        }
    }

    /// The serial (hex, lowercase) of the certificate a TLS server on 127.0.0.1:`port` presents.
    fn served_serial(&self, port: u16) -> String {
        let out = run(Command::new("sh").arg("-c").arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} </dev/null 2>/dev/null | openssl x509 -noout -serial"
        )));
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        line.strip_prefix("serial=")
            .unwrap_or_else(|| panic!("no serial from port {port}: {}", text(&out)))
            .to_lowercase()
    }

    fn pki(&self, rel: &str) -> PathBuf {
        self.state.join("pki").join(rel)
    }
}

/// `openssl verify` of a leaf against its CA's certificate file.
fn openssl_verifies(ca: &Path, leaf: &Path) -> bool {
    let out = run(Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(ca)
        .arg(leaf));
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains(": OK")
}

fn sha(path: &Path) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

#[test]
fn renew_replaces_certificates_and_restarts_only_their_users() {
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let ports = Ports::allocate();
    let c = Container::boot("certs");
    let epoch = now_secs();
    let mut args = control_plane_args(&version);
    for set in [
        format!("name={ENV}"),
        format!("pki.certValidity={}m", VALIDITY_SECS / 60),
        format!("pki.epoch={epoch}"),
    ] {
        args.push("--set".into());
        args.push(set);
    }
    let state = gen_in(&c, "state", &ports, &args);
    let e = Env {
        c: &c,
        state: state.clone(),
        kubectl: kubernetes_bin_dir().join("kubectl"),
        ports: &ports,
    };
    e.ku_ok(&["start"]);
    e.readyz();

    // check-expiration: every leaf from the epoch for the validity, its residual time counting down;
    // the CAs last years.
    let before = e.leaves();
    let elapsed = now_secs() - epoch;
    assert_eq!(before.len(), 12, "{before:?}");
    for (name, row) in &before {
        assert_eq!(unix(row["notBefore"].as_str().unwrap()), epoch, "{name}");
        assert_eq!(
            unix(row["notAfter"].as_str().unwrap()),
            epoch + VALIDITY_SECS,
            "{name}"
        );
        let residual = row["residualSeconds"].as_i64().unwrap();
        assert!(
            residual <= VALIDITY_SECS - elapsed + 1 && residual >= VALIDITY_SECS - elapsed - 30,
            "{name}: residual {residual}s, {elapsed}s after the epoch"
        );
        assert_eq!(row["signedByCa"], true, "{name}");
    }
    let j = e.json(&["certs", "check-expiration", "-o", "json"]);
    for ca in j["certificateAuthorities"].as_array().unwrap() {
        assert!(
            ca["residualSeconds"].as_i64().unwrap() > 9 * 365 * 86_400,
            "{ca}"
        );
    }
    // Who uses what comes from the units and config files.
    let used = |name: &str| before[name]["usedBy"].clone();
    assert_eq!(used("etcd/server"), serde_json::json!(["etcd"]));
    assert_eq!(
        used("apiserver-etcd-client"),
        serde_json::json!(["kube-apiserver"])
    );
    assert_eq!(used("scheduler"), serde_json::json!(["kube-scheduler"]));
    assert_eq!(used("admin"), serde_json::json!([]));
    let table = e.ku_ok(&["certs", "check-expiration"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("apiserver "))
        .unwrap_or_else(|| panic!("{table}"));
    let left = (VALIDITY_SECS - (now_secs() - epoch)) / 60;
    assert!(
        row.contains(&format!(" {left}m")) || row.contains(&format!(" {}m", left - 1)),
        "about {left} minutes left: {row}"
    );
    assert!(table.contains("CERTIFICATE AUTHORITY"), "{table}");

    // status warns: everything expires within 30 days.
    let st = e.json(&["status", "-o", "json"]);
    for row in st.as_array().unwrap() {
        assert!(
            !row["certificatesExpiring"].as_array().unwrap().is_empty(),
            "{row}"
        );
    }
    let status_text = e.ku_ok(&["status"]);
    assert!(
        status_text.contains("WARNING: certificates expire within 30 days")
            && status_text.contains("kubeunit certs renew all"),
        "{status_text}"
    );

    let cas = [
        "ca.crt",
        "ca.key",
        "etcd/ca.crt",
        "etcd/ca.key",
        "front-proxy-ca.crt",
    ];
    let ca_digests: Vec<Vec<u8>> = cas.iter().map(|f| sha(&e.pki(f))).collect();
    let scheduler_port = e.ports.port("scheduler");
    assert_eq!(
        e.served_serial(scheduler_port),
        before["scheduler-server"]["serial"].as_str().unwrap()
    );

    // 1. The scheduler's two certificates: the scheduler restarts, nothing else.
    let ids0 = e.invocations();
    let renewed_at = now_secs();
    let j = e.json(&[
        "certs",
        "renew",
        "scheduler",
        "scheduler-server",
        "-o",
        "json",
    ]);
    let comps = j["components"].as_array().unwrap();
    assert_eq!(comps.len(), 1, "{j}");
    assert_eq!(comps[0]["component"], "kube-scheduler");
    assert_eq!(comps[0]["action"], "restarted");
    assert_eq!(
        j["kubeconfigs"],
        serde_json::json!(["kubeconfig/scheduler.kubeconfig"])
    );
    let ids1 = e.invocations();
    for comp in COMPONENTS {
        assert_eq!(
            ids0[comp] != ids1[comp],
            comp == "kube-scheduler",
            "{comp}: {} -> {}",
            ids0[comp],
            ids1[comp]
        );
    }
    let after = e.leaves();
    for (name, row) in &after {
        let renewed = name == "scheduler" || name == "scheduler-server";
        assert_eq!(
            row["serial"] != before[name]["serial"],
            renewed,
            "{name}: serial {} -> {}",
            before[name]["serial"],
            row["serial"]
        );
        if renewed {
            // Valid from the renewal, for the full validity.
            let nb = unix(row["notBefore"].as_str().unwrap());
            assert!(nb >= renewed_at - 1 && nb <= now_secs(), "{name}: {row}");
            assert_eq!(unix(row["notAfter"].as_str().unwrap()), nb + VALIDITY_SECS);
            assert!(row["residualSeconds"].as_i64().unwrap() > VALIDITY_SECS - 60);
        }
    }
    // The restarted scheduler serves the new certificate.
    assert_eq!(
        e.served_serial(scheduler_port),
        after["scheduler-server"]["serial"].as_str().unwrap()
    );
    e.all_healthy();

    // 2. admin: the kubeconfig is rewritten, no component restarts, and kubectl works with it.
    let j = e.json(&["certs", "renew", "admin", "-o", "json"]);
    assert_eq!(j["components"], serde_json::json!([]), "{j}");
    assert_eq!(
        j["kubeconfigs"],
        serde_json::json!(["kubeconfig/admin.kubeconfig"])
    );
    assert_eq!(e.invocations(), ids1);
    e.readyz();

    // 3. all: every component restarts in place, the cluster comes back healthy, and every new
    // certificate verifies against its unchanged CA.
    let apiserver_port = e.ports.port("apiserver");
    let out = e.ku_ok(&["certs", "renew", "all"]);
    for comp in COMPONENTS {
        assert!(
            out.contains(&format!("{comp}: restarted, healthy after")),
            "{comp}: {out}"
        );
    }
    let ids2 = e.invocations();
    for comp in COMPONENTS {
        assert_ne!(ids1[comp], ids2[comp], "{comp} restarted");
    }
    e.all_healthy();
    e.readyz();
    let last = e.leaves();
    for (name, row) in &last {
        assert_ne!(row["serial"], after[name]["serial"], "{name}");
        let ca = row["ca"].as_str().unwrap();
        assert!(
            openssl_verifies(&e.pki(&format!("{ca}.crt")), &e.pki(&format!("{name}.crt"))),
            "{name} against {ca}"
        );
    }
    assert_eq!(
        e.served_serial(apiserver_port),
        last["apiserver"]["serial"].as_str().unwrap()
    );
    let now: Vec<Vec<u8>> = cas.iter().map(|f| sha(&e.pki(f))).collect();
    assert_eq!(now, ca_digests, "CAs unchanged");
    // The controller-manager works with its new identity: it still reconciles (a Deployment
    // gets its ReplicaSet).
    let kubectl = |args: &[&str]| {
        run(Command::new(&e.kubectl)
            .arg("--kubeconfig")
            .arg(state.join("kubeconfig/admin.kubeconfig"))
            .args(args))
    };
    let out = kubectl(&[
        "create",
        "deployment",
        "after-renew",
        "--image=registry.invalid/x",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    wait_for(
        "the Deployment's ReplicaSet",
        Duration::from_secs(60),
        || {
            let out = kubectl(&["get", "rs", "-l", "app=after-renew", "-o", "name"]);
            !String::from_utf8_lossy(&out.stdout).trim().is_empty()
        },
    );

    // The state dir is what gen would write; a gen keeps the renewed certificates.
    let check = e.ku(&["gen", "--check"]);
    assert!(check.status.success(), "{}", text(&check));
    let crt = std::fs::read(e.pki("apiserver.crt")).unwrap();
    let profile = state.join("profile.yaml");
    e.ku_ok(&["gen", "--profile", profile.to_str().unwrap()]);
    assert_eq!(std::fs::read(e.pki("apiserver.crt")).unwrap(), crt);

    e.ku_ok(&["stop"]);
}

/// Certificates that run out: named as expired, the cluster breaks (kubectl refuses the API
/// server's certificate), and `renew all` brings it back while it runs. A stopped environment
/// whose certificates expired is not started (preflight names them and the fix); renewed, it is.
#[test]
fn expired_certificates_are_named_and_renewal_brings_the_cluster_back() {
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let ports = Ports::allocate();
    let c = Container::boot("certs-exp");
    let validity = 120;
    let epoch = now_secs();
    let mut args = control_plane_args(&version);
    for set in [
        format!("name={ENV}x"),
        "pki.certValidity=2m".to_string(),
        format!("pki.epoch={epoch}"),
    ] {
        args.push("--set".into());
        args.push(set);
    }
    let state = gen_in(&c, "state", &ports, &args);
    let e = Env {
        c: &c,
        state: state.clone(),
        kubectl: kubernetes_bin_dir().join("kubectl"),
        ports: &ports,
    };
    e.ku_ok(&["start"]);
    e.readyz();
    let wait = epoch + validity + 2 - now_secs();
    assert!(wait > 0, "started after the certificates ran out");
    std::thread::sleep(Duration::from_secs(wait as u64));

    for (name, row) in e.leaves() {
        assert_eq!(row["expired"], true, "{name}: {row}");
        assert!(row["residualSeconds"].as_i64().unwrap() < 0, "{name}");
    }
    let table = e.ku_ok(&["certs", "check-expiration"]);
    assert!(
        table.contains("expired certificates: renew them"),
        "{table}"
    );
    let status_text = String::from_utf8_lossy(&e.ku(&["status"]).stdout).into_owned();
    assert!(status_text.contains("apiserver (expired)"), "{status_text}");
    let out = run(Command::new(&e.kubectl)
        .arg("--kubeconfig")
        .arg(state.join("kubeconfig/admin.kubeconfig"))
        .args(["get", "--raw", "/readyz"]));
    assert!(
        !out.status.success(),
        "an expired serving certificate is refused"
    );
    assert!(text(&out).contains("expired"), "{}", text(&out));

    let ids = e.invocations();
    let j = e.json(&["certs", "renew", "all", "-o", "json"]);
    let actions: Vec<(&str, &str)> = j["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["component"].as_str().unwrap(),
                o["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        COMPONENTS
            .iter()
            .map(|c| (*c, "restarted"))
            .collect::<Vec<_>>()
    );
    let now = e.invocations();
    for comp in COMPONENTS {
        assert_ne!(ids[comp], now[comp], "{comp}");
    }
    e.readyz();
    e.all_healthy();

    // Stopped with expired certificates (issued at an epoch long gone): start refuses before
    // anything starts, and names the fix; after the renewal it starts.
    e.ku_ok(&["stop"]);
    let profile = state.join("profile.yaml");
    let old = format!("pki.epoch={}", now_secs() - 3600);
    e.ku_ok(&["gen", "--profile", profile.to_str().unwrap(), "--set", &old]);
    let out = e.ku(&["start"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("certificates expired: apiserver")
            && text(&out).contains("kubeunit certs renew all"),
        "{}",
        text(&out)
    );
    let active = c.run(&[
        "systemctl",
        "list-units",
        "--state=active",
        "--no-legend",
        "--plain",
        &format!("{}-*", unit_prefix(&state)),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&active.stdout).trim(),
        "",
        "nothing started"
    );
    let j = e.json(&["certs", "renew", "all", "-o", "json"]);
    for o in j["components"].as_array().unwrap() {
        assert_eq!(o["action"], "notRunning", "{o}");
    }
    e.ku_ok(&["start"]);
    e.readyz();
    e.ku_ok(&["stop"]);
}

/// Bad input: exit 2 and the state dir exactly as it was (bytes, modes, mtimes).
#[test]
fn bad_input_exits_2_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_ok(
        &dir,
        &[
            "--profile",
            "control-plane",
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "name=kucerts-bad",
        ],
    );
    let ku = |args: &[&str]| {
        let mut cmd = kubeunit();
        cmd.args(args);
        // No systemd needed: bad input is refused before it would be asked.
        cmd.env("KUBEUNIT_BUS_ADDRESS", "unix:path=/nonexistent/bus");
        run(&mut cmd)
    };
    let d = dir.to_str().unwrap();
    let before = snapshot(&dir);
    for (args, says) in [
        (vec!["renew", "nope"], "no certificate 'nope'"),
        (vec!["renew", "ca"], "ca is a CA"),
        (vec!["renew", "etcd/ca", "admin"], "etcd/ca is a CA"),
        (vec!["renew", "front-proxy-ca"], "never replaces a CA"),
        (vec!["renew", "kubelet"], "kubelet, which is not enabled"),
        (vec!["renew"], "required"),
        (vec!["renew", "all", "--timeout", "soon"], "invalid value"),
        (vec!["check-expiration", "-o", "yaml"], "invalid value"),
    ] {
        let mut argv = vec!["certs"];
        argv.extend(args.iter().copied());
        argv.extend(["--state-dir", d]);
        let out = ku(&argv);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{argv:?}: {}", text(&out));
        assert_eq!(snapshot(&dir), before, "{argv:?} changed the state dir");
    }
    // The messages carry the fix.
    let out = ku(&["certs", "renew", "ca", "--state-dir", d]);
    assert!(
        text(&out).contains("kubeunit gen --force"),
        "{}",
        text(&out)
    );
    let out = ku(&["certs", "renew", "nope", "--state-dir", d]);
    assert!(
        text(&out).contains("apiserver, apiserver-kubelet-client"),
        "lists the names: {}",
        text(&out)
    );

    // A state dir that differs from what gen would write is not renewed (that would write the
    // difference too).
    let audit = dir.join("config/audit-policy.yaml");
    let mut edited = std::fs::read_to_string(&audit).unwrap();
    edited.push_str("# mine\n");
    std::fs::write(&audit, &edited).unwrap();
    let before = snapshot(&dir);
    let out = ku(&["certs", "renew", "all", "--no-restart", "--state-dir", d]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("tampered config/audit-policy.yaml")
            && text(&out).contains("kubeunit gen"),
        "{}",
        text(&out)
    );
    assert_eq!(snapshot(&dir), before);

    // Not a generated state dir: an empty one and a missing one, for both commands.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let missing = tmp.path().join("missing");
    for target in [&empty, &missing] {
        for args in [
            vec!["certs", "check-expiration"],
            vec!["certs", "renew", "all", "--no-restart"],
            vec!["certs", "renew", "all"],
        ] {
            let mut argv = args.clone();
            argv.extend(["--state-dir", target.to_str().unwrap()]);
            let out = ku(&argv);
            assert_eq!(out.status.code(), Some(2), "{argv:?}: {}", text(&out));
            assert!(text(&out).contains("kubeunit gen"), "{}", text(&out));
        }
    }
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    assert!(!missing.exists());

    // A validity under a minute is refused by gen (a minute and more is fine).
    let short = tmp.path().join("short");
    let out = run(kubeunit()
        .args(["gen", "--profile", "control-plane", "--state-dir"])
        .arg(&short)
        .args(["--set", "network.advertiseAddress=192.0.2.10"])
        .args(["--set", "pki.certValidity=30s"]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("pki.certValidity"), "{}", text(&out));
    assert!(!short.exists());
}

/// Without systemd (--no-restart): the certificates are renewed, the kubeconfigs that embed them
/// rewritten, the state dir consistent; the help has examples.
#[test]
fn renew_without_restart_and_help() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let epoch = now_secs().to_string();
    gen_ok(
        &dir,
        &[
            "--profile",
            "control-plane",
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "pki.certValidity=2m",
            "--set",
            &format!("pki.epoch={epoch}"),
        ],
    );
    let d = dir.to_str().unwrap();
    let kubeconfig = std::fs::read(dir.join("kubeconfig/controller-manager.kubeconfig")).unwrap();
    let admin = std::fs::read(dir.join("kubeconfig/admin.kubeconfig")).unwrap();
    let out = run(kubeunit().args([
        "certs",
        "renew",
        "controller-manager",
        "--no-restart",
        "--state-dir",
        d,
        "-o",
        "json",
    ]));
    assert!(out.status.success(), "{}", text(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["components"][0]["component"], "kube-controller-manager");
    assert_eq!(j["components"][0]["action"], "skipped");
    assert_ne!(
        std::fs::read(dir.join("kubeconfig/controller-manager.kubeconfig")).unwrap(),
        kubeconfig
    );
    assert_eq!(
        std::fs::read(dir.join("kubeconfig/admin.kubeconfig")).unwrap(),
        admin
    );
    assert!(openssl_verifies(
        &dir.join("pki/ca.crt"),
        &dir.join("pki/controller-manager.crt")
    ));
    let check = run(kubeunit().args(["gen", "--check", "--state-dir", d]));
    assert!(check.status.success(), "{}", text(&check));
    let out = run(kubeunit().args(["certs", "check-expiration", "--state-dir", d]));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(table.contains("USED BY"), "{table}");

    // The user's own edits (a unit file, an addon of theirs) do not stop a renewal, and stay.
    let unit = dir.join("units").join(unit(&dir, "kube-scheduler"));
    let mut edited = std::fs::read_to_string(&unit).unwrap();
    edited.push_str("# my edit\n");
    std::fs::write(&unit, &edited).unwrap();
    std::fs::write(dir.join("addons/50-mine.yaml"), "kind: Namespace\n").unwrap();
    let differences = |out: &Output| {
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        j["differences"].clone()
    };
    let before = differences(&run(kubeunit().args([
        "gen",
        "--check",
        "--state-dir",
        d,
        "-o",
        "json",
    ])));
    assert_eq!(before.as_array().unwrap().len(), 2, "{before}");
    let scheduler = std::fs::read(dir.join("pki/scheduler.crt")).unwrap();
    let out = run(kubeunit().args([
        "certs",
        "renew",
        "scheduler",
        "--no-restart",
        "--state-dir",
        d,
    ]));
    assert!(out.status.success(), "{}", text(&out));
    assert_ne!(
        std::fs::read(dir.join("pki/scheduler.crt")).unwrap(),
        scheduler
    );
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), edited);
    let after = differences(&run(kubeunit().args([
        "gen",
        "--check",
        "--state-dir",
        d,
        "-o",
        "json",
    ])));
    assert_eq!(after, before);

    for args in [
        vec!["certs", "--help"],
        vec!["certs", "renew", "--help"],
        vec!["certs", "check-expiration", "--help"],
    ] {
        let out = run(kubeunit().args(&args));
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Examples:"),
            "{args:?}: {}",
            text(&out)
        );
    }
}
