//! Templates (handlebars, one per artifact under `units/` and `configs/`) and systemd quoting.

use handlebars::{handlebars_helper, no_escape, Handlebars};
use serde_json::Value;

use crate::error::Error;

/// Every template, embedded in the binary: (name, text).
const TEMPLATES: &[(&str, &str)] = &[
    ("service", include_str!("../units/service.hbs")),
    ("slice", include_str!("../units/slice.hbs")),
    ("kubeconfig", include_str!("../configs/kubeconfig.hbs")),
    (
        "audit-policy",
        include_str!("../configs/audit-policy.yaml.hbs"),
    ),
    (
        "scheduler-config",
        include_str!("../configs/scheduler-config.yaml.hbs"),
    ),
    (
        "kubelet-config",
        include_str!("../configs/kubelet-config.yaml.hbs"),
    ),
    (
        "kube-proxy-config",
        include_str!("../configs/kube-proxy-config.yaml.hbs"),
    ),
    (
        "encryption-config",
        include_str!("../configs/encryption-config.yaml.hbs"),
    ),
    ("containerd", include_str!("../configs/containerd.toml.hbs")),
    (
        "cni-bridge",
        include_str!("../configs/cni-bridge.conflist.hbs"),
    ),
    ("addon-rbac", include_str!("../addons/rbac.yaml.hbs")),
    ("addon-coredns", include_str!("../addons/coredns.yaml.hbs")),
    (
        "addon-storageclass",
        include_str!("../addons/storageclass.yaml.hbs"),
    ),
];

// A JSON string is a valid YAML and TOML scalar: the one quoting helper every config template uses.
handlebars_helper!(json: |v: Value| serde_json::to_string(&v).unwrap_or_default());

pub struct Renderer {
    hb: Handlebars<'static>,
}

impl Renderer {
    pub fn new() -> Result<Renderer, Error> {
        let mut hb = Handlebars::new();
        hb.set_strict_mode(true);
        hb.register_escape_fn(no_escape);
        hb.register_helper("json", Box::new(json));
        for (name, text) in TEMPLATES {
            hb.register_template_string(name, *text)
                .map_err(|e| Error::Other(format!("template {name}: {e}")))?;
        }
        Ok(Renderer { hb })
    }

    pub fn render(&self, template: &str, data: &Value) -> Result<String, Error> {
        self.hb
            .render(template, data)
            .map_err(|e| Error::Other(format!("rendering template {template}: {e}")))
    }
}

/// Quote one word of an ExecStart= line so systemd reads it back unchanged: `%` and `$` doubled
/// (specifier and variable expansion), and C-style double quotes around anything with white space,
/// quotes, backslashes or a lone `;`.
pub fn systemd_word(arg: &str) -> String {
    let needs_quotes = arg.is_empty()
        || arg == ";"
        || arg
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\'));
    let mut out = String::with_capacity(arg.len() + 2);
    if needs_quotes {
        out.push('"');
    }
    for c in arg.chars() {
        match c {
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            '"' if needs_quotes => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    if needs_quotes {
        out.push('"');
    }
    out
}

/// An EnvironmentFile= line: `KEY="value"` with the escapes systemd's env-file parser undoes.
pub fn env_file_line(key: &str, value: &str) -> String {
    let mut v = String::new();
    for c in value.chars() {
        match c {
            '"' | '\\' | '$' | '`' => {
                v.push('\\');
                v.push(c);
            }
            c => v.push(c),
        }
    }
    format!("{key}=\"{v}\"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(systemd_word("--v=2"), "--v=2");
        assert_eq!(systemd_word("a b"), "\"a b\"");
        assert_eq!(systemd_word("100%"), "100%%");
        assert_eq!(systemd_word("$HOME"), "$$HOME");
        assert_eq!(systemd_word("say \"hi\""), "\"say \\\"hi\\\"\"");
        assert_eq!(systemd_word(""), "\"\"");
    }
}
