//! Real VMs: `kubeunit hosts seed` writes a cloud-init NoCloud seed per host from the host dirs of one
//! `gen --out`; the seeds are read back as cloud-init reads them, and refuse what cannot work.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use base64::Engine;

use crate::common::hosts_net::{self, Bridge, BRIDGE, STATE};
use crate::common::*;

const NETWORK: &str = "198.19.254.0/24";
/// The seeds of the VM tests: static addresses on the test bridge, the files beside them.
const SEED_ARGS: &[&str] = &[
    "--network",
    NETWORK,
    "--gateway",
    "198.19.254.1",
    "--files-volume",
    "kubeunit-files",
];

fn seed(dir: &Path, out: &Path, extra: &[&str]) -> Output {
    run(kubeunit()
        .args(["hosts", "seed"])
        .arg(dir)
        .arg("--out")
        .arg(out)
        .args(extra))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// user-data's write_files as path -> (bytes, permissions).
fn written_files(user_data: &str) -> Vec<(String, Vec<u8>, String)> {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(user_data).unwrap();
    doc["write_files"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(f["encoding"], "b64");
            assert_eq!(f["owner"], "root:root");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(f["content"].as_str().unwrap())
                .unwrap();
            (
                f["path"].as_str().unwrap().to_string(),
                bytes,
                f["permissions"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_seed_carries_its_host_dir_byte_for_byte_and_only_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = tmp.path().join("hosts");
    gen_hermetic_ha(&hosts, "3");
    let out = tmp.path().join("seeds");
    let o = seed(&hosts, &out, &[SEED_ARGS, &["-o", "json"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["seeds"].as_array().unwrap().len(), 5);
    assert_eq!(mode(&out), 0o700);
    for host in ["cp-1", "cp-2", "cp-3", "worker-1", "worker-2"] {
        let dir = out.join(host);
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        for doc in ["meta-data", "user-data", "network-config"] {
            assert_eq!(mode(&dir.join(doc)), 0o600, "{host}/{doc}");
        }
        let user_data = std::fs::read_to_string(dir.join("user-data")).unwrap();
        assert!(user_data.starts_with("#cloud-config\n"), "{host}");
        let files = written_files(&user_data);
        // Every file of the host dir, the manifest too, with its bytes and mode; nothing else but
        // the script (not gen's empty lock file).
        let host_dir = hosts.join(host);
        let on_disk: Vec<PathBuf> = walkdir::WalkDir::new(&host_dir)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file() && e.file_name() != ".lock")
            .map(|e| e.path().strip_prefix(&host_dir).unwrap().to_path_buf())
            .collect();
        assert_eq!(files.len(), on_disk.len() + 1, "{host}");
        for rel in &on_disk {
            let path = format!("/root/kubeunit-seed/host/{}", rel.display());
            let (_, bytes, perms) = files
                .iter()
                .find(|(p, _, _)| *p == path)
                .unwrap_or_else(|| panic!("{host}: {path} not in the seed"));
            assert_eq!(bytes, &std::fs::read(host_dir.join(rel)).unwrap(), "{path}");
            assert_eq!(
                u32::from_str_radix(perms, 8).unwrap(),
                mode(&host_dir.join(rel)),
                "{path}"
            );
        }
        let (_, script, perms) = files
            .iter()
            .find(|(p, _, _)| p == "/root/kubeunit-seed/up.sh")
            .unwrap();
        assert_eq!(perms, "0700");
        let script = String::from_utf8_lossy(script);
        for want in [
            "mount -o ro LABEL=kubeunit-files",
            "import \"$seed/host\"",
            "install --kubeunit \"$kubeunit\" --state-dir /var/lib/kubeunit/ha",
            "systemctl start --no-block kubeunit-ha.target",
        ] {
            assert!(script.contains(want), "{host}: {want} not in\n{script}");
        }
        let sh = run(std::process::Command::new("sh")
            .arg("-n")
            .arg("-c")
            .arg(&*script));
        assert!(sh.status.success(), "{host}: {}", text(&sh));
        // A worker's seed holds no CA key: only what its host dir holds.
        if host.starts_with("worker") {
            assert!(
                !files.iter().any(|(p, _, _)| p.ends_with("pki/ca.key")),
                "{host}"
            );
        }
        let net: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("network-config")).unwrap())
                .unwrap();
        let want = &report["seeds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["host"] == host)
            .unwrap()["address"];
        assert_eq!(
            net["ethernets"]["e*"]["addresses"][0].as_str().unwrap(),
            format!("{}/24", want.as_str().unwrap())
        );
        let meta = std::fs::read_to_string(dir.join("meta-data")).unwrap();
        assert!(meta.contains(&format!("local-hostname: {host}")), "{meta}");
    }
    // The same host dirs and options: the same seeds, byte for byte.
    let again = tmp.path().join("again");
    let o = seed(&hosts, &again, SEED_ARGS);
    assert!(o.status.success(), "{}", text(&o));
    let bytes = |d: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        snapshot(d)
            .into_iter()
            .map(|(p, (b, _, _))| (p, b))
            .collect()
    };
    assert_eq!(bytes(&out), bytes(&again));

    // etcd as its own user (the cis profile's etcd.user): the seed of a host that runs etcd makes
    // the user before the import, once; a worker's makes none.
    let own = tmp.path().join("own-user");
    gen_hermetic_ha_with(&own, "3", &["--set", "etcd.user=etcd"]);
    let own_seeds = tmp.path().join("own-user-seeds");
    let o = seed(&own, &own_seeds, SEED_ARGS);
    assert!(o.status.success(), "{}", text(&o));
    let useradd = "getent passwd etcd >/dev/null || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin etcd\n";
    for (host, makes) in [("cp-1", true), ("worker-1", false)] {
        let user_data = std::fs::read_to_string(own_seeds.join(host).join("user-data")).unwrap();
        let files = written_files(&user_data);
        let (_, script, _) = files
            .iter()
            .find(|(p, _, _)| p == "/root/kubeunit-seed/up.sh")
            .unwrap();
        let script = String::from_utf8_lossy(script);
        assert_eq!(
            script.matches(useradd).count(),
            usize::from(makes),
            "{host}:\n{script}"
        );
        if makes {
            assert!(
                script.find(useradd) < script.find("import \"$seed/host\""),
                "{script}"
            );
        }
    }
}

#[test]
fn seeds_refuse_what_cannot_work_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let hosts = tmp.path().join("hosts");
    gen_hermetic_ha(&hosts, "3");
    let out = tmp.path().join("seeds");
    let vol = ["--files-volume", "kubeunit-files"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "no way for the host to get its binaries"),
        (
            [&vol[..], &["--network", "198.19.253.0/24"]].concat(),
            "outside --network",
        ),
        (
            [
                &vol[..],
                &["--network", NETWORK, "--gateway", "198.19.254.11"],
            ]
            .concat(),
            "cp-1",
        ),
        (
            [&vol[..], &["--gateway", "198.19.254.1"]].concat(),
            "--network",
        ),
        (
            [&vol[..], &["--kubeunit", "/opt/../kubeunit"]].concat(),
            "--kubeunit",
        ),
        (
            [&vol[..], &["--kubeunit", "/opt/ku\nbeunit"]].concat(),
            "--kubeunit",
        ),
        (vec!["--files-volume", "../../etc"], "--files-volume"),
        // Not where the hosts' hosts-sync timer runs kubeunit (rendered for /usr/local/bin).
        (
            [&vol[..], &["--kubeunit", "/opt/bin/kubeunit"]].concat(),
            "hosts-sync timer runs /usr/local/bin/kubeunit",
        ),
        (
            [&vol[..], &["--ca-cert", "/etc/hostname"]].concat(),
            "no PEM certificate",
        ),
    ];
    for (args, says) in cases {
        let o = seed(&hosts, &out, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains(says),
            "{args:?}: want {says:?}: {}",
            text(&o)
        );
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    // A manifest that names the environment otherwise puts nothing of that into a seed (its
    // script runs as root at boot).
    let manifest = hosts.join("worker-2/manifest.json");
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        original.replacen("\"name\": \"ha\"", "\"name\": \"ha\\n$(reboot)\"", 1),
    )
    .unwrap();
    let o = seed(&hosts, &out, &vol);
    if o.status.success() {
        for e in walkdir::WalkDir::new(&out)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
        {
            let doc = std::fs::read_to_string(e.path()).unwrap();
            assert!(!doc.contains("reboot"), "{}", e.path().display());
            if e.file_name() == "user-data" {
                let (_, script, _) = written_files(&doc)
                    .into_iter()
                    .find(|(p, _, _)| p.ends_with("up.sh"))
                    .unwrap();
                assert!(!String::from_utf8_lossy(&script).contains("reboot"));
            }
        }
        std::fs::remove_dir_all(&out).unwrap();
    } else {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(!out.exists());
    }
    std::fs::write(&manifest, original).unwrap();
    // --out a symlink (to an empty directory): refused, nothing written through it; a huge value too.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &out).unwrap();
    let o = seed(&hosts, &out, &vol);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    std::fs::remove_file(&out).unwrap();
    std::fs::remove_dir(&elsewhere).unwrap();
    let huge = format!("/{}", "k".repeat(100_000));
    let o = seed(&hosts, &out, &[&vol[..], &["--kubeunit", &huge]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!out.exists());
    // A seed goes to a new directory only; a tampered host dir is refused by name.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), "mine").unwrap();
    let o = seed(&hosts, &out, &vol);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(out.join("keep")).unwrap(), "mine");
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::write(
        hosts.join("worker-1/pki/ca.crt"),
        "-----BEGIN CERTIFICATE-----\n",
    )
    .unwrap();
    let o = seed(&hosts, &out, &vol);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("pki/ca.crt"), "{}", text(&o));
    assert!(!out.exists());
    // Nothing but `out` was written beside it (no temporary directory left).
    let beside: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside.len(), 1, "{beside:?}");
}

/// The VMs of `ha` the two cores carry: a control-plane VM and two workers (name, address, MiB).
const VMS: [(&str, &str, u32); 3] = [
    ("cp-1", "198.19.254.11", 3072),
    ("worker-1", "198.19.254.21", 2048),
    ("worker-2", "198.19.254.22", 2048),
];

/// The worker VM that joins the running ones later, by a bootstrap token.
const JOINER: (&str, &str, u32) = ("worker-3", "198.19.254.23", 2048);

/// kubectl as cp-1's admin: every VM's API calls go there.
fn kubectl(out: &Path, args: &[&str]) -> Output {
    hosts_net::kubectl(out, "cp-1", args)
}

fn kubectl_ok(out: &Path, args: &[&str]) -> String {
    hosts_net::kubectl_ok(out, "cp-1", args)
}

/// kubectl as cp-1's admin inside a wait: a failed request is "not yet".
fn kubectl_now(out: &Path, args: &[&str]) -> Option<String> {
    hosts_net::kubectl_now(out, "cp-1", args)
}

fn ready_nodes(out: &Path) -> Vec<String> {
    hosts_net::ready_nodes(out, "cp-1")
}

/// The profile of the VMs: `ha` with the hosts the machine carries, and, given its token file and
/// CA certificate, the worker that joins them later (listed last, as a host joining later is).
fn vm_profile(work: &Path, file: &str, joiner: Option<(&Path, &Path)>) -> PathBuf {
    let mut yaml = String::from("extends: ha\nhosts:\n");
    for (name, address, _) in VMS {
        let roles = if name.starts_with("cp-") {
            "[etcd, control-plane]"
        } else {
            "[worker]"
        };
        yaml.push_str(&format!(
            "  - {{name: {name}, address: {address}, roles: {roles}}}\n"
        ));
    }
    if let Some((token, ca)) = joiner {
        let (name, address, _) = JOINER;
        yaml.push_str(&format!(
            "  - {{name: {name}, address: {address}, roles: [worker], join: {{tokenFile: {}, caFile: {}}}}}\n",
            token.display(),
            ca.display()
        ));
    }
    let path = work.join(file);
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The images the VMs get: what the test's pods and CoreDNS run. Every image more is minutes of
/// `containerd import` under TCG before a kubelet starts.
const VM_IMAGES: [&str; 3] = ["pause", "coredns", "busybox"];

/// What the VMs copy from their files volume: the binaries and images the host dirs name, at the
/// same paths below the cache as here, and kubeunit.
fn vm_files(work: &Path) -> (PathBuf, PathBuf) {
    let cache = cache_dir();
    let mut files: Vec<(PathBuf, PathBuf)> = [
        kubernetes_bin_dir(),
        built_dir("etcd-"),
        built_dir("containerd-"),
        built_dir("runc-"),
        built_dir("cni-plugins-"),
        built_dir("registry-"),
    ]
    .into_iter()
    .chain(
        VM_IMAGES
            .iter()
            .map(|i| built_dir("images-").join(format!("{i}.tar"))),
    )
    .map(|d| {
        let rel = d.strip_prefix(&cache).unwrap().to_path_buf();
        (d, rel)
    })
    .collect();
    // kubeunit without its debug info (a fifth of the size).
    let stripped = work.join("kubeunit");
    let o = run(std::process::Command::new("objcopy")
        .arg("--strip-debug")
        .arg(env!("CARGO_BIN_EXE_kubeunit"))
        .arg(&stripped));
    assert!(o.status.success(), "objcopy: {}", text(&o));
    files.push((stripped, PathBuf::from("vm/kubeunit")));
    let volume = crate::common::vm::files_volume(work, "kubeunit-files", &files);
    (volume, cache.join("vm/kubeunit"))
}

/// `gen --out` of the VMs' profile: dev's pinned binaries, the VMs' few images, kubeunit where the
/// seed puts it on the VMs (the hosts-sync timer runs it), short eviction timeouts.
fn gen_vms(profile: &Path, out: &Path, kubeunit_on_vm: &Path) {
    let mut args = crate::common::container::dev_args(&pinned("KUBERNETES_VERSIONS")[0]);
    args[1] = profile.display().to_string();
    // The dev arguments' images, replaced by the VMs' few (`--set images=[...]`: both words).
    if let Some(i) = args.iter().position(|a| a.starts_with("images=[")) {
        args.drain(i - 1..=i);
    }
    let images: Vec<String> = VM_IMAGES
        .iter()
        .map(|i| {
            built_dir("images-")
                .join(format!("{i}.tar"))
                .display()
                .to_string()
        })
        .collect();
    let images = format!("images=[{}]", images.join(","));
    // Where the seed puts kubeunit on the VMs (not /usr/local/bin): the hosts-sync timer runs it.
    let hosts_sync = format!("components.hosts-sync.binary={}", kubeunit_on_vm.display());
    for set in [
        images.as_str(),
        hosts_sync.as_str(),
        // What the test does not use, off: each is an image and pods a VM would start under TCG.
        // The local registry too (and with it the pull-through caches): the VMs import their
        // images into containerd from the files volume; pushing them into the registry as well
        // kept a worker busy for more than 12 minutes under TCG (2026-12-02).
        "components.registry.enabled=false",
        // hosts sync once a minute, not every 10 s: under TCG each run of the debug build costs
        // 2 to 5 s of guest CPU, a quarter of a worker's at every 10 s (2026-12-02: 173, 90 and
        // 67 runs on cp-1 and the workers; once a minute, 19, 13 and 6, and the test took 1439 s,
        // was 1547 to 1946 s). The join waits for a run at most a minute more; tests/it/hosts.rs
        // keeps the default.
        "hostsSync.schedule=*:0/1",
        "addons.metricsServer=false",
        "addons.loadBalancer=false",
        "addons.defaultStorageClass=false",
        // The power cut's eviction, quicker than the defaults (300 s), yet slow enough that a
        // kubelet of a busy TCG VM late with its lease does not lose its pods: with 20 s and 10 s,
        // web's rollout flapped (available 1, 0, 1) and timed out in a run of 2026-11-28.
        "components.kube-apiserver.extraArgs.default-unreachable-toleration-seconds=30",
        "components.kube-apiserver.extraArgs.default-not-ready-toleration-seconds=30",
        // Kubernetes' own default since v1.32 (50 s), said here so that the eviction's time is.
        "components.kube-controller-manager.extraArgs.node-monitor-grace-period=50s",
    ] {
        args.push("--set".into());
        args.push(set.into());
    }
    // One seed and epoch for every render: the later one (with the joiner) must give the hosts the
    // same PKI, or `hosts seed` refuses its dirs as disagreeing on the CA.
    let o = run(kubeunit()
        .env("SOURCE_DATE_EPOCH", test_epoch())
        .arg("gen")
        .args(&args)
        .args(["--seed", "37", "--state-dir", STATE, "--out"])
        .arg(out));
    assert!(o.status.success(), "gen: {}", text(&o));
}

/// `hosts seed` of every host dir in `out`, for the VMs: their files volume, kubeunit on it.
fn seed_vms(out: &Path, seeds: &Path, kubeunit_on_vm: &Path) {
    let o = seed(
        out,
        seeds,
        &[
            SEED_ARGS,
            &[
                "--files-dir",
                &cache_dir().display().to_string(),
                "--kubeunit",
                &kubeunit_on_vm.display().to_string(),
            ],
        ]
        .concat(),
    );
    assert!(o.status.success(), "hosts seed: {}", text(&o));
}

/// A VM booted from its seed (its `index`: its MAC), once its node is Ready; the time that took
/// and the memory it takes, reported.
fn boot_until_ready(
    work: &Path,
    files: &Path,
    seeds: &Path,
    out: &Path,
    (name, _, memory_mb): (&str, &str, u32),
    index: u8,
) -> crate::common::vm::Vm {
    use crate::common::vm::{self, Vm, VmSpec};
    let iso = work.join(format!("{name}.iso"));
    vm::seed_iso(&seeds.join(name), &iso);
    let vm = Vm::boot(
        work,
        &vm::image(),
        VmSpec {
            name: name.to_string(),
            memory_mb,
            cpus: if name.starts_with("cp-") { 2 } else { 1 },
            bridge: BRIDGE.into(),
            mac: format!("52:54:00:19:54:{:02x}", 0x10 + index),
            seed_iso: iso,
            files: Some(files.to_path_buf()),
        },
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(1200);
    while !ready_nodes(out).iter().any(|n| n == name) {
        if std::time::Instant::now() > deadline {
            panic!(
                "{name} not Ready 1200 s after qemu started; console:\n{}",
                vm.console_tail(40)
            );
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    // A worker once Ready yields the cores to the control-plane VM, which every kubelet and every
    // request of the test talks to. Sharing two cores thread for thread with the workers, cp-1 got
    // one, its API server answered in 10 to 40 s, and every node went NotReady (2026-12-02). Not
    // while booting: at nice 5 from the start, a worker's image import outlasted its hook's 300 s.
    if !name.starts_with("cp-") {
        vm.renice(5);
    }
    eprintln!(
        "vms: {name} Ready {:.0} s after qemu started ({}, {} vCPU), guest uses {} MiB, qemu RSS {} MiB",
        vm.started.elapsed().as_secs_f64(),
        crate::common::vm::accel().to_uppercase(),
        vm.spec.cpus,
        vm.guest_used_mb().unwrap_or(0),
        vm.rss_mb()
    );
    vm
}

/// What keeps a VM busy, reported: its clock source (an emulated HPET makes every clock read
/// a trap), the CPU time of its hosts-sync runs (every 10 s on every host) and how often
/// kube-controller-manager restarted (it exits when kube-apiserver is not healthy in 10 s).
fn report_load(vm: &crate::common::vm::Vm) {
    let out = vm
        .exec(
            "cat /sys/devices/system/clocksource/clocksource0/current_clocksource; \
             journalctl -q -o cat -u '*-hosts-sync.service' | sed -n 's/.*Consumed \\(.*\\) CPU time.*/\\1/p' | tr '\\n' ' '; echo; \
             systemctl show -p NRestarts --value kubeunit-ha-kube-controller-manager.service",
        )
        .map(|(_, o)| o)
        .unwrap_or_default();
    let mut lines = out.lines();
    let clock = lines.next().unwrap_or("?").to_string();
    let secs: Vec<f64> = lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|t| match t.strip_suffix("ms") {
            Some(ms) => ms.parse::<f64>().ok().map(|v| v / 1000.0),
            None => t.strip_suffix('s')?.parse().ok(),
        })
        .collect();
    let mean = secs.iter().sum::<f64>() / secs.len().max(1) as f64;
    let restarts = match vm.spec.name.starts_with("cp-") {
        true => format!(
            ", kube-controller-manager restarted {} times",
            lines.next().unwrap_or("?").trim()
        ),
        false => String::new(),
    };
    eprintln!(
        "vms: {} clocksource {clock}, hosts-sync {} runs, {mean:.2} s CPU each on average{restarts}",
        vm.spec.name,
        secs.len(),
    );
    // Where its CPU went: the environment's units and the pods, most first (guest CPU seconds,
    // which under TCG count the time qemu's vCPU thread waited for a core too).
    let by_unit = vm
        .exec(
            &(each_unit(
                &["Id", "CPUUsageNSec"],
                "'kubeunit-*.service' kubepods.slice",
                r#"if (v["CPUUsageNSec"] ~ /^[0-9]+$/) printf "%.0f %s\n", v["CPUUsageNSec"] / 1e9, v["Id"]"#,
            ) + r#" | sort -rn | head -8 | awk '{sub(/^kubeunit-[^-]*-/, "", $2); sub(/\.service$/, "", $2); printf "%s %s s, ", $2, $1}'"#),
        )
        .map(|(_, o)| o)
        .unwrap_or_default();
    eprintln!(
        "vms: {} CPU by unit since boot: {}",
        vm.spec.name,
        by_unit.trim().trim_end_matches(',')
    );
}

/// A guest's shell command: `systemctl show -p PROP... UNITS`, and awk running `body` once per
/// unit with its properties in `v` (`v["Id"]`).
fn each_unit(props: &[&str], units: &str, body: &str) -> String {
    let props: Vec<String> = props.iter().map(|p| format!("-p {p}")).collect();
    let props = props.join(" ");
    format!(
        "systemctl show {props} {units} | awk -v RS= '{{\n  for (i = 1; i <= NF; i++) {{ split($i, kv, \"=\"); v[kv[1]] = kv[2] }}\n  {body}\n  delete v\n}}'"
    )
}

/// What each VM says of itself, for a failure: its kubelet's and containerd's last journal lines,
/// then one line each of its load and every unit that failed or restarted, last (CI shows the
/// tail of a failure: CI stop 54's rollout timed out after a pod sandbox was re-created, with
/// nothing to say why).
fn what_the_vms_say(vms: &[crate::common::vm::Vm]) -> String {
    let journal = "journalctl -q -o short-monotonic --no-pager -n 12 -u 'kubeunit-*-kubelet.service' -u 'kubeunit-*-containerd.service'";
    // Every unit of the environment that is not active or inactive, restarted, or did not
    // succeed: `Id ActiveState restarts=N Result`.
    let summary = r#"echo "load $(cut -d' ' -f1-3 /proc/loadavg), up $(cut -d' ' -f1 /proc/uptime) s, $(awk '/MemAvailable/{print int($2/1024)}' /proc/meminfo) MiB free"
"#
    .to_string()
        + &each_unit(
            &["Id", "ActiveState", "NRestarts", "Result"],
            "'kubeunit-*'",
            r#"a = v["ActiveState"]; n = v["NRestarts"]; r = v["Result"]
  if ((a != "active" && a != "inactive") || (n != "" && n != 0) || (r != "success" && r != "")) print "  " v["Id"], a, "restarts=" n, r"#,
        );
    let mut tails = String::new();
    let mut lines = String::new();
    for vm in vms {
        let name = &vm.spec.name;
        let ask = |cmd: &str| {
            vm.exec(cmd)
                .map(|(_, o)| o)
                .unwrap_or_else(|| "(no answer)".into())
        };
        tails.push_str(&format!(
            "--- {name}: kubelet and containerd\n{}\n",
            ask(journal).trim_end()
        ));
        lines.push_str(&format!("--- {name}: {}\n", ask(&summary).trim_end()));
    }
    format!("{tails}{lines}")
}

/// What a VM has of the environment, as hashes: every file of its state dir but the data below it
/// (etcd's, the kubelet's: they run), and the units `install` wrote.
fn installed_hashes(vm: &crate::common::vm::Vm) -> String {
    vm.exec_ok(&format!(
        "cd {STATE} && find . -path ./data -prune -o -type f ! -name .lock -print | sort | xargs sha256sum && \
         cd /etc/systemd/system && find . -path '*kubeunit-ha*' \\( -type f -o -type l \\) | sort | xargs sha256sum"
    ))
}

/// The cluster DNS Service's address, as the host dirs' kubelets have it.
fn cluster_dns(out: &Path) -> String {
    let config = std::fs::read_to_string(out.join("cp-1/config/kubelet-config.yaml")).unwrap();
    config
        .lines()
        .skip_while(|l| l.trim() != "clusterDNS:")
        .nth(1)
        .and_then(|l| l.trim().strip_prefix("- "))
        .map(|a| a.trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("no clusterDNS in cp-1's kubelet-config.yaml:\n{config}"))
}

/// What every VM routes: the other VMs, their nodes' pod networks and links go by the bridge (the
/// interface holding the VM's address), via the owner's address; its own and the cluster DNS
/// Service's stay on the VM; and nothing goes anywhere else. `out` holds every VM's host dir.
fn routes_stay_on_the_bridge(out: &Path, vms: &[crate::common::vm::Vm], hosts: &[(&str, &str)]) {
    let mut targets: Vec<(String, String)> = Vec::new();
    for (name, address) in hosts {
        targets.push((name.to_string(), address.to_string()));
        let script =
            std::fs::read_to_string(out.join(name).join("config/node-network.sh")).unwrap();
        for var in ["net", "pod_cidr"] {
            let net = script
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{var}=\"")))
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_else(|| panic!("no {var} in {name}'s node-network.sh"));
            let net: ipnet::Ipv4Net = net.parse().unwrap();
            let first = u32::from(net.network()) + 1;
            targets.push((
                name.to_string(),
                std::net::Ipv4Addr::from(first).to_string(),
            ));
        }
    }
    targets.push(("service".into(), cluster_dns(out)));
    for vm in vms {
        let address = hosts.iter().find(|v| v.0 == vm.spec.name).unwrap().1;
        let addrs = vm.exec_ok("ip -o -4 addr show");
        let bridge = addrs
            .lines()
            .find(|l| l.contains(&format!(" {address}/")))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("{}: no interface has {address}: {addrs}", vm.spec.name))
            .to_string();
        for (owner, target) in &targets {
            let route = vm.exec_ok(&format!("ip -4 route get {target}"));
            let dev = route
                .split_whitespace()
                .skip_while(|w| *w != "dev")
                .nth(1)
                .unwrap_or_default()
                .to_string();
            let own = *owner == vm.spec.name || owner == "service";
            assert!(
                dev == bridge || (own && dev != "lo") || (own && route.starts_with("local")),
                "{}: {target} ({owner}) goes {route:?}",
                vm.spec.name
            );
            if !own {
                let host = hosts.iter().find(|v| v.0 == owner).unwrap().1;
                assert!(
                    route.contains(&format!("dev {bridge} "))
                        && (route.contains(&format!("via {host} ")) || target == host),
                    "{}: {target} ({owner}) goes {route:?}, not to {owner} on the bridge",
                    vm.spec.name
                );
            }
        }
    }
}

/// Set by scripts/vms.sh: the VM test goes on to the power cut and the join by token (about 20
/// minutes more on two cores under TCG), which CI's 90 minutes do not carry. The same two run on
/// systemd containers in CI (`hosts::five_hosts_serve_with_a_control_plane_host_or_a_worker_powered_off`,
/// `hosts::a_worker_joins_later_by_token_and_no_other_host_changes`); the script's dated results
/// are in benches/results/vms-*.txt.
const FULL: &str = "KUBEUNIT_VMS_FULL";

/// Three VMs from one `gen` and their seeds, up by cloud-init alone: every node Ready, a Deployment
/// across both workers reached by its Service's name from a pod, routes that stay on the bridge,
/// bootstrap-token node certificates. With KUBEUNIT_VMS_FULL (scripts/vms.sh), then a worker's
/// power cut and a worker joining later by token (`power_cut_then_a_worker_joins`).
#[test]
fn ha_on_vms_comes_up_by_cloud_init_alone_and_serves_across_them() {
    let _lock = node_lock();
    let _bridge = Bridge::up();
    let work = PathBuf::from(format!("/tmp/kubeunit-it/vms-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let (files, kubeunit_on_vm) = vm_files(&work);

    // One gen renders every VM's host dir; one seed each.
    let out = work.join("out");
    gen_vms(&vm_profile(&work, "vms.yaml", None), &out, &kubeunit_on_vm);
    let seeds = work.join("seeds");
    seed_vms(&out, &seeds, &kubeunit_on_vm);

    // One VM after the other, each once the one before is Ready: TCG VMs starting together on two
    // cores starve each other (three at once: cp-1's kube-apiserver took 7 minutes to answer and
    // then too long for its nodes' leases). Up by cloud-init alone: no command typed into a VM.
    let mut vms: Vec<crate::common::vm::Vm> = Vec::new();
    for (i, vm) in VMS.iter().enumerate() {
        vms.push(boot_until_ready(&work, &files, &seeds, &out, *vm, i as u8));
    }
    let all: Vec<String> = VMS.iter().map(|v| v.0.to_string()).collect();
    wait_for("every node Ready at once", Duration::from_secs(120), || {
        ready_nodes(&out) == all
    });

    // A Deployment across both workers, its Service by name from a pod: DNS and Services across VMs.
    let image = pinned("TEST_IMAGE")[0].clone();
    let serve = "mkdir -p /w/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho from $(hostname)\\n' >/w/cgi-bin/who && chmod +x /w/cgi-bin/who && exec httpd -f -p 8080 -h /w";
    let manifest = format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 1
      # Honor: a node tainted as unreachable is no domain to spread over (the default counts it,
      # and the pod worker-2's power cut evicted could then go nowhere).
      topologySpreadConstraints:
      - {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Honor, labelSelector: {{matchLabels: {{app: web}}}}}}
      containers: [{{name: c, image: {image}, command: [sh, -c, {serve:?}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec: {{selector: {{app: web}}, ports: [{{port: 8080}}]}}
---
apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  nodeName: worker-1
  terminationGracePeriodSeconds: 1
  containers: [{{name: c, image: {image}, command: [sleep, "3600"]}}]
"#
    );
    let path = work.join("web.yaml");
    std::fs::write(&path, manifest).unwrap();
    wait_for(
        "the default service account",
        Duration::from_secs(120),
        || {
            kubectl(&out, &["get", "serviceaccount", "default"])
                .status
                .success()
        },
    );
    kubectl_ok(&out, &["apply", "-f", &path.to_string_lossy()]);
    // 600 s: on 2026-11-29 the second web pod's sandbox took 70 s to start on worker-1, and then
    // cp-1, busy, dropped the kubelets' connections; the rollout was not done after 300 s. What the
    // pods and their events say goes with a failure.
    let rollout = kubectl(
        &out,
        &["rollout", "status", "deployment/web", "--timeout=600s"],
    );
    if !rollout.status.success() {
        let pods = kubectl(&out, &["get", "nodes,pods", "-o", "wide"]);
        let events = kubectl(&out, &["get", "events", "--sort-by=.lastTimestamp"]);
        panic!(
            "web's rollout: {}\n{}\n{}\n{}",
            text(&rollout),
            text(&pods),
            text(&events),
            what_the_vms_say(&vms)
        );
    }
    kubectl_ok(
        &out,
        &[
            "wait",
            "--for=condition=Ready",
            "pod/client",
            "--timeout=300s",
        ],
    );
    // Asked inside waits too: a failed request lists nothing (not yet).
    let nodes_of_web = || {
        let o = kubectl_now(
            &out,
            &[
                "get",
                "pods",
                "-l",
                "app=web",
                "-o",
                "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
            ],
        )
        .unwrap_or_default();
        // A pod being deleted is on its way out: on a node that lost power it stays Running (no
        // kubelet reports otherwise) until the node is back or gone.
        let mut n: Vec<String> = o
            .lines()
            .filter(|l| l.trim_end().ends_with(" Running"))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    // Waited for, not asserted once: the rollout is done, but one request to a busy cp-1 can fail
    // (CI stop 52 read an empty list here from a single failed request).
    // What the last request said goes with a failure: an empty list is a failed request or no pod
    // (CI stop 53: "last seen: []" after 120 s, which told neither).
    wait_for_saying(
        "the web pods Running on worker-1 and worker-2",
        Duration::from_secs(300),
        || {
            let n = nodes_of_web();
            if n == ["worker-1", "worker-2"] {
                return (true, String::new());
            }
            let pods = kubectl(&out, &["get", "pods", "-o", "wide"]);
            (false, format!("{n:?}; pods: {}", text(&pods)))
        },
    );
    // Both pods answer through the Service's name (CoreDNS, kube-proxy), from worker-1's client.
    // 300 s, saying who answered and what the last try printed: in a run of 2026-11-29, cp-1 (busy,
    // its API server timing requests out) let 180 s pass with no answer from one of them.
    let mut answered = std::collections::BTreeSet::new();
    wait_for_saying(
        "both web pods through the Service's name",
        Duration::from_secs(300),
        || {
            let o = kubectl(
                &out,
                &[
                    "exec",
                    "client",
                    "--",
                    "wget",
                    "-qO-",
                    "-T",
                    "5",
                    "http://web.default.svc.cluster.local:8080/cgi-bin/who",
                ],
            );
            if let Some(from) = String::from_utf8_lossy(&o.stdout)
                .trim()
                .strip_prefix("from ")
            {
                answered.insert(from.to_string());
            }
            (
                answered.len() == 2,
                format!("answered: {answered:?}; last try: {}", text(&o)),
            )
        },
    );

    let hosts: Vec<(&str, &str)> = VMS.iter().map(|v| (v.0, v.1)).collect();
    routes_stay_on_the_bridge(&out, &vms, &hosts);
    for vm in &vms {
        report_load(vm);
    }
    bootstrap_tokens_get_node_certificates(&work, &out);

    if std::env::var_os(FULL).is_some() {
        power_cut_then_a_worker_joins(&work, &files, &kubeunit_on_vm, &out, &mut vms, nodes_of_web);
    } else {
        eprintln!(
            "vms: a worker's power cut and a worker joining by token run with {FULL}=1 (scripts/vms.sh)"
        );
    }
    for vm in &mut vms {
        assert!(
            vm.running(),
            "{} stopped: {}",
            vm.spec.name,
            vm.console_tail(20)
        );
    }
    // Passed: the VMs go (qemu killed, taps removed), then their disks (gigabytes of overlays). A
    // failed run keeps them for a look.
    drop(vms);
    std::fs::remove_dir_all(&work).unwrap();
}

/// Power loss for real, then a join later (scripts/vms.sh): kill -9 of worker-2's qemu moves its
/// web pod to worker-1; booted again, worker-2 is Ready with no command (install made its units
/// start at boot). Then worker-3 joins with a bootstrap token, and no other VM's state dir or units
/// change.
fn power_cut_then_a_worker_joins(
    work: &Path,
    files: &Path,
    kubeunit_on_vm: &Path,
    out: &Path,
    vms: &mut Vec<crate::common::vm::Vm>,
    nodes_of_web: impl Fn() -> Vec<String>,
) {
    let all: Vec<String> = VMS.iter().map(|v| v.0.to_string()).collect();
    // Power loss: kill -9 of worker-2's qemu. Its web pod moves to worker-1 after the shortened
    // eviction timeouts (about 80 s); booted again, it is Ready with no command.
    let w2 = vms.iter_mut().find(|v| v.spec.name == "worker-2").unwrap();
    w2.kill();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while nodes_of_web() != ["worker-1", "worker-1"] {
        if std::time::Instant::now() > deadline {
            let o = kubectl(out, &["get", "nodes,pods", "-o", "wide"]);
            let taints = kubectl(
                out,
                &["get", "node", "worker-2", "-o", "jsonpath={.spec.taints}"],
            );
            panic!(
                "web's pods not all on worker-1 300 s after worker-2's power cut:\n{}\nworker-2's taints: {}",
                text(&o),
                text(&taints)
            );
        }
        std::thread::sleep(Duration::from_secs(5));
    }
    let w2 = vms.iter_mut().find(|v| v.spec.name == "worker-2").unwrap();
    w2.power_on();
    let started = std::time::Instant::now();
    wait_for(
        "worker-2 Ready again, by itself",
        Duration::from_secs(900),
        || ready_nodes(out) == all,
    );
    eprintln!(
        "vms: worker-2 Ready {:.0} s after power came back",
        started.elapsed().as_secs_f64()
    );

    // Two cores carry three VMs under TCG, not four: with worker-2 running, worker-3 was not Ready
    // 1200 s after its qemu started (scripts/vms.sh, 2026-11-29). worker-2 has shown it comes back;
    // it is shut down cleanly and leaves the set, and the join is checked on the VMs that run.
    let w2 = vms.iter().position(|v| v.spec.name == "worker-2").unwrap();
    vms.remove(w2).power_off();

    // Join later: a token made on cp-1's dir; worker-3's dir rendered with it and the cluster CA's
    // certificate (no key); its seed; its VM. No other VM is rendered again or touched: their state
    // dirs and units are the same after.
    let before: Vec<String> = vms.iter().map(installed_hashes).collect();
    let o = run(kubeunit()
        .args([
            "token",
            "create",
            "--description",
            "worker-3",
            "--state-dir",
        ])
        .arg(out.join("cp-1")));
    assert!(o.status.success(), "token create: {}", text(&o));
    let token = work.join("token");
    std::fs::write(&token, &o.stdout).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let later = work.join("later");
    let ca = out.join("cp-1/pki/ca.crt");
    gen_vms(
        &vm_profile(work, "later.yaml", Some((&token, &ca))),
        &later,
        kubeunit_on_vm,
    );
    let seeds_later = work.join("seeds-later");
    seed_vms(&later, &seeds_later, kubeunit_on_vm);
    vms.push(boot_until_ready(
        work,
        files,
        &seeds_later,
        out,
        JOINER,
        VMS.len() as u8,
    ));
    // Its kubelet's serving certificate, approved by cp-1's sync; a pod on it, reached from
    // worker-1's client by its address (the routes each VM's sync added) and by a Service; its
    // logs (the API server to its kubelet's serving certificate).
    wait_for(
        "worker-3's serving certificate approved",
        Duration::from_secs(180),
        || {
            kubectl_now(
                out,
                &["get", "csr", "-o", "jsonpath={range .items[*]}{.spec.signerName} {.spec.username} {.status.conditions[0].type}{\"\\n\"}{end}"],
            )
            .unwrap_or_default()
            .contains("kubernetes.io/kubelet-serving system:node:worker-3 Approved")
        },
    );
    let image = pinned("TEST_IMAGE")[0].clone();
    let joined = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: joined, labels: {{app: joined}}}}
spec:
  nodeName: worker-3
  terminationGracePeriodSeconds: 1
  containers: [{{name: c, image: {image}, command: [sh, -c, "mkdir -p /w && echo hello from worker-3 >/w/index.html && exec httpd -f -p 8080 -h /w"]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: joined}}
spec: {{selector: {{app: joined}}, ports: [{{port: 80, targetPort: 8080}}]}}
"#
    );
    let path = work.join("joined.yaml");
    std::fs::write(&path, joined).unwrap();
    kubectl_ok(out, &["apply", "-f", &path.to_string_lossy()]);
    kubectl_ok(
        out,
        &[
            "wait",
            "--for=condition=Ready",
            "pod/joined",
            "--timeout=300s",
        ],
    );
    let pod_ip = kubectl_ok(
        out,
        &["get", "pod", "joined", "-o", "jsonpath={.status.podIP}"],
    );
    for (what, url) in [
        (
            "worker-3's pod from worker-1's",
            format!("http://{pod_ip}:8080/"),
        ),
        (
            "worker-3's pod by its Service's name from worker-1's",
            "http://joined.default.svc.cluster.local/".to_string(),
        ),
    ] {
        wait_for(what, Duration::from_secs(120), || {
            let o = kubectl(
                out,
                &["exec", "client", "--", "wget", "-qO-", "-T", "5", &url],
            );
            String::from_utf8_lossy(&o.stdout).contains("hello from worker-3")
        });
    }
    kubectl_ok(out, &["logs", "joined"]);
    let mut hosts: Vec<(&str, &str)> = VMS.iter().map(|v| (v.0, v.1)).collect();
    hosts.push((JOINER.0, JOINER.1));
    routes_stay_on_the_bridge(&later, vms, &hosts);
    for (vm, b) in vms.iter().zip(&before) {
        assert_eq!(
            b,
            &installed_hashes(vm),
            "{}'s state dir or units changed when worker-3 joined",
            vm.spec.name
        );
    }
}

/// What a host joining later relies on, from outside: `kubeunit token create` on the control plane's
/// state dir makes a token; with it alone (no certificate), a client's CSR for a node's client
/// certificate is approved by kube-controller-manager and signed, as a joining kubelet's is.
fn bootstrap_tokens_get_node_certificates(work: &Path, out: &Path) {
    let o = run(kubeunit()
        .args(["token", "create", "--ttl", "10m", "--state-dir"])
        .arg(out.join("cp-1")));
    assert!(o.status.success(), "token create: {}", text(&o));
    let token = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let o = run(kubeunit()
        .args(["token", "list", "-o", "json", "--state-dir"])
        .arg(out.join("cp-1")));
    assert!(o.status.success(), "token list: {}", text(&o));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = token.split('.').next().unwrap();
    assert!(
        listed.as_array().unwrap().iter().any(|t| t["id"] == id),
        "{listed}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&token));

    // A node client CSR as a kubelet bootstraps one, sent with the token.
    let dir = work.join("bootstrap");
    std::fs::create_dir_all(&dir).unwrap();
    let o = run(std::process::Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-subj", "/O=system:nodes/CN=system:node:joiner"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("csr.pem")));
    assert!(o.status.success(), "openssl: {}", text(&o));
    let csr = base64::engine::general_purpose::STANDARD
        .encode(std::fs::read(dir.join("csr.pem")).unwrap());
    let manifest = format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {{name: joiner}}\nspec:\n  request: {csr}\n  signerName: kubernetes.io/kube-apiserver-client-kubelet\n  usages: [digital signature, client auth]\n"
    );
    std::fs::write(dir.join("csr.yaml"), manifest).unwrap();
    let as_token = |args: &[&str]| {
        run(
            std::process::Command::new(kubernetes_bin_dir().join("kubectl"))
                .env("KUBECONFIG", "/dev/null")
                .arg(format!("--server=https://{}:6443", VMS[0].1))
                .arg(format!(
                    "--certificate-authority={}",
                    out.join("cp-1/pki/ca.crt").display()
                ))
                .arg(format!("--token={token}"))
                .args(["--request-timeout=20s"])
                .args(args),
        )
    };
    let o = as_token(&["auth", "whoami"]);
    assert!(
        o.status.success()
            && text(&o).contains(&format!("system:bootstrap:{id}"))
            && text(&o).contains("system:bootstrappers:kubeunit:default-node-token"),
        "whoami with the token: {}",
        text(&o)
    );
    let o = as_token(&["create", "-f", &dir.join("csr.yaml").to_string_lossy()]);
    assert!(o.status.success(), "CSR with the token: {}", text(&o));
    // The token's user may ask for a certificate, not more.
    let o = as_token(&["get", "secrets", "-n", "kube-system"]);
    assert!(!o.status.success(), "the token reads Secrets: {}", text(&o));
    let mut issued = String::new();
    wait_for(
        "the CSR approved and signed",
        Duration::from_secs(120),
        || {
            issued = kubectl_now(
                out,
                &[
                    "get",
                    "csr",
                    "joiner",
                    "-o",
                    "jsonpath={.status.certificate}",
                ],
            )
            .unwrap_or_default();
            !issued.is_empty()
        },
    );
    let conditions = kubectl_ok(
        out,
        &[
            "get",
            "csr",
            "joiner",
            "-o",
            "jsonpath={.status.conditions[*].type}",
        ],
    );
    assert_eq!(conditions, "Approved", "{conditions}");
    let cert = base64::engine::general_purpose::STANDARD
        .decode(issued.trim())
        .unwrap();
    std::fs::write(dir.join("cert.pem"), &cert).unwrap();
    let o = run(std::process::Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-in"])
        .arg(dir.join("cert.pem")));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("CN = system:node:joiner"),
        "{}",
        text(&o)
    );
    kubectl_ok(out, &["delete", "csr", "joiner"]);
    let o = run(kubeunit()
        .args(["token", "delete", id, "--state-dir"])
        .arg(out.join("cp-1")));
    assert!(o.status.success(), "token delete: {}", text(&o));
    // kube-apiserver reads tokens from its informer's cache: gone a moment after the Secret.
    wait_for("the deleted token refused", Duration::from_secs(60), || {
        let o = as_token(&["auth", "whoami"]);
        !o.status.success() && text(&o).contains("Unauthorized")
    });
}
