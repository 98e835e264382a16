//! A state dir generated elsewhere (`gen --out`, a Nix build's output) read back as the tree `gen`
//! would have written, checked file by file against its manifest. A copy from the Nix store has
//! lost its modes (every file 0444 there): the manifest's are the ones that count.

use std::path::Path;

use super::manifest::{sha256_hex, Manifest};
use super::root::{Kind, Root};
use super::tree::{Artifact, Tree, MODE_EXECUTABLE, MODE_PUBLIC, MODE_SECRET};
use crate::error::Error;
use crate::spec::paths::{LOCK, MANIFEST};

/// The largest file a state dir holds is a kubeconfig or a bundle of a few certificates; anything
/// near this is not one.
const MAX_FILE: u64 = 16 << 20;

fn refuse(src: &Path, problem: impl Into<String>) -> Error {
    Error::state(
        src,
        problem,
        "import the unchanged output of `kubeunit gen --out` (or of a Nix build of lib.mkState)",
    )
}

/// The files of the state dir at `src` and its manifest. Every file the manifest lists must be
/// there as a regular file with its sha256; besides those only the manifest, an empty lock file and
/// the directories holding them may be there.
pub fn read(src: &Path) -> Result<(Tree, Manifest), Error> {
    let root = Root::open(src).map_err(|e| refuse(src, format!("cannot open it: {e}")))?;
    let text = root
        .read_string(MANIFEST)
        .map_err(|e| refuse(src, format!("no readable {MANIFEST}: {e}")))?;
    let manifest: Manifest = serde_json::from_str(&text)
        .map_err(|e| refuse(src, format!("{MANIFEST} is not a kubeunit manifest: {e}")))?;
    if let Some(p) = manifest.foreign_paths().first() {
        return Err(refuse(
            src,
            format!("{MANIFEST} lists {p:?}, which is no file of a state dir"),
        ));
    }
    let mut tree = Tree::new();
    for (rel, entry) in &manifest.files {
        let mode = u32::from_str_radix(&entry.mode, 8)
            .ok()
            .filter(|m| [MODE_SECRET, MODE_PUBLIC, MODE_EXECUTABLE].contains(m))
            .ok_or_else(|| {
                refuse(
                    src,
                    format!(
                        "{MANIFEST}: {rel} has mode {:?}, not 0600, 0644 or 0755",
                        entry.mode
                    ),
                )
            })?;
        let size = std::fs::symlink_metadata(src.join(rel))
            .map(|m| m.len())
            .unwrap_or(0);
        if size > MAX_FILE {
            return Err(refuse(src, format!("{rel} is {size} bytes: too large")));
        }
        let bytes = root
            .read(rel)
            .map_err(|e| refuse(src, format!("{rel}: {e}")))?;
        if sha256_hex(&bytes) != entry.sha256 {
            return Err(refuse(
                src,
                format!("{rel} differs from what {MANIFEST} records (sha256)"),
            ));
        }
        tree.insert(rel.clone(), Artifact { bytes, mode });
    }
    let entries = root
        .walk("")
        .map_err(|e| refuse(src, format!("cannot list it: {e}")))?;
    for e in entries {
        let expected = match e.kind {
            Kind::File => {
                tree.contains_key(&e.rel)
                    || e.rel == MANIFEST
                    || (e.rel == LOCK && root.read(LOCK).is_ok_and(|b| b.is_empty()))
            }
            Kind::Dir => tree.keys().any(|f| {
                f.strip_prefix(e.rel.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
            }),
            Kind::Symlink | Kind::Other => false,
        };
        if !expected {
            return Err(refuse(
                src,
                format!("holds {:?}, which its {MANIFEST} does not list", e.rel),
            ));
        }
    }
    Ok((tree, manifest))
}
