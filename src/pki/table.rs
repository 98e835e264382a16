//! The certificate table: one row per certificate, CAs first, each naming its CA, subject, usage,
//! SANs, kubeconfig and when it exists. `CERTS` is the single place a certificate is defined;
//! `specs` resolves the rows against a plan, `check_tree` proves the order.

use crate::spec::Plan;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Usage {
    Ca,
    Server,
    Client,
    ServerClient,
}

/// The subject's common name.
#[derive(Debug, Clone, Copy)]
pub enum Cn {
    Fixed(&'static str),
    /// The node name (etcd's member certificates).
    Node,
    /// `system:node:<node name>` (the kubelet's identities).
    NodeUser,
}

/// Subject alternative names.
#[derive(Debug, Clone, Copy)]
pub enum Sans {
    None,
    /// localhost, the node name, loopback and the plan's bind, advertise and local addresses.
    Local,
    /// The `kubernetes` Service names and first IP, then `Local`, the host's end of the node link
    /// (where the node reaches it), then the profile's extraSANs.
    ApiServer,
    /// localhost, the node name, loopback and the node's address (its end of the node link).
    Node,
}

/// When a certificate is part of the environment.
#[derive(Debug, Clone, Copy)]
pub enum When {
    Always,
    /// While this component is enabled.
    Component(&'static str),
}

/// One row of the certificate table.
#[derive(Debug, Clone, Copy)]
pub struct Cert {
    /// File stem under `pki/` (`etcd/server` -> `pki/etcd/server.crt` + `.key`).
    pub name: &'static str,
    /// Issuing CA (a row with `usage: Usage::Ca` above this one); `None` for a self-signed CA.
    pub ca: Option<&'static str>,
    pub cn: Cn,
    /// Organizations: the groups of a client identity.
    pub orgs: &'static [&'static str],
    pub usage: Usage,
    pub sans: Sans,
    /// A kubeconfig `kubeconfig/<name>.kubeconfig` is written for this client certificate.
    pub kubeconfig: Option<&'static str>,
    pub when: When,
}

/// What a row does not say: a client certificate of the cluster CA, always there.
const CLIENT: Cert = Cert {
    name: "",
    ca: Some("ca"),
    cn: Cn::Fixed(""),
    orgs: &[],
    usage: Usage::Client,
    sans: Sans::None,
    kubeconfig: None,
    when: When::Always,
};

const fn ca(name: &'static str, cn: &'static str) -> Cert {
    Cert {
        name,
        ca: None,
        cn: Cn::Fixed(cn),
        usage: Usage::Ca,
        ..CLIENT
    }
}

/// Every certificate, CAs before the certificates they sign.
pub const CERTS: &[Cert] = &[
    ca("ca", "kubernetes"),
    ca("front-proxy-ca", "front-proxy-ca"),
    Cert {
        when: When::Component("etcd"),
        ..ca("etcd/ca", "etcd-ca")
    },
    Cert {
        name: "apiserver",
        cn: Cn::Fixed("kube-apiserver"),
        usage: Usage::Server,
        sans: Sans::ApiServer,
        ..CLIENT
    },
    Cert {
        name: "apiserver-kubelet-client",
        cn: Cn::Fixed("kube-apiserver-kubelet-client"),
        ..CLIENT
    },
    Cert {
        name: "apiserver-etcd-client",
        ca: Some("etcd/ca"),
        cn: Cn::Fixed("kube-apiserver-etcd-client"),
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "front-proxy-client",
        ca: Some("front-proxy-ca"),
        cn: Cn::Fixed("front-proxy-client"),
        ..CLIENT
    },
    Cert {
        name: "etcd/server",
        ca: Some("etcd/ca"),
        cn: Cn::Node,
        usage: Usage::ServerClient,
        sans: Sans::Local,
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "etcd/peer",
        ca: Some("etcd/ca"),
        cn: Cn::Node,
        usage: Usage::ServerClient,
        sans: Sans::Local,
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "etcd/healthcheck-client",
        ca: Some("etcd/ca"),
        cn: Cn::Fixed("kube-etcd-healthcheck-client"),
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "admin",
        cn: Cn::Fixed("kubernetes-admin"),
        orgs: &["system:masters"],
        kubeconfig: Some("admin"),
        ..CLIENT
    },
    Cert {
        name: "controller-manager",
        cn: Cn::Fixed("system:kube-controller-manager"),
        kubeconfig: Some("controller-manager"),
        when: When::Component("kube-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "controller-manager-server",
        cn: Cn::Fixed("kube-controller-manager"),
        usage: Usage::Server,
        sans: Sans::Local,
        when: When::Component("kube-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "scheduler",
        cn: Cn::Fixed("system:kube-scheduler"),
        kubeconfig: Some("scheduler"),
        when: When::Component("kube-scheduler"),
        ..CLIENT
    },
    Cert {
        name: "scheduler-server",
        cn: Cn::Fixed("kube-scheduler"),
        usage: Usage::Server,
        sans: Sans::Local,
        when: When::Component("kube-scheduler"),
        ..CLIENT
    },
    Cert {
        name: "cloud-controller-manager",
        cn: Cn::Fixed("system:cloud-controller-manager"),
        kubeconfig: Some("cloud-controller-manager"),
        when: When::Component("cloud-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "cloud-controller-manager-server",
        cn: Cn::Fixed("cloud-controller-manager"),
        usage: Usage::Server,
        sans: Sans::Local,
        when: When::Component("cloud-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "kubelet",
        cn: Cn::NodeUser,
        orgs: &["system:nodes"],
        usage: Usage::Server,
        sans: Sans::Node,
        when: When::Component("kubelet"),
        ..CLIENT
    },
    Cert {
        name: "kubelet-client",
        cn: Cn::NodeUser,
        orgs: &["system:nodes"],
        kubeconfig: Some("kubelet"),
        when: When::Component("kubelet"),
        ..CLIENT
    },
    Cert {
        name: "kube-proxy",
        cn: Cn::Fixed("system:kube-proxy"),
        kubeconfig: Some("kube-proxy"),
        when: When::Component("kube-proxy"),
        ..CLIENT
    },
];

/// Every leaf names a CA of the table listed before it, and names are unique: issuing can then go
/// down the table once. A unit test holds `CERTS` to this.
pub fn check_tree(table: &[Cert]) -> Result<(), TreeError> {
    for (i, cert) in table.iter().enumerate() {
        let earlier = &table[..i];
        if earlier.iter().any(|c| c.name == cert.name) {
            return Err(TreeError::Duplicate(cert.name));
        }
        match (cert.usage, cert.ca) {
            (Usage::Ca, None) => {}
            (Usage::Ca, Some(_)) => return Err(TreeError::CaWithIssuer(cert.name)),
            (_, None) => return Err(TreeError::NoCa(cert.name)),
            (_, Some(ca)) => {
                if !earlier.iter().any(|c| c.name == ca && c.usage == Usage::Ca) {
                    return Err(TreeError::CaNotBefore {
                        leaf: cert.name,
                        ca,
                    });
                }
            }
        }
    }
    Ok(())
}

/// What is wrong with a certificate table.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    #[error("certificate {0} is listed twice")]
    Duplicate(&'static str),
    #[error("CA {0} must be self-signed (ca: None)")]
    CaWithIssuer(&'static str),
    #[error("leaf {0} names no CA")]
    NoCa(&'static str),
    #[error("leaf {leaf} is signed by {ca}, which is not a CA listed before it")]
    CaNotBefore {
        leaf: &'static str,
        ca: &'static str,
    },
}

/// One certificate of the environment, resolved against a plan. Its serialized form is hashed into
/// the manifest to decide reissues: keep the fields and their order.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CertSpec {
    pub name: String,
    pub ca: Option<&'static str>,
    pub cn: String,
    pub orgs: Vec<String>,
    pub usage: Usage,
    pub sans: Vec<String>,
    pub kubeconfig: Option<&'static str>,
    /// The component it exists for (`When::Component`).
    pub component: Option<&'static str>,
}

/// The certificates of this plan, CAs first.
pub fn specs(plan: &Plan) -> Vec<CertSpec> {
    specs_of(CERTS, plan)
}

pub fn specs_of(table: &[Cert], plan: &Plan) -> Vec<CertSpec> {
    let node = &plan.node().name;
    let mut local = vec![
        "localhost".to_string(),
        node.clone(),
        "127.0.0.1".into(),
        "::1".into(),
    ];
    for ip in [plan.bind, plan.advertise, plan.local] {
        if !ip.is_unspecified() {
            local.push(ip.to_string());
        }
    }
    let domain = &plan.profile.network.dns_domain;
    let mut apiserver = vec![
        "kubernetes".to_string(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        format!("kubernetes.default.svc.{domain}"),
        plan.first_service_ip.to_string(),
    ];
    apiserver.extend(local.iter().cloned());
    apiserver.push(plan.node().link.host.to_string());
    apiserver.extend(plan.profile.network.extra_sans.iter().cloned());

    table
        .iter()
        .filter(|c| match c.when {
            When::Always => true,
            When::Component(name) => plan.enabled(name),
        })
        .map(|c| {
            let sans = match c.sans {
                Sans::None => vec![],
                Sans::Local => local.clone(),
                Sans::ApiServer => apiserver.clone(),
                Sans::Node => vec![
                    "localhost".to_string(),
                    node.clone(),
                    "127.0.0.1".into(),
                    "::1".into(),
                    plan.node().link.node.to_string(),
                ],
            };
            let mut uniq: Vec<String> = Vec::new();
            for s in sans {
                if !uniq.contains(&s) {
                    uniq.push(s);
                }
            }
            CertSpec {
                name: c.name.into(),
                ca: c.ca,
                cn: match c.cn {
                    Cn::Fixed(cn) => cn.to_string(),
                    Cn::Node => node.clone(),
                    Cn::NodeUser => format!("system:node:{node}"),
                },
                orgs: c.orgs.iter().map(|s| s.to_string()).collect(),
                usage: c.usage,
                sans: uniq,
                kubeconfig: c.kubeconfig,
                component: match c.when {
                    When::Always => None,
                    When::Component(name) => Some(name),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_table_is_a_tree_in_issuing_order() {
        check_tree(CERTS).unwrap();
    }

    #[test]
    fn a_broken_tree_is_refused() {
        let leaf = Cert {
            name: "leaf",
            cn: Cn::Fixed("leaf"),
            ..CLIENT
        };
        // The leaf's CA comes after it.
        let e = check_tree(&[leaf, ca("ca", "kubernetes")]).unwrap_err();
        assert_eq!(
            e,
            TreeError::CaNotBefore {
                leaf: "leaf",
                ca: "ca"
            }
        );
        assert!(e.to_string().contains("not a CA listed before"), "{e}");
        // Signed by a leaf.
        let other = Cert {
            name: "other",
            ca: Some("leaf"),
            ..leaf
        };
        assert_eq!(
            check_tree(&[ca("ca", "k"), leaf, other]),
            Err(TreeError::CaNotBefore {
                leaf: "other",
                ca: "leaf"
            })
        );
        // No CA at all, a CA with an issuer, a duplicate.
        assert_eq!(
            check_tree(&[Cert { ca: None, ..leaf }]),
            Err(TreeError::NoCa("leaf"))
        );
        let with_issuer = Cert {
            ca: Some("x"),
            ..ca("ca", "k")
        };
        assert_eq!(
            check_tree(&[with_issuer]),
            Err(TreeError::CaWithIssuer("ca"))
        );
        assert_eq!(
            check_tree(&[ca("ca", "k"), ca("ca", "k")]),
            Err(TreeError::Duplicate("ca"))
        );
    }
}
