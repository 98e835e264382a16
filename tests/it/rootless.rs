//! Rootless for real: a non-root user with lingering enabled runs the control-plane profile under
//! their own systemd manager (`--user`), on unprivileged ports, with the state dir under
//! $XDG_STATE_HOME; it starts, serves and stops, and nothing outside the user's directories is
//! written. A node is refused at `gen`, which then writes nothing.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::container::{control_plane_args, Container};
use crate::common::ports::Ports;
use crate::common::*;

const USER: &str = "ku";
const HOME: &str = "/home/ku";
const STATE_HOME: &str = "/home/ku/.local/state";

/// kubeunit as the user, with the environment a login session gives them.
fn as_user(c: &Container, args: &[&str]) -> Output {
    let uid = 1000;
    let mut argv = vec![
        "runuser".to_string(),
        "-u".into(),
        USER.into(),
        "--".into(),
        "env".into(),
        format!("HOME={HOME}"),
        format!("XDG_RUNTIME_DIR=/run/user/{uid}"),
        format!("DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/{uid}/bus"),
        format!("XDG_STATE_HOME={STATE_HOME}"),
        format!("SOURCE_DATE_EPOCH={}", test_epoch()),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    c.run(&argv.iter().map(String::as_str).collect::<Vec<_>>())
}

fn kubeunit_as_user(c: &Container, args: &[&str]) -> Output {
    let mut argv = vec![env!("CARGO_BIN_EXE_kubeunit")];
    argv.extend_from_slice(args);
    as_user(c, &argv)
}

#[test]
fn a_user_runs_the_control_plane_under_their_own_systemd() {
    let ports = Ports::allocate();
    let c = Container::boot("rootless");
    // A user whose systemd runs without a login (lingering); the pinned binaries readable by them:
    // every dir above the cache (bound at its own path: ~/.cache/kubeunit-test, or KUBEUNIT_CACHE's)
    // searchable.
    let above_cache: Vec<String> = cache_dir()
        .ancestors()
        .skip(1)
        .filter(|d| d.parent().is_some())
        .map(|d| format!("'{}'", d.display()))
        .collect();
    let out = c.sh(&format!(
        "useradd -m -u 1000 {USER} && loginctl enable-linger {USER} && chmod o+x {} \
         && for i in $(seq 100); do [ -S /run/user/1000/bus ] && exit 0; sleep 0.1; done; exit 1",
        above_cache.join(" ")
    ));
    assert!(out.status.success(), "user manager: {}", text(&out));
    let marker = c.sh("touch /run/rootless-marker");
    assert!(marker.status.success());

    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let mut args = control_plane_args(&version);
    let state = format!("{STATE_HOME}/kubeunit/control-plane");

    // A node needs root: refused by name, nothing written.
    let mut dev = vec!["gen".to_string(), "--user".into()];
    dev.extend(args.iter().cloned());
    dev[3] = "dev".into();
    let out = kubeunit_as_user(&c, &dev.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("components.kubelet.enabled") && t.contains("needs root"),
        "{t}"
    );
    let out = c.sh(&format!("ls -A {HOME}/.local/state 2>/dev/null | wc -l"));
    assert_eq!(text(&out).trim(), "0", "nothing written");

    // gen and start as the user: the default state dir is under $XDG_STATE_HOME.
    let mut argv = vec!["gen".to_string(), "--user".into()];
    argv.append(&mut args);
    argv.extend(ports.sets());
    let out = kubeunit_as_user(&c, &argv.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out));
    let out = c.sh(&format!("stat -c '%U %a' {state}"));
    assert_eq!(text(&out).trim(), format!("{USER} 700"));
    let unit = std::fs::read_to_string(format!(
        "/proc/{}/root{state}/units/kubeunit-control-plane-etcd.service",
        c.leader
    ))
    .unwrap();
    assert!(
        !unit.contains("LimitNOFILE"),
        "above a user's limit: {unit}"
    );

    let out = kubeunit_as_user(&c, &["start", "--env", "control-plane"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = as_user(
        &c,
        &[
            "systemctl",
            "--user",
            "is-active",
            "kubeunit-control-plane-etcd.service",
            "kubeunit-control-plane-kube-apiserver.service",
        ],
    );
    assert_eq!(text(&out), "active\nactive\n", "in the user's manager");
    let out = c.run(&[
        "systemctl",
        "is-active",
        "kubeunit-control-plane-etcd.service",
    ]);
    assert_ne!(text(&out).trim(), "active", "not in the system's");
    let kubectl = cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"))
        .join("kubectl");
    let kubeconfig = format!("--kubeconfig={state}/kubeconfig/admin.kubeconfig");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = as_user(
            &c,
            &[
                kubectl.to_str().unwrap(),
                &kubeconfig,
                "get",
                "--raw",
                "/readyz",
            ],
        );
        if text(&out).trim() == "ok" {
            break;
        }
        assert!(Instant::now() < deadline, "{}", text(&out));
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = kubeunit_as_user(
        &c,
        &["status", "--env", "control-plane", "--user", "-o", "json"],
    );
    assert!(out.status.success(), "healthy: {}", text(&out));
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st.as_array().map(Vec::len), Some(4), "{st}");

    let out = kubeunit_as_user(&c, &["stop", "--env", "control-plane"]);
    assert!(out.status.success(), "{}", text(&out));
    // The environment's units and slice (its parents, kubeunit-control.slice and kubeunit.slice,
    // are systemd's, implied by the slice's name).
    let out = as_user(
        &c,
        &[
            "systemctl",
            "--user",
            "list-units",
            "--all",
            "--no-legend",
            "kubeunit-control-plane*",
        ],
    );
    assert_eq!(text(&out).trim(), "", "nothing left");

    // Everything the user (and kubeunit as the user) wrote is in their home or runtime dir.
    let out = c.sh(&format!(
        "find / \\( -path /proc -o -path /sys -o -path /dev -o -path {HOME} -o -path /run/user/1000 \\) -prune \
         -o \\( -user {USER} -o -newer /run/rootless-marker -path '/tmp/*' \\) -print"
    ));
    assert_eq!(
        text(&out).trim(),
        "",
        "written outside the user's directories"
    );
}
