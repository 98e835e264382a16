//! `kubeunit import SRC`: a state dir made elsewhere, every part of it hostile. The harness builds SRC
//! from the input (files, dirs, symlinks pointing anywhere, a manifest listing any path with right or
//! wrong hashes and modes, or raw manifest text), imports it into a fresh DST, and checks that nothing
//! was written outside DST: a canary dir beside them, which symlinks in SRC may name, stays empty.
#![no_main]

use std::collections::BTreeMap;
use std::path::{Component, Path};
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

#[derive(Arbitrary, Debug)]
enum Node {
    File(Vec<u8>),
    Dir,
    Symlink(String),
}

#[derive(Arbitrary, Debug)]
struct Listed {
    path: String,
    /// The hash of these bytes (a file of SRC's, or anything); None: a fuzzed string.
    hash_of: Option<Vec<u8>>,
    raw_hash: String,
    mode: String,
}

#[derive(Arbitrary, Debug)]
struct Input {
    nodes: Vec<(String, Node)>,
    listed: Vec<Listed>,
    /// When set, manifest.json is this text instead of one made from `listed`.
    raw_manifest: Option<String>,
    /// Also put the manifest's stateDir elsewhere than DST.
    state_dir_elsewhere: bool,
}

/// Where the harness may create `rel` inside SRC: relative, no `..`, no empty or odd names.
fn inside(rel: &str) -> bool {
    !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

fuzz_target!(|input: Input| {
    let base = tempfile::tempdir().expect("a temp dir");
    let (src, dst, canary) = (
        base.path().join("src"),
        base.path().join("dst"),
        base.path().join("canary"),
    );
    for d in [&src, &canary] {
        std::fs::create_dir(d).expect("mkdir");
    }
    for (rel, node) in &input.nodes {
        if !inside(rel) || rel == "manifest.json" {
            continue;
        }
        let path = src.join(rel);
        if let Some(parent) = path.parent() {
            if std::fs::create_dir_all(parent).is_err() {
                continue;
            }
        }
        // A path that failed (its parent is a file, say) is simply not there.
        let _ = match node {
            Node::File(bytes) => std::fs::write(&path, bytes),
            Node::Dir => std::fs::create_dir(&path),
            Node::Symlink(target) => std::os::unix::fs::symlink(target, &path),
        };
    }
    let manifest = match &input.raw_manifest {
        Some(text) => text.clone(),
        None => {
            let files: BTreeMap<&str, serde_json::Value> = input
                .listed
                .iter()
                .map(|l| {
                    let sha256 = match &l.hash_of {
                        Some(bytes) => hex::encode(Sha256::digest(bytes)),
                        None => l.raw_hash.clone(),
                    };
                    (
                        l.path.as_str(),
                        serde_json::json!({"sha256": sha256, "mode": l.mode}),
                    )
                })
                .collect();
            let state_dir = if input.state_dir_elsewhere {
                canary.join("elsewhere")
            } else {
                dst.clone()
            };
            serde_json::json!({
                "kubeunitVersion": "0.1.0",
                "name": "fuzz",
                "stateDir": state_dir,
                "files": files,
                "certs": {},
                "profile": {},
            })
            .to_string()
        }
    };
    std::fs::write(src.join("manifest.json"), manifest).expect("write the manifest");
    let result =
        kubeunit::pipeline::import(&src, Some(&dst), Duration::from_millis(10), &mut |_| {});
    let written_outside: Vec<_> = std::fs::read_dir(&canary)
        .expect("read the canary dir")
        .collect();
    assert!(
        written_outside.is_empty(),
        "import wrote outside its state dir: {written_outside:?} ({result:?})"
    );
    if let Ok((manifest, _)) = result {
        for rel in manifest.files.keys() {
            assert!(
                std::fs::symlink_metadata(dst.join(rel)).is_ok_and(|m| m.is_file()),
                "import reported success without {rel}"
            );
        }
    }
});
