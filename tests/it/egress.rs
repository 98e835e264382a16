//! `network.egress` and the offline switch: what `gen` renders and records for each value, what it
//! refuses, what `KUBEUNIT_OFFLINE=1` forces; what the rendered node-network.sh lets out, run in a
//! network namespace of its own against a simulated internet there (in 198.19.255.0/24, as
//! common::internet's); and a dev node on real systemd reaching a simulated internet as egress says, with
//! this host's net.ipv4.ip_forward as it was and nothing leaving by its default route.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::*;

/// `kubeunit gen` into `dir` (a seed, a fixed advertise address, binaries that exist), with `extra`
/// arguments (`--profile dev` unless they name one) and the environment `env`.
fn gen(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let bin = executable_bin_dir(dir.parent().unwrap());
    let mut cmd = kubeunit();
    cmd.arg("gen");
    if !extra.contains(&"--profile") {
        cmd.args(["--profile", "dev"]);
    }
    cmd.args(["--seed", "7", "--bin-dir"])
        .arg(&bin)
        .args([
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--state-dir",
        ])
        .arg(dir)
        .args(extra)
        .envs(env.iter().copied());
    run(&mut cmd)
}

fn gen_ok(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> String {
    let out = gen(dir, extra, env);
    assert!(out.status.success(), "gen {extra:?}: {}", text(&out));
    text(&out)
}

/// A shell variable of the node's rendered node-network.sh, as written (`egress="on"`).
fn script_var(dir: &Path, var: &str) -> String {
    let script = std::fs::read_to_string(dir.join("config/node-network.sh")).unwrap();
    let prefix = format!("{var}=");
    script
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {var}= in node-network.sh"))
        .trim_matches(|c| c == '"' || c == '\'')
        .trim()
        .to_string()
}

fn recorded(dir: &Path) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("profile.yaml")).unwrap()).unwrap()
}

/// Each value renders its mode and networks into node-network.sh, `profile.yaml` records it, and
/// the state dir checks clean against it.
#[test]
fn each_value_renders_its_mode_and_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str, serde_yaml_ng::Value)] = &[
        ("", "host", "", "host".into()),
        ("network.egress=host", "host", "", "host".into()),
        ("network.egress=on", "on", "0.0.0.0/0", "on".into()),
        ("network.egress=off", "off", "", "off".into()),
        (
            "network.egress=[203.0.113.0/24, 198.51.100.7/32]",
            "only",
            "203.0.113.0/24 198.51.100.7/32",
            serde_yaml_ng::from_str("[203.0.113.0/24, 198.51.100.7/32]").unwrap(),
        ),
    ];
    for (i, (set, mode, allowed, record)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("s{i}"));
        let sets: Vec<&str> = if set.is_empty() {
            vec![]
        } else {
            vec!["--set", set]
        };
        gen_ok(&dir, &sets, &[]);
        assert_eq!(script_var(&dir, "egress"), *mode, "{set}");
        assert_eq!(script_var(&dir, "allowed"), *allowed, "{set}");
        // The cluster's own ranges stay here whatever egress says.
        assert_eq!(
            script_var(&dir, "cluster_nets"),
            "10.88.0.0/16 10.0.0.0/24 198.18.0.0/16 198.19.0.0/17 198.19.128.0/18 198.19.192.0/19 \
             198.19.224.0/20 198.19.240.0/21 198.19.248.0/22 198.19.252.0/23 198.19.254.0/24",
            "{set}"
        );
        let p = recorded(&dir);
        assert_eq!(p["network"]["egress"], *record, "{set}");
        assert_eq!(p["offline"].as_bool(), Some(false), "{set}");
        let check = run(kubeunit().args(["gen", "--check", "--state-dir"]).arg(&dir));
        assert!(check.status.success(), "{set}: {}", text(&check));
    }
}

/// A bad value: exit 2, the field, the value and a fix named, and the state dir as it was.
#[test]
fn bad_values_exit_2_naming_the_field_and_leave_the_state_dir_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_ok(&dir, &["--set", "network.egress=on"], &[]);
    let before = snapshot(&dir);
    let cases: &[(&str, &[&str])] = &[
        (
            "network.egress=sometimes",
            &["network.egress", "\"sometimes\"", "host, on, off"],
        ),
        (
            "network.egress=203.0.113.0/24",
            &["network.egress", "[203.0.113.0/24]"],
        ),
        (
            "network.egress=[203.0.113.0/33]",
            &["network.egress", "203.0.113.0/33", "not a network"],
        ),
        (
            "network.egress=[203.0.113.9/24]",
            &["network.egress", "203.0.113.0/24", "host bits"],
        ),
        (
            "network.egress=[10.88.7.0/24]",
            &["network.egress", "network.podCIDR"],
        ),
        (
            "network.egress=[0.0.0.0/0]",
            &["network.egress", "network.egress: on"],
        ),
        ("network.egress=[]", &["network.egress", "off"]),
        ("network.egress={a: b}", &["network.egress"]),
        ("offline=maybe", &["offline"]),
    ];
    for (set, needles) in cases {
        let out = gen(&dir, &["--set", set], &[]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{set}: {t}");
        for n in *needles {
            assert!(t.contains(n), "{set}: expected {n:?} in:\n{t}");
        }
        assert!(t.contains("fix:"), "{set}: {t}");
        assert!(before == snapshot(&dir), "{set} changed the state dir");
    }
    let out = gen(&dir, &[], &[("KUBEUNIT_OFFLINE", "maybe")]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains("KUBEUNIT_OFFLINE") && t.contains("\"maybe\"") && t.contains("fix:"),
        "{t}"
    );
    assert!(
        before == snapshot(&dir),
        "KUBEUNIT_OFFLINE=maybe changed the state dir"
    );
}

/// `KUBEUNIT_OFFLINE=1` (and `offline: true` in a profile) forces egress off and CoreDNS forwarding
/// nothing, whatever the profile asks; the state dir records it, so that nothing else needs it.
#[test]
fn offline_forces_egress_off_and_no_forwarding_and_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let asks = [
        "--set",
        "network.egress=on",
        "--set",
        "addons.corednsForward=192.0.2.53",
    ];
    let online = tmp.path().join("online");
    gen_ok(&online, &asks, &[]);
    let coredns = |dir: &Path| std::fs::read_to_string(dir.join("addons/10-coredns.yaml")).unwrap();
    assert!(coredns(&online).contains("forward . 192.0.2.53"));
    assert_eq!(script_var(&online, "egress"), "on");

    let by_env = tmp.path().join("env");
    let said = gen_ok(&by_env, &asks, &[("KUBEUNIT_OFFLINE", "1")]);
    assert!(
        said.contains("offline") && said.contains("network.egress and addons.corednsForward"),
        "gen says what offline overrode:\n{said}"
    );
    let profile = tmp.path().join("offline.yaml");
    std::fs::write(&profile, "extends: dev\noffline: true\n").unwrap();
    let by_profile = tmp.path().join("profile");
    gen_ok(
        &by_profile,
        &[&["--profile", profile.to_str().unwrap()][..], &asks[..]].concat(),
        &[],
    );
    for dir in [&by_env, &by_profile] {
        assert_eq!(script_var(dir, "egress"), "off", "{}", dir.display());
        assert_eq!(script_var(dir, "allowed"), "");
        assert!(!coredns(dir).contains("forward ."), "{}", coredns(dir));
        let p = recorded(dir);
        assert_eq!(p["offline"].as_bool(), Some(true));
        assert_eq!(p["network"]["egress"].as_str(), Some("off"));
        assert_eq!(p["addons"]["corednsForward"].as_str(), Some(""));
        // What the state dir records is all a later command needs: checked without the switch.
        let check = run(kubeunit().args(["gen", "--check", "--state-dir"]).arg(dir));
        assert!(check.status.success(), "{}", text(&check));
    }
    // 0 (or unset) leaves the profile as it is.
    let zero = tmp.path().join("zero");
    gen_ok(&zero, &asks, &[("KUBEUNIT_OFFLINE", "0")]);
    assert_eq!(script_var(&zero, "egress"), "on");
}

/// Offline is sticky: a state dir made offline, rendered again from the same profile (as `upgrade
/// --profile dev --set versions.kubernetes=...` does) with the switch unset, stays offline: its
/// registry hosts files, egress and CoreDNS forwarding are what they were. KUBEUNIT_OFFLINE=0 (or
/// `--set offline=false`) takes it online, and gen says so.
#[test]
fn an_offline_state_dir_stays_offline_until_it_is_told_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    let hosts = |dir: &Path| {
        let hosts = dir.join("config/registry-hosts");
        let mut files: Vec<(String, String)> = walkdir::WalkDir::new(&hosts)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                (
                    e.path().display().to_string(),
                    std::fs::read_to_string(e.path()).unwrap(),
                )
            })
            .collect();
        files.sort();
        files
    };
    let coredns = |dir: &Path| std::fs::read_to_string(dir.join("addons/10-coredns.yaml")).unwrap();
    gen_ok(&dir, &[], &[("KUBEUNIT_OFFLINE", "1")]);
    let (offline_hosts, offline_dns) = (hosts(&dir), coredns(&dir));
    assert_eq!(script_var(&dir, "egress"), "off");
    for sets in [&[][..], &["--set", "versions.kubernetes=v1.36"][..]] {
        let said = gen_ok(&dir, sets, &[]);
        assert!(!said.contains("online now"), "{said}");
        assert_eq!(recorded(&dir)["offline"].as_bool(), Some(true), "{sets:?}");
        assert_eq!(script_var(&dir, "egress"), "off", "{sets:?}");
        assert_eq!(hosts(&dir), offline_hosts, "{sets:?}");
        assert_eq!(coredns(&dir), offline_dns, "{sets:?}");
    }
    let said = gen_ok(&dir, &[], &[("KUBEUNIT_OFFLINE", "0")]);
    assert!(said.contains("online now (it was offline)"), "{said}");
    assert_eq!(recorded(&dir)["offline"].as_bool(), Some(false));
    assert_ne!(
        hosts(&dir),
        offline_hosts,
        "online: the registry caches are in the hosts files"
    );
    // And back: said too.
    let said = gen_ok(&dir, &["--set", "offline=true"], &[]);
    assert!(said.contains("offline now (it was online)"), "{said}");
}

/// The sandbox of `the_rendered_script_lets_out_what_egress_says`, run in a network and mount
/// namespace of its own (a private /run): an uplink `ku-sim0` (198.19.255.242/30; named like a node link,
/// which it is not: its other end is in no kubeunit-* namespace) whose default route
/// leads to a simulated internet (namespace `inet`: the gateway 198.19.255.241, and HTTP on
/// 198.19.255.100 and 198.19.255.200); node-network.sh `up`, dials, `down`. Prints `key: value` lines.
const SANDBOX: &str = r#"set -u
script=$1 host_forwards=$2 other_tool=${3:-0}
mount -t tmpfs kubeunit-it /run
echo "$host_forwards" >/proc/sys/net/ipv4/ip_forward
ip link set lo up
ip netns add inet
ip link add ku-sim0 type veth peer name gw0 netns inet
ip addr add 198.19.255.242/30 dev ku-sim0
ip link set ku-sim0 up
ip route add default via 198.19.255.241
ip -n inet link set lo up
ip -n inet addr add 198.19.255.241/30 dev gw0
ip -n inet link set gw0 up
ip -n inet addr add 198.19.255.100/32 dev lo
ip -n inet addr add 198.19.255.200/32 dev lo
ip -n inet route add default via 198.19.255.242
ip netns exec inet python3 -m http.server 8000 >/dev/null 2>&1 &
dial() { ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && echo yes || echo no; }
listening() { for _ in $(seq 50); do [ "$(dial "$1" "$2" "$3")" = yes ] && return; sleep 0.1; done; }
listening inet 198.19.255.100 8000
# What the host has of kubeunit's: forwarding, rules, routes of other tables, iptables rules, /run.
host_state() {
  grep -H . /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv4/conf/*/forwarding
  ip rule
  ip route show table all | grep -v -e 'table local' -e '^local ' -e '^broadcast '
  iptables-save | grep -e '^-' -e '^:KU'
  ls -A /run/kubeunit 2>/dev/null
}
host_state >/run/before
sh "$script" up >/run/up.log 2>&1 || { echo "up: failed"; cat /run/up.log; }
ns=$(sed -n 's/^ns="\(.*\)"$/\1/p' "$script")
node=$(sed -n 's/^node="\(.*\)"$/\1/p' "$script")
echo "reach 198.19.255.100: $(dial "$ns" 198.19.255.100 8000)"
echo "reach 198.19.255.200: $(dial "$ns" 198.19.255.200 8000)"
echo "forwarding: $(cat /proc/sys/net/ipv4/ip_forward) $(cat /proc/sys/net/ipv4/conf/ku-sim0/forwarding)"
# A new connection from the internet to the node (which it routes to this host).
ip netns exec "$ns" python3 -m http.server 8001 >/dev/null 2>&1 &
listening "$ns" "$node" 8001
ip -n inet route add "$node/32" via 198.19.255.242
echo "inbound: $(dial inet "$node" 8001)"
# Another tool (Docker) turns this host's forwarding on while the node runs.
[ "$other_tool" = 0 ] || echo 1 >/proc/sys/net/ipv4/ip_forward
sh "$script" down >/run/down.log 2>&1 || { echo "down: failed"; cat /run/down.log; }
echo "forwarding after down: $(cat /proc/sys/net/ipv4/ip_forward) $(cat /proc/sys/net/ipv4/conf/ku-sim0/forwarding)"
host_state >/run/after
rmdir /run/kubeunit 2>/dev/null || true
if cmp -s /run/before /run/after; then echo "after down: as before"; else echo "after down: changed"; diff /run/before /run/after; fi
kill $(jobs -p) 2>/dev/null
"#;

/// Run the sandbox on the node-network.sh of `dir`; its `key: value` lines, and all it printed.
fn sandbox(dir: &Path, host_forwards: bool) -> (BTreeMap<String, String>, String) {
    sandbox_with(dir, host_forwards, false)
}

/// `sandbox`, and with `other_tool` net.ipv4.ip_forward turned on while the node runs.
fn sandbox_with(
    dir: &Path,
    host_forwards: bool,
    other_tool: bool,
) -> (BTreeMap<String, String>, String) {
    let script = dir.join("config/node-network.sh");
    let flag = |on: bool| -> &std::ffi::OsStr { if on { "1" } else { "0" }.as_ref() };
    let out = in_net_sandbox(
        SANDBOX,
        &[script.as_os_str(), flag(host_forwards), flag(other_tool)],
    );
    let t = text(&out);
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (lines, t)
}

/// Another tool (Docker) turning on this host's forwarding while a node holds an uplink's keeps
/// it on after the node lets go: the release writes back only what kubeunit changed.
#[test]
fn forwarding_another_tool_turned_on_during_a_hold_stays_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("dev");
    gen_ok(&dir, &["--set", "network.egress=on"], &[]);
    let (lines, t) = sandbox_with(&dir, false, true);
    assert_eq!(
        lines.get("forwarding").map(String::as_str),
        Some("0 1"),
        "{t}"
    );
    assert_eq!(
        lines.get("forwarding after down").map(String::as_str),
        Some("1 1"),
        "{t}"
    );
    // Without the other tool, the uplink's forwarding goes back to what it was.
    let (lines, t) = sandbox_with(&dir, false, false);
    assert_eq!(
        lines.get("forwarding after down").map(String::as_str),
        Some("0 0"),
        "{t}"
    );
}

/// node-network.sh as gen renders it, run for real (in namespaces of its own): each egress value
/// lets the node reach what it says and no more, never lets a new connection in from outside
/// (but where this host forwards anyway, as before), never touches net.ipv4.ip_forward, and
/// `down` leaves the host as it found it.
#[test]
fn the_rendered_script_lets_out_what_egress_says() {
    let tmp = tempfile::tempdir().unwrap();
    // value, this host forwards, reaches .100 and .200, new connections in, forwarding during
    // (net.ipv4.ip_forward and the uplink's).
    let cases: &[(&str, bool, [&str; 2], &str, &str)] = &[
        ("host", false, ["no", "no"], "no", "0 0"),
        ("host", true, ["yes", "yes"], "yes", "1 1"),
        ("off", false, ["no", "no"], "no", "0 0"),
        ("off", true, ["no", "no"], "no", "1 1"),
        ("on", false, ["yes", "yes"], "no", "0 1"),
        ("[198.19.255.100/32]", false, ["yes", "no"], "no", "0 1"),
        (
            "[198.19.255.96/28, 198.19.255.200/32]",
            true,
            ["yes", "yes"],
            "no",
            "1 1",
        ),
        ("[198.19.255.200/32]", true, ["no", "yes"], "no", "1 1"),
    ];
    for (i, (value, forwards, reach, inbound, forwarding)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("s{i}"));
        gen_ok(&dir, &["--set", &format!("network.egress={value}")], &[]);
        let (got, all) = sandbox(&dir, *forwards);
        let case = format!("egress {value}, host forwards: {forwards}");
        assert_eq!(
            got.get("reach 198.19.255.100").map(String::as_str),
            Some(reach[0]),
            "{case}:\n{all}"
        );
        assert_eq!(
            got.get("reach 198.19.255.200").map(String::as_str),
            Some(reach[1]),
            "{case}:\n{all}"
        );
        assert_eq!(
            got.get("inbound").map(String::as_str),
            Some(*inbound),
            "{case}:\n{all}"
        );
        assert_eq!(
            got.get("forwarding").map(String::as_str),
            Some(*forwarding),
            "{case}:\n{all}"
        );
        assert_eq!(
            got.get("after down").map(String::as_str),
            Some("as before"),
            "{case}:\n{all}"
        );
        assert!(!all.contains("failed"), "{case}:\n{all}");
    }
}

/// One start of `a_dev_node_reaches_the_simulated_internet_as_egress_says`.
struct Case {
    name: &'static str,
    /// `--set`s of its `gen`.
    sets: Vec<String>,
    /// Whether its `gen` lifts the offline switch.
    online: bool,
    /// How `start`'s egress line begins.
    line: &'static str,
    /// Whether the node reaches the web server (and a pod it), and the file server.
    reach: [bool; 2],
}

/// This host's forwarding switches (the container shares its network): net.ipv4.ip_forward, and the
/// simulated internet's veth's.
fn forwarding(veth: &str) -> (String, String) {
    let read = |p: String| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    (
        read("/proc/sys/net/ipv4/ip_forward".into()),
        read(format!("/proc/sys/net/ipv4/conf/{veth}/forwarding")),
    )
}

/// A dev node on real systemd, started against a simulated internet (slot 7) once per egress value:
/// `on` reaches its web server by address and, with CoreDNS forwarding to its DNS server, by name;
/// a list reaches only what it lists; `off`, and offline (`KUBEUNIT_OFFLINE=1` over `on`), reach
/// nothing, and `start` says so with the fix. From a pod, and from the node's own namespace (where
/// containerd pulls). This host's forwarding is as it was after each `stop`, and no packet of the
/// test ranges left by its default route.
#[test]
fn a_dev_node_reaches_the_simulated_internet_as_egress_says() {
    use crate::common::container::{dev_args, Container, Env};
    use crate::common::internet::{Internet, Site, HTTP_BODY};
    use crate::common::ports::Ports;
    use std::time::Duration;

    let _turn = node_lock();
    // Before the node: its uplinks are the interfaces of this host's routes when it starts.
    let inet = Internet::start(5);
    inet.http();
    let web = inet.addr(Site::Http);
    let files = inet.addr(Site::Files);
    inet.files_url();
    let dns = inet.dns(&[("web.sim.test", web)]);
    let c = Container::boot_node("egress");
    let ports = Ports::allocate();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let e = Env {
        c: &c,
        state: c.work.join("dev"),
        kubectl: cache_dir()
            .join("bin")
            .join(format!("kubernetes-{version}"))
            .join("kubectl"),
    };
    let veth = inet.netns().to_string();
    let before = forwarding(&veth);
    let image = pinned("TEST_IMAGE")[0].clone();
    let get = "printf 'GET / HTTP/1.0\\r\\n\\r\\n'";
    let list = format!("network.egress=[{web}/32]");
    let cases = [
        Case {
            name: "on",
            sets: vec![
                "network.egress=on".into(),
                format!("addons.corednsForward={dns}"),
            ],
            online: true,
            line: "egress: on: ",
            reach: [true, true],
        },
        Case {
            name: "list",
            sets: vec![list],
            online: true,
            line: "egress: only: ",
            reach: [true, false],
        },
        Case {
            name: "off",
            sets: vec!["network.egress=off".into()],
            online: true,
            line: "egress: off: ",
            reach: [false, false],
        },
        Case {
            name: "offline",
            sets: vec!["network.egress=on".into()],
            online: false,
            line: "egress: off (offline): ",
            reach: [false, false],
        },
    ];
    for (i, k) in cases.iter().enumerate() {
        let (case, online, reach) = (k.name, k.online, k.reach);
        let mut argv: Vec<String> = vec![
            "gen".into(),
            "--state-dir".into(),
            e.state.display().to_string(),
        ];
        argv.extend(ports.sets());
        argv.extend(dev_args(&version));
        argv.extend(k.sets.iter().flat_map(|s| ["--set".to_string(), s.clone()]));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = if online {
            c.kubeunit_online(&argv)
        } else {
            c.kubeunit(&argv)
        };
        assert!(out.status.success(), "{case}: gen: {}", text(&out));
        let out = e.ku(&["start", "--timeout", "180"]);
        let t = text(&out);
        assert!(out.status.success(), "{case}: start:\n{t}");
        let said = t
            .lines()
            .find(|l| l.trim_start().starts_with("egress: "))
            .unwrap_or_else(|| panic!("{case}: start names no egress:\n{t}"))
            .trim();
        assert!(said.starts_with(k.line), "{case}: {said}");
        assert_eq!(
            said.contains("fix: ") && said.contains("network.egress=on"),
            !reach[0],
            "{case}: {said}"
        );

        // kubeunit forwards per interface, never through net.ipv4.ip_forward.
        assert_eq!(
            forwarding(&veth).0,
            before.0,
            "{case}: net.ipv4.ip_forward while up"
        );
        // From the node's own namespace: a TCP connect to each site.
        let netns = format!("--net=/run/netns/{}", unit_prefix(&e.state));
        for (addr, port, expect) in [(web, 80, reach[0]), (files, 443, reach[1])] {
            let out = c.run(&[
                "nsenter",
                &netns,
                "timeout",
                "3",
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/{addr}/{port}"),
            ]);
            assert_eq!(
                out.status.success(),
                expect,
                "{case}: node -> {addr}:{port}: {}",
                text(&out)
            );
        }
        // From a pod: the web server's page by address (and by name through CoreDNS with `on`).
        let pod = format!("client-{i}");
        let mut created = String::new();
        wait_for("a pod created", Duration::from_secs(60), || {
            let out = e.kubectl(&[
                "run",
                &pod,
                &format!("--image={image}"),
                "--",
                "sleep",
                "3600",
            ]);
            created = text(&out);
            out.status.success()
        });
        e.kubectl_ok(&[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{pod}"),
            "--timeout=120s",
        ]);
        let fetch = |host: &str| {
            let out = e.kubectl(&[
                "exec",
                &pod,
                "--",
                "sh",
                "-c",
                &format!("{get} | nc -w 3 {host} 80; echo exit $?"),
            ]);
            (
                String::from_utf8_lossy(&out.stdout).contains(HTTP_BODY),
                text(&out),
            )
        };
        let (mut reached, mut said) = fetch(&web.to_string());
        let mut attempts = 1;
        // A reach is retried: once in four runs here a just-Ready pod's first fetch got no answer
        // in 3 s (no request reached the server; the cause was not found), the next ones did.
        while reach[0] && !reached && attempts < 10 {
            std::thread::sleep(Duration::from_secs(1));
            (reached, said) = fetch(&web.to_string());
            attempts += 1;
        }
        assert_eq!(
            reached, reach[0],
            "{case}: pod -> {web} ({attempts} attempts): {said}"
        );
        if case == "on" {
            // Absolute: one name, forwarded as it is (no search domain tried first). Retried as
            // above: twice here a first lookup failed with no query reaching the simulated DNS
            // server (the cause was not found), a later one did not.
            let (mut by_name, mut said) = fetch("web.sim.test.");
            let mut attempts = 1;
            while !by_name && attempts < 10 {
                std::thread::sleep(Duration::from_secs(1));
                (by_name, said) = fetch("web.sim.test.");
                attempts += 1;
            }
            assert!(
                by_name,
                "pod -> web.sim.test ({attempts} attempts): {said}\nsimulated DNS asked: {:?}",
                inet.dns_queries()
            );
            assert!(
                inet.dns_queries().iter().any(|q| q == "web.sim.test"),
                "{:?}",
                inet.dns_queries()
            );
        }
        e.ku_ok(&["stop"]);
        assert_eq!(
            forwarding(&veth),
            before,
            "{case}: this host's forwarding after stop"
        );
    }
    assert!(!inet.http_requests().is_empty());
    inet.assert_no_leak();
}
