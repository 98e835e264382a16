//! What a download gives: the file itself, or members of a gzipped tar. Only the members named in
//! the source's table are taken, as regular files, each at most the download's size limit: an
//! archive cannot place anything else (links, `..`, other paths) in the cache.

use std::io::Read;
use std::path::Path;

use super::download::FILE_LIMIT;
use super::FetchError;

/// Extract `members` (archive path, name) of the tar.gz at `archive` into `into`, each as its
/// name. `url` names the download in errors.
pub fn archive(
    archive: &Path,
    members: &[(String, String)],
    into: &Path,
    url: &str,
) -> Result<(), FetchError> {
    let file = std::fs::File::open(archive).map_err(|e| FetchError::io(archive, "read", e))?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let bad = |reason: String| FetchError::Archive {
        url: url.to_string(),
        reason,
    };
    let mut missing: Vec<&(String, String)> = members.iter().collect();
    let entries = tar.entries().map_err(|e| bad(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let path = entry.path().map_err(|e| bad(e.to_string()))?;
        let path = path.to_string_lossy();
        let path = path.trim_start_matches("./").to_string();
        let Some(i) = missing.iter().position(|(member, _)| *member == path) else {
            continue;
        };
        if !entry.header().entry_type().is_file() {
            return Err(bad(format!("{path} is not a regular file")));
        }
        let (_, name) = missing.remove(i);
        let to = into.join(name);
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&to)
            .map_err(|e| FetchError::io(&to, "create", e))?;
        let copied = std::io::copy(&mut (&mut entry).take(FILE_LIMIT + 1), &mut out)
            .map_err(|e| bad(format!("{path}: {e}")))?;
        if copied > FILE_LIMIT {
            return Err(bad(format!("{path} is larger than {FILE_LIMIT} bytes")));
        }
    }
    if let Some((member, _)) = missing.first() {
        return Err(bad(format!("it has no {member}")));
    }
    Ok(())
}
