//! Templates (handlebars), embedded in the binary: the artifact stage's own (units, kubeconfigs) here,
//! each component's config templates next to its entry in the component table. `quote` has the
//! quoting that unit and environment files need.

pub mod quote;

use handlebars::{handlebars_helper, no_escape, Handlebars};
use serde_json::Value;

use crate::error::Error;

/// A template: a name for errors and its text.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    pub name: &'static str,
    pub text: &'static str,
}

pub const SERVICE: Template = Template {
    name: "units/service.hbs",
    text: include_str!("../../units/service.hbs"),
};
pub const TIMER: Template = Template {
    name: "units/timer.hbs",
    text: include_str!("../../units/timer.hbs"),
};
pub const SLICE: Template = Template {
    name: "units/slice.hbs",
    text: include_str!("../../units/slice.hbs"),
};
pub const TARGET: Template = Template {
    name: "units/target.hbs",
    text: include_str!("../../units/target.hbs"),
};
pub const INSTALL_DROPIN: Template = Template {
    name: "units/install-dropin.hbs",
    text: include_str!("../../units/install-dropin.hbs"),
};
pub const HOOK: Template = Template {
    name: "units/hook.hbs",
    text: include_str!("../../units/hook.hbs"),
};
pub const KUBECONFIG: Template = Template {
    name: "configs/kubeconfig.hbs",
    text: include_str!("../../configs/kubeconfig.hbs"),
};

// A JSON string is a valid YAML and TOML scalar: the one quoting helper every config template uses.
handlebars_helper!(json: |v: Value| serde_json::to_string(&v).unwrap_or_default());

pub struct Renderer {
    hb: Handlebars<'static>,
}

impl Renderer {
    pub fn new() -> Renderer {
        let mut hb = Handlebars::new();
        hb.set_strict_mode(true);
        hb.register_escape_fn(no_escape);
        hb.register_helper("json", Box::new(json));
        Renderer { hb }
    }

    /// Render `t` with `data`. Strict: a name the data lacks is an error, never an empty string.
    pub fn render(&self, t: &Template, data: &Value) -> Result<String, Error> {
        self.hb
            .render_template(t.text, data)
            .map_err(|e| Error::Internal(format!("rendering template {}: {e}", t.name)))
    }
}

impl Default for Renderer {
    fn default() -> Self {
        Renderer::new()
    }
}
