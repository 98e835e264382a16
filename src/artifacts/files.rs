//! Config files and addon manifests: the `files` of every instance of the table's enabled
//! components (a per-node component's in each node's directory).

use super::generated::{put, Generated};
use crate::components::{self, Component, Content, FileContext, FileMode};
use crate::error::Error;
use crate::pki::Secrets;
use crate::render::Renderer;
use crate::spec::Plan;
use crate::state::{MODE_EXECUTABLE, MODE_PRIVATE, MODE_PUBLIC, MODE_SECRET};

pub fn component_files(
    table: &[Component],
    plan: &Plan,
    secrets: &Secrets,
    r: &Renderer,
    g: &mut Generated,
) -> Result<(), Error> {
    for instance in components::instances_of(table, plan) {
        let plan = &instance.plan;
        let cx = FileContext {
            plan,
            component: instance.component,
            secrets,
        };
        for file in instance.component.files.iter().filter(|f| (f.when)(plan)) {
            let text = match (file.content)(&cx).map_err(|e| Error::field("profile", e))? {
                Content::Template(name, data) => r.render(name, &data)?,
                Content::Verbatim(text) => text,
            };
            let mode = match file.mode {
                FileMode::Public => MODE_PUBLIC,
                FileMode::Private => MODE_PRIVATE,
                FileMode::Secret => MODE_SECRET,
                FileMode::Executable => MODE_EXECUTABLE,
            };
            put(
                &mut g.tree,
                &instance.file_path(file.path),
                text.into_bytes(),
                mode,
            );
        }
    }
    Ok(())
}
