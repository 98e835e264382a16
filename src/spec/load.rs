//! Loading a profile: a built-in name or a file, its `extends:` chain (every profile sits on `base`),
//! then `--set` overrides, then one typed deserialization with unknown fields rejected. What types
//! cannot say (CIDRs, ports, components, and which fields `ports:` has: the component table's) is
//! checked afterwards, all fields at once.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use super::profile::{Profile, BUILTIN};
use super::set::apply_set;
use crate::error::{Error, FieldError};

/// Where a profile came from, for error messages.
#[derive(Debug, Clone)]
pub enum Source {
    Builtin(String),
    File(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Builtin(n) => write!(f, "built-in profile '{n}'"),
            Source::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Load `spec` (a built-in name or a path) with its `extends:` chain and `--set` overrides applied.
/// The result has the right types; its values are not validated yet.
pub fn layered(spec: &str, sets: &[String]) -> Result<(Source, Profile), Error> {
    let (source, value) = load_layered(spec, &mut Vec::new())?;
    finish(source, value, sets)
}

/// Parse an already resolved profile (a state dir's `profile.yaml`, read from `path`).
pub fn resolved(path: &Path, text: &str) -> Result<(Source, Profile), Error> {
    resolved_with(path, text, &[])
}

/// `resolved`, with `--set` overrides applied on top (`upgrade --set`).
pub fn resolved_with(path: &Path, text: &str, sets: &[String]) -> Result<(Source, Profile), Error> {
    let source = Source::File(path.to_path_buf());
    // On top of `base`: a state dir written by an older kubeunit lacks fields added since.
    let (_, mut value) = load_layered("base", &mut Vec::new())?;
    let mut recorded = parse_yaml(&source, text)?;
    // No `instance` recorded: none (`gen` leaves it out then, as versions before it did), never
    // base's `auto`, which would rename the units of a state dir outside the default place.
    if let Value::Mapping(m) = &mut recorded {
        let key = Value::String("instance".into());
        if !m.contains_key(&key) {
            m.insert(key, Value::String(String::new()));
        }
    }
    merge(&mut value, recorded);
    finish(source, value, sets)
}

fn finish(source: Source, mut value: Value, sets: &[String]) -> Result<(Source, Profile), Error> {
    if let Value::Mapping(m) = &mut value {
        m.remove("extends");
    }
    for set in sets {
        apply_set(&mut value, set)?;
    }
    let profile = typed(&source, value)?;
    Ok((source, profile))
}

/// Deserialize with the path of the offending field in the error (`ports.apiserver`, not "(document)").
fn typed(source: &Source, value: Value) -> Result<Profile, Error> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "(document)".to_string()
        } else {
            path
        };
        Error::field(
            source.to_string(),
            FieldError::new(
                field,
                "",
                e.into_inner().to_string(),
                "check the field's spelling and type against `kubeunit profile show base`",
            ),
        )
    })
}

fn parse_yaml(source: &Source, text: &str) -> Result<Value, Error> {
    serde_yaml_ng::from_str(text).map_err(|e| {
        Error::field(
            source.to_string(),
            FieldError::new("(document)", "", e.to_string(), "fix the YAML syntax"),
        )
    })
}

fn load_layered(spec: &str, chain: &mut Vec<String>) -> Result<(Source, Value), Error> {
    if chain.iter().any(|c| c == spec) || chain.len() > 8 {
        return Err(Error::field(
            spec,
            FieldError::new(
                "extends",
                spec,
                format!(
                    "profiles extend each other in a loop: {} -> {spec}",
                    chain.join(" -> ")
                ),
                "remove one of the `extends:` entries",
            ),
        ));
    }
    chain.push(spec.to_string());
    let (source, text) = read_source(spec)?;
    let mut value = parse_yaml(&source, &text)?;
    if !matches!(value, Value::Mapping(_)) {
        return Err(Error::field(
            source.to_string(),
            FieldError::new(
                "(document)",
                "",
                "a profile must be a YAML mapping",
                "start from `kubeunit profile show dev`",
            ),
        ));
    }
    let parent = match &value {
        Value::Mapping(m) => m.get("extends").cloned(),
        _ => None,
    };
    // Every profile but `base` sits on top of `base`, so a user profile only states what differs.
    let parent = match parent {
        Some(Value::String(p)) => Some(resolve_relative(&source, &p)),
        Some(Value::Null) | None if spec != "base" => Some("base".to_string()),
        None | Some(Value::Null) => None,
        Some(other) => {
            return Err(Error::field(
                source.to_string(),
                FieldError::new(
                    "extends",
                    format!("{other:?}"),
                    "expected a profile name or path",
                    "write `extends: dev` or `extends: ./other.yaml`",
                ),
            ))
        }
    };
    if let Some(parent) = parent {
        let (_, mut base) = load_layered(&parent, chain)?;
        merge(&mut base, value);
        value = base;
    }
    Ok((source, value))
}
fn resolve_relative(source: &Source, parent: &str) -> String {
    if BUILTIN.iter().any(|(n, _)| *n == parent) {
        return parent.to_string();
    }
    match source {
        Source::File(p) if Path::new(parent).is_relative() => p
            .parent()
            .unwrap_or(Path::new("."))
            .join(parent)
            .to_string_lossy()
            .into_owned(),
        _ => parent.to_string(),
    }
}

fn read_source(spec: &str) -> Result<(Source, String), Error> {
    if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == spec) {
        return Ok((Source::Builtin(name.to_string()), text.to_string()));
    }
    let looks_like_path = spec.contains('/') || spec.ends_with(".yaml") || spec.ends_with(".yml");
    if !looks_like_path {
        let names: Vec<_> = BUILTIN.iter().map(|(n, _)| *n).collect();
        return Err(Error::ProfileRead {
            source_name: spec.into(),
            reason: format!(
                "no built-in profile of that name (built-ins: {}); a file path needs a '/' or a .yaml suffix",
                names.join(", ")
            ),
        });
    }
    let path = PathBuf::from(spec);
    let refused = |reason: String| Error::ProfileRead {
        source_name: path.display().to_string(),
        reason,
    };
    // A regular file of a profile's size only: a FIFO or a device would block the read or never
    // end, and a file of megabytes is no profile (the built-in ones are a few kB). The read is
    // bounded, not the size checked first: a file may grow between the two.
    let meta = std::fs::metadata(&path).map_err(|e| refused(e.to_string()))?;
    if !meta.is_file() {
        return Err(refused(format!(
            "not a regular file (a {})",
            file_kind(&meta)
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_PROFILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| refused(e.to_string()))?;
    if bytes.len() as u64 > MAX_PROFILE_BYTES {
        return Err(refused(format!(
            "more than a profile's limit of {MAX_PROFILE_BYTES} bytes"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        refused(format!(
            "not UTF-8 text (byte {} is not): a profile is YAML in UTF-8",
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok((Source::File(path.clone()), text))
}

/// What a path that is not a regular file is, for an error (links are followed before).
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    match () {
        _ if t.is_dir() => "directory",
        _ if t.is_fifo() => "FIFO",
        _ if t.is_socket() => "socket",
        _ if t.is_char_device() || t.is_block_device() => "device",
        _ => "special file",
    }
}

/// The largest profile file read (1 MiB).
pub const MAX_PROFILE_BYTES: u64 = 1 << 20;

/// Deep-merge `over` into `base`: mappings merge by key, everything else replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, over) => *slot = over,
    }
}

#[cfg(test)]
mod set_tests {
    use super::*;

    fn with(sets: &[&str]) -> Result<Profile, Error> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        layered("dev", &sets).map(|(_, p)| p)
    }

    #[test]
    fn typed_values_land_in_their_fields() {
        let p = with(&[
            "ports.apiserver=7443",
            "etcd.unsafeNoFsync=true",
            "network.extraSANs=[a.example, 192.0.2.1]",
            "apiserver.authorizationMode=[RBAC]",
            "featureGates.Foo=false",
        ])
        .unwrap();
        assert_eq!(p.ports.fixed().and_then(|p| p.get("apiserver")), Some(7443));
        assert!(p.etcd.unsafe_no_fsync);
        assert_eq!(p.network.extra_sans, vec!["a.example", "192.0.2.1"]);
        assert_eq!(p.apiserver.authorization_mode, vec!["RBAC"]);
        assert_eq!(p.feature_gates.get("Foo"), Some(&false));
    }

    #[test]
    fn strings_stay_strings_where_the_schema_wants_them() {
        let p = with(&[
            "name=007",
            "components.kube-apiserver.extraArgs.profiling=false",
            "components.etcd.env.GOGC=50",
            "network.dnsIP=",
        ])
        .unwrap();
        assert_eq!(p.name, "007");
        let api = p.component("kube-apiserver");
        assert_eq!(api.extra_args.get("profiling"), Some(&Some("false".into())));
        assert_eq!(
            p.component("etcd").env.get("GOGC").map(String::as_str),
            Some("50")
        );
        assert_eq!(p.network.dns_ip, "");
    }

    #[test]
    fn null_removes_a_flag_and_new_maps_are_created() {
        let p = with(&[
            "components.kube-apiserver.extraArgs.v=null",
            "components.cloud-controller-manager.featureGates.X=true",
        ])
        .unwrap();
        assert_eq!(
            p.component("kube-apiserver").extra_args.get("v"),
            Some(&None)
        );
        assert_eq!(
            p.component("cloud-controller-manager")
                .feature_gates
                .get("X"),
            Some(&true)
        );
    }

    #[test]
    fn malformed_sets_are_refused_with_the_set_named() {
        for (set, needle) in [
            ("ports.apiserver", "expected KEY=VALUE"),
            ("ports..apiserver=1", "not a dotted key path"),
            (".name=x", "not a dotted key path"),
            ("name.inner=x", "'name' is not a mapping"),
        ] {
            let e = with(&[set]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{set}");
            let msg = e.to_string();
            assert!(msg.contains(set) && msg.contains(needle), "{set}: {msg}");
        }
        // A wrong type is reported with the field's path.
        let msg = with(&["ports.apiserver=high"]).unwrap_err().to_string();
        assert!(msg.contains("ports.apiserver"), "{msg}");
        let msg = with(&["network.bogus=1"]).unwrap_err().to_string();
        assert!(msg.contains("bogus"), "{msg}");
    }
}
