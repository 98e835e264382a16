//! Objects applied once the API server is ready: the manifests `gen` rendered into `STATE/addons/`
//! (RBAC for the generated identities, CoreDNS, the default StorageClass and its provisioner,
//! metrics-server, MetalLB, the Gateway API and Traefik), applied server-side with
//! the admin identity, so re-applying is idempotent.
//!
//! The API calls are plain HTTPS PATCHes (`application/apply-patch+yaml`) through the same TLS client
//! as the health probes (`probe::https_agent`): the handful of kinds kubeunit renders is listed
//! below, which spares a full Kubernetes client (kube-rs + k8s-openapi) and its build time for a
//! few URLs.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::Error;
use crate::spec::{paths, Plan};
use crate::state::root::{Kind, Root};

/// kind -> (plural resource, namespaced) for every kind the addon templates use.
const KINDS: &[(&str, &str, bool)] = &[
    ("ServiceAccount", "serviceaccounts", true),
    ("ConfigMap", "configmaps", true),
    ("Service", "services", true),
    ("Deployment", "deployments", true),
    ("RoleBinding", "rolebindings", true),
    ("Role", "roles", true),
    ("ClusterRole", "clusterroles", false),
    ("ClusterRoleBinding", "clusterrolebindings", false),
    ("StorageClass", "storageclasses", false),
    ("Namespace", "namespaces", false),
    ("Node", "nodes", false),
    ("APIService", "apiservices", false),
    (
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
    ("DaemonSet", "daemonsets", true),
    ("IPAddressPool", "ipaddresspools", true),
    ("L2Advertisement", "l2advertisements", true),
    ("GatewayClass", "gatewayclasses", false),
];

/// Every document of every `addons/*.yaml`, in file order.
pub fn documents(state_dir: &Path) -> Result<Vec<(String, Value)>, Error> {
    let root = Root::open(state_dir).map_err(Error::io(state_dir, "open"))?;
    let dir = state_dir.join(paths::ADDONS);
    // Sorted; links and subdirectories are not followed.
    let names: Vec<String> = root
        .list(paths::ADDONS)
        .map_err(Error::io(&dir, "list"))?
        .into_iter()
        .filter(|(n, k)| *k == Kind::File && n.ends_with(".yaml"))
        .map(|(n, _)| n)
        .collect();
    let mut docs = Vec::new();
    for name in names {
        let rel = paths::addon(&name);
        let file = state_dir.join(&rel);
        let text = root.read_string(&rel).map_err(Error::io(&file, "read"))?;
        docs.extend(parse(&file, &text)?);
    }
    Ok(docs)
}

/// The documents of one addon file, each with the file's name.
fn parse(file: &Path, text: &str) -> Result<Vec<(String, Value)>, Error> {
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let v: Value = serde::Deserialize::deserialize(doc).map_err(|e| Error::Artifact {
            path: file.to_path_buf(),
            message: format!("document {}: {e}", i + 1),
            fix: "fix the YAML or regenerate it with `kubeunit gen`".into(),
        })?;
        if !v.is_null() {
            docs.push((file.display().to_string(), v));
        }
    }
    Ok(docs)
}

/// The addon documents of a state dir rendered in memory (`pipeline::render`), as `documents`
/// reads them once written: what a `gen` would leave.
pub fn documents_of(plan: &Plan, tree: &crate::state::Tree) -> Result<Vec<(String, Value)>, Error> {
    let prefix = format!("{}/", paths::ADDONS);
    let mut docs = Vec::new();
    for (rel, artifact) in tree.range(prefix.clone()..) {
        let Some(name) = rel.strip_prefix(&prefix) else {
            break;
        };
        if name.contains('/') || !name.ends_with(".yaml") {
            continue;
        }
        let text = String::from_utf8_lossy(&artifact.bytes);
        docs.extend(parse(&plan.state_dir.join(rel), &text)?);
    }
    Ok(docs)
}

/// Why a document has no API path kubeunit can apply it at.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("no {0}")]
    Missing(&'static str),
    #[error("kind {0} is not one kubeunit applies")]
    Kind(String),
}

/// The API path of an object, for server-side apply.
pub fn object_url(doc: &Value) -> Result<String, ObjectError> {
    fn field<'v>(v: &'v Value, name: &'static str) -> Result<&'v str, ObjectError> {
        v.as_str().ok_or(ObjectError::Missing(name))
    }
    let api_version = field(&doc["apiVersion"], "apiVersion")?;
    let kind = field(&doc["kind"], "kind")?;
    let name = field(&doc["metadata"]["name"], "metadata.name")?;
    let (_, plural, namespaced) = KINDS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .ok_or_else(|| ObjectError::Kind(kind.to_string()))?;
    let base = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    if *namespaced {
        let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
        Ok(format!("{base}/namespaces/{ns}/{plural}/{name}"))
    } else {
        Ok(format!("{base}/{plural}/{name}"))
    }
}

/// Apply every addon document (blocking). Retries for a short while on answers that mean "not yet"
/// (a namespace still being created, a conflict, a 5xx while the server settles).
pub fn apply(plan: &Plan) -> Result<Vec<String>, Error> {
    let docs = documents(&plan.state_dir)?;
    if docs.is_empty() {
        return Ok(vec![]);
    }
    let agent =
        super::probe::https_agent(plan, Some("ca"), Some("admin"), Duration::from_secs(10))?;
    let mut applied = Vec::new();
    for (file, doc) in docs {
        let path = object_url(&doc).map_err(|e| Error::Artifact {
            path: file.clone().into(),
            message: e.to_string(),
            fix: "use one of the kinds kubeunit renders, or apply it with kubectl".into(),
        })?;
        apply_object(plan, &agent, &path, &doc, &file)?;
        applied.push(path);
    }
    Ok(applied)
}

/// Delete the objects of `docs`, last first (a namespace after what is in it), as `kubectl delete -f`
/// does: one that is gone already counts as deleted. Retries for a short while on answers that
/// mean "not now". Returns their API paths.
pub fn delete(plan: &Plan, docs: &[(String, Value)]) -> Result<Vec<String>, Error> {
    if docs.is_empty() {
        return Ok(vec![]);
    }
    let agent =
        super::probe::https_agent(plan, Some("ca"), Some("admin"), Duration::from_secs(10))?;
    let mut deleted = Vec::new();
    for (file, doc) in docs.iter().rev() {
        let path = object_url(doc).map_err(|e| Error::Artifact {
            path: file.into(),
            message: e.to_string(),
            fix: "regenerate it with `kubeunit gen`".into(),
        })?;
        let url = format!("{}{path}", crate::components::apiserver_url(plan));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, text) = match agent.delete(&url).call() {
                Ok(mut r) => (
                    r.status().as_u16(),
                    r.body_mut().read_to_string().unwrap_or_default(),
                ),
                Err(e) => (0, e.to_string()),
            };
            match status {
                200 | 202 | 404 => break,
                0 | 409 | 429 | 500..=599 if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                _ => {
                    return Err(Error::Addon(format!(
                        "deleting {path} (from {file}): HTTP {status}: {text}"
                    )))
                }
            }
        }
        deleted.push(path);
    }
    Ok(deleted)
}

/// Server-side apply `doc` at `path`, retrying for a short while on answers that mean "not yet".
fn apply_object(
    plan: &Plan,
    agent: &ureq::Agent,
    path: &str,
    doc: &Value,
    file: &str,
) -> Result<(), Error> {
    let get_url = format!("{}{path}", crate::components::apiserver_url(plan));
    let url = format!("{get_url}?fieldManager=kubeunit&force=true");
    let body = serde_json::to_vec(doc).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut retried_as_update = false;
    loop {
        let result = agent
            .patch(&url)
            .header("Content-Type", "application/apply-patch+yaml")
            .send(&body[..]);
        let (status, text) = match result {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default(),
            ),
            Err(e) => (0, e.to_string()),
        };
        if status == 200 || status == 201 {
            return Ok(());
        }
        // Several control-plane hosts apply the addons at once. When another one created the
        // object between this apply's lookup and its create, the create can fail validation
        // instead of answering 409 (a Service: "provided IP is already allocated", by the other
        // one's Service). The object now exists, so one more apply updates it. The other create
        // takes the address before it stores its Service, so a lookup right after can still
        // miss it: "already allocated" is retried until the deadline (a Service a user made with
        // that address still fails, after it, with the server's message).
        let address_taken = status == 422 && text.contains("already allocated");
        let created_meanwhile = status == 422
            && !retried_as_update
            && matches!(
                agent.get(&get_url).call().map(|r| r.status().as_u16()),
                Ok(200)
            );
        retried_as_update |= created_meanwhile;
        // A StorageClass's provisioner and binding mode cannot change (the default class of an
        // environment generated again with another `addons.storageProvisioner`): the old class
        // goes, and the next apply creates the new one. Its volumes stay, with their provisioner.
        let class_replaced = status == 422
            && path.contains("/storageclasses/")
            && text.contains("field is immutable")
            && matches!(
                agent.delete(&get_url).call().map(|r| r.status().as_u16()),
                Ok(200 | 202)
            );
        let retry = address_taken
            || created_meanwhile
            || class_replaced
            || matches!(status, 0 | 404 | 409 | 429 | 500..=599);
        if !retry || Instant::now() >= deadline {
            return Err(Error::Addon(format!(
                "applying {path} from {file}: HTTP {status}: {text}"
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The kubelet's start hook: once its Node is registered, apply the node's `config/node.yaml`
/// (role and labels, which a kubelet may not set on itself, and its pod network). Waiting for the
/// registration keeps the apply from creating the Node before the kubelet does (it would then
/// not register its taints).
pub fn label_node(plan: &Plan) -> Result<Vec<String>, Error> {
    // A host that joined later publishes, as its node, what the other hosts route to it by.
    if plan.joins() {
        return super::hosts_sync::publish(plan);
    }
    // Across hosts, only a control-plane host holds the admin identity (least privilege): a worker
    // host's node has the labels and taints its kubelet registers.
    if !plan.here_has(crate::spec::profile::HostRole::ControlPlane) {
        return Ok(vec![]);
    }
    let rel = plan.node().file(crate::components::NODE_OBJECT_FILE);
    let file = plan.state_dir.join(&rel);
    let root = Root::open(&plan.state_dir).map_err(Error::io(&plan.state_dir, "open"))?;
    let text = root.read_string(&rel).map_err(Error::io(&file, "read"))?;
    let doc: Value = serde_yaml_ng::from_str(&text).map_err(|e| Error::Artifact {
        path: file.clone(),
        message: e.to_string(),
        fix: "regenerate it with `kubeunit gen`".into(),
    })?;
    let path = object_url(&doc).map_err(|e| Error::Artifact {
        path: file.clone(),
        message: e.to_string(),
        fix: "regenerate it with `kubeunit gen`".into(),
    })?;
    let agent =
        super::probe::https_agent(plan, Some("ca"), Some("admin"), Duration::from_secs(10))?;
    let url = format!("{}{path}", crate::components::apiserver_url(plan));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = agent.get(&url).call().map(|r| r.status().as_u16());
        match status {
            Ok(200) => break,
            _ if Instant::now() >= deadline => {
                return Err(Error::Addon(format!(
                    "node {} did not register within 60 s (GET {path}: {})",
                    plan.node().name,
                    match status {
                        Ok(s) => format!("HTTP {s}"),
                        Err(e) => e.to_string(),
                    }
                )))
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    apply_object(plan, &agent, &path, &doc, &file.display().to_string())?;
    Ok(vec![path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let doc: Value = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "coredns", "namespace": "kube-system"}});
        assert_eq!(
            object_url(&doc).unwrap(),
            "/apis/apps/v1/namespaces/kube-system/deployments/coredns"
        );
        let doc: Value = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"}});
        assert_eq!(
            object_url(&doc).unwrap(),
            "/apis/storage.k8s.io/v1/storageclasses/standard"
        );
        let doc: Value = serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kube-dns", "namespace": "kube-system"}});
        assert_eq!(
            object_url(&doc).unwrap(),
            "/api/v1/namespaces/kube-system/services/kube-dns"
        );
        let doc: Value =
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
        assert!(object_url(&doc).is_err());
    }
}
