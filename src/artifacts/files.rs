//! Config files and addon manifests: the `files` of every enabled component of the table.

use super::generated::{put, Generated};
use crate::components::{self, Component, Content, FileContext};
use crate::error::Error;
use crate::pki::Secrets;
use crate::render::Renderer;
use crate::spec::Plan;
use crate::state::{MODE_PUBLIC, MODE_SECRET};

pub fn component_files(
    table: &[Component],
    plan: &Plan,
    secrets: &Secrets,
    r: &Renderer,
    g: &mut Generated,
) -> Result<(), Error> {
    for component in components::enabled(table, &plan.profile) {
        let cx = FileContext {
            plan,
            component,
            secrets,
        };
        for file in component.files.iter().filter(|f| (f.when)(plan)) {
            let text = match (file.content)(&cx).map_err(|e| Error::field("profile", e))? {
                Content::Template(name, data) => r.render(name, &data)?,
                Content::Verbatim(text) => text,
            };
            let mode = if file.secret {
                MODE_SECRET
            } else {
                MODE_PUBLIC
            };
            put(&mut g.tree, file.path, text.into_bytes(), mode);
        }
    }
    Ok(())
}
