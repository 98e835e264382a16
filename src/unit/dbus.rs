//! A parsed unit file as StartTransientUnit's `a(sv)` properties.

use zbus::{OwnedVariant, Variant};

use super::file::{UnitFile, Value};
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
                Value::Exec(cmds) => Variant::from(cmds.clone()),
                Value::EnvFiles(files) => Variant::from(files.clone()),
                Value::Calendar(specs) => Variant::from(specs.clone()),
            };
            OwnedVariant::try_from(v)
                .map(|v| (name.clone(), v))
                .map_err(|e| Error::Artifact {
                    path: unit.path.clone(),
                    message: format!("property {name} has no D-Bus form: {e}"),
                    fix: "regenerate the unit with `kubeunit gen`".into(),
                })
        })
        .collect()
}
