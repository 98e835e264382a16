//! The certificate table: one row per certificate, CAs first, each naming its CA, subject, usage,
//! SANs, kubeconfig, when it exists and whether each node has its own. `CERTS` is the single place
//! a certificate is defined; `specs` resolves the rows against a plan (a per-node row once per
//! node), `check_tree` proves the order.

use crate::spec::hosts::OnHosts;
use crate::spec::plan::NodePlan;
use crate::spec::profile::HostRole;
use crate::spec::{paths, Plan};

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
    /// localhost, the node name, loopback and the plan's bind, advertise and local addresses (and
    /// across hosts the DNS name of this host's address, if it was given one).
    Local,
    /// The `kubernetes` Service names and first IP, then `Local`, the host's end of every node's
    /// link (where that node reaches it), then the profile's extraSANs.
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

/// Whose a certificate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The environment's, once (its node-dependent values are the first node's: etcd's member).
    Cluster,
    /// Every node's own, made from that node's name and link, as kubeadm's certlist.go fills a
    /// certificate in for the node it runs on (configMutators: setCommonNameToNodeName) and gives
    /// each node a kubelet.conf of `system:node:<name>`. The first node's keeps the row's name and
    /// paths; another's is `<name>@<node>` (`NodePlan::qualified`) with its files under
    /// `nodes/<node>/` (`NodePlan::file`), as its components' are.
    Node,
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
    pub scope: Scope,
    /// The hosts of an environment across hosts whose state dirs hold it (its key, and a CA's
    /// certificate; a CA's key is on the control-plane hosts only): least privilege, each host
    /// only what its components use.
    pub hosts: OnHosts,
}

/// What a row does not say: a client certificate of the cluster CA, always there, the environment's.
const CLIENT: Cert = Cert {
    name: "",
    ca: Some("ca"),
    cn: Cn::Fixed(""),
    orgs: &[],
    usage: Usage::Client,
    sans: Sans::None,
    kubeconfig: None,
    when: When::Always,
    scope: Scope::Cluster,
    hosts: OnHosts::Every,
};

/// What only the control-plane hosts' components use.
const CONTROL_PLANE: OnHosts = OnHosts::With(HostRole::ControlPlane);

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
    // A host that joins later is given the cluster CA's certificate (`hosts[].join.caFile`),
    // not issued anything.
    Cert {
        hosts: OnHosts::PreIssued,
        ..ca("ca", "kubernetes")
    },
    Cert {
        hosts: CONTROL_PLANE,
        ..ca("front-proxy-ca", "front-proxy-ca")
    },
    Cert {
        when: When::Component("etcd"),
        hosts: CONTROL_PLANE,
        ..ca("etcd/ca", "etcd-ca")
    },
    Cert {
        name: "apiserver",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("kube-apiserver"),
        usage: Usage::Server,
        sans: Sans::ApiServer,
        ..CLIENT
    },
    Cert {
        name: "apiserver-kubelet-client",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("kube-apiserver-kubelet-client"),
        ..CLIENT
    },
    Cert {
        name: "apiserver-etcd-client",
        hosts: CONTROL_PLANE,
        ca: Some("etcd/ca"),
        cn: Cn::Fixed("kube-apiserver-etcd-client"),
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "front-proxy-client",
        hosts: CONTROL_PLANE,
        ca: Some("front-proxy-ca"),
        cn: Cn::Fixed("front-proxy-client"),
        ..CLIENT
    },
    Cert {
        name: "etcd/server",
        hosts: OnHosts::With(HostRole::Etcd),
        ca: Some("etcd/ca"),
        cn: Cn::Node,
        usage: Usage::ServerClient,
        sans: Sans::Local,
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "etcd/peer",
        hosts: OnHosts::With(HostRole::Etcd),
        ca: Some("etcd/ca"),
        cn: Cn::Node,
        usage: Usage::ServerClient,
        sans: Sans::Local,
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "etcd/healthcheck-client",
        hosts: OnHosts::With(HostRole::Etcd),
        ca: Some("etcd/ca"),
        cn: Cn::Fixed("kube-etcd-healthcheck-client"),
        when: When::Component("etcd"),
        ..CLIENT
    },
    Cert {
        name: "admin",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("kubernetes-admin"),
        orgs: &["system:masters"],
        kubeconfig: Some("admin"),
        ..CLIENT
    },
    Cert {
        name: "controller-manager",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("system:kube-controller-manager"),
        kubeconfig: Some("controller-manager"),
        when: When::Component("kube-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "controller-manager-server",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("kube-controller-manager"),
        usage: Usage::Server,
        sans: Sans::Local,
        when: When::Component("kube-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "scheduler",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("system:kube-scheduler"),
        kubeconfig: Some("scheduler"),
        when: When::Component("kube-scheduler"),
        ..CLIENT
    },
    Cert {
        name: "scheduler-server",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("kube-scheduler"),
        usage: Usage::Server,
        sans: Sans::Local,
        when: When::Component("kube-scheduler"),
        ..CLIENT
    },
    Cert {
        name: "cloud-controller-manager",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("system:cloud-controller-manager"),
        kubeconfig: Some("cloud-controller-manager"),
        when: When::Component("cloud-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "cloud-controller-manager-server",
        hosts: CONTROL_PLANE,
        cn: Cn::Fixed("cloud-controller-manager"),
        usage: Usage::Server,
        sans: Sans::Local,
        when: When::Component("cloud-controller-manager"),
        ..CLIENT
    },
    Cert {
        name: "kubelet",
        hosts: OnHosts::PreIssued,
        cn: Cn::NodeUser,
        orgs: &["system:nodes"],
        usage: Usage::Server,
        sans: Sans::Node,
        when: When::Component("kubelet"),
        scope: Scope::Node,
        ..CLIENT
    },
    // Each node its own identity: the Node authorizer and NodeRestriction let it touch only its
    // own Node and pods.
    Cert {
        name: "kubelet-client",
        hosts: OnHosts::PreIssued,
        cn: Cn::NodeUser,
        orgs: &["system:nodes"],
        kubeconfig: Some("kubelet"),
        when: When::Component("kubelet"),
        scope: Scope::Node,
        ..CLIENT
    },
    // One identity for every node (kube-proxy's RBAC, system:node-proxier, is not per node), but
    // each node its own key and kubeconfig: that names the API server at the node's end of its link.
    Cert {
        name: "kube-proxy",
        hosts: OnHosts::PreIssued,
        cn: Cn::Fixed("system:kube-proxy"),
        kubeconfig: Some("kube-proxy"),
        when: When::Component("kube-proxy"),
        scope: Scope::Node,
        ..CLIENT
    },
];

/// Every leaf names a CA of the table listed before it, and names are unique: issuing can then go
/// down the table once. A CA is the environment's (its leaves name it by the row's name), and no
/// name holds `@`, which sets a further node's certificate apart (`kubelet@worker-1`). A unit
/// test holds `CERTS` to this.
pub fn check_tree(table: &[Cert]) -> Result<(), TreeError> {
    for (i, cert) in table.iter().enumerate() {
        let earlier = &table[..i];
        if earlier.iter().any(|c| c.name == cert.name) {
            return Err(TreeError::Duplicate(cert.name));
        }
        if cert.name.contains('@') {
            return Err(TreeError::At(cert.name));
        }
        match (cert.usage, cert.ca) {
            (Usage::Ca, _) if cert.scope == Scope::Node => {
                return Err(TreeError::CaPerNode(cert.name))
            }
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
    #[error("certificate {0}: a name holds no '@' (it sets a further node's certificate apart)")]
    At(&'static str),
    #[error("CA {0} must be the environment's (scope: Scope::Cluster)")]
    CaPerNode(&'static str),
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

/// One certificate of the environment, resolved against a plan: a per-node row's on one node. Its
/// serialized form is hashed into the manifest to decide reissues: keep the serialized fields and
/// their order (the skipped ones say where it goes, which its name already does).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CertSpec {
    /// The row's name; `<name>@<node>` on a node after the first (`Scope::Node`).
    pub name: String,
    pub ca: Option<&'static str>,
    pub cn: String,
    pub orgs: Vec<String>,
    pub usage: Usage,
    pub sans: Vec<String>,
    pub kubeconfig: Option<&'static str>,
    /// The component it exists for (`When::Component`).
    pub component: Option<&'static str>,
    /// The node (index in `Plan::nodes`) a per-node certificate is of; `None`: the environment's.
    #[serde(skip)]
    pub node: Option<usize>,
    /// Its certificate in the state dir: `pki/<row>.crt`, under `nodes/<node>/` on a further node.
    #[serde(skip)]
    pub cert_path: String,
    /// Its key, beside the certificate.
    #[serde(skip)]
    pub key_path: String,
    /// The kubeconfig that embeds it: `kubeconfig/<kubeconfig>.kubeconfig`, under `nodes/<node>/`
    /// on a further node.
    #[serde(skip)]
    pub kubeconfig_path: Option<String>,
}

/// The certificates of this plan, CAs first. The same whichever node's view the plan is.
pub fn specs(plan: &Plan) -> Vec<CertSpec> {
    specs_of(CERTS, plan)
}

/// `specs` of another table: each row in table order, a per-node row once per node (in node order).
pub fn specs_of(table: &[Cert], plan: &Plan) -> Vec<CertSpec> {
    // The environment's certificates take the first node's values, whichever view `plan` is.
    let first = &plan.nodes[0];
    let domain = &plan.profile.network.dns_domain;
    let mut apiserver = vec![
        "kubernetes".to_string(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        format!("kubernetes.default.svc.{domain}"),
        plan.first_service_ip.to_string(),
    ];
    apiserver.extend(local_sans(plan, first));
    // Each node reaches the API server at the host's end of its own link (its kubeconfigs say so).
    apiserver.extend(plan.nodes.iter().map(|n| n.link.host.to_string()));
    // Across hosts, a worker host's node reaches the API servers through its load balancer, at
    // the host's end of its link (TLS passes through it).
    apiserver.extend(plan.hosts.iter().map(|h| h.link.host.to_string()));
    apiserver.extend(plan.profile.network.extra_sans.iter().cloned());

    let mut out = Vec::new();
    let on = |c: &&Cert| match c.when {
        When::Always => true,
        When::Component(name) => plan.enabled(name),
    };
    for c in table
        .iter()
        .filter(on)
        .filter(|c| c.hosts.here(&plan.profile))
    {
        match c.scope {
            Scope::Cluster => out.push(resolve(c, plan, first, None, &apiserver)),
            Scope::Node => out.extend(
                plan.nodes
                    .iter()
                    .enumerate()
                    .map(|(i, node)| resolve(c, plan, node, Some(i), &apiserver)),
            ),
        }
    }
    out
}

/// localhost, the node's name, loopback and the plan's bind, advertise and local addresses; across
/// hosts, the DNS name this host's address was given as (`hosts[].address`), so that clients may
/// use the name.
fn local_sans(plan: &Plan, node: &NodePlan) -> Vec<String> {
    let mut local = vec![
        "localhost".to_string(),
        node.name.clone(),
        "127.0.0.1".into(),
        "::1".into(),
    ];
    for ip in [plan.bind, plan.advertise, plan.local] {
        if !ip.is_unspecified() {
            local.push(ip.to_string());
        }
    }
    local.extend(plan.this_host().and_then(|h| h.dns_name.clone()));
    local
}

/// Row `c` on `node` (the first node for the environment's rows; `index` is `Some` for a per-node
/// row's), with the API server's SANs made once.
fn resolve(
    c: &Cert,
    plan: &Plan,
    node: &NodePlan,
    index: Option<usize>,
    apiserver: &[String],
) -> CertSpec {
    let sans = match c.sans {
        Sans::None => vec![],
        Sans::Local => local_sans(plan, node),
        Sans::ApiServer => apiserver.to_vec(),
        Sans::Node => vec![
            "localhost".to_string(),
            node.name.clone(),
            "127.0.0.1".into(),
            "::1".into(),
            node.link.node.to_string(),
        ],
    };
    let mut uniq: Vec<String> = Vec::new();
    for s in sans {
        if !uniq.contains(&s) {
            uniq.push(s);
        }
    }
    // A node's certificate is named and placed as its component's files are: the first node's
    // where the environment's always were.
    let per_node = index.is_some();
    let file = |rel: String| if per_node { node.file(&rel) } else { rel };
    let name = if per_node {
        node.qualified(c.name)
    } else {
        c.name.to_string()
    };
    CertSpec {
        ca: c.ca,
        cn: match c.cn {
            Cn::Fixed(cn) => cn.to_string(),
            Cn::Node => node.name.clone(),
            Cn::NodeUser => format!("system:node:{}", node.name),
        },
        orgs: c.orgs.iter().map(|s| s.to_string()).collect(),
        usage: c.usage,
        sans: uniq,
        kubeconfig: c.kubeconfig,
        component: match c.when {
            When::Always => None,
            When::Component(name) => Some(name),
        },
        node: index,
        cert_path: file(paths::cert(c.name)),
        key_path: file(paths::key(c.name)),
        kubeconfig_path: c.kubeconfig.map(|k| file(paths::kubeconfig(k))),
        name,
    }
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
        // A name with '@' (a further node's), a CA per node.
        assert_eq!(
            check_tree(&[
                ca("ca", "k"),
                Cert {
                    name: "a@b",
                    ..leaf
                }
            ]),
            Err(TreeError::At("a@b"))
        );
        let per_node_ca = Cert {
            scope: Scope::Node,
            ..ca("ca", "k")
        };
        assert_eq!(check_tree(&[per_node_ca]), Err(TreeError::CaPerNode("ca")));
    }

    /// Across hosts, a host given by DNS name has it in every certificate that names its address
    /// (the API server's, etcd's, the controller-manager's and scheduler's), beside the address;
    /// nothing else changes.
    #[test]
    fn a_host_given_by_dns_name_has_it_beside_its_address_in_its_certificates() {
        let (names, found) = crate::spec::resolve::ha_by_name("198.19.254.12");
        let facts = crate::spec::HostFacts {
            host_addresses: found,
            ..crate::spec::HostFacts::fixed(Some("192.0.2.5"))
        };
        for host in ["cp-2", "worker-1"] {
            let set = format!("host={host}");
            let literal = specs(&Plan::for_tests("ha", &[&set]));
            let named = specs(&Plan::for_tests_on("ha", &[&names, &set], &facts));
            assert_eq!(literal.len(), named.len());
            let name = format!("{host}.test");
            let mut with_name = 0;
            for (l, n) in literal.iter().zip(&named) {
                assert_eq!(l.name, n.name);
                let row = CERTS.iter().find(|c| c.name == l.name).map(|c| c.sans);
                let mut expected = l.sans.clone();
                if matches!(row, Some(Sans::Local | Sans::ApiServer)) {
                    expected.push(name.clone());
                    with_name += 1;
                }
                let mut got = n.sans.clone();
                expected.sort();
                got.sort();
                assert_eq!(got, expected, "{host}: {}", l.name);
            }
            // A worker's certificates name its node's link, not the host's address.
            assert_eq!(with_name > 0, host == "cp-2", "{host}");
        }
        let cp2 = specs(&Plan::for_tests_on("ha", &[&names, "host=cp-2"], &facts));
        for cert in ["apiserver", "etcd/server", "etcd/peer"] {
            let spec = cp2.iter().find(|s| s.name == cert).unwrap();
            assert!(
                spec.sans.contains(&"cp-2.test".to_string())
                    && spec.sans.contains(&"198.19.254.12".to_string()),
                "{cert}: {:?}",
                spec.sans
            );
            assert!(
                !spec.sans.iter().any(|s| s == "cp-1.test"),
                "{cert}: only its own"
            );
        }
    }

    #[test]
    fn a_per_node_row_is_resolved_on_every_node_from_its_values() {
        let one = Plan::for_tests("dev", &[]);
        let two = Plan::for_tests("dev", &[]).with_extra_node_for_tests("worker-1");
        let (a, b) = (specs(&one), specs(&two));
        let names = |s: &[CertSpec]| s.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        // Each per-node row once more, right after the first node's, in table order.
        let mut want = names(&a);
        for row in ["kubelet", "kubelet-client", "kube-proxy"] {
            let i = want.iter().position(|n| n == row).unwrap();
            want.insert(i + 1, format!("{row}@worker-1"));
        }
        assert_eq!(names(&b), want);
        // The first node's and the environment's are exactly the one-node plan's, whatever the view
        let json = |s: &CertSpec| serde_json::to_string(s).unwrap();
        for view in [&two, &two.on_node(1)] {
            // (but the API server's, which names every node's end of its link: below).
            for s in specs(view)
                .iter()
                .filter(|s| !s.name.contains('@') && s.name != "apiserver")
            {
                let same = a.iter().find(|o| o.name == s.name).unwrap();
                assert_eq!(json(s), json(same), "{}", s.name);
                assert_eq!(
                    (&s.cert_path, &s.key_path, &s.kubeconfig_path, s.node),
                    (
                        &same.cert_path,
                        &same.key_path,
                        &same.kubeconfig_path,
                        same.node
                    )
                );
            }
        }
        // What is hashed into the manifest: the fields it always had, in their order, not where
        // the files go.
        let fields: Vec<String> = match serde_json::to_value(&a[0]).unwrap() {
            serde_json::Value::Object(m) => m.keys().cloned().collect(),
            other => panic!("{other}"),
        };
        assert_eq!(
            fields,
            [
                "name",
                "ca",
                "cn",
                "orgs",
                "usage",
                "sans",
                "kubeconfig",
                "component"
            ]
        );
        let of = |name: &str| b.iter().find(|s| s.name == name).unwrap();
        let node = &two.nodes[1];
        let serving = of("kubelet@worker-1");
        assert_eq!(serving.cn, "system:node:worker-1");
        assert_eq!(serving.orgs, ["system:nodes"]);
        assert_eq!(
            serving.sans,
            [
                "localhost".to_string(),
                "worker-1".into(),
                "127.0.0.1".into(),
                "::1".into(),
                node.link.node.to_string()
            ]
        );
        assert_eq!(serving.node, Some(1));
        assert_eq!(serving.cert_path, "nodes/worker-1/pki/kubelet.crt");
        assert_eq!(serving.key_path, "nodes/worker-1/pki/kubelet.key");
        assert_eq!(serving.kubeconfig_path, None);
        let client = of("kubelet-client@worker-1");
        assert_eq!(client.cn, "system:node:worker-1");
        assert_eq!(client.kubeconfig, Some("kubelet"));
        assert_eq!(
            client.kubeconfig_path.as_deref(),
            Some("nodes/worker-1/kubeconfig/kubelet.kubeconfig")
        );
        let proxy = of("kube-proxy@worker-1");
        assert_eq!(proxy.cn, "system:kube-proxy");
        assert_eq!(
            proxy.kubeconfig_path.as_deref(),
            Some("nodes/worker-1/kubeconfig/kube-proxy.kubeconfig")
        );
        let first = of("kubelet");
        assert_eq!(
            (first.node, first.cert_path.as_str()),
            (Some(0), "pki/kubelet.crt")
        );
        assert_eq!(of("apiserver").node, None);
        // The API server is reached at every node's end of its link.
        let apiserver = &of("apiserver").sans;
        for n in &two.nodes {
            assert!(
                apiserver.contains(&n.link.host.to_string()),
                "{apiserver:?}"
            );
        }
        assert_eq!(
            apiserver.len(),
            a.iter().find(|s| s.name == "apiserver").unwrap().sans.len() + 1
        );
        // etcd's member stays the first node's.
        assert_eq!(of("etcd/server").cn, "dev");
    }
}
