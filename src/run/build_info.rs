//! The main module of a Go binary, read from its build info (what `go version -m` prints) instead
//! of running it: a `--version` call is a process start of a large binary, on `start`'s critical
//! path. No Rust crate reads Go's build info, so this follows Go's own reader (debug/buildinfo,
//! go1.18+ layout, strings inline); `object` finds the section and reads only it.

use std::path::Path;

use object::{Object, ObjectSection};

/// Go's marker at the start of the `.go.buildinfo` section.
const MAGIC: &[u8] = b"\xff Go buildinf:";
/// Header: magic, pointer size, flags, padding; the strings follow it.
const HEADER: usize = 32;
/// Flag: the version and module strings are inline (go1.18 and later).
const INLINE: u8 = 0x2;
/// More than any real section (Kubernetes' lists about 150 modules in some 20 KB).
const MAX_SECTION: u64 = 4 << 20;

/// A binary's main module: its path and version as Go recorded them at build time.
#[derive(Debug, PartialEq)]
pub struct MainModule {
    pub path: String,
    pub version: String,
}

impl MainModule {
    /// The release this module version names: `vX.Y.Z`, or with a pre-release (`-rc.1`). `None`
    /// for a build that does not say which source it is: `(devel)` (a checkout), a pseudo-version
    /// (a commit between tags), or `+dirty` (uncommitted changes).
    pub fn release(&self) -> Option<&str> {
        let v = self.version.as_str();
        let core = v.strip_prefix('v')?;
        let numbers = core.split(['-', '+']).next()?;
        let is_release = numbers.split('.').count() == 3
            && numbers
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        // A pseudo-version's pre-release part ends in "YYYYMMDDhhmmss-abcdefabcdef".
        let pseudo = v.split('-').rev().nth(1).is_some_and(|stamp| {
            let stamp = stamp.rsplit('.').next().unwrap_or(stamp);
            stamp.len() == 14 && stamp.bytes().all(|b| b.is_ascii_digit())
        });
        (is_release && !pseudo && !v.contains('+')).then_some(v)
    }
}

/// The main module of the Go binary at `path`; `None` when it is not one (or not built in module
/// mode), or the file cannot be read. Never runs it.
pub fn main_module(path: &Path) -> Option<MainModule> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: a FIFO put where the binary was must not hang `start`; only a regular file is read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
    let cache = object::ReadCache::new(file);
    let binary = object::File::parse(&cache).ok()?;
    let section = binary.section_by_name(".go.buildinfo")?;
    if section.size() > MAX_SECTION {
        return None;
    }
    parse(section.data().ok()?)
}

/// The main module from a `.go.buildinfo` section's bytes.
fn parse(data: &[u8]) -> Option<MainModule> {
    let header = data.get(..HEADER)?;
    if !header.starts_with(MAGIC) || header[MAGIC.len() + 1] & INLINE == 0 {
        return None;
    }
    let mut rest = &data[HEADER..];
    let _go_version = read_string(&mut rest)?;
    let info = read_string(&mut rest)?;
    // Go wraps the module text in 16-byte sentinels; the text ends in a newline.
    if info.len() < 33 || info[info.len() - 17] != b'\n' {
        return None;
    }
    let text = std::str::from_utf8(&info[16..info.len() - 16]).ok()?;
    text.lines().find_map(|line| {
        let mut fields = line.split('\t');
        (fields.next()? == "mod").then_some(())?;
        Some(MainModule {
            path: fields.next()?.to_string(),
            version: fields.next()?.to_string(),
        })
    })
}

/// A string as Go's linker writes it here: its length as a uvarint, then its bytes.
fn read_string<'a>(data: &mut &'a [u8]) -> Option<&'a [u8]> {
    let mut len: u64 = 0;
    let mut used = 0;
    for (i, b) in data.iter().enumerate().take(10) {
        len |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            used = i + 1;
            break;
        }
    }
    if used == 0 {
        return None;
    }
    let len = usize::try_from(len).ok()?;
    let s = data.get(used..used.checked_add(len)?)?;
    *data = &data[used + len..];
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(go: &str, info: &str) -> Vec<u8> {
        let mut data = MAGIC.to_vec();
        data.extend([8, INLINE]);
        data.resize(HEADER, 0);
        for s in [go.as_bytes().to_vec(), info.as_bytes().to_vec()] {
            data.push(u8::try_from(s.len()).unwrap_or(0x7f) | 0x80);
            data.push(u8::try_from(s.len() >> 7).unwrap_or(0));
            data.extend(s);
        }
        data
    }

    #[test]
    fn the_main_module_is_read_from_the_section() {
        let sentinel = "0123456789abcdef";
        let info = format!(
            "{sentinel}path\tk8s.io/kubernetes/cmd/kube-apiserver\nmod\tk8s.io/kubernetes\tv1.36.3\th1:x=\ndep\tcel.dev/expr\tv0.25.1\th1:y=\n{sentinel}"
        );
        let m = parse(&section("go1.26.8", &info)).expect("a main module");
        assert_eq!(m.path, "k8s.io/kubernetes");
        assert_eq!(m.version, "v1.36.3");
        assert_eq!(m.release(), Some("v1.36.3"));
    }

    #[test]
    fn truncated_or_foreign_sections_give_nothing() {
        let info = "0123456789abcdefpath\tx\nmod\tx\tv1.0.0\n0123456789abcdef";
        let good = section("go1.26.8", info);
        assert!(parse(&good).is_some());
        for cut in 0..good.len() {
            assert_eq!(parse(&good[..cut]), None, "cut at {cut}");
        }
        let mut old = good.clone();
        old[MAGIC.len() + 1] = 0; // pre-1.18: pointers instead of inline strings
        assert_eq!(parse(&old), None);
        assert_eq!(parse(&[0xff; 64]), None);
    }

    #[test]
    fn only_a_tagged_release_names_its_source() {
        let release = |v: &str| {
            MainModule {
                path: "m".into(),
                version: v.into(),
            }
            .release()
            .map(str::to_string)
        };
        assert_eq!(release("v3.6.16").as_deref(), Some("v3.6.16"));
        assert_eq!(release("v1.37.0-rc.1").as_deref(), Some("v1.37.0-rc.1"));
        for v in [
            "(devel)",
            "v0.0.0-20260101120000-abcdefabcdef",
            "v1.36.4-0.20260101120000-abcdefabcdef",
            "v1.36.3+dirty",
            "v1.36",
            "",
        ] {
            assert_eq!(release(v), None, "{v}");
        }
    }

    #[test]
    fn a_file_without_go_build_info_or_no_file_gives_nothing() {
        // This test binary is ELF without a .go.buildinfo section.
        let me = std::env::current_exe().expect("test binary");
        assert_eq!(main_module(&me), None);
        assert_eq!(main_module(Path::new("/nonexistent/kube-apiserver")), None);
        // A FIFO (no writer) is neither waited on nor read.
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("kube-apiserver");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("no NUL");
        // SAFETY: mkfifo reads the NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o755) }, 0);
        assert_eq!(main_module(&fifo), None);
    }
}
