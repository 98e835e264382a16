//! Golden state dirs: for each built-in profile (and one with every optional part switched on), the
//! state dir that `gen` writes with a fixed seed, epoch, advertise address, bin dir and state-dir path
//! must match two records under `tests/golden/`:
//! - `NAME.sha256` pins every byte and mode: a refactoring must not change a byte;
//! - `NAME.txt` holds the files a reviewer reads (units, configs, kubeconfigs with their key data
//!   redacted, the manifest, each certificate's fields), so a changed template line is a changed line.
//!   Secrets (keys, the encryption config) are in the hashes only.
//!
//! Update the records only on purpose, and read their diff: KUBEUNIT_UPDATE_GOLDEN=1 cargo test --test it golden::

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::*;
use sha2::{Digest, Sha256};

/// (record name, gen arguments after the fixed ones).
const CASES: &[(&str, &[&str])] = &[
    ("dev", &["--profile", "dev"]),
    ("control-plane", &["--profile", "control-plane"]),
    ("ci", &["--profile", "ci"]),
    ("multi", &["--profile", "multi"]),
    // RSA keys come from kubeunit's own prime search (src/pki/key.rs): pinned here as a whole.
    (
        "dev-rsa",
        &["--profile", "dev", "--set", "pki.algorithm=rsa-2048"],
    ),
    (
        "dev-everything",
        &[
            "--profile",
            "dev",
            "--set",
            "components.cloud-controller-manager.enabled=true",
            "--set",
            "components.cloud-controller-manager.extraArgs.cloud-provider=external",
            "--set",
            "components.kube-apiserver.env.GODEBUG=x509sha1=1",
            "--set",
            "components.kube-apiserver.extraArgs.v=null",
            "--set",
            "components.kubelet.featureGates.KubeletTracing=false",
            "--set",
            "featureGates.InPlacePodVerticalScaling=true",
            "--set",
            "network.extraSANs=[k8s.example.test, 198.51.100.7]",
            "--set",
            "node.name=golden-node",
            "--set",
            "audit.policy=RequestResponse",
            "--set",
            "etcd.snapshot.schedule=Mon..Fri *-*-* 02:30:00",
            "--set",
            "etcd.snapshot.retention=3",
            // The addons dev leaves off (the `apps` profile's).
            "--set",
            "addons.metricsServer=true",
            "--set",
            "addons.loadBalancer=true",
            "--set",
            "addons.gateway=true",
        ],
    ),
];

/// Every file below `dir`, sorted by path: (path relative to `dir`, mode, bytes).
fn files(dir: &Path) -> Vec<(String, u32, Vec<u8>)> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let mode = e.metadata().unwrap().permissions().mode() & 0o7777;
            (rel, mode, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// `<sha256>  <mode>  <path>` for every file below `dir`, sorted by path.
fn tree_record(dir: &Path) -> String {
    let mut lines = Vec::new();
    for (rel, mode, bytes) in files(dir) {
        lines.push(format!(
            "{}  {mode:04o}  {rel}",
            hex::encode(Sha256::digest(&bytes))
        ));
    }
    lines.join("\n") + "\n"
}

/// Upstream's Gateway API CRDs, which `gen` writes as they are.
const GATEWAY_API_CRDS: &[u8] = include_bytes!("../../addons/gateway-api-crds.yaml");

/// A unit, config file or addon manifest: owner-only (0600, as the CIS benchmark asks), yet no
/// secret, so the record shows its text. The secrets among config files are known by name.
fn private_config(rel: &str) -> bool {
    // A further node's files are below nodes/NAME/.
    let own = match rel.strip_prefix("nodes/") {
        Some(r) => r.split_once('/').map_or(r, |(_, r)| r),
        None => rel,
    };
    let name = own.rsplit('/').next().unwrap_or(own);
    ["units/", "addons/", "config/"]
        .iter()
        .any(|d| own.starts_with(d))
        && ![
            "encryption-config.yaml",
            "join-token",
            "password",
            "credentials.json",
        ]
        .contains(&name)
}

/// The readable record: every file's path and mode, then its text. Secrets (files only their owner may
/// read, but kubeconfigs and `private_config`s) show no content; a kubeconfig's embedded `*-data` values are redacted; a
/// certificate shows its fields rather than its PEM.
fn text_record(dir: &Path) -> String {
    let mut out = String::new();
    for (rel, mode, bytes) in files(dir) {
        let body = if rel == "manifest.json" {
            // Its hashes are the .sha256 record's: here they would turn one changed line into two.
            values_replaced(
                &String::from_utf8(bytes).unwrap(),
                "\"sha256\": ",
                "(in the .sha256 record),",
            )
        } else if rel.ends_with(".kubeconfig") {
            values_replaced(&String::from_utf8(bytes).unwrap(), "-data: ", "<redacted>")
        } else if mode & 0o044 == 0 && !private_config(&rel) {
            format!(
                "(owner-only: {} bytes, pinned by the .sha256 record only)\n",
                bytes.len()
            )
        } else if rel.ends_with(".crt") {
            certificate_fields(&bytes)
        } else if bytes == GATEWAY_API_CRDS {
            // Upstream's text, in the repository as it is: the record would repeat 0.7 MB of it.
            format!(
                "(addons/gateway-api-crds.yaml of the repository as it is: {} bytes)\n",
                bytes.len()
            )
        } else {
            match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => format!("(binary: {} bytes)\n", e.as_bytes().len()),
            }
        };
        out.push_str(&format!("=== {rel} ({mode:04o})\n{body}"));
        if !out.ends_with('\n') {
            out.push_str("\n(no newline at the end)\n");
        }
    }
    out
}

/// `text` with what follows `marker` on each line replaced by `with` (the line's start kept).
fn values_replaced(text: &str, marker: &str, with: &str) -> String {
    text.lines()
        .map(|line| match line.split_once(marker) {
            Some((start, _)) => format!("{start}{marker}{with}\n"),
            None => format!("{line}\n"),
        })
        .collect()
}

/// What a reviewer checks in a certificate: names, validity, SANs and usages, one per line.
fn certificate_fields(pem: &[u8]) -> String {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).expect("a PEM certificate");
    let cert = pem.parse_x509().expect("an X.509 certificate");
    let mut lines = vec![
        format!("subject: {}", cert.subject()),
        format!("issuer: {}", cert.issuer()),
        format!("serial: {}", cert.raw_serial_as_string()),
        format!(
            "validity: {} .. {}",
            cert.validity().not_before,
            cert.validity().not_after
        ),
        format!(
            "public key: {}",
            match cert
                .public_key()
                .algorithm
                .algorithm
                .to_id_string()
                .as_str()
            {
                "1.2.840.10045.2.1" => "EC".to_string(),
                "1.2.840.113549.1.1.1" => "RSA".to_string(),
                other => other.to_string(),
            }
        ),
    ];
    if let Ok(Some(bc)) = cert.basic_constraints() {
        lines.push(format!(
            "CA: {} (path length {:?})",
            bc.value.ca, bc.value.path_len_constraint
        ));
    }
    if let Ok(Some(ku)) = cert.key_usage() {
        lines.push(format!("key usage: {}", ku.value));
    }
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        let e = eku.value;
        let names: Vec<&str> = [
            (e.server_auth, "server auth"),
            (e.client_auth, "client auth"),
            (e.any, "any"),
        ]
        .iter()
        .filter_map(|(on, name)| on.then_some(*name))
        .collect();
        lines.push(format!("extended key usage: {}", names.join(", ")));
    }
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            lines.push(format!("SAN: {name}"));
        }
    }
    lines.join("\n") + "\n"
}

/// `diff -u` of the record and what was made, at most 60 lines.
fn line_diff(want: &str, got: &str) -> String {
    let diff = similar::TextDiff::from_lines(want, got)
        .unified_diff()
        .context_radius(2)
        .header("recorded", "made")
        .to_string();
    let mut lines: Vec<&str> = diff.lines().take(61).collect();
    if lines.len() > 60 {
        lines[60] = "...";
    }
    lines.join("\n")
}

/// The point of the text record: one changed line in a rendered file is one changed line in it, not
/// also a hash somewhere else (the manifest's).
#[test]
fn one_changed_line_is_a_one_line_diff_in_the_text_record() {
    let dir = tempfile::tempdir().unwrap();
    gen_ok(dir.path(), &["--profile", "dev", "--seed", "42"]);
    let before = text_record(dir.path());
    let unit = std::fs::read_dir(dir.path().join("units"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("-kube-apiserver.service"))
        .unwrap();
    let text = std::fs::read_to_string(&unit).unwrap();
    std::fs::write(&unit, text.replacen("[Service]", "[Service]\nNice=5", 1)).unwrap();
    // What gen would write next to it: the manifest records the new hash.
    let manifest = dir.path().join("manifest.json");
    let m = std::fs::read_to_string(&manifest).unwrap();
    let rel = unit.strip_prefix(dir.path()).unwrap().display().to_string();
    let at = m.find(&format!("\"{rel}\"")).unwrap();
    let hash_at = at + m[at..].find("\"sha256\": \"").unwrap() + 11;
    std::fs::write(
        &manifest,
        format!("{}{}{}", &m[..hash_at], "0".repeat(64), &m[hash_at + 64..]),
    )
    .unwrap();
    let after = text_record(dir.path());
    let diff = line_diff(&before, &after);
    assert!(diff.contains("\n+Nice=5"), "{diff}");
    let (before_lines, after_lines) = (before.lines().count(), after.lines().count());
    assert_eq!(after_lines, before_lines + 1);
    let added: Vec<&str> = after
        .lines()
        .filter(|l| !before.lines().any(|b| b == *l))
        .collect();
    assert_eq!(added, ["Nice=5"]);
}

/// A fixed state-dir path (paths are part of flags, units and the manifest), held under a lock so
/// two test runs on one machine do not write it at once.
fn fixed_dir(name: &str) -> (PathBuf, std::fs::File) {
    let base = PathBuf::from("/tmp/kubeunit-golden");
    std::fs::create_dir_all(&base).unwrap();
    let lock = std::fs::File::create(base.join(format!("{name}.lock"))).unwrap();
    // SAFETY: flock on a descriptor we own; released when the file is dropped.
    let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock");
    let dir = base.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    (dir, lock)
}

#[test]
fn every_profile_renders_the_recorded_state_dir() {
    let update = std::env::var_os("KUBEUNIT_UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    for (name, args) in CASES {
        let (dir, _lock) = fixed_dir(name);
        let mut all = vec![
            "--seed",
            "42",
            "--bin-dir",
            "/opt/kubeunit-golden/bin",
            "--set",
            "pki.epoch=2026-01-01T00:00:00Z",
            "--set",
            "network.advertiseAddress=192.0.2.10",
            // The unit names of a default state dir (/var/lib/kubeunit/NAME), which these stand
            // for: elsewhere `instance: auto` adds the state dir's hash to every name.
            "--set",
            "instance=",
        ];
        all.extend_from_slice(args);
        gen_ok(&dir, &all);
        let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        let mut differs = false;
        for (record, got) in [
            (golden.join(format!("{name}.sha256")), tree_record(&dir)),
            (golden.join(format!("{name}.txt")), text_record(&dir)),
        ] {
            if update {
                std::fs::write(&record, &got).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&record).unwrap_or_else(|e| {
                panic!(
                    "{}: {e} (create it with KUBEUNIT_UPDATE_GOLDEN=1)",
                    record.display()
                )
            });
            if got != want {
                differs = true;
                failures.push(format!(
                    "{name}: differs from {}:\n{}",
                    record.display(),
                    line_diff(&want, &got)
                ));
            }
        }
        if differs {
            failures.push(format!("{name}: state dir kept in {}", dir.display()));
        } else {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// docs/profiles.md: every key of profiles/base.yaml with its default and its comment, as a table. A
/// key added to base.yaml without this page made again fails here (KUBEUNIT_UPDATE_GOLDEN=1 makes it).
#[test]
fn the_profile_reference_is_made_from_base_yaml() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let base = std::fs::read_to_string(root.join("profiles/base.yaml")).unwrap();
    let page = profile_reference(&base);
    let path = root.join("docs/profiles.md");
    if std::env::var_os("KUBEUNIT_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let recorded = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        recorded == page,
        "docs/profiles.md is not what profiles/base.yaml makes: KUBEUNIT_UPDATE_GOLDEN=1 cargo test --test it golden::"
    );
}

/// One row per key: its dotted path, default and comment (the comment lines under it joined). Plain
/// line reading, not a YAML parser: the comments are the point, and base.yaml keeps to one key per
/// line, two spaces per level and `- item` lines for lists.
fn profile_reference(base: &str) -> String {
    struct Row {
        key: String,
        default: String,
        what: Vec<String>,
    }
    let mut intro = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut items: Vec<String> = Vec::new();
    let flush_items = |rows: &mut Vec<Row>, items: &mut Vec<String>| {
        if let (Some(row), false) = (rows.last_mut(), items.is_empty()) {
            row.default = format!("[{}]", items.join(", "));
            items.clear();
        }
    };
    // Whether the line above says something of its key (a comment after it, or one continuing that).
    let mut commented = false;
    for (n, line) in base.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            commented = false;
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            match rows.last_mut() {
                None => intro.push(comment.trim().to_string()),
                // A comment line goes on with the key above's own: one under a key without one
                // would land on that key's row, whatever it speaks of.
                Some(row) if commented => row.what.push(comment.trim().to_string()),
                Some(row) => panic!(
                    "profiles/base.yaml:{}: a comment line under `{}`, which has no comment of its own: \
                     say it after the key it is about, on its line",
                    n + 1,
                    row.key
                ),
            }
            continue;
        }
        commented = trimmed.contains(" #");
        if let Some(item) = trimmed.strip_prefix("- ") {
            items.push(item.trim().to_string());
            continue;
        }
        flush_items(&mut rows, &mut items);
        let (text, comment) = match trimmed.find(" #") {
            Some(i) => (&trimmed[..i], Some(trimmed[i + 2..].trim())),
            None => (trimmed, None),
        };
        let (key, value) = text.split_once(':').expect("a key: value line");
        path.truncate(indent / 2);
        path.push(key.trim().to_string());
        rows.push(Row {
            key: path.join("."),
            default: value.trim().to_string(),
            what: comment.into_iter().map(String::from).collect(),
        });
    }
    flush_items(&mut rows, &mut items);
    let cell = |s: &str| s.replace('|', "\\|").replace('<', "&lt;");
    let mut out = String::from(
        "# Profile reference\n\n\
         Made from `profiles/base.yaml` by `KUBEUNIT_UPDATE_GOLDEN=1 cargo test --test it golden::`, and checked \
         against it by that test: do not edit it by hand.\n\n",
    );
    out.push_str(&intro.join(" "));
    out.push_str(
        "\n\nA profile states only what differs from these (`extends:` another profile), and `--set KEY=VALUE` \
         sets one key for one `gen` (dotted, as in the table).\n\n| key | default | what |\n|---|---|---|\n",
    );
    for row in &rows {
        let default = if row.default.is_empty() {
            String::new()
        } else {
            format!("`{}`", cell(&row.default))
        };
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            row.key,
            default,
            cell(&row.what.join(" "))
        ));
    }
    out
}

/// docs/man: the pages `kubeunit man` writes. A flag or help text changed without the pages made again
/// fails here (KUBEUNIT_UPDATE_GOLDEN=1 makes them).
#[test]
fn the_man_pages_are_made_by_kubeunit_man() {
    let recorded_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/man");
    let fresh = tempfile::tempdir().unwrap();
    let out = run(kubeunit().arg("man").arg("--out-dir").arg(fresh.path()));
    assert!(out.status.success(), "kubeunit man: {}", text(&out));
    let pages = |dir: &Path| -> std::collections::BTreeMap<String, String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().path())
                    .map(|p| {
                        let name = p.file_name().unwrap().to_string_lossy().into_owned();
                        (name, std::fs::read_to_string(&p).unwrap())
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let made = pages(fresh.path());
    assert!(
        made.contains_key("kubeunit.1") && made.contains_key("kubeunit-images-load.1"),
        "{:?}",
        made.keys()
    );
    // Every page the command listed is one it wrote.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        made.len()
    );
    if std::env::var_os("KUBEUNIT_UPDATE_GOLDEN").is_some() {
        let _ = std::fs::remove_dir_all(&recorded_dir);
        let out = run(kubeunit().arg("man").arg("--out-dir").arg(&recorded_dir));
        assert!(out.status.success(), "kubeunit man: {}", text(&out));
    }
    let recorded = pages(&recorded_dir);
    let differing: Vec<&String> = made
        .keys()
        .chain(recorded.keys())
        .filter(|name| made.get(*name) != recorded.get(*name))
        .collect();
    assert!(
        differing.is_empty(),
        "docs/man differs from what `kubeunit man` makes in {differing:?}: KUBEUNIT_UPDATE_GOLDEN=1 cargo test --test it golden::"
    );
}

/// `start` applies every document of every addon a profile renders: each has a kind kubeunit knows
/// the API path of (`run::addons`' table). A kind missing there failed only at `start`, on a node.
#[test]
fn start_applies_every_kind_the_addons_render() {
    for (name, args) in CASES {
        let dir = tempfile::tempdir().unwrap();
        let mut all = vec![
            "--seed",
            "42",
            "--set",
            "network.advertiseAddress=192.0.2.10",
        ];
        all.extend_from_slice(args);
        gen_ok(dir.path(), &all);
        let docs = kubeunit::run::addons::documents(dir.path()).unwrap();
        assert!(!docs.is_empty(), "{name}: no addon documents");
        for (file, doc) in docs {
            if let Err(e) = kubeunit::run::addons::object_url(&doc) {
                panic!(
                    "{name}: {file}: {} {}: {e}",
                    doc["kind"], doc["metadata"]["name"]
                );
            }
        }
    }
}
