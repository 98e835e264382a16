//! Self-contained kubeconfigs: one per certificate-table row that names one (a per-node row's on
//! every node), embedding the cluster CA, the client certificate and its key.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::json;

use super::generated::{put, Generated};
use super::pki::Issued;
use crate::components;
use crate::error::Error;
use crate::pki;
use crate::render::{self, Renderer};
use crate::spec::Plan;
use crate::state::MODE_SECRET;

pub fn kubeconfigs(
    plan: &Plan,
    r: &Renderer,
    certs: &Issued,
    g: &mut Generated,
) -> Result<(), Error> {
    let cluster = format!("kubeunit-{}", plan.name());
    for spec in pki::specs(plan) {
        let Some(file) = &spec.kubeconfig_path else {
            continue;
        };
        let (ca, _) = certs
            .get("ca")
            .ok_or_else(|| Error::Internal("no cluster CA".into()))?;
        let (cert, key) = certs
            .get(&spec.name)
            .ok_or_else(|| Error::Internal(format!("{} was not issued", spec.name)))?;
        // A component in the node's network namespace reaches the API server across the node
        // link: a per-node certificate's kubeconfig across its own node's.
        let in_node = spec
            .component
            .and_then(components::find)
            .is_some_and(|c| c.netns);
        let server = if in_node {
            components::node_apiserver_url(&plan.on_node(spec.node.unwrap_or(0)))
        } else {
            components::apiserver_url(plan)
        };
        let data = json!({
            "env": plan.name(),
            "cluster": cluster,
            "server": server,
            "user": spec.cn,
            "context": format!("{}@{}", spec.cn, cluster),
            "ca_data": B64.encode(ca),
            "cert_data": B64.encode(cert),
            "key_data": B64.encode(key),
        });
        let text = r.render(&render::KUBECONFIG, &data)?;
        put(&mut g.tree, file, text.into_bytes(), MODE_SECRET);
    }
    Ok(())
}
