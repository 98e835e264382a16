//! `--set KEY=VALUE`: one profile field by dotted path, on the YAML tree before it is typed.

use serde_yaml_ng::Value;

use super::profile::Profile;
use crate::error::Error;

/// `--set a.b.c=VALUE`. VALUE is read as YAML (`[a,b]`, `true`, `12`); where the schema wants a string
/// there (`--set name=007`, `extraArgs.profiling=false`) the raw text is used instead.
pub fn apply_set(root: &mut Value, set: &str) -> Result<(), Error> {
    let Some((path, raw)) = set.split_once('=') else {
        return Err(Error::Set {
            set: set.into(),
            message: "expected KEY=VALUE".into(),
        });
    };
    let keys: Vec<&str> = path.split('.').collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(Error::Set {
            set: set.into(),
            message: format!("'{path}' is not a dotted key path like network.serviceCIDR"),
        });
    }
    let parsed: Value = serde_yaml_ng::from_str(raw).unwrap_or(Value::String(raw.to_string()));
    let as_string = Value::String(raw.to_string());
    if parsed != as_string {
        let mut typed_try = root.clone();
        set_path(&mut typed_try, &keys, parsed, set)?;
        let typed_ok = serde_path_to_error::deserialize::<_, Profile>(typed_try.clone()).is_ok();
        let mut string_try = root.clone();
        set_path(&mut string_try, &keys, as_string, set)?;
        let string_ok = serde_path_to_error::deserialize::<_, Profile>(string_try.clone()).is_ok();
        *root = if string_ok && !typed_ok {
            string_try
        } else {
            typed_try
        };
        return Ok(());
    }
    set_path(root, &keys, parsed, set)
}

fn set_path(root: &mut Value, keys: &[&str], new: Value, set: &str) -> Result<(), Error> {
    let mut node = root;
    for (i, key) in keys.iter().enumerate() {
        let Value::Mapping(map) = node else {
            return Err(Error::Set {
                set: set.into(),
                message: format!("'{}' is not a mapping", keys[..i].join(".")),
            });
        };
        let key_value = Value::String(key.to_string());
        if i + 1 == keys.len() {
            map.insert(key_value, new);
            return Ok(());
        }
        node = map
            .entry(key_value)
            .or_insert_with(|| Value::Mapping(Default::default()));
    }
    Ok(())
}
