//! `kubeunit debug`: a component under dlv in place, on real systemd and the pinned binaries (debug
//! builds of kube-scheduler and kube-apiserver, dlv, from scripts/build-test-binaries.sh). A real dlv
//! client (its JSON-RPC API) stops the scheduler in its per-pod function and reads the pod's name;
//! the API server under dlv still serves the others. Also `cmdline`, `restart --binary` and the bad
//! inputs of `debug`.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::container::{control_plane_args, gen_in, Container, Env};
use crate::common::ports::Ports;
use crate::common::*;
use serde_json::{json, Value};

/// dlv's JSON-RPC API (version 2): Go's net/rpc JSON codec, one object per request and reply.
struct Dlv {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    id: u64,
}

impl Dlv {
    fn connect(addr: &str) -> Dlv {
        let stream =
            TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to dlv at {addr}: {e}"));
        Dlv {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            id: 0,
        }
    }

    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.id += 1;
        let req =
            json!({"method": format!("RPCServer.{method}"), "params": [params], "id": self.id});
        writeln!(self.writer, "{req}").unwrap();
        self.id
    }

    fn reply(&mut self, id: u64) -> Value {
        let mut de = serde_json::Deserializer::from_reader(&mut self.reader).into_iter::<Value>();
        loop {
            let v = de.next().expect("a reply from dlv").expect("JSON from dlv");
            if v["id"] == id {
                assert!(v["error"].is_null(), "dlv: {}", v["error"]);
                return v["result"].clone();
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.reply(id)
    }
}

impl Env<'_> {
    fn status(&self) -> Vec<Value> {
        let out = self.ku(&["status", "-o", "json"]);
        serde_json::from_slice(&out.stdout).expect("status -o json")
    }

    fn row(&self, component: &str) -> Value {
        self.status()
            .into_iter()
            .find(|r| r["component"] == component)
            .unwrap()
    }

    /// A pod (no node here: it stays Pending, but the scheduler tries it); retried until the
    /// default ServiceAccount exists.
    fn create_pod(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self.kubectl(&[
                "run",
                name,
                &format!("--image={}", pinned("TEST_IMAGE")[0]),
                "--restart=Never",
            ]);
            if out.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "kubectl run {name}: {}",
                text(&out)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

#[test]
fn a_component_runs_under_dlv_in_place_and_comes_back() {
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let c = Container::boot("debug");
    let ports = Ports::allocate();
    let state = gen_in(&c, "cp", &ports, &control_plane_args(&version));
    let e = Env {
        c: &c,
        state,
        kubectl: kubernetes_bin_dir().join("kubectl"),
    };
    let dlv = built_dir("dlv-").join("dlv");
    let debug_bins = built_dir("debug-kubernetes-");
    let dlv_arg = dlv.to_string_lossy().into_owned();
    let scheduler = debug_bins
        .join("kube-scheduler")
        .to_string_lossy()
        .into_owned();

    // Not running yet: refused, nothing started.
    let out = e.ku(&["debug", "kube-scheduler", "--dlv", &dlv_arg]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("kube-scheduler is not running"),
        "{}",
        text(&out)
    );
    let prefix = unit_prefix(&e.state);
    let units = format!("{prefix}*");
    let scheduler_unit = unit(&e.state, "kube-scheduler");
    let scheduler_debug = format!("{prefix}-kube-scheduler-debug.service");
    assert_eq!(c.list_units(&units), "");

    e.ku_ok(&["start"]);
    let units_before = c.list_units(&units);
    assert!(units_before.contains(&scheduler_unit), "{units_before}");
    let refused = |args: &[&str], needle: &str| {
        let out = e.ku(args);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains(needle),
            "{args:?}: {needle:?} missing:\n{}",
            text(&out)
        );
        assert_eq!(
            c.list_units(&units),
            units_before,
            "{args:?} changed nothing"
        );
    };
    refused(
        &["debug", "kube-nothing", "--dlv", &dlv_arg],
        "no component 'kube-nothing'",
    );
    refused(
        &["debug", "kube-scheduler", "--dlv", "/nonexistent/dlv"],
        "scripts/build-test-binaries.sh --debug",
    );
    let apiserver_port = ports.port("apiserver").to_string();
    refused(
        &[
            "debug",
            "kube-scheduler",
            "--dlv",
            &dlv_arg,
            "--listen",
            &format!("127.0.0.1:{apiserver_port}"),
        ],
        &format!("port {apiserver_port} for dlv is already in use"),
    );
    refused(
        &[
            "debug",
            "kube-scheduler",
            "--dlv",
            &dlv_arg,
            "--listen",
            "0.0.0.0:4711",
        ],
        "--allow-remote",
    );
    refused(
        &["debug", "kube-scheduler", "--stop"],
        "does not run under a debugger",
    );

    // The scheduler under dlv, running (--continue), on a port we choose.
    let listen = format!("127.0.0.1:{}", ports.spare(0));
    let out = e.ku_ok(&[
        "debug",
        "kube-scheduler",
        "--dlv",
        &dlv_arg,
        "--binary",
        &scheduler,
        "--listen",
        &listen,
        "--continue",
        "-o",
        "json",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["healthy"], true, "{report}");
    assert_eq!(report["unit"], scheduler_debug.as_str());
    let row = e.row("kube-scheduler");
    assert_eq!(row["debugger"], listen.as_str(), "{row}");
    assert_eq!(row["healthy"], true, "{row}");
    let text_status = String::from_utf8_lossy(&e.ku(&["status"]).stdout).into_owned();
    assert!(
        text_status.contains(&format!(
            "kube-scheduler runs under dlv ({scheduler_debug}): dlv connect {listen}"
        )),
        "{text_status}"
    );
    // Its own arguments, after dlv's.
    let argv: Vec<String> = serde_json::from_value(report["argv"].clone()).unwrap();
    let cmdline: Value =
        serde_json::from_str(&e.ku_ok(&["cmdline", "kube-scheduler", "-o", "json"])).unwrap();
    let own: Vec<String> = serde_json::from_value(cmdline["argv"].clone()).unwrap();
    assert_eq!(
        argv[argv.iter().position(|a| a == "--").unwrap() + 1..],
        own[1..]
    );

    // A client stops it in the per-pod scheduling function and reads the pod's name.
    let mut d = Dlv::connect(&listen);
    d.call("Command", json!({"name": "halt"}));
    let bp = d.call(
        "CreateBreakpoint",
        // Only for our pod: a retry of another must not stop it first.
        json!({"Breakpoint": {
            "functionName": "k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOnePod",
            "Cond": "podInfo.Pod.Name == \"debug-me\"",
        }}),
    );
    let bp_id = bp["Breakpoint"]["id"].as_i64().unwrap();
    let cont = d.send("Command", json!({"name": "continue"}));
    e.create_pod("debug-me");
    let st = d.reply(cont);
    assert_eq!(
        st["State"]["currentThread"]["breakPoint"]["id"], bp_id,
        "{st}"
    );
    let name = d.call(
        "Eval",
        json!({
            "Scope": {"GoroutineID": -1, "Frame": 0},
            "Expr": "podInfo.Pod.Name",
            "Cfg": {"FollowPointers": true, "MaxVariableRecurse": 1, "MaxStringLen": 64, "MaxArrayValues": 64, "MaxStructFields": -1},
        }),
    );
    assert_eq!(name["Variable"]["value"], "debug-me", "{name}");
    d.call("ClearBreakpoint", json!({"Id": bp_id}));
    d.send("Command", json!({"name": "continue"}));
    drop(d);

    // Its logs and dlv's are in the journal, under the component.
    let logs = e.ku(&["logs", "kube-scheduler", "-n", "100000"]);
    assert!(
        text(&logs).contains("API server listening at"),
        "{}",
        text(&logs)
    );

    // Back to the normal unit, healthy.
    e.ku_ok(&["debug", "kube-scheduler", "--stop"]);
    let row = e.row("kube-scheduler");
    assert_eq!(row["unit"], scheduler_unit.as_str());
    assert!(row["debugger"].is_null() && row["healthy"] == true, "{row}");

    // The API server under dlv becomes ready; the others keep working through it.
    let apiserver = debug_bins
        .join("kube-apiserver")
        .to_string_lossy()
        .into_owned();
    let out = e.ku_ok(&[
        "debug",
        "kube-apiserver",
        "--dlv",
        &dlv_arg,
        "--binary",
        &apiserver,
        "--continue",
        "--timeout",
        "240",
        "-o",
        "json",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["healthy"], true, "{report}");
    assert!(
        e.status().iter().all(|r| r["healthy"] == true),
        "{:?}",
        e.status()
    );
    let out = e.kubectl(&[
        "create",
        "deployment",
        "web",
        &format!("--image={}", pinned("TEST_IMAGE")[0]),
        "--replicas=2",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    // The controller-manager makes the pods (through the API server under dlv).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = e.kubectl(&["get", "pods", "-l", "app=web", "-o", "name"]);
        if String::from_utf8_lossy(&out.stdout).lines().count() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no pods of the deployment: {}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // stop takes the debug unit with the rest.
    e.ku_ok(&["stop"]);
    assert_eq!(c.list_units(&units), "", "nothing left");
}

/// `restart --binary`: another binary for one component, recorded in the profile: `status` and
/// `gen --check` show it as an override, not as tampering; `--reset-binary` goes back.
#[test]
fn restart_with_another_binary_is_an_override() {
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let c = Container::boot("restart-binary");
    let ports = Ports::allocate();
    // A name of its own: test containers share one cgroup tree, where two environments of one name
    // would have the same unit cgroups (see tests/it/common/container.rs).
    let mut args = control_plane_args(&version);
    args.extend(["--set".into(), "name=restart-binary".into()]);
    let state = gen_in(&c, "cp", &ports, &args);
    let e = Env {
        c: &c,
        state,
        kubectl: kubernetes_bin_dir().join("kubectl"),
    };
    e.ku_ok(&["start"]);
    // A differently built binary: the debug build of the scheduler for the controller-manager would
    // not do; the pinned controller-manager copied elsewhere is another file with another path.
    let other = c.work.join("my-build/kube-controller-manager");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::copy(kubernetes_bin_dir().join("kube-controller-manager"), &other).unwrap();
    let other_s = other.to_string_lossy().into_owned();

    // A binary that is not there changes nothing.
    let before = std::fs::read_to_string(e.state.join("profile.yaml")).unwrap();
    let out = e.ku(&[
        "restart",
        "kube-controller-manager",
        "--binary",
        "/nonexistent/kcm",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is not an executable file"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_to_string(e.state.join("profile.yaml")).unwrap(),
        before
    );

    e.ku_ok(&["restart", "kube-controller-manager", "--binary", &other_s]);
    let row = e.row("kube-controller-manager");
    assert_eq!(row["binaryOverride"], other_s.as_str(), "{row}");
    assert_eq!(row["healthy"], true, "{row}");
    let pid = row["pid"].as_u64().unwrap();
    // The process runs it (PIDs are the container's).
    let exe = c.run(&["readlink", &format!("/proc/{pid}/exe")]);
    assert!(
        String::from_utf8_lossy(&exe.stdout)
            .trim()
            .ends_with("my-build/kube-controller-manager"),
        "{}",
        text(&exe)
    );
    let status_text = String::from_utf8_lossy(&e.ku(&["status"]).stdout).into_owned();
    assert!(
        status_text.contains(&format!("kube-controller-manager runs {other_s}")),
        "{status_text}"
    );
    let check = e.ku(&["gen", "--check"]);
    assert!(
        check.status.success(),
        "an override is no difference: {}",
        text(&check)
    );
    assert!(
        text(&check).contains(&format!(
            "override  components.kube-controller-manager.binary={other_s}"
        )),
        "{}",
        text(&check)
    );

    e.ku_ok(&["restart", "kube-controller-manager", "--reset-binary"]);
    let row = e.row("kube-controller-manager");
    assert!(
        row["binaryOverride"].is_null() && row["healthy"] == true,
        "{row}"
    );
    assert!(!text(&e.ku(&["gen", "--check"])).contains("components.kube-controller-manager.binary"));
    e.ku_ok(&["stop"]);
}

/// `cmdline`: the unit's exact argv, one per line or shell-quoted, and its environment.
#[test]
fn cmdline_prints_what_the_unit_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let bin = executable_bin_dir(tmp.path());
    gen_ok(
        &dir,
        &[
            "--profile",
            "control-plane",
            "--bin-dir",
            bin.to_str().unwrap(),
            "--set",
            "components.kube-scheduler.env.GODEBUG=x509sha1=1 $HOME",
            "--set",
            "components.kube-scheduler.extraArgs.v=4",
        ],
    );
    let out = run(kubeunit()
        .args(["cmdline", "kube-scheduler", "--state-dir"])
        .arg(&dir));
    assert!(out.status.success(), "{}", text(&out));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines[1], bin.join("kube-scheduler").to_string_lossy());
    assert!(lines.contains(&"--v=4".to_string()), "{lines:?}");
    assert!(
        lines.contains(&"GODEBUG=x509sha1=1 $HOME".to_string()),
        "{lines:?}"
    );
    let out = run(kubeunit()
        .args(["cmdline", "kube-scheduler", "--shell", "--state-dir"])
        .arg(&dir));
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let words = shlex_split(&line);
    assert_eq!(words[0], "env");
    assert_eq!(words[1], "GODEBUG=x509sha1=1 $HOME");
    assert_eq!(words[2], bin.join("kube-scheduler").to_string_lossy());
    assert_eq!(&words[2..], &lines[1..lines.len() - 2], "the same argv");
    let out = run(kubeunit()
        .args(["cmdline", "kube-nothing", "--state-dir"])
        .arg(&dir));
    assert!(!out.status.success() && text(&out).contains("no component 'kube-nothing'"));
}

/// What a shell makes of the line, by the shell itself.
fn shlex_split(line: &str) -> Vec<String> {
    let out = run(Command::new("bash").args(["-c", &format!("printf '%s\\n' {line}")]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}
