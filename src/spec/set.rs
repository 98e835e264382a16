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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load;

    fn with(sets: &[&str]) -> Result<Profile, Error> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        load::layered("dev", &sets).map(|(_, p)| p)
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
        assert_eq!(p.ports.apiserver, 7443);
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
