//! A real systemd for tests: systemd booted as PID 1 in a systemd-nspawn container on the cached
//! Debian rootfs, sharing the host network, by scripts/container.sh (the one implementation, which
//! scripts/up.sh's dev container uses too). Each test boots its own container; commands run inside
//! through `container.sh exec`, exactly as on a host whose PID 1 is systemd.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::ports::Ports;
use super::{cache_dir, run, script, text};

pub struct Container {
    /// Host PID of the container's systemd (PID 1 inside).
    pub leader: u32,
    /// The container's name for scripts/container.sh.
    pub name: String,
    /// Shared read-write directory, at the same path inside and out. Kept when the test fails.
    pub work: PathBuf,
    log: PathBuf,
    /// Arguments after `boot NAME` (a reboot boots with them again).
    boot_args: Vec<String>,
    /// The persistent root's overlay dir (`boot_persistent`), removed with the work dir.
    persist: Option<PathBuf>,
}

impl Container {
    /// Boot a container for one test. `name` must be unique among the tests of one test binary.
    pub fn boot(name: &str) -> Container {
        Container::start(name, false)
    }

    /// A container that can run a node (scripts/container.sh boot --node), with the offline images.
    pub fn boot_node(name: &str) -> Container {
        Container::start(name, true)
    }

    /// A node container booted with more `container.sh boot` arguments (`--bind-ro=DIR`).
    pub fn boot_node_with(name: &str, extra: &[&str]) -> Container {
        Container::start_full(name, true, false, extra)
    }

    /// A node container whose root survives `reboot` (container.sh boot --persist).
    pub fn boot_persistent(name: &str) -> Container {
        Container::start_with(name, true, true)
    }

    /// A host of an environment across hosts: a node container whose root survives a power cut
    /// and a reboot, with a network of its own (`container.sh boot --network=BRIDGE,ADDRESS,GATEWAY`).
    pub fn boot_host(name: &str, network: &str, extra: &[&str]) -> Container {
        let mut args = vec![format!("--network={network}")];
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Container::start_full(name, true, true, &args)
    }

    /// Cut its power (`container.sh kill`): no shutdown; `reboot` boots it again.
    pub fn power_cut(&self) {
        let out = Command::new(script("container.sh"))
            .args(["kill", &self.name])
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/container.sh");
        assert!(out.status.success(), "container.sh kill: {}", text(&out));
    }

    /// Boot it again after `power_cut`, on the same root.
    pub fn power_on(&mut self) {
        self.reboot();
    }

    /// A container booted with more `container.sh boot` arguments (`--bind-ro=/nix/store`).
    pub fn boot_with(name: &str, extra: &[&str]) -> Container {
        Container::start_full(name, false, false, extra)
    }

    /// Power the container off and boot it again on the same root (and binds); `leader` changes.
    pub fn reboot(&mut self) {
        let out = Command::new(script("container.sh"))
            .args(["stop", &self.name])
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/container.sh");
        assert!(out.status.success(), "container.sh stop: {}", text(&out));
        let out = Command::new(script("container.sh"))
            .args(["boot", &self.name])
            .args(&self.boot_args)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/container.sh");
        assert!(
            out.status.success(),
            "container.sh boot (reboot): {}",
            text(&out)
        );
        self.leader = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("container.sh boot printed no PID ({e}): {}", text(&out)));
    }

    fn start(name: &str, node: bool) -> Container {
        Container::start_with(name, node, false)
    }

    fn start_with(name: &str, node: bool, persistent: bool) -> Container {
        Container::start_full(name, node, persistent, &[])
    }

    fn start_full(name: &str, node: bool, persistent: bool, extra: &[&str]) -> Container {
        remove_stale_work_dirs();
        let pid = std::process::id();
        let work = PathBuf::from(format!("/tmp/kubeunit-it/{name}-{pid}"));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        let log = work.join("container.log");
        let exe_dir = Path::new(env!("CARGO_BIN_EXE_kubeunit")).parent().unwrap();
        let bin_cache = cache_dir().join("bin");
        std::fs::create_dir_all(&bin_cache).unwrap();
        let machine = format!("ku-{name}-{pid}");
        let machine = machine[..machine.len().min(64)].to_string();
        let mut boot_args: Vec<String> = Vec::new();
        if node {
            boot_args.push("--node".into());
            boot_args.push(format!(
                "--bind-ro={}",
                super::built_dir("images-").display()
            ));
        }
        // Next to the work dir, not in it: the work dir is bound into the container's root.
        let persist = persistent.then(|| PathBuf::from(format!("{}.root", work.display())));
        if let Some(p) = &persist {
            let _ = std::fs::remove_dir_all(p);
            boot_args.push(format!("--persist={}", p.display()));
        }
        boot_args.extend([
            format!("--log={}", log.display()),
            format!("--bind-ro={}", exe_dir.display()),
            format!("--bind-ro={}", bin_cache.display()),
            format!("--bind={}", work.display()),
        ]);
        boot_args.extend(extra.iter().map(|a| a.to_string()));
        let out = Command::new(script("container.sh"))
            .args(["boot", &machine])
            .args(&boot_args)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/container.sh");
        assert!(
            out.status.success(),
            "scripts/container.sh boot {machine}:\n{}",
            text(&out)
        );
        let leader = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("container.sh boot printed no PID ({e}): {}", text(&out)));
        Container {
            leader,
            name: machine,
            work,
            log,
            boot_args,
            persist,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A command inside the container (its mount, PID, IPC and UTS namespaces; network is shared),
    /// with a clean environment.
    pub fn command(&self, argv: &[&str]) -> Command {
        let mut cmd = Command::new(script("container.sh"));
        cmd.args(["exec", &self.name, "--"]).args(argv);
        cmd.env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .env("SYSTEMD_PAGER", "")
            .env("SYSTEMD_COLORS", "0");
        cmd
    }

    pub fn run(&self, argv: &[&str]) -> Output {
        self.command(argv).output().expect("container.sh exec")
    }

    pub fn sh(&self, script: &str) -> Output {
        self.run(&["/bin/sh", "-c", script])
    }

    /// The system user the cis profile's etcd runs as, added as `kubeunit start`'s preflight says.
    pub fn add_etcd_user(&self) {
        let out = self.sh(
            "getent passwd etcd >/dev/null || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin etcd",
        );
        assert!(out.status.success(), "useradd: {}", text(&out));
    }

    /// Run kubeunit inside the container, offline: `KUBEUNIT_OFFLINE` as the tests have it (1 from
    /// scripts/test.sh), 1 when they have none, so that no environment of a test reaches beyond
    /// this machine.
    pub fn kubeunit(&self, args: &[&str]) -> Output {
        let offline = std::env::var("KUBEUNIT_OFFLINE").unwrap_or_else(|_| "1".into());
        self.kubeunit_with(args, &offline)
    }

    /// Run kubeunit inside the container with the offline switch lifted: only for a test whose
    /// environment reaches a simulated internet (common::internet, 198.19.255.0/24), and nothing else.
    pub fn kubeunit_online(&self, args: &[&str]) -> Output {
        self.kubeunit_with(args, "0")
    }

    fn kubeunit_with(&self, args: &[&str], offline: &str) -> Output {
        let mut argv = vec![env!("CARGO_BIN_EXE_kubeunit")];
        argv.extend_from_slice(args);
        let mut cmd = self.command(&argv);
        cmd.env("SOURCE_DATE_EPOCH", super::test_epoch())
            .env("KUBEUNIT_OFFLINE", offline);
        cmd.output().expect("container.sh exec kubeunit")
    }

    /// `systemctl list-units --all` of the units matching `pattern`, one per line ("" when none).
    pub fn list_units(&self, pattern: &str) -> String {
        let out = self.run(&[
            "systemctl",
            "list-units",
            "--all",
            "--no-legend",
            "--plain",
            pattern,
        ]);
        // A failed systemctl lists nothing: every "nothing left" check would pass on it.
        assert!(
            out.status.success(),
            "systemctl list-units {pattern} in {}: {}",
            self.name,
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The host-side address of the container's system bus, for `--bus`.
    pub fn bus_address(&self) -> String {
        format!(
            "unix:path=/proc/{}/root/run/dbus/system_bus_socket",
            self.leader
        )
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let out = Command::new(script("container.sh"))
            .args(["stop", &self.name])
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {
                // Keep the work dir (container log, state dirs) of a failed test for a look.
                if !std::thread::panicking() {
                    let _ = std::fs::remove_dir_all(&self.work);
                    if let Some(p) = &self.persist {
                        let _ = std::fs::remove_dir_all(p);
                    }
                }
            }
            Ok(o) => eprintln!("scripts/container.sh stop {}: {}", self.name, text(&o)),
            Err(e) => eprintln!("scripts/container.sh stop {}: {e}", self.name),
        }
    }
}

/// Work dirs of earlier test processes that are gone (kept because a test failed).
fn remove_stale_work_dirs() {
    let Ok(entries) = std::fs::read_dir("/tmp/kubeunit-it") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .trim_end_matches(".root")
            .rsplit('-')
            .next()
            .and_then(|p| p.parse::<u32>().ok());
        if pid
            .is_some_and(|p| p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists())
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// `kubeunit gen --state-dir WORK/<dir>` inside the container, on the ports of `ports`, plus `args`.
pub fn gen_in(c: &Container, dir: &str, ports: &Ports, args: &[String]) -> PathBuf {
    let state = c.work.join(dir);
    let mut argv: Vec<String> = vec![
        "gen".into(),
        "--state-dir".into(),
        state.to_string_lossy().into(),
    ];
    argv.extend(ports.sets());
    argv.extend(args.iter().cloned());
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = c.kubeunit(&argv);
    assert!(out.status.success(), "gen {args:?}: {}", text(&out));
    state
}

/// gen arguments for the control-plane profile on the pinned binaries of Kubernetes `version`.
pub fn control_plane_args(version: &str) -> Vec<String> {
    let k8s = super::cache_dir()
        .join("bin")
        .join(format!("kubernetes-{version}"));
    assert!(
        k8s.join(".complete").exists(),
        "pinned Kubernetes {version} missing: run scripts/build-test-binaries.sh"
    );
    [
        "--profile".to_string(),
        "control-plane".into(),
        "--bin-dir".into(),
        k8s.to_string_lossy().into(),
        "--set".into(),
        format!(
            "components.etcd.binary={}",
            super::etcd_bin_dir().join("etcd").display()
        ),
        "--set".into(),
        format!("versions.kubernetes={version}"),
        "--set".into(),
        format!("versions.etcd={}", super::pinned("ETCD_VERSION")[0]),
    ]
    .to_vec()
}

/// The references of the offline images (images.txt: an archive and its names per line; busybox
/// has two).
pub fn offline_image_refs() -> Vec<String> {
    let list = std::fs::read_to_string(super::built_dir("images-").join("images.txt")).unwrap();
    list.lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.split_whitespace().skip(1).map(String::from))
        .collect()
}

/// The offline images' archives (pause, CoreDNS, busybox, the addons') built here.
pub fn offline_images() -> Vec<String> {
    std::fs::read_dir(super::built_dir("images-"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tar"))
        .map(|p| p.display().to_string())
        .collect()
}

/// gen arguments for the dev profile (a node, its registry) on the pinned binaries of Kubernetes
/// `version`, with the offline images.
pub fn dev_args(version: &str) -> Vec<String> {
    let mut args = control_plane_args(version);
    args[1] = "dev".into();
    let images = offline_images();
    let bin = |prefix: &str, file: &str| super::built_dir(prefix).join(file).display().to_string();
    for set in [
        format!(
            "components.containerd.binary={}",
            bin("containerd-", "containerd")
        ),
        format!("containerd.runtime={}", bin("runc-", "runc")),
        format!(
            "components.registry.binary={}",
            bin("registry-", "registry")
        ),
        format!(
            "containerd.cniBinDir={}",
            super::built_dir("cni-plugins-").display()
        ),
        format!("images=[{}]", images.join(",")),
        // CoreDNS answers for the cluster only: nothing a test's pods ask leaves this machine.
        "addons.corednsForward=".into(),
    ] {
        args.push("--set".into());
        args.push(set);
    }
    args
}

/// The archives of the addons dev leaves off: what scripts/up.sh leaves out of dev's `images`.
const ADDON_ARCHIVES: [&str; 4] = [
    "metrics-server.tar",
    "metallb-controller.tar",
    "metallb-speaker.tar",
    "traefik.tar",
];

/// dev as scripts/up.sh renders it: `dev_args` with only the images dev runs (the addons' that
/// it leaves off stay out, and `start` imports every archive before the kubelet starts). What a
/// bench of dev measures.
pub fn up_sh_dev_args(version: &str) -> Vec<String> {
    let mut args = dev_args(version);
    let images = offline_images_but(&ADDON_ARCHIVES);
    args.extend(["--set".into(), format!("images=[{}]", images.join(","))]);
    args
}

/// The offline images' archives but those named (file names).
pub fn offline_images_but(left_out: &[&str]) -> Vec<String> {
    offline_images()
        .into_iter()
        .filter(|p| !left_out.iter().any(|a| p.ends_with(&format!("/{a}"))))
        .collect()
}

/// `args` with every addon dev leaves off (the `apps` profile's: metrics-server, MetalLB, the Gateway
/// API with Traefik), for a test of them on dev or a profile that extends it.
pub fn with_every_addon(mut args: Vec<String>) -> Vec<String> {
    for addon in ["metricsServer", "loadBalancer", "gateway"] {
        args.extend(["--set".into(), format!("addons.{addon}=true")]);
    }
    args
}

/// Properties that describe a unit's runtime state or origin, not its configuration.
pub fn volatile(k: &str) -> bool {
    is_command(k)
        || k.contains("Timestamp")
        || k.ends_with("PID")
        || (k.starts_with("Memory") && k != "MemoryMax" && k != "MemoryAccounting")
        || k.starts_with("CPUUsage")
        || (k.starts_with("IO") && (k.ends_with("Bytes") || k.ends_with("Operations")))
        || (k.starts_with("IP") && (k.ends_with("Bytes") || k.ends_with("Packets")))
        || matches!(
            k,
            "InvocationID"
                | "TasksCurrent"
                | "NRestarts"
                | "StatusText"
                | "StatusErrno"
                | "ExecMainStatus"
                | "ExecMainCode"
                | "Transient"
                | "FragmentPath"
                | "SourcePath"
                | "DropInPaths"
                | "UnitFileState"
                | "UnitFilePreset"
                | "NeedDaemonReload"
                | "ActiveState"
                | "SubState"
                | "LoadState"
                | "Result"
                | "ControlGroup"
                | "ControlGroupId"
                | "Job"
                | "Following"
                | "Triggers"
                | "ConditionResult"
                | "AssertResult"
                | "CanStart"
                | "CanStop"
                | "CanReload"
                | "CanClean"
                | "CanFreeze"
                | "CanIsolate"
                | "RefuseManualStart"
                | "FreezerState"
                | "Perpetual"
                | "ReloadResult"
                | "CleanResult"
                | "UID"
                | "GID"
                // The effective watchdog timeout: a running service may set it through sd_notify.
                | "WatchdogUSec"
                // A timer's runs: when it last ran, when it runs next (only while started).
                | "NextElapseUSecRealtime"
                | "NextElapseUSecMonotonic"
                | "LastTriggerUSec"
                | "LastTriggerUSecMonotonic"
        )
}

pub fn show_unit(c: &Container, unit: &str) -> BTreeMap<String, String> {
    let out = c.run(&["systemctl", "show", "--all", unit]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), without_next_elapse(k, v)))
        .collect()
}

/// TimersCalendar= as systemctl shows it carries the next run (only while the timer is started):
/// keep the expressions.
fn without_next_elapse(key: &str, value: &str) -> String {
    if key != "TimersCalendar" {
        return value.to_string();
    }
    value
        .split(" ; ")
        .filter(|part| !part.starts_with("next_elapse="))
        .collect::<Vec<_>>()
        .join(" ; ")
}

/// ExecStart= as systemctl shows it carries run-time fields; keep path and argv.
pub fn exec_argv(m: &BTreeMap<String, String>) -> String {
    exec_argv_of(m, "ExecStart")
}

/// An Exec*= property as systemctl shows it, without the run-time fields (times, PID, status).
pub fn exec_argv_of(m: &BTreeMap<String, String>, key: &str) -> String {
    m.get(key)
        .map(|v| v.split(" ; ").take(2).collect::<Vec<_>>().join(" ; "))
        .unwrap_or_default()
}

/// ExecStart=, ExecStopPost= and the like (with their `Ex` forms): commands, shown with run-time fields.
fn is_command(k: &str) -> bool {
    k.starts_with("Exec") && !k.starts_with("ExecMain")
}

/// Configuration properties whose values differ between two `systemctl show` maps (dependency lists
/// compared as sets, commands by path and argv).
pub fn unit_differences(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let words = |v: Option<&String>| {
        let mut w: Vec<String> = v
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        w.sort();
        w
    };
    let mut diffs: Vec<String> = a
        .keys()
        .chain(b.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| !volatile(k) && words(a.get(*k)) != words(b.get(*k)))
        .map(|k| format!("{k}: {:?} vs {:?}", a.get(k), b.get(k)))
        .collect();
    let commands: BTreeSet<&String> = a.keys().chain(b.keys()).filter(|k| is_command(k)).collect();
    for key in commands {
        if exec_argv_of(a, key) != exec_argv_of(b, key) {
            diffs.push(format!(
                "{key}: {:?} vs {:?}",
                exec_argv_of(a, key),
                exec_argv_of(b, key)
            ));
        }
    }
    diffs
}

/// An environment in a test container: its state dir, and the kubectl of its Kubernetes.
pub struct Env<'c> {
    pub c: &'c Container,
    pub state: PathBuf,
    pub kubectl: PathBuf,
}

impl Env<'_> {
    /// `kubeunit ARGS... --state-dir STATE`, in the container.
    pub fn ku(&self, args: &[&str]) -> Output {
        let mut argv = args.to_vec();
        let dir = self.state.to_string_lossy().into_owned();
        argv.extend(["--state-dir", &dir]);
        self.c.kubeunit(&argv)
    }

    pub fn ku_ok(&self, args: &[&str]) -> String {
        let out = self.ku(args);
        assert!(out.status.success(), "kubeunit {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kubectl as the environment's admin, from this host.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        run(Command::new(&self.kubectl)
            .env("KUBECONFIG", self.state.join("kubeconfig/admin.kubeconfig"))
            .args(args))
    }

    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Deployment `web`: `replicas` pods of the offline test image, each logging `started
    /// <hostname>` and serving `hello` at /index.html on port 8080.
    pub fn create_web(&self, replicas: u32) {
        let image = super::pinned("TEST_IMAGE")[0].clone();
        self.kubectl_ok(&[
            "create",
            "deployment",
            "web",
            &format!("--image={image}"),
            &format!("--replicas={replicas}"),
            "--",
            "sh",
            "-c",
            "echo started $(hostname); echo hello > /tmp/index.html; exec httpd -f -p 8080 -h /tmp",
        ]);
    }
}
