//! The three documents of a cloud-init NoCloud seed, as cloud-init reads them: `meta-data`,
//! `user-data` (#cloud-config) and `network-config` (version 2). Serialized from types, so that no
//! value, whatever it holds, can break out of its place in the YAML.

use std::collections::BTreeMap;

use serde::Serialize;

/// `meta-data`: the instance's identity. cloud-init runs a seed's user-data once per instance-id.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct MetaData {
    pub instance_id: String,
    pub local_hostname: String,
}

/// `user-data`: the modules a seed uses (cc_set_hostname, cc_ca_certs, cc_write_files,
/// cc_runcmd).
#[derive(Debug, Serialize)]
pub struct UserData {
    pub hostname: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_certs: Option<CaCerts>,
    pub write_files: Vec<WriteFile>,
    pub runcmd: Vec<Vec<String>>,
}

/// cc_ca_certs: PEM certificates added to the system's trust store.
#[derive(Debug, Serialize)]
pub struct CaCerts {
    pub trusted: Vec<String>,
}

/// One file of cc_write_files, base64 so that bytes arrive as they left.
#[derive(Debug, Serialize)]
pub struct WriteFile {
    pub path: String,
    pub content: String,
    pub encoding: &'static str,
    pub owner: &'static str,
    pub permissions: String,
}

impl WriteFile {
    pub fn new(path: String, bytes: &[u8], mode: u32) -> WriteFile {
        use base64::Engine;
        WriteFile {
            path,
            content: base64::engine::general_purpose::STANDARD.encode(bytes),
            encoding: "b64",
            owner: "root:root",
            permissions: format!("{mode:04o}"),
        }
    }
}

/// `network-config`, version 2 (netplan's schema, which cloud-init renders for systemd-networkd,
/// ifupdown or NetworkManager).
#[derive(Debug, Serialize)]
pub struct NetworkConfig {
    pub version: u8,
    pub ethernets: BTreeMap<String, Ethernet>,
}

#[derive(Debug, Serialize)]
pub struct Ethernet {
    #[serde(rename = "match")]
    pub matching: Match,
    pub dhcp4: bool,
    pub addresses: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nameservers: Option<Nameservers>,
}

#[derive(Debug, Serialize)]
pub struct Match {
    pub name: String,
}

#[derive(Debug, Serialize)]
pub struct Route {
    pub to: String,
    pub via: String,
}

#[derive(Debug, Serialize)]
pub struct Nameservers {
    pub addresses: Vec<String>,
}

/// A document as YAML (a user-data's `#cloud-config` line first).
pub fn yaml<T: Serialize>(header: &str, doc: &T) -> Result<String, crate::error::Error> {
    let body = serde_yaml_ng::to_string(doc)
        .map_err(|e| crate::error::Error::Internal(format!("serializing a seed document: {e}")))?;
    Ok(format!("{header}{body}"))
}
