//! Real VMs: `kubeunit hosts seed` writes a cloud-init NoCloud seed per host from the host dirs of one
//! `gen --out`; the seeds are read back as cloud-init reads them, and refuse what cannot work.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use base64::Engine;

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
