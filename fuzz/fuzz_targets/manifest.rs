//! A state dir's manifest.json as `gen`, `gen --check` and `start` read it back (`Previous::load`).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// One state dir for every run: only its manifest changes.
fn dir() -> &'static std::path::Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temp dir")).path()
}

fuzz_target!(|bytes: &[u8]| {
    std::fs::write(dir().join("manifest.json"), bytes).expect("write the manifest");
    let _ = kubeunit::state::Previous::load(dir());
    if let Ok(m) = serde_json::from_slice::<kubeunit::state::Manifest>(bytes) {
        let _ = m.foreign_paths();
        let _ = m.mode();
    }
});
