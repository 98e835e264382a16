//! `kubeunit gen`: the state dir it writes, checked with the tools that consume it (openssl, kubectl,
//! systemd-analyze) and by parsing the certificates.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::*;
use x509_parser::extensions::ParsedExtension;
use x509_parser::prelude::*;

struct CertInfo {
    cn: String,
    orgs: Vec<String>,
    sans: BTreeSet<String>,
    server_auth: bool,
    client_auth: bool,
    is_ca: bool,
    key_cert_sign: bool,
    digital_signature: bool,
}

fn cert(dir: &Path, name: &str) -> CertInfo {
    let pem_bytes = std::fs::read(dir.join("pki").join(format!("{name}.crt"))).unwrap();
    let (_, pem) = parse_x509_pem(&pem_bytes).unwrap();
    let c = pem.parse_x509().unwrap();
    let mut info = CertInfo {
        cn: c
            .subject()
            .iter_common_name()
            .map(|a| a.as_str().unwrap().to_string())
            .collect(),
        orgs: c
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap().to_string())
            .collect(),
        sans: BTreeSet::new(),
        server_auth: false,
        client_auth: false,
        is_ca: false,
        key_cert_sign: false,
        digital_signature: false,
    };
    for ext in c.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::SubjectAlternativeName(san) => {
                info.sans
                    .extend(san.general_names.iter().filter_map(san_text));
            }
            ParsedExtension::ExtendedKeyUsage(eku) => {
                info.server_auth = eku.server_auth;
                info.client_auth = eku.client_auth;
            }
            ParsedExtension::BasicConstraints(bc) => info.is_ca = bc.ca,
            ParsedExtension::KeyUsage(ku) => {
                info.key_cert_sign = ku.key_cert_sign();
                info.digital_signature = ku.digital_signature();
            }
            _ => {}
        }
    }
    info
}

fn set<const N: usize>(items: [&str; N]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn gen_dev(dir: &Path, extra: &[&str]) {
    let bin = executable_bin_dir(dir.parent().unwrap());
    let mut args = vec![
        "--profile",
        "dev",
        "--seed",
        "7",
        "--bin-dir",
        bin.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    gen_ok(dir, &args);
}

#[test]
fn every_certificate_verifies_against_its_ca_with_openssl() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(&dir, &["--set", "network.advertiseAddress=192.0.2.10"]);
    assert_openssl_accepts_the_pki(&dir);
}

#[test]
fn rsa_keys_and_certificates_pass_openssl_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(
        &dir,
        &[
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "pki.algorithm=rsa-2048",
        ],
    );
    assert_openssl_accepts_the_pki(&dir);
    let mut keys: Vec<_> = walkdir::WalkDir::new(dir.join("pki"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "key") && !p.ends_with("encryption.key"))
        .collect();
    keys.sort();
    assert_eq!(keys.len(), 19, "{keys:?}");
    let mut moduli = BTreeSet::new();
    for key in keys {
        // openssl's own consistency check: p and q prime, n = p q, d e = 1, CRT values.
        let check = run(Command::new("openssl")
            .args(["rsa", "-check", "-noout", "-in"])
            .arg(&key));
        assert!(
            check.status.success() && text(&check).contains("RSA key ok"),
            "openssl rsa -check {}: {}",
            key.display(),
            text(&check)
        );
        let modulus = run(Command::new("openssl")
            .args(["rsa", "-noout", "-text", "-in"])
            .arg(&key));
        let t = text(&modulus);
        assert!(t.contains("Private-Key: (2048 bit, 2 primes)"), "{t}");
        assert!(t.contains("publicExponent: 65537 (0x10001)"), "{t}");
        moduli.insert(t.split("publicExponent").next().unwrap().to_string());
    }
    assert_eq!(moduli.len(), 19, "every key is its own");
}

/// `openssl verify` of every certificate against its CA, and each key belongs to its certificate.
fn assert_openssl_accepts_the_pki(dir: &Path) {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let certs: Vec<String> = manifest["files"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.ends_with(".crt"))
        .cloned()
        .collect();
    assert!(
        certs.len() >= 18,
        "expected every certificate in the manifest, got {certs:?}"
    );
    for crt in certs {
        let ca = if crt.starts_with("pki/etcd/") || crt == "pki/apiserver-etcd-client.crt" {
            "pki/etcd/ca.crt"
        } else if crt.starts_with("pki/front-proxy") {
            "pki/front-proxy-ca.crt"
        } else {
            "pki/ca.crt"
        };
        let out = run(Command::new("openssl").current_dir(dir).args([
            "verify",
            "-x509_strict",
            "-CAfile",
            ca,
            &crt,
        ]));
        assert!(
            out.status.success(),
            "openssl verify {crt} against {ca}: {}",
            text(&out)
        );
        // Each key belongs to its certificate.
        let key = crt.replace(".crt", ".key");
        let from_key = run(Command::new("openssl")
            .current_dir(dir)
            .args(["pkey", "-pubout", "-in", &key]));
        let from_crt = run(Command::new("openssl")
            .current_dir(dir)
            .args(["x509", "-pubkey", "-noout", "-in", &crt]));
        assert!(
            from_key.status.success(),
            "openssl cannot read {key}: {}",
            text(&from_key)
        );
        assert_eq!(
            from_key.stdout, from_crt.stdout,
            "{key} does not match {crt}"
        );
    }
}

#[test]
fn subjects_sans_and_key_usages_are_as_specified() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(
        &dir,
        &[
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "network.extraSANs=[api.example.test,198.51.100.7]",
            "--set",
            "node.link=198.18.7.0/30",
        ],
    );
    for ca in ["ca", "front-proxy-ca", "etcd/ca"] {
        let c = cert(&dir, ca);
        assert!(c.is_ca && c.key_cert_sign, "{ca} must be a CA");
    }
    let api = cert(&dir, "apiserver");
    assert_eq!(api.cn, "kube-apiserver");
    assert!(api.server_auth && !api.client_auth && !api.is_ca && api.digital_signature);
    assert_eq!(
        api.sans,
        set([
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
            "dev",
            "127.0.0.1",
            "::1",
            "10.0.0.1",
            "192.0.2.10",
            // The host's end of the node link: the node reaches the API server there.
            "198.18.7.1",
            "api.example.test",
            "198.51.100.7",
        ])
    );
    let expect_client = |name: &str, cn: &str, orgs: &[&str]| {
        let c = cert(&dir, name);
        assert_eq!(c.cn, cn, "{name} CN");
        assert_eq!(c.orgs, orgs, "{name} O");
        assert!(
            c.client_auth && !c.server_auth && !c.is_ca,
            "{name} must be a client cert only"
        );
    };
    expect_client("admin", "kubernetes-admin", &["system:masters"]);
    expect_client("controller-manager", "system:kube-controller-manager", &[]);
    expect_client("scheduler", "system:kube-scheduler", &[]);
    expect_client("kube-proxy", "system:kube-proxy", &[]);
    expect_client("kubelet-client", "system:node:dev", &["system:nodes"]);
    expect_client(
        "apiserver-kubelet-client",
        "kube-apiserver-kubelet-client",
        &[],
    );
    expect_client("apiserver-etcd-client", "kube-apiserver-etcd-client", &[]);
    expect_client("front-proxy-client", "front-proxy-client", &[]);
    expect_client(
        "etcd/healthcheck-client",
        "kube-etcd-healthcheck-client",
        &[],
    );

    let kubelet = cert(&dir, "kubelet");
    assert_eq!(kubelet.cn, "system:node:dev");
    assert!(kubelet.server_auth && !kubelet.client_auth);
    // The node's address: its end of the node link (the InternalIP the API server dials).
    assert_eq!(
        kubelet.sans,
        set(["localhost", "dev", "127.0.0.1", "::1", "198.18.7.2"])
    );
    for name in ["etcd/server", "etcd/peer"] {
        let c = cert(&dir, name);
        assert!(
            c.server_auth && c.client_auth,
            "{name} is server and client"
        );
        assert!(
            c.sans
                .is_superset(&set(["localhost", "127.0.0.1", "::1", "dev"])),
            "{name}: {:?}",
            c.sans
        );
    }

    // The service-account public key is an SPKI PEM that openssl reads and that matches sa.key.
    let pub_pem = std::fs::read_to_string(dir.join("pki/sa.pub")).unwrap();
    assert!(pub_pem.starts_with("-----BEGIN PUBLIC KEY-----"));
    let derived = run(Command::new("openssl").current_dir(&dir).args([
        "pkey",
        "-pubout",
        "-in",
        "pki/sa.key",
    ]));
    assert_eq!(String::from_utf8_lossy(&derived.stdout), pub_pem);
}

#[test]
fn first_service_address_follows_the_service_cidr() {
    for (cidr, first, dns, advertise) in [
        ("10.96.0.0/16", "10.96.0.1", "10.96.0.10", "192.0.2.10"),
        (
            "fd00:10:96::/108",
            "fd00:10:96::1",
            "fd00:10:96::a",
            "2001:db8::10",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let svc = format!("network.serviceCIDR={cidr}");
        let adv = format!("network.advertiseAddress={advertise}");
        // A node routes IPv4 only (its link is an IPv4 /30): an IPv6 Service range goes without one.
        let ipv6 = cidr.contains(':');
        let mut sets = vec![svc, adv];
        if ipv6 {
            for c in [
                "node-network",
                "kubelet",
                "kube-proxy",
                "containerd",
                "registry",
            ] {
                sets.push(format!("components.{c}.enabled=false"));
            }
            sets.push("addons.coredns=false".into());
        }
        let args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s.as_str()]).collect();
        gen_dev(&dir, &args);
        let api = cert(&dir, "apiserver");
        assert!(
            api.sans.contains(first),
            "{cidr}: apiserver SANs {:?} lack {first}",
            api.sans
        );
        assert!(
            !api.sans.contains("10.0.0.1"),
            "{cidr}: default service IP leaked into SANs"
        );
        if !ipv6 {
            let kubelet = std::fs::read_to_string(dir.join("config/kubelet-config.yaml")).unwrap();
            assert!(
                kubelet.contains(&format!("- \"{dns}\"")),
                "{cidr}: clusterDNS should be {dns}:\n{kubelet}"
            );
        }
        let unit =
            std::fs::read_to_string(dir.join("units").join(unit(&dir, "kube-apiserver"))).unwrap();
        assert!(unit.contains(&format!("--service-cluster-ip-range={cidr}")));
    }
}

#[test]
fn kubectl_reads_every_kubeconfig() {
    let kubectl = kubernetes_bin_dir().join("kubectl");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(
        &dir,
        &[
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "ports.apiserver=7443",
            "--set",
            "node.link=198.18.7.0/30",
        ],
    );
    for (file, user) in [
        ("admin", "kubernetes-admin"),
        ("controller-manager", "system:kube-controller-manager"),
        ("scheduler", "system:kube-scheduler"),
        ("kubelet", "system:node:dev"),
        ("kube-proxy", "system:kube-proxy"),
    ] {
        let path = dir.join(format!("kubeconfig/{file}.kubeconfig"));
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let out = run(Command::new(&kubectl)
            .args(["config", "view", "--raw", "-o", "json", "--kubeconfig"])
            .arg(&path));
        assert!(
            out.status.success(),
            "kubectl config view {file}: {}",
            text(&out)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // The node's components reach the API server across the node link.
        let server = if matches!(file, "kubelet" | "kube-proxy") {
            "https://198.18.7.1:7443"
        } else {
            "https://127.0.0.1:7443"
        };
        assert_eq!(v["clusters"][0]["cluster"]["server"], server, "{file}");
        assert_eq!(v["users"][0]["name"], user);
        assert!(
            v["users"][0]["user"]["client-key-data"]
                .as_str()
                .unwrap()
                .len()
                > 100,
            "{file}: embedded key"
        );
        let out = run(Command::new(&kubectl)
            .args(["config", "current-context", "--kubeconfig"])
            .arg(&path));
        assert!(out.status.success(), "{file}: {}", text(&out));
    }
}

/// `kubeunit kubeconfig --as` prints an identity's own kubeconfig, a further node's by
/// `<identity>@<node>`; an unknown one is a usage error listing those there are.
#[test]
fn kubeconfig_as_prints_each_nodes_own_identity() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_ok(
        &dir,
        &[
            "--profile",
            "multi",
            "--set",
            "network.advertiseAddress=192.0.2.10",
        ],
    );
    let show = |identity: &str| {
        run(kubeunit()
            .args(["kubeconfig", "--as", identity, "--state-dir"])
            .arg(&dir))
    };
    for (identity, user, file) in [
        (
            "kubelet",
            "system:node:control-plane",
            "kubeconfig/kubelet.kubeconfig",
        ),
        (
            "kubelet@worker-1",
            "system:node:worker-1",
            "nodes/worker-1/kubeconfig/kubelet.kubeconfig",
        ),
        (
            "kube-proxy@worker-2",
            "system:kube-proxy",
            "nodes/worker-2/kubeconfig/kube-proxy.kubeconfig",
        ),
        (
            "scheduler",
            "system:kube-scheduler",
            "kubeconfig/scheduler.kubeconfig",
        ),
    ] {
        let out = show(identity);
        assert!(out.status.success(), "{identity}: {}", text(&out));
        assert_eq!(
            out.stdout,
            std::fs::read(dir.join(file)).unwrap(),
            "{identity}: the state dir's file"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("identity {user}.")),
            "{identity}"
        );
    }
    let out = show("kubelet@worker-9");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("kubelet@worker-1, kubelet@worker-2"),
        "{}",
        text(&out)
    );
}

/// `gen --profile PROFILE` with a bin dir of executables and `more` into `tmp/state`, whose unit
/// files systemd-analyze verify accepts without a word: (state dir, unit files).
fn verified_units(
    tmp: &Path,
    profile: &str,
    more: &[&str],
) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let dir = tmp.join("state");
    let bin = executable_bin_dir(tmp);
    let base = [
        "--profile",
        profile,
        "--bin-dir",
        bin.to_str().unwrap(),
        "--set",
        "network.advertiseAddress=192.0.2.10",
    ];
    gen_ok(&dir, &[&base[..], more].concat());
    let units: Vec<_> = std::fs::read_dir(dir.join("units"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let out = run(Command::new("systemd-analyze").arg("verify").args(&units));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify ({profile}): {}",
        text(&out)
    );
    (dir, units)
}

/// The cis profile's etcd unit, sandboxed for its own user (User=, UMask=, LoadCredential=,
/// TemporaryFileSystem=, BindPaths=, `ExecStartPre=+`), is one systemd-analyze verify accepts, as
/// every other unit of the profile.
#[test]
fn systemd_analyze_verify_accepts_the_cis_units() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = verified_units(tmp.path(), "cis", &[]);
    let etcd = std::fs::read_to_string(dir.join("units").join(unit(&dir, "etcd"))).unwrap();
    for key in [
        "User=etcd\n",
        "UMask=0077\n",
        "LoadCredential=",
        "TemporaryFileSystem=",
        "BindPaths=",
        "ExecStartPre=+",
    ] {
        assert!(etcd.contains(key), "no {key} in etcd's unit:\n{etcd}");
    }
}

#[test]
fn systemd_analyze_verify_accepts_every_unit() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, units) = verified_units(
        tmp.path(),
        "dev",
        &[
            // Quoting and escaping on the way: a space, a percent sign and a dollar in one value.
            "--set",
            "components.kube-apiserver.extraArgs.service-node-port-range=30000-32767",
            "--set",
            "components.kube-scheduler.extraArgs.profiling=false",
            "--set",
            "components.kube-proxy.env.GODEBUG=x509sha1=1 $HOME 100%",
            "--set",
            "components.etcd.extraArgs.log-outputs=stderr",
        ],
    );
    assert_eq!(
        units.len(),
        12,
        "slice + 9 dev components + 2 registry caches: {units:?}"
    );
    let apiserver =
        std::fs::read_to_string(dir.join("units").join(unit(&dir, "kube-apiserver"))).unwrap();
    assert!(
        apiserver.contains("Type=notify")
            && apiserver.contains(&format!(
                "Wants={etcd}\nAfter={etcd}",
                etcd = unit(&dir, "etcd")
            ))
    );
    assert!(
        apiserver.contains(&format!("Slice={}.slice", unit_prefix(&dir)))
            && apiserver.contains("Restart=on-failure")
    );
    let scheduler =
        std::fs::read_to_string(dir.join("units").join(unit(&dir, "kube-scheduler"))).unwrap();
    assert!(scheduler.contains("Type=exec") && scheduler.contains("--profiling=false"));
    // Environment goes to a 0600 file, never into the unit.
    let proxy = std::fs::read_to_string(dir.join("units").join(unit(&dir, "kube-proxy"))).unwrap();
    assert!(!proxy.contains("GODEBUG") && proxy.contains("EnvironmentFile="));
    // The node's components join the node's network namespace, which a oneshot unit makes and
    // removes (after a failed start too), the latter with the copy of its script in /run that
    // `up` made (a node removed from the state dir goes down too).
    assert!(
        proxy.contains(&format!(
            "NetworkNamespacePath=/run/netns/{}",
            unit_prefix(&dir)
        )),
        "{proxy}"
    );
    let network =
        std::fs::read_to_string(dir.join("units").join(unit(&dir, "node-network"))).unwrap();
    assert!(
        network.contains("Type=oneshot\nRemainAfterExit=yes")
            && network.contains("/config/node-network.sh \\\n    up\n")
            && network.contains("ExecStopPost=/bin/sh ")
            && network.contains(&format!(
                "ExecStopPost=/bin/sh /run/kubeunit/{}/node-network.sh down",
                unit_prefix(&dir).trim_start_matches("kubeunit-")
            )),
        "{network}"
    );
    let env_file = dir.join("env/kube-proxy.env");
    assert_eq!(
        std::fs::metadata(&env_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn units_carry_no_secrets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(
        &dir,
        &[
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "components.kube-apiserver.env.TOKEN=s3cret",
        ],
    );
    let key = std::fs::read_to_string(dir.join("pki/encryption.key")).unwrap();
    for e in std::fs::read_dir(dir.join("units")).unwrap() {
        let unit = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(!unit.contains(key.trim()) && !unit.contains("PRIVATE KEY"));
        // The profile's env goes to a private file; inline only the component table's tuning.
        assert!(!unit.contains("s3cret"), "{unit}");
        for line in unit.lines().filter(|l| l.starts_with("Environment=")) {
            assert_eq!(line, "Environment=OTEL_TRACES_EXPORTER=none", "{unit}");
        }
    }
    let env_file = std::fs::read_to_string(dir.join("env/kube-apiserver.env")).unwrap();
    assert!(env_file.contains("TOKEN=\"s3cret\""), "{env_file}");
    let enc = dir.join("config/encryption-config.yaml");
    assert!(std::fs::read_to_string(&enc).unwrap().contains(key.trim()));
    assert_eq!(
        std::fs::metadata(&enc).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn keys_are_0600_and_directories_0700() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(&dir, &["--set", "network.advertiseAddress=192.0.2.10"]);
    for e in walkdir::WalkDir::new(&dir) {
        let e = e.unwrap();
        let mode = e.metadata().unwrap().permissions().mode() & 0o777;
        let name = e.file_name().to_string_lossy();
        if e.file_type().is_dir() {
            assert_eq!(mode, 0o700, "{}", e.path().display());
        } else if name.ends_with(".key") || name.ends_with(".kubeconfig") {
            assert_eq!(mode, 0o600, "{}", e.path().display());
        }
    }
}

#[test]
fn seeded_runs_are_byte_identical_and_unseeded_runs_are_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let bin = executable_bin_dir(tmp.path());
    let args = [
        "--profile",
        "dev",
        "--seed",
        "42",
        "--bin-dir",
        bin.to_str().unwrap(),
        "--set",
        "network.advertiseAddress=192.0.2.10",
    ];
    let contents = |dir: &Path| -> Vec<(std::path::PathBuf, Vec<u8>, u32)> {
        snapshot(dir)
            .into_iter()
            .map(|(p, (b, m, _))| (p, b, m))
            .collect()
    };
    gen_ok(&dir, &args);
    let first = contents(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    gen_ok(&dir, &args);
    let second = contents(&dir);
    let differing: Vec<_> = first
        .iter()
        .zip(&second)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| &a.0)
        .collect();
    assert!(
        first.len() == second.len() && differing.is_empty(),
        "same profile + seed must give the same bytes: {differing:?}"
    );

    std::fs::remove_dir_all(&dir).unwrap();
    gen_ok(
        &dir,
        &args[..2]
            .iter()
            .chain(&args[4..])
            .copied()
            .collect::<Vec<_>>(),
    );
    let unseeded = std::fs::read(dir.join("pki/ca.key")).unwrap();
    let seeded = &first
        .iter()
        .find(|(p, _, _)| p == Path::new("pki/ca.key"))
        .unwrap()
        .1;
    assert_ne!(&unseeded, seeded, "without --seed keys are random");
}

/// `gen --hermetic` reads nothing of this machine (Nix builds it in a sandbox): a profile with hosts
/// takes each host's advertised address from its inventory.
#[test]
fn hermetic_host_dirs_are_byte_identical_and_pass_hosts_check() {
    let tmp = tempfile::tempdir().unwrap();
    let render = |out: &Path| {
        gen_hermetic_ha(out, "7");
        snapshot(out)
            .into_iter()
            .map(|(p, (bytes, mode, _))| (p, bytes, mode))
            .collect::<Vec<_>>()
    };
    let first = render(&tmp.path().join("a"));
    let second = render(&tmp.path().join("b"));
    assert_eq!(first.len(), second.len());
    let differing: Vec<_> = first
        .iter()
        .zip(&second)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a.0.clone())
        .collect();
    assert!(differing.is_empty(), "differ: {differing:?}");
    let profile = std::fs::read_to_string(tmp.path().join("a/cp-2/profile.yaml")).unwrap();
    assert!(
        profile.contains("advertiseAddress: 198.19.254.12"),
        "{profile}"
    );
    let check = run(kubeunit()
        .args(["hosts", "check"])
        .arg(tmp.path().join("a")));
    assert!(check.status.success(), "hosts check: {}", text(&check));
}

#[test]
fn seeded_rsa_runs_are_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = executable_bin_dir(tmp.path());
    let args = [
        "--profile",
        "dev",
        "--seed",
        "42",
        "--bin-dir",
        bin.to_str().unwrap(),
        "--set",
        "network.advertiseAddress=192.0.2.10",
        "--set",
        "pki.algorithm=rsa-2048",
        "--set",
        "pki.epoch=2026-01-01T00:00:00Z",
    ];
    let contents = |dir: &Path| -> Vec<(std::path::PathBuf, Vec<u8>)> {
        snapshot(dir)
            .into_iter()
            .map(|(p, (b, _, _))| (p, b))
            .collect()
    };
    let dir = tmp.path().join("state");
    gen_ok(&dir, &args);
    let first = contents(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    gen_ok(&dir, &args);
    let second = contents(&dir);
    assert_eq!(first.len(), second.len());
    let differing: Vec<_> = first
        .iter()
        .zip(&second)
        .filter(|(x, y)| x != y)
        .map(|(x, _)| &x.0)
        .collect();
    assert!(
        differing.is_empty(),
        "same profile + seed, other bytes: {differing:?}"
    );
}

#[test]
fn rerun_keeps_keys_and_reissues_only_what_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let bin = executable_bin_dir(tmp.path());
    let base = [
        "--profile",
        "dev",
        "--bin-dir",
        bin.to_str().unwrap(),
        "--set",
        "network.advertiseAddress=192.0.2.10",
    ];
    gen_ok(&dir, &base);
    let before = snapshot(&dir);
    // Unseeded and on another "day": nothing may change on a plain re-run.
    let out = run(kubeunit()
        .env("SOURCE_DATE_EPOCH", "1767312000")
        .arg("gen")
        .arg("--state-dir")
        .arg(&dir)
        .args(base));
    assert!(out.status.success(), "{}", text(&out));
    let after = snapshot(&dir);
    let touched: Vec<_> = after
        .iter()
        .filter(|(p, v)| before.get(*p) != Some(v))
        .map(|(p, _)| p)
        .collect();
    assert!(
        touched.is_empty(),
        "a re-run with the same profile must not touch any file: {touched:?}"
    );

    // A new SAN reissues the apiserver certificate only; its key and the CA stay.
    let mut with_san = base.to_vec();
    with_san.extend(["--set", "network.extraSANs=[api.example.test]"]);
    gen_ok(&dir, &with_san);
    let changed: Vec<_> = snapshot(&dir)
        .into_iter()
        .filter(|(p, v)| before.get(p).map(|b| b.0 != v.0).unwrap_or(true))
        .map(|(p, _)| p.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        changed,
        vec!["manifest.json", "pki/apiserver.crt", "profile.yaml"]
    );

    // --force replaces the CA.
    let mut forced = with_san.clone();
    forced.push("--force");
    gen_ok(&dir, &forced);
    assert_ne!(
        before[Path::new("pki/ca.key")].0,
        std::fs::read(dir.join("pki/ca.key")).unwrap()
    );
}

#[test]
fn disabling_a_component_removes_its_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(&dir, &["--set", "network.advertiseAddress=192.0.2.10"]);
    assert!(dir.join("units").join(unit(&dir, "kube-proxy")).exists());
    gen_dev(
        &dir,
        &[
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "components.kube-proxy.enabled=false",
        ],
    );
    assert!(!dir.join("units").join(unit(&dir, "kube-proxy")).exists());
    assert!(!dir.join("kubeconfig/kube-proxy.kubeconfig").exists());
    assert!(!dir.join("pki/kube-proxy.key").exists());
    let out = run(kubeunit().args(["gen", "--check", "--state-dir"]).arg(&dir));
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn check_reports_tampered_missing_and_changed_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(&dir, &["--set", "network.advertiseAddress=192.0.2.10"]);
    let check = |extra: &[&str]| {
        run(kubeunit()
            .args(["gen", "--check", "--state-dir"])
            .arg(&dir)
            .args(extra))
    };
    let out = check(&[]);
    assert!(
        out.status.success(),
        "fresh state must pass: {}",
        text(&out)
    );

    // A modified certificate (another valid cert swapped in) is caught.
    std::fs::copy(dir.join("pki/admin.crt"), dir.join("pki/apiserver.crt")).unwrap();
    std::fs::remove_file(dir.join("config/audit-policy.yaml")).unwrap();
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("tampered  pki/apiserver.crt"), "{t}");
    assert!(t.contains("missing   config/audit-policy.yaml"), "{t}");

    // A file slipped into a directory kubeunit manages (an addon manifest `start` would apply).
    std::fs::write(dir.join("addons/99-extra.yaml"), "kind: Secret\n").unwrap();
    let out = check(&[]);
    assert!(
        text(&out).contains("unknown   addons/99-extra.yaml"),
        "{}",
        text(&out)
    );

    // JSON for scripts.
    let out = check(&["-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["differences"].as_array().unwrap().len(), 3);
    std::fs::remove_file(dir.join("addons/99-extra.yaml")).unwrap();

    // gen repairs it, keeping the CA.
    let ca = std::fs::read(dir.join("pki/ca.crt")).unwrap();
    gen_dev(&dir, &["--set", "network.advertiseAddress=192.0.2.10"]);
    assert!(check(&[]).status.success());
    assert_eq!(ca, std::fs::read(dir.join("pki/ca.crt")).unwrap());

    // A profile that asks for something else shows up as changed.
    let out = check(&[
        "--profile",
        "dev",
        "--set",
        "network.advertiseAddress=192.0.2.10",
        "--set",
        "logging.verbosity=5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(&format!("changed   units/{}", unit(&dir, "kube-apiserver"))),
        "{}",
        text(&out)
    );
}

#[test]
fn hyperkube_style_binary_is_expressible() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(
        &dir,
        &[
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "components.kube-apiserver.binary=hyperkube",
            "--set",
            "components.kube-apiserver.binaryArgs=[kube-apiserver]",
        ],
    );
    let unit =
        std::fs::read_to_string(dir.join("units").join(unit(&dir, "kube-apiserver"))).unwrap();
    let bin = tmp.path().join("bin/hyperkube");
    assert!(
        unit.contains(&format!(
            "ExecStart={} \\\n    kube-apiserver \\\n    --advertise-address",
            bin.display()
        )),
        "{unit}"
    );
}

#[test]
fn feature_gates_reach_flags_and_config_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(
        &dir,
        &[
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--set",
            "featureGates.AllAlpha=false",
            "--set",
            "components.kubelet.featureGates.KubeletTracing=true",
        ],
    );
    let api =
        std::fs::read_to_string(dir.join("units").join(unit(&dir, "kube-apiserver"))).unwrap();
    assert!(api.contains("--feature-gates=AllAlpha=false"));
    let kubelet_unit =
        std::fs::read_to_string(dir.join("units").join(unit(&dir, "kubelet"))).unwrap();
    assert!(
        !kubelet_unit.contains("--feature-gates"),
        "kubelet takes gates from its config file"
    );
    let kubelet = std::fs::read_to_string(dir.join("config/kubelet-config.yaml")).unwrap();
    assert!(
        kubelet.contains("featureGates:\n  AllAlpha: false\n  KubeletTracing: true\n"),
        "{kubelet}"
    );
    let etcd = std::fs::read_to_string(dir.join("units").join(unit(&dir, "etcd"))).unwrap();
    assert!(
        !etcd.contains("AllAlpha"),
        "Kubernetes gates are not etcd's"
    );
}

/// Bad input: exit 2, a message naming the field, the value and a fix, and no change to existing state.
#[test]
fn bad_input_is_reported_and_leaves_state_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(&dir, &["--set", "network.advertiseAddress=192.0.2.10"]);
    let before = snapshot(&dir);
    let bad_profile = tmp.path().join("bad.yaml");
    std::fs::write(
        &bad_profile,
        "extends: dev\nnetwork:\n  sevriceCIDR: 10.0.0.0/24\n",
    )
    .unwrap();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["--profile".into(), bad_profile.to_string_lossy().into()],
            vec!["sevriceCIDR", "bad.yaml", "fix:"],
        ),
        (
            vec!["--set".into(), "ports.apiserver=high".into()],
            vec!["ports.apiserver", "high", "fix:"],
        ),
        (
            vec!["--set".into(), "network.serviceCIDR=10.0.0.0/33".into()],
            vec!["network.serviceCIDR", "10.0.0.0/33", "fix:"],
        ),
        (
            vec!["--set".into(), "network.dnsIP=10.1.0.10".into()],
            vec!["network.dnsIP", "10.1.0.10", "fix:"],
        ),
        (
            vec!["--set".into(), "ports.scheduler=6443".into()],
            vec!["ports.scheduler", "6443", "ports.apiserver", "fix:"],
        ),
        (
            vec!["--set".into(), "components.kube-dns.enabled=true".into()],
            vec!["components.kube-dns", "unknown component", "fix:"],
        ),
        (
            vec!["--profile".into(), "/nonexistent/profile.yaml".into()],
            vec!["/nonexistent/profile.yaml", "fix:"],
        ),
        (
            vec!["--profile".into(), "devv".into()],
            vec!["devv", "built-in", "fix:"],
        ),
    ];
    for (args, needles) in cases {
        let out = run(kubeunit()
            .args([
                "gen",
                "--set",
                "network.advertiseAddress=192.0.2.10",
                "--state-dir",
            ])
            .arg(&dir)
            .args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let t = text(&out);
        for n in needles {
            assert!(t.contains(n), "{args:?}: error should mention {n:?}:\n{t}");
        }
        assert!(before == snapshot(&dir), "{args:?} changed the state dir");
    }
}

#[test]
fn unwritable_state_dir_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    // A path below a regular file cannot be created, even by root.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = run(kubeunit()
        .args([
            "gen",
            "--profile",
            "ci",
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--state-dir",
        ])
        .arg(file.join("state")));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("a-file/state") && t.contains("cannot create") && t.contains("fix:"),
        "{t}"
    );

    // A read-only file system (a read-only bind mount) as well.
    let ro = tmp.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let mounted = Command::new("mount")
        .args(["--bind", "-o", "ro"])
        .arg(&ro)
        .arg(&ro)
        .status()
        .unwrap();
    assert!(
        mounted.success(),
        "tests run as root (they boot systemd containers)"
    );
    let out = run(kubeunit()
        .args([
            "gen",
            "--profile",
            "ci",
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--state-dir",
        ])
        .arg(ro.join("state")));
    let _ = Command::new("umount").arg(&ro).status();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("Read-only file system"),
        "{}",
        text(&out)
    );
}

#[test]
fn foreign_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("important.txt"), "keep me").unwrap();
    let out = run(kubeunit()
        .args([
            "gen",
            "--profile",
            "ci",
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "--state-dir",
        ])
        .arg(tmp.path()));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not a kubeunit state dir"));
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[test]
fn profiles_extend_and_default_state_dir_follows_the_environment() {
    let out = run(kubeunit().args(["profile", "show", "ci"]));
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        t.contains("name: ci") && t.contains("unsafeNoFsync: true"),
        "{t}"
    );
    assert!(
        t.contains("kubelet:\n    enabled: false"),
        "ci extends control-plane: {t}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let user_profile = tmp.path().join("mine.yaml");
    std::fs::write(
        &user_profile,
        "extends: ci\nname: mine\nports:\n  apiserver: 7443\n",
    )
    .unwrap();
    let state = tmp.path().join("env-state");
    let out = run(kubeunit()
        .env("KUBEUNIT_STATE_DIR", &state)
        .args([
            "gen",
            "--set",
            "network.advertiseAddress=192.0.2.10",
            "-o",
            "json",
            "--profile",
        ])
        .arg(&user_profile));
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stateDir"], state.to_string_lossy().as_ref());
    let apiserver =
        std::fs::read_to_string(state.join("units").join(unit(&state, "kube-apiserver"))).unwrap();
    assert!(apiserver.contains("--secure-port=7443") && apiserver.contains("--v=1"));
    assert!(state.join("units").join(unit(&state, "etcd")).exists());
    assert!(
        std::fs::read_to_string(state.join("units").join(unit(&state, "etcd")))
            .unwrap()
            .contains("--unsafe-no-fsync=true")
    );
}

#[test]
fn ports_auto_is_picked_once_recorded_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let auto = [
        "--profile",
        "control-plane",
        "--set",
        "network.advertiseAddress=192.0.2.10",
        "--set",
        "ports=auto",
    ];
    let out = gen_ok(&a, &[&auto[..], &["-o", "json"]].concat());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ports = recorded_ports(&a);
    // Twelve distinct ports (one per field) from kubeunit's range, away from the tests' blocks
    // (21000 and up).
    let values: BTreeSet<u16> = ports.values().copied().collect();
    assert_eq!((ports.len(), values.len()), (12, 12), "{ports:?}");
    assert!(
        values.iter().all(|p| (12000..21000).contains(p)),
        "{ports:?}"
    );
    assert_eq!(json["ports"]["apiserver"], ports["apiserver"]);
    assert!(
        json["notes"].to_string().contains("ports: auto picked"),
        "{json}"
    );
    // Each is free now (nothing listens: gen holds none of them).
    for p in &values {
        assert!(std::net::TcpListener::bind(("0.0.0.0", *p)).is_ok(), "{p}");
    }
    // The units name them.
    let apiserver =
        std::fs::read_to_string(a.join("units").join(unit(&a, "kube-apiserver"))).unwrap();
    assert!(
        apiserver.contains(&format!("--secure-port={}", ports["apiserver"])),
        "{apiserver}"
    );
    // gen --check (the recorded profile, or `auto` again) finds nothing to change.
    for args in [&[][..], &auto[..]] {
        let out = run(kubeunit()
            .args(["gen", "--check", "--state-dir"])
            .arg(&a)
            .args(args));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
    }
    // A later gen with `auto` keeps the recorded ports, even while one of them is taken (as the
    // running environment takes them).
    let _held = std::net::TcpListener::bind(("0.0.0.0", ports["apiserver"])).unwrap();
    let out = gen_ok(&a, &auto);
    assert!(!text(&out).contains("ports: auto picked"), "{}", text(&out));
    assert_eq!(recorded_ports(&a), ports);
    // Another state dir of the same profile: other ports and other unit names.
    gen_ok(&b, &auto);
    let other = recorded_ports(&b);
    assert!(
        other.values().all(|p| !values.contains(p)),
        "{ports:?} / {other:?}"
    );
    assert_ne!(unit(&a, "etcd"), unit(&b, "etcd"));
    assert!(unit(&a, "etcd").starts_with("kubeunit-control-plane_"));
    // Named ports replace the recorded ones.
    gen_ok(
        &a,
        &[&auto[..4], &["--set", "ports.apiserver=7443"]].concat(),
    );
    assert_eq!(recorded_ports(&a)["apiserver"], 7443);
    assert_eq!(
        recorded_ports(&a)["etcdClient"],
        2379,
        "the profile's own ports"
    );
}

#[test]
fn units_are_named_for_the_state_dir_and_the_name_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let args = [
        "--profile",
        "ci",
        "--set",
        "network.advertiseAddress=192.0.2.10",
    ];
    let json = |dir: &Path| -> serde_json::Value {
        let out = gen_ok(dir, &[&args[..], &["-o", "json"]].concat());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (ja, jb) = (json(&a), json(&b));
    assert_eq!(
        (ja["name"].as_str(), jb["name"].as_str()),
        (Some("ci"), Some("ci"))
    );
    let (pa, pb) = (
        ja["unitPrefix"].as_str().unwrap(),
        jb["unitPrefix"].as_str().unwrap(),
    );
    assert_ne!(pa, pb);
    assert_eq!(pa, unit_prefix(&a), "gen says what profile.yaml records");
    assert_eq!(
        pa,
        format!("kubeunit-ci_{}", ja["instance"].as_str().unwrap())
    );
    // Every unit file is the state dir's own; the slice and its Slice= agree.
    for dir in [&a, &b] {
        let prefix = unit_prefix(dir);
        for e in std::fs::read_dir(dir.join("units")).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(name.starts_with(&prefix), "{name} in {}", dir.display());
        }
        let etcd = std::fs::read_to_string(dir.join("units").join(unit(dir, "etcd"))).unwrap();
        assert!(etcd.contains(&format!("Slice={prefix}.slice")), "{etcd}");
    }
    // The kubeconfigs keep the environment's name (contexts do not move with the state dir).
    let admin = std::fs::read_to_string(a.join("kubeconfig/admin.kubeconfig")).unwrap();
    assert!(admin.contains("- name: \"kubeunit-ci\"\n"), "{admin}");
    // An explicit instance of another kind would rename the units: refused unless forced.
    let out = run(kubeunit()
        .args(["gen", "--state-dir"])
        .arg(&a)
        .args(args)
        .args(["--set", "instance=other"]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("rename"), "{}", text(&out));
    assert_eq!(unit_prefix(&a), pa);
    // `instance=` (none) is the default state dir's short names.
    let c = tmp.path().join("c");
    gen_ok(&c, &[&args[..], &["--set", "instance="]].concat());
    assert_eq!(unit_prefix(&c), "kubeunit-ci");
}

// The node's pull-through caches (`registries:`, docs/node.md).

/// A dev profile with a mirror of quay.io that needs a password (inline) and a CA, and a mirror
/// of ghcr.io whose password is in a file outside the state dir.
fn registries_profile(tmp: &Path) -> std::path::PathBuf {
    let ca = tmp.join("ca.pem");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let password_file = tmp.join("ghcr.password");
    std::fs::write(&password_file, "file-pw-0xC0FFEE\n").unwrap();
    let profile = tmp.join("registries.yaml");
    std::fs::write(
        &profile,
        format!(
            "extends: dev\nregistries:\n  mirrors:\n    quay.io:\n      endpoint: [https://mirror.example:8443/, https://unused.example]\n    ghcr.io: {{}}\n  configs:\n    mirror.example:8443:\n      auth: {{username: alice, password: inline-pw-0xBEEF}}\n      tls: {{caFile: {}}}\n    ghcr.io:\n      auth: {{username: bob, passwordFile: {}}}\n",
            ca.display(),
            password_file.display()
        ),
    )
    .unwrap();
    profile
}

/// gen of `profile` into `dir`, with fake binaries.
fn gen_profile(dir: &Path, profile: &Path) -> Output {
    let bin = executable_bin_dir(dir.parent().unwrap());
    let (profile, bin) = (profile.to_str().unwrap(), bin.to_str().unwrap());
    gen_ok(
        dir,
        &["--profile", profile, "--seed", "7", "--bin-dir", bin],
    )
}

fn toml_file(path: &Path) -> toml::Table {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `[host."URL"]` tables of a hosts.toml, in the file's order (the order containerd tries
/// them), and its `server`.
fn hosts_of(path: &Path) -> (Vec<String>, Option<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let hosts = text
        .lines()
        .filter_map(|l| l.strip_prefix("[host.\"")?.strip_suffix("\"]"))
        .map(String::from)
        .collect();
    let table = toml_file(path);
    let server = table
        .get("server")
        .and_then(|s| s.as_str())
        .map(String::from);
    (hosts, server)
}

#[test]
fn each_registry_name_tries_the_local_registry_then_its_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let profile = registries_profile(tmp.path());
    gen_profile(&dir, &profile);
    let link_host = |s: &str| s.rsplit_once(':').unwrap().0.to_string();
    let local = {
        let registry: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(dir.join("config/registry.yml")).unwrap(),
        )
        .unwrap();
        format!("http://{}", registry["http"]["addr"].as_str().unwrap())
    };
    // The defaults first, then the mirrors' names in order, each the next port.
    let caches = [
        ("docker.io", "https://registry-1.docker.io", 5001),
        ("registry.k8s.io", "https://registry.k8s.io", 5002),
        ("ghcr.io", "https://ghcr.io", 5003),
        ("quay.io", "https://mirror.example:8443", 5004),
    ];
    let mut cache_host = None;
    for (name, remote, port) in caches {
        let hosts = dir.join(format!("config/registry-hosts/{name}/hosts.toml"));
        let (tried, server) = hosts_of(&hosts);
        // Local first (what `images load` put there wins), then the cache, never the name itself.
        assert_eq!(tried, std::slice::from_ref(&local), "{name}");
        let server = server.unwrap_or_else(|| panic!("{name}: no server"));
        assert!(server.ends_with(&format!(":{port}")), "{name}: {server}");
        let table = toml_file(&hosts);
        assert_eq!(
            table["host"][&local]["capabilities"]
                .as_array()
                .unwrap()
                .len(),
            2,
            "{name}: pull, resolve"
        );
        // The cache: distribution in proxy mode, where the server names it.
        let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            &std::fs::read_to_string(dir.join(format!("config/registry-cache/{name}/config.yml")))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            config["proxy"]["remoteurl"].as_str(),
            Some(remote),
            "{name}"
        );
        assert_eq!(
            format!("http://{}", config["http"]["addr"].as_str().unwrap()),
            server
        );
        let data = dir.join(format!("data/registry-cache/{name}"));
        assert_eq!(
            config["storage"]["filesystem"]["rootdirectory"].as_str(),
            data.to_str()
        );
        let unit = dir
            .join("units")
            .join(unit(&dir, &format!("registry-cache@{name}")));
        let unit = std::fs::read_to_string(unit).unwrap();
        assert!(
            unit.contains(&format!("config/registry-cache/{name}/config.yml")),
            "{unit}"
        );
        // Every cache listens on this host's end of the node link, beside the local registry's.
        let host = link_host(server.trim_start_matches("http://"));
        assert_eq!(cache_host.get_or_insert(host.clone()), &host);
    }
    // The CA of quay.io's upstream is the cache's to trust, from a file in the state dir.
    let quay = dir.join("units").join(unit(&dir, "registry-cache@quay.io"));
    let quay = std::fs::read_to_string(quay).unwrap();
    let certs = dir.join("config/registry-cache/quay.io/certs");
    assert!(
        quay.contains(&format!("Environment=SSL_CERT_DIR={}", certs.display())),
        "{quay}"
    );
    assert!(std::fs::read_to_string(certs.join("ca.crt"))
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    // Any other name: the local registry, then its own (no server: containerd's default).
    assert_eq!(
        hosts_of(&dir.join("config/registry-hosts/_default/hosts.toml")),
        (vec![local.clone()], None)
    );
    // kubeunit.local is the local registry's alone.
    assert_eq!(
        hosts_of(&dir.join("config/registry-hosts/kubeunit.local/hosts.toml")),
        (vec![], Some(local))
    );
}

#[test]
fn offline_renders_the_local_registry_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = registries_profile(tmp.path());
    let bin = executable_bin_dir(tmp.path());
    let gen = |dir: &Path, offline: Option<&str>, sets: &[&str]| {
        let mut c = kubeunit();
        c.args([
            "gen",
            "--seed",
            "7",
            "--bin-dir",
            bin.to_str().unwrap(),
            "--state-dir",
        ])
        .arg(dir)
        .args(sets);
        if let Some(v) = offline {
            c.env("KUBEUNIT_OFFLINE", v);
        }
        let out = run(&mut c);
        assert!(out.status.success(), "{}", text(&out));
    };
    // The dev profile without caches as it was (no mirrors), offline by the variable and by the
    // profile: the same files.
    let by_env = tmp.path().join("env");
    gen(
        &by_env,
        Some("1"),
        &["--profile", profile.to_str().unwrap()],
    );
    let by_profile = tmp.path().join("profile");
    gen(
        &by_profile,
        None,
        &["--profile", "dev", "--set", "offline=true"],
    );
    let files = |dir: &Path| -> Vec<String> {
        walkdir::WalkDir::new(dir)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| e.path().strip_prefix(dir).unwrap().display().to_string())
            .filter(|p| p.contains("registry"))
            // Units are named for their state dir.
            .map(|p| p.replace(&unit_prefix(dir), "kubeunit-dev"))
            .collect()
    };
    let names = files(&by_env);
    assert_eq!(names, files(&by_profile));
    assert!(
        !names.iter().any(|f| f.contains("registry-cache")),
        "{names:?}"
    );
    // Every name has the local registry as its only server, no [host] to fall back to: the
    // hosts.toml of today.
    let hosts: Vec<&String> = names.iter().filter(|f| f.ends_with("hosts.toml")).collect();
    assert_eq!(hosts.len(), 4, "{hosts:?}");
    let local = hosts_of(&by_env.join("config/registry-hosts/kubeunit.local/hosts.toml"));
    assert_eq!(local.0, Vec::<String>::new());
    let today =
        std::fs::read_to_string(by_env.join("config/registry-hosts/kubeunit.local/hosts.toml"))
            .unwrap();
    for h in hosts {
        let table = toml_file(&by_env.join(h));
        assert_eq!(table.keys().collect::<Vec<_>>(), ["server"], "{h}");
        assert_eq!(
            std::fs::read_to_string(by_env.join(h)).unwrap(),
            today,
            "{h}"
        );
        let theirs = std::fs::read_to_string(by_profile.join(h)).unwrap();
        assert_eq!(
            toml_file(&by_profile.join(h)).keys().count(),
            1,
            "{h}: {theirs}"
        );
    }
    // No password went anywhere: no cache uses it.
    for f in walkdir::WalkDir::new(&by_env)
        .into_iter()
        .map(|e| e.unwrap())
    {
        if f.file_type().is_file() {
            let bytes = std::fs::read(f.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("inline-pw-0xBEEF"),
                "{}",
                f.path().display()
            );
        }
    }
}

#[test]
fn registry_passwords_are_only_in_0600_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let profile = registries_profile(tmp.path());
    let bin = executable_bin_dir(tmp.path());
    let out = gen_ok(
        &dir,
        &[
            "--profile",
            profile.to_str().unwrap(),
            "--seed",
            "7",
            "--bin-dir",
            bin.to_str().unwrap(),
        ],
    );
    let passwords = ["inline-pw-0xBEEF", "file-pw-0xC0FFEE"];
    for p in passwords {
        assert!(!text(&out).contains(p), "gen said it: {}", text(&out));
    }
    let mut holders = Vec::new();
    for e in walkdir::WalkDir::new(&dir).into_iter().map(|e| e.unwrap()) {
        if !e.file_type().is_file() {
            continue;
        }
        let body = String::from_utf8_lossy(&std::fs::read(e.path()).unwrap()).into_owned();
        let rel = e.path().strip_prefix(&dir).unwrap().display().to_string();
        for p in passwords.iter().filter(|p| body.contains(**p)) {
            let mode = e.metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{rel} holds {p}");
            holders.push((rel.clone(), *p));
        }
    }
    holders.sort();
    // The caches' credential helpers' answers and the password files profile.yaml names: nothing
    // else (no config, unit, profile.yaml or manifest).
    assert_eq!(
        holders,
        [
            (
                "config/registry-cache/ghcr.io/credentials.json".to_string(),
                "file-pw-0xC0FFEE"
            ),
            (
                "config/registry-cache/ghcr.io/password".to_string(),
                "file-pw-0xC0FFEE"
            ),
            (
                "config/registry-cache/quay.io/credentials.json".to_string(),
                "inline-pw-0xBEEF"
            ),
            (
                "config/registry-cache/quay.io/password".to_string(),
                "inline-pw-0xBEEF"
            ),
        ]
    );
    // The cache runs its helper, which hands the upstream's credentials over on a pull.
    let helper = dir.join("config/registry-cache/quay.io/credential-helper");
    let mode = std::fs::metadata(&helper).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    let answer = run(Command::new(&helper).arg("get"));
    let answer: serde_json::Value = serde_json::from_slice(&answer.stdout).unwrap();
    assert_eq!(answer["Username"], "alice");
    assert_eq!(answer["Secret"], "inline-pw-0xBEEF");
    let recorded: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(dir.join("profile.yaml")).unwrap())
            .unwrap();
    let quay = &recorded["registries"]["configs"]["mirror.example:8443"]["auth"];
    assert!(quay.get("password").is_none(), "{quay:?}");
    assert_eq!(
        quay["passwordFile"].as_str(),
        dir.join("config/registry-cache/quay.io/password").to_str()
    );
    // The file outside the state dir stays named as it was: read at every gen.
    assert_eq!(
        recorded["registries"]["configs"]["ghcr.io"]["auth"]["passwordFile"].as_str(),
        tmp.path().join("ghcr.password").to_str()
    );
    // What profile.yaml records renders the same state dir.
    let check = run(kubeunit().args(["gen", "--check", "--state-dir"]).arg(&dir));
    assert!(check.status.success(), "{}", text(&check));
}

#[test]
fn bad_registries_are_refused_with_the_field_named_and_the_state_dir_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(&dir, &[]);
    let before = snapshot(&dir);
    let bad = |name: &str, yaml: &str| {
        let p = tmp.path().join(format!("{name}.yaml"));
        std::fs::write(&p, format!("extends: dev\nregistries:\n{yaml}")).unwrap();
        p
    };
    let cases = [
        (
            bad("local", "  mirrors: {kubeunit.local: {endpoint: [https://a.example]}}\n"),
            vec!["registries.mirrors.kubeunit.local"],
        ),
        (
            bad("url", "  mirrors: {quay.io: {endpoint: [ftp://a.example/x]}}\n"),
            vec!["registries.mirrors.quay.io.endpoint[0]", "ftp://a.example/x"],
        ),
        (
            bad("both", "  configs: {a.example: {auth: {username: u, password: hide-me-0x1, passwordFile: /etc/hostname}}}\n"),
            vec!["registries.configs.a.example.auth.password", "exactly one"],
        ),
        (
            bad("missing", "  configs: {a.example: {auth: {username: u, passwordFile: /nonexistent/pw}}}\n"),
            vec!["registries.configs.a.example.auth.passwordFile", "/nonexistent/pw"],
        ),
        (
            bad("ca", "  configs: {a.example: {tls: {caFile: /etc/hostname}}}\n"),
            vec!["registries.configs.a.example.tls.caFile", "PEM"],
        ),
        (
            bad("unknown", "  mirrors: {quay.io: {rewrite: {x: y}}}\n"),
            vec!["rewrite"],
        ),
    ];
    for (profile, needles) in cases {
        let out = run(kubeunit()
            .args(["gen", "--profile"])
            .arg(&profile)
            .arg("--state-dir")
            .arg(&dir));
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{}: {t}", profile.display());
        for n in needles {
            assert!(
                t.contains(n),
                "{}: should name {n:?}:\n{t}",
                profile.display()
            );
        }
        assert!(!t.contains("hide-me-0x1"), "the password in an error: {t}");
        assert!(
            before == snapshot(&dir),
            "{} changed the state dir",
            profile.display()
        );
    }
}

#[test]
fn a_state_dir_from_before_the_caches_keeps_its_auto_ports() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    gen_dev(&dir, &["--set", "ports=auto"]);
    let before = recorded_ports(&dir);
    // As a state dir generated before ports.registryCache was declared recorded it.
    let profile = dir.join("profile.yaml");
    let text_before = std::fs::read_to_string(&profile).unwrap();
    let old: String = text_before
        .lines()
        .filter(|l| !l.trim_start().starts_with("registryCache:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(old, text_before);
    std::fs::write(&profile, old).unwrap();
    gen_dev(&dir, &["--set", "ports=auto"]);
    let after = recorded_ports(&dir);
    for (field, port) in &before {
        if field != "registryCache" {
            assert_eq!(after.get(field), Some(port), "ports.{field} moved");
        }
    }
    assert_eq!(after.get("registryCache"), Some(&5001));
}

/// dev is lean: CoreDNS, the default StorageClass and the registry; metrics-server, MetalLB and the
/// Gateway API are one key each, and the `apps` profile has them all.
#[test]
fn dev_leaves_the_heavy_addons_off_and_apps_has_them() {
    let tmp = tempfile::tempdir().unwrap();
    let addons = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir.join("addons"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let heavy = [
        "30-metrics-server.yaml",
        "40-metallb.yaml",
        "50-gateway-api-crds.yaml",
    ];
    let dev = tmp.path().join("dev");
    gen_dev(&dev, &[]);
    let on = addons(&dev);
    assert!(on.contains("10-coredns.yaml"), "{on:?}");
    assert!(on.contains("20-storageclass.yaml"), "{on:?}");
    for a in heavy {
        assert!(!on.contains(a), "dev renders {a}: {on:?}");
    }
    let one = tmp.path().join("one");
    gen_dev(&one, &["--set", "addons.loadBalancer=true"]);
    assert!(
        addons(&one).contains("40-metallb.yaml"),
        "{:?}",
        addons(&one)
    );
    let apps = tmp.path().join("apps");
    gen_profile(&apps, Path::new("apps"));
    let all = addons(&apps);
    for a in heavy {
        assert!(all.contains(a), "apps lacks {a}: {all:?}");
    }
}
