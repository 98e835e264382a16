//! A parsed unit file as StartTransientUnit's `a(sv)` properties.

use zbus::{OwnedVariant, Variant};

use super::file::{ExecFlags, UnitFile, Value};
use crate::error::Error;

/// D-Bus properties for StartTransientUnit from a parsed unit file.
pub fn properties(unit: &UnitFile) -> Result<Vec<(String, OwnedVariant)>, Error> {
    unit.properties
        .iter()
        .map(|(name, value)| {
            let v: Variant<'static> = match value {
                Value::Str(s) => Variant::from(s.clone()),
                Value::Bool(b) => Variant::from(*b),
                Value::U64(n) => Variant::from(*n),
                Value::I32(n) => Variant::from(*n),
                Value::Strings(list) => Variant::from(list.clone()),
                Value::Exec(cmds) if cmds.iter().any(|(_, _, f)| f.privileged) => {
                    return ex_property(unit, name, cmds);
                }
                Value::Exec(cmds) => Variant::from(
                    cmds.iter()
                        .map(|(path, argv, f)| (path.clone(), argv.clone(), f.ignore_failure))
                        .collect::<Vec<_>>(),
                ),
                Value::Pairs(pairs) => Variant::from(pairs.clone()),
                Value::Binds(binds) => Variant::from(binds.clone()),
                Value::U32(n) => Variant::from(*n),
                Value::EnvFiles(files) => Variant::from(files.clone()),
                Value::Calendar(specs) => Variant::from(specs.clone()),
            };
            owned(unit, name.clone(), v)
        })
        .collect()
}

fn owned(
    unit: &UnitFile,
    name: String,
    v: Variant<'static>,
) -> Result<(String, OwnedVariant), Error> {
    OwnedVariant::try_from(v)
        .map(|v| (name.clone(), v))
        .map_err(|e| Error::Artifact {
            path: unit.path.clone(),
            message: format!("property {name} has no D-Bus form: {e}"),
            fix: "regenerate the unit with `kubeunit gen`".into(),
        })
}

/// Exec commands as the key's `Ex` property, a(sasas): the only form that carries prefixes other
/// than `-` (systemd 243 and later; kept to the units that need it, so that the others start on
/// older systemd too).
fn ex_property(
    unit: &UnitFile,
    name: &str,
    cmds: &[(String, Vec<String>, ExecFlags)],
) -> Result<(String, OwnedVariant), Error> {
    let cmds: Vec<(String, Vec<String>, Vec<String>)> = cmds
        .iter()
        .map(|(path, argv, f)| {
            let flags = [
                (f.ignore_failure, "ignore-failure"),
                (f.privileged, "privileged"),
            ];
            let flags = flags
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, s)| s.to_string())
                .collect();
            (path.clone(), argv.clone(), flags)
        })
        .collect();
    owned(unit, format!("{name}Ex"), Variant::from(cmds))
}
