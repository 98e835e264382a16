//! plan -> artifacts: every file of the state dir, built in memory (PKI, kubeconfigs, configs, units).
//! The state module then writes or checks this tree; nothing here touches the disk except reading the
//! previous state for keys and certificates to keep.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::json;

use crate::components::Component;
use crate::error::Error;
use crate::pki::{self, Ca, CertSpec, Entropy, Key, Usage};
use crate::plan::Plan;
use crate::profile::AUDIT_LEVELS;
use crate::render::{env_file_line, systemd_word, Renderer};
use crate::state::Existing;

pub const MODE_PUBLIC: u32 = 0o644;
pub const MODE_SECRET: u32 = 0o600;

#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub bytes: Vec<u8>,
    pub mode: u32,
}

/// Relative path -> content. BTreeMap: a stable order everywhere it is listed or hashed.
pub type Tree = BTreeMap<String, Artifact>;

pub struct Generated {
    pub tree: Tree,
    /// Certificate name -> spec digest (stored in the manifest to decide reissues).
    pub cert_digests: BTreeMap<String, String>,
    /// What happened to each certificate: created, kept, reissued.
    pub notes: Vec<String>,
}

pub struct Options {
    pub entropy: Entropy,
    /// Replace CAs and keys too.
    pub force: bool,
}

pub fn generate(plan: &Plan, old: &Existing, opts: &Options) -> Result<Generated, Error> {
    let renderer = Renderer::new()?;
    let mut g = Generated {
        tree: Tree::new(),
        cert_digests: BTreeMap::new(),
        notes: Vec::new(),
    };
    let certs = issue_pki(plan, old, opts, &mut g)?;
    kubeconfigs(plan, &renderer, &certs, &mut g)?;
    configs(plan, &renderer, old, opts, &mut g)?;
    units(plan, &renderer, &mut g)?;
    addons(plan, &renderer, &mut g)?;
    let profile = plan.profile.to_yaml();
    put(
        &mut g.tree,
        "profile.yaml",
        profile.into_bytes(),
        MODE_PUBLIC,
    );
    Ok(g)
}

fn put(tree: &mut Tree, path: &str, bytes: Vec<u8>, mode: u32) {
    tree.insert(path.to_string(), Artifact { bytes, mode });
}

fn artifact_err(plan: &Plan, rel: &str, message: String) -> Error {
    Error::Artifact {
        path: plan.state_dir.join(rel),
        message,
        fix: "run `kubeunit gen --force` to replace the PKI".into(),
    }
}

/// The key of every certificate, and whether it is the previous run's: kept when it is still usable
/// (a CA's when it matches the CA certificate; a leaf's when it has the profile's algorithm), the
/// rest generated on every core, since RSA key generation is most of `gen`'s time.
fn reuse_or_generate_keys(
    plan: &Plan,
    old: &Existing,
    opts: &Options,
    specs: &[CertSpec],
) -> Result<Vec<Option<(Key, bool)>>, Error> {
    let alg = plan.profile.pki.algorithm;
    let mut keys: Vec<Option<(Key, bool)>> = specs
        .iter()
        .map(|spec| {
            if opts.force {
                return None;
            }
            let key = Key::from_pem(&old.read(&format!("pki/{}.key", spec.name))?).ok()?;
            let usable = if spec.usage == Usage::Ca {
                old.read(&format!("pki/{}.crt", spec.name))
                    .is_some_and(|c| pki::cert_matches_key(&c, &key))
            } else {
                key.algorithm_kind() == alg
            };
            usable.then_some((key, true))
        })
        .collect();
    let missing: Vec<usize> = (0..specs.len()).filter(|i| keys[*i].is_none()).collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(missing.len().max(1));
    let generated: Vec<(usize, Result<Key, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let mine: Vec<usize> = missing.iter().copied().skip(w).step_by(workers).collect();
                s.spawn(move || {
                    mine.into_iter()
                        .map(|i| {
                            (
                                i,
                                Key::generate(
                                    alg,
                                    &opts.entropy,
                                    &format!("key:{}", specs[i].name),
                                ),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for (i, key) in generated {
        let key = key.map_err(|e| artifact_err(plan, &format!("pki/{}.key", specs[i].name), e))?;
        keys[i] = Some((key, false));
    }
    Ok(keys)
}

/// Name -> (certificate PEM, private key PEM) of every issued certificate.
type Issued = BTreeMap<String, (String, String)>;

fn issue_pki(
    plan: &Plan,
    old: &Existing,
    opts: &Options,
    g: &mut Generated,
) -> Result<Issued, Error> {
    let alg = plan.profile.pki.algorithm;
    let specs = pki::cert_specs(plan);
    let mut keys = reuse_or_generate_keys(plan, old, opts, &specs)?;
    let mut cas: BTreeMap<String, Ca> = BTreeMap::new();
    let mut issued = Issued::new();
    for (spec, slot) in specs.iter().zip(keys.iter_mut()) {
        let crt = format!("pki/{}.crt", spec.name);
        let key_path = format!("pki/{}.key", spec.name);
        let (key, reused) = slot
            .take()
            .ok_or_else(|| Error::Other(format!("internal: no key for {}", spec.name)))?;
        let old_cert = if opts.force { None } else { old.read(&crt) };

        let (cert_pem, key) = if spec.usage == Usage::Ca {
            // CAs survive re-runs (only --force replaces them), and a CA the user put in place is used as is.
            match old_cert {
                Some(c) if reused => {
                    g.notes.push(format!("{crt}: kept"));
                    let d = old.cert_digest(&spec.name).unwrap_or_default();
                    g.cert_digests.insert(spec.name.clone(), d);
                    (c, key)
                }
                _ => {
                    let digest = pki::spec_digest(spec, plan, &key, None);
                    let (c, k) = pki::issue(spec, plan, key, &digest, None)
                        .map_err(|e| artifact_err(plan, &crt, e))?;
                    g.notes.push(format!("{crt}: created"));
                    g.cert_digests.insert(spec.name.clone(), digest);
                    (c, k)
                }
            }
        } else {
            let ca_name = spec.ca.unwrap_or("ca");
            let ca = cas.get(ca_name).ok_or_else(|| {
                Error::Other(format!("internal: CA {ca_name} listed after {}", spec.name))
            })?;
            let digest = pki::spec_digest(spec, plan, &key, Some(&ca.cert_pem));
            let keep = old_cert.filter(|_| {
                old.cert_digest(&spec.name).as_deref() == Some(digest.as_str()) && old.intact(&crt)
            });
            let result = match keep {
                Some(c) => {
                    g.notes.push(format!("{crt}: kept"));
                    (c, key)
                }
                None => {
                    let verb = if old.read(&crt).is_some() {
                        "reissued"
                    } else {
                        "created"
                    };
                    g.notes.push(format!("{crt}: {verb}"));
                    pki::issue(spec, plan, key, &digest, Some(ca))
                        .map_err(|e| artifact_err(plan, &crt, e))?
                }
            };
            g.cert_digests.insert(spec.name.clone(), digest);
            result
        };
        let key_pem = key
            .private_pem()
            .map_err(|e| artifact_err(plan, &key_path, e))?;
        put(
            &mut g.tree,
            &crt,
            cert_pem.clone().into_bytes(),
            MODE_PUBLIC,
        );
        put(
            &mut g.tree,
            &key_path,
            key_pem.clone().into_bytes(),
            MODE_SECRET,
        );
        if spec.usage == Usage::Ca {
            let ca = Ca::from_existing(&cert_pem, key).map_err(|e| artifact_err(plan, &crt, e))?;
            cas.insert(spec.name.clone(), ca);
        }
        issued.insert(spec.name.clone(), (cert_pem, key_pem));
    }

    // Service-account signing key pair: no certificate; kept across runs unless the algorithm changes.
    let sa = match old.read("pki/sa.key").and_then(|p| Key::from_pem(&p).ok()) {
        Some(k) if !opts.force && k.algorithm_kind() == alg => k,
        _ => Key::generate(alg, &opts.entropy, "key:sa")
            .map_err(|e| artifact_err(plan, "pki/sa.key", e))?,
    };
    let sa_pub = sa
        .public_pem()
        .map_err(|e| artifact_err(plan, "pki/sa.pub", e))?;
    let sa_key = sa
        .private_pem()
        .map_err(|e| artifact_err(plan, "pki/sa.key", e))?;
    put(&mut g.tree, "pki/sa.key", sa_key.into_bytes(), MODE_SECRET);
    put(&mut g.tree, "pki/sa.pub", sa_pub.into_bytes(), MODE_PUBLIC);
    Ok(issued)
}

fn kubeconfigs(plan: &Plan, r: &Renderer, certs: &Issued, g: &mut Generated) -> Result<(), Error> {
    let ca = &certs
        .get("ca")
        .ok_or_else(|| Error::Other("internal: no cluster CA".into()))?
        .0;
    let specs: Vec<CertSpec> = pki::cert_specs(plan);
    for spec in specs.iter().filter(|s| s.kubeconfig.is_some()) {
        let file = spec.kubeconfig.unwrap_or_default();
        let (cert, key) = &certs[&spec.name];
        let cluster = format!("kubeunit-{}", plan.name());
        let data = json!({
            "env": plan.name(),
            "cluster": cluster,
            "server": plan.apiserver_url(),
            "user": spec.cn,
            "context": format!("{}@{}", spec.cn, cluster),
            "ca_data": B64.encode(ca),
            "cert_data": B64.encode(cert),
            "key_data": B64.encode(key),
        });
        let text = r.render("kubeconfig", &data)?;
        put(
            &mut g.tree,
            &format!("kubeconfig/{file}.kubeconfig"),
            text.into_bytes(),
            MODE_SECRET,
        );
    }
    Ok(())
}

/// Feature gates of one component: the profile's global ones (Kubernetes components), then its own.
pub fn feature_gates(plan: &Plan, c: &Component) -> BTreeMap<String, bool> {
    let mut gates = if c.kubernetes {
        plan.profile.feature_gates.clone()
    } else {
        BTreeMap::new()
    };
    gates.extend(plan.profile.component(c.name).feature_gates);
    gates
}

fn configs(
    plan: &Plan,
    r: &Renderer,
    old: &Existing,
    opts: &Options,
    g: &mut Generated,
) -> Result<(), Error> {
    let prof = &plan.profile;
    let policy = &prof.audit.policy;
    let audit = if AUDIT_LEVELS.contains(&policy.as_str()) {
        r.render("audit-policy", &json!({ "level": policy }))?
    } else {
        std::fs::read_to_string(policy).map_err(|e| Error::Profile {
            source_name: "profile".into(),
            field: "audit.policy".into(),
            message: format!("cannot read the policy file (value: {policy}): {e}"),
            fix: "give a readable audit Policy file or a level such as Metadata".into(),
        })?
    };
    put(
        &mut g.tree,
        "config/audit-policy.yaml",
        audit.into_bytes(),
        MODE_PUBLIC,
    );

    if plan.enabled("kube-scheduler") {
        let text = r.render(
            "scheduler-config",
            &json!({ "kubeconfig": plan.path("kubeconfig/scheduler.kubeconfig") }),
        )?;
        put(
            &mut g.tree,
            "config/scheduler-config.yaml",
            text.into_bytes(),
            MODE_PUBLIC,
        );
    }
    let runtime_endpoint = format!("unix://{}", prof.containerd.socket.display());
    if let Some(c) = crate::components::find("kubelet").filter(|c| plan.enabled(c.name)) {
        let data = json!({
            "address": plan.advertise.to_string(),
            "port": prof.ports.kubelet,
            "healthz_port": prof.ports.kubelet_healthz,
            "tls_cert": plan.path("pki/kubelet.crt"),
            "tls_key": plan.path("pki/kubelet.key"),
            "client_ca": plan.path("pki/ca.crt"),
            "dns_domain": prof.network.dns_domain,
            "dns_ip": plan.dns_ip.to_string(),
            "runtime_endpoint": runtime_endpoint,
            "feature_gates": feature_gates(plan, c),
        });
        let text = r.render("kubelet-config", &data)?;
        put(
            &mut g.tree,
            "config/kubelet-config.yaml",
            text.into_bytes(),
            MODE_PUBLIC,
        );
    }
    if let Some(c) = crate::components::find("kube-proxy").filter(|c| plan.enabled(c.name)) {
        let loopback = |port| crate::plan::host_port(std::net::Ipv4Addr::LOCALHOST.into(), port);
        let data = json!({
            "kubeconfig": plan.path("kubeconfig/kube-proxy.kubeconfig"),
            "node_name": plan.node_name,
            "pod_cidr": plan.pod_cidr.to_string(),
            "healthz": loopback(prof.ports.kube_proxy_healthz),
            "metrics": loopback(prof.ports.kube_proxy_metrics),
            "feature_gates": feature_gates(plan, c),
        });
        let text = r.render("kube-proxy-config", &data)?;
        put(
            &mut g.tree,
            "config/kube-proxy-config.yaml",
            text.into_bytes(),
            MODE_PUBLIC,
        );
    }
    if plan.enabled("containerd") || plan.enabled("kubelet") {
        let data = json!({
            "env": plan.name(),
            "root": plan.data("containerd/root"),
            "state": format!("/run/kubeunit/{}/containerd", plan.name()),
            "socket": prof.containerd.socket,
            "cni_bin_dir": prof.containerd.cni_bin_dir,
            "cni_conf_dir": plan.path("config/cni"),
        });
        let text = r.render("containerd", &data)?;
        put(
            &mut g.tree,
            "config/containerd.toml",
            text.into_bytes(),
            MODE_PUBLIC,
        );
        let default_route = if plan.pod_cidr.network().is_ipv6() {
            "::/0"
        } else {
            "0.0.0.0/0"
        };
        let data = json!({
            "env": plan.name(),
            "pod_cidr": plan.pod_cidr.to_string(),
            "default_route": default_route,
        });
        let text = r.render("cni-bridge", &data)?;
        put(
            &mut g.tree,
            "config/cni/10-kubeunit-bridge.conflist",
            text.into_bytes(),
            MODE_PUBLIC,
        );
    }
    if prof.encryption.enabled {
        // The key is kept across runs: replacing it would make every stored Secret unreadable.
        let existing = old
            .read("pki/encryption.key")
            .map(|k| k.trim().to_string())
            .filter(|k| !opts.force && B64.decode(k).map(|b| b.len() == 32).unwrap_or(false));
        let key = existing.unwrap_or_else(|| B64.encode(opts.entropy.bytes("encryption-key", 32)));
        put(
            &mut g.tree,
            "pki/encryption.key",
            format!("{key}\n").into_bytes(),
            MODE_SECRET,
        );
        let text = r.render("encryption-config", &json!({ "key": key }))?;
        put(
            &mut g.tree,
            "config/encryption-config.yaml",
            text.into_bytes(),
            MODE_SECRET,
        );
    }
    Ok(())
}

/// Manifests `start` applies once the API server is ready (see `bootstrap`).
fn addons(plan: &Plan, r: &Renderer, g: &mut Generated) -> Result<(), Error> {
    if !plan.enabled("kube-apiserver") {
        return Ok(());
    }
    let prof = &plan.profile;
    let rbac = r.render(
        "addon-rbac",
        &json!({ "cloud_controller_manager": plan.enabled("cloud-controller-manager") }),
    )?;
    put(
        &mut g.tree,
        "addons/00-rbac.yaml",
        rbac.into_bytes(),
        MODE_PUBLIC,
    );
    if prof.addons.coredns {
        let data = json!({
            "dns_ip": plan.dns_ip.to_string(),
            "dns_domain": prof.network.dns_domain,
            "image": prof.addons.coredns_image,
        });
        put(
            &mut g.tree,
            "addons/10-coredns.yaml",
            r.render("addon-coredns", &data)?.into_bytes(),
            MODE_PUBLIC,
        );
    }
    if prof.addons.default_storage_class {
        let text = r.render("addon-storageclass", &json!({}))?;
        put(
            &mut g.tree,
            "addons/20-storageclass.yaml",
            text.into_bytes(),
            MODE_PUBLIC,
        );
    }
    Ok(())
}

/// The command line of a component: binary, binary args, kubeunit's flags with extraArgs merged in.
pub fn command_line(plan: &Plan, c: &Component) -> Vec<String> {
    let settings = plan.profile.component(c.name);
    let mut flags = (c.flags)(plan);
    if c.kubernetes {
        flags.push(("v".into(), plan.profile.logging.verbosity.to_string()));
    }
    let gates = feature_gates(plan, c);
    if !c.gates_in_config && !gates.is_empty() {
        let list: Vec<String> = gates.iter().map(|(k, v)| format!("{k}={v}")).collect();
        flags.push(("feature-gates".into(), list.join(",")));
    }
    for (name, value) in &settings.extra_args {
        match (flags.iter().position(|(n, _)| n == name), value) {
            (Some(i), Some(v)) => flags[i].1 = v.clone(),
            (Some(i), None) => {
                flags.remove(i);
            }
            (None, Some(v)) => flags.push((name.clone(), v.clone())),
            (None, None) => {}
        }
    }
    let mut argv = vec![plan.binary(c).to_string_lossy().into_owned()];
    argv.extend(settings.binary_args.iter().cloned());
    argv.extend(flags.into_iter().map(|(n, v)| format!("--{n}={v}")));
    argv
}

fn units(plan: &Plan, r: &Renderer, g: &mut Generated) -> Result<(), Error> {
    let version = env!("CARGO_PKG_VERSION");
    let slice = plan.slice_name();
    let text = r.render(
        "slice",
        &json!({ "version": version, "env": plan.name(), "slice": slice }),
    )?;
    put(
        &mut g.tree,
        &format!("units/{slice}"),
        text.into_bytes(),
        MODE_PUBLIC,
    );
    for c in plan.components() {
        let unit = |n: &&str| plan.unit_name(n);
        let wants: Vec<String> = c.needs.iter().map(unit).collect();
        let mut after = wants.clone();
        after.extend(
            c.after_if_enabled
                .iter()
                .filter(|n| plan.enabled(n))
                .map(unit),
        );
        let env = plan.profile.component(c.name).env;
        let env_file = if env.is_empty() {
            None
        } else {
            let rel = format!("env/{}.env", c.name);
            let text: String = env.iter().map(|(k, v)| env_file_line(k, v)).collect();
            put(&mut g.tree, &rel, text.into_bytes(), MODE_SECRET);
            Some(plan.path(&rel))
        };
        let exec: Vec<String> = command_line(plan, c)
            .iter()
            .map(|a| systemd_word(a))
            .collect();
        let data = json!({
            "version": version,
            "env": plan.name(),
            "component": c.name,
            "wants": wants,
            "after": after,
            "type": if c.notify { "notify" } else { "exec" },
            "notify": c.notify,
            "exec": exec,
            "env_file": env_file,
            "delegate": c.delegate,
            "kill_mode": c.kill_mode,
            "slice": slice,
            "syslog_identifier": format!("kubeunit-{}-{}", plan.name(), c.name),
        });
        let text = r.render("service", &data)?;
        put(
            &mut g.tree,
            &format!("units/{}", plan.unit_name(c.name)),
            text.into_bytes(),
            MODE_PUBLIC,
        );
    }
    Ok(())
}
