//! `kubeunit install` for real: a dev environment (a node) installed into a machine whose root
//! survives a reboot (a node container on a persistent overlay), powered off and booted again. It
//! comes back by itself, with what was created before; `uninstall` leaves /etc/systemd/system as it
//! was. Bad input changes nothing.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::container::{dev_args, gen_in, Container};
use crate::common::ports::Ports;
use crate::common::*;

struct Env {
    c: Container,
    state: PathBuf,
    kubectl: PathBuf,
}

impl Env {
    fn ku(&self, args: &[&str]) -> Output {
        let mut argv = args.to_vec();
        let dir = self.state.to_string_lossy().into_owned();
        argv.extend(["--state-dir", &dir]);
        self.c.kubeunit(&argv)
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        run(Command::new(&self.kubectl)
            .env("KUBECONFIG", self.state.join("kubeconfig/admin.kubeconfig"))
            .args(args))
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn node_ready(&self) -> bool {
        self.node_ready_since("")
    }

    /// The node Ready, as its kubelet said at or after `since` (RFC 3339 in UTC, as the API
    /// writes times, so that the strings compare as the times): not a status left from before.
    fn node_ready_since(&self, since: &str) -> bool {
        let o = self.kubectl(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type=='Ready')].status} {.items[0].status.conditions[?(@.type=='Ready')].lastHeartbeatTime}",
        ]);
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        matches!(said.split_once(' '), Some(("True", at)) if at >= since)
    }

    /// This container's clock now, as the API writes times.
    fn now(&self) -> String {
        let out = self.c.run(&["date", "-u", "+%Y-%m-%dT%H:%M:%SZ"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Every file and link below /etc/systemd/system, with type and mode.
    fn unit_dir_listing(&self) -> String {
        let out = self
            .c
            .sh("cd /etc/systemd/system && find . -printf '%p %y %m %l\\n' | sort");
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

#[test]
fn an_installed_environment_comes_back_after_a_reboot_and_uninstall_removes_it() {
    let _turn = node_lock();
    let c = Container::boot_persistent("install");
    let ports = Ports::allocate();
    let version = pinned("KUBERNETES_VERSIONS")[0].clone();
    let mut args = dev_args(&version);
    args.extend(["--set".into(), "name=inst".into()]);
    let state = gen_in(&c, "inst", &ports, &args);
    let mut env = Env {
        c,
        state: state.clone(),
        kubectl: cache_dir()
            .join("bin")
            .join(format!("kubernetes-{version}"))
            .join("kubectl"),
    };
    let before = env.unit_dir_listing();

    // Bad input: exit 2, nothing written.
    for bad in [
        vec!["install", "--root", "relative/dir"],
        vec!["install", "--root", "/nonexistent-root"],
        vec!["install", "--kubeunit", "/nonexistent/kubeunit"],
        vec!["install", "--kubeunit", "kubeunit"],
    ] {
        let out = env.ku(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out));
    }
    let out = env
        .c
        .kubeunit(&["install", "--state-dir", "/nonexistent/state"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(env.unit_dir_listing(), before, "bad input writes nothing");

    // A running (transient) environment is not installed under its feet.
    let out = env.ku(&["start", "--timeout", "180"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = env.ku(&["install"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("kubeunit stop"), "{}", text(&out));
    assert_eq!(env.unit_dir_listing(), before);
    let out = env.ku(&["stop"]);
    assert!(out.status.success(), "{}", text(&out));

    // Install and start now; a Deployment.
    let out = env.ku(&["install", "--now"]);
    assert!(out.status.success(), "{}", text(&out));
    let prefix = unit_prefix(&env.state);
    let target = format!("{prefix}.target");
    let out = env.c.run(&["systemctl", "is-enabled", &target]);
    assert_eq!(text(&out).trim(), "enabled");
    wait_for("node Ready", Duration::from_secs(120), || env.node_ready());
    let image = pinned("TEST_IMAGE")[0].clone();
    env.kubectl_ok(&[
        "create",
        "deployment",
        "kept",
        &format!("--image={image}"),
        "--",
        "sleep",
        "3600",
    ]);
    env.kubectl_ok(&[
        "wait",
        "--for=condition=available",
        "deploy/kept",
        "--timeout=120s",
    ]);

    // Power off, boot the same root: nobody runs kubeunit, the environment comes back.
    let before_reboot = env.now();
    env.c.reboot();
    let out = env.c.run(&[
        "systemctl",
        "is-active",
        &target,
        &format!("{prefix}-kube-apiserver-apply-addons.service"),
        &format!("{prefix}-containerd-import-images.service"),
        &format!("{prefix}-registry-load-registry.service"),
    ]);
    assert_eq!(
        text(&out),
        "active\nactive\nactive\nactive\n",
        "reached at boot"
    );
    // A hook that a slow host outlasts is tried again (VMs under TCG outlasted the API server's).
    let out = env.c.run(&[
        "systemctl",
        "show",
        "-p",
        "Restart",
        &format!("{prefix}-kube-apiserver-apply-addons.service"),
    ]);
    assert_eq!(text(&out).trim(), "Restart=on-failure");
    wait_for(
        "node Ready after the reboot",
        Duration::from_secs(180),
        || env.node_ready_since(&before_reboot),
    );
    // The Deployment's pod runs again: a container started after the reboot, ready (the
    // Deployment's own "available" may be what it said before it).
    wait_for(
        "kept's pod running again after the reboot",
        Duration::from_secs(180),
        || {
            let o = env.kubectl(&[
                "get",
                "pods",
                "-l",
                "app=kept",
                "-o",
                "jsonpath={range .items[*]}{.status.containerStatuses[0].ready} {.status.containerStatuses[0].state.running.startedAt}{\"\\n\"}{end}",
            ]);
            String::from_utf8_lossy(&o.stdout).lines().any(
                |l| matches!(l.split_once(' '), Some(("true", at)) if at >= before_reboot.as_str()),
            )
        },
    );
    env.kubectl_ok(&[
        "wait",
        "--for=condition=available",
        "deploy/kept",
        "--timeout=180s",
    ]);
    let out = env.ku(&["status", "-o", "json"]);
    assert!(out.status.success(), "all healthy: {}", text(&out));
    // The boot's own journal says the gate held: the scheduler was healthy before the target.
    let out = env.c.run(&[
        "journalctl",
        "-b",
        "-o",
        "cat",
        "-u",
        &unit(&env.state, "kube-scheduler"),
    ]);
    assert!(
        text(&out).contains("kube-scheduler healthy after"),
        "{}",
        text(&out)
    );

    // uninstall: stopped, and the unit dir as it was.
    let out = env.ku(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(env.unit_dir_listing(), before);
    assert_eq!(
        env.c.list_units("kubeunit-inst*"),
        "",
        "nothing left running"
    );
    let out = env.ku(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("not installed"), "{}", text(&out));
}
