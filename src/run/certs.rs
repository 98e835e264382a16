//! Certificates at run time: when each one of the state dir expires (`certs check-expiration`,
//! `status`, preflight), and which components use it (those `certs renew` restarts).
//!
//! Which component uses which certificate is read from what the component is given, not from a
//! list: a component uses a certificate when its unit (command line, environment file) or one of
//! its config files names the certificate, its key, or the kubeconfig that embeds it. An extraArgs
//! flag pointing at another certificate counts as well.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::env::Env;
use crate::components::Instance;
use crate::error::Error;
use crate::pki::{self, issue, CertSpec, Usage};
use crate::spec::{paths, Plan};
use crate::state::manifest::rfc3339;
use crate::state::Root;
use crate::unit::Value;

/// `status` warns about certificates that expire sooner than this.
pub const WARN_WITHIN: Duration = Duration::from_secs(30 * 24 * 3600);

/// One certificate of the state dir and how long it has left.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CertExpiry {
    pub name: String,
    /// Relative to the state dir: `pki/<name>.crt`; a further node's under `nodes/<node>/`.
    pub path: String,
    /// Its issuing CA (`None` for a CA).
    pub ca: Option<String>,
    pub is_ca: bool,
    /// The kubeconfig that embeds it (`kubeconfig/<name>.kubeconfig`; a further node's under
    /// `nodes/<node>/`).
    pub kubeconfig: Option<String>,
    pub not_before: String,
    pub not_after: String,
    /// Seconds until NotAfter (negative: expired that long ago).
    pub residual_seconds: i64,
    pub expired: bool,
    /// NotBefore is still ahead (an epoch in the future).
    pub not_yet_valid: bool,
    /// Serial number (hex).
    pub serial: String,
    /// Its signature verifies against its CA's certificate in the state dir (a CA: against itself).
    pub signed_by_ca: bool,
    /// Instances (`kubelet`, `kubelet@worker-1`) whose unit or config files name it (restarted by
    /// `certs renew`).
    pub used_by: Vec<String>,
}

impl CertExpiry {
    /// Residual time as `certs check-expiration` and `status` print it.
    pub fn residual(&self) -> String {
        residual(self.residual_seconds)
    }
}

/// kubeadm's RESIDUAL TIME, finer for short validities: `expired`, `45s`, `4m05s`, `3h07m`,
/// `364d`, `9y`.
pub fn residual(secs: i64) -> String {
    match secs {
        s if s < 0 => "expired".into(),
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        s if s < 365 * 86_400 => format!("{}d", s / 86_400),
        s => format!("{}y", s / (365 * 86_400)),
    }
}

/// Certificate name -> the instances (`Instance::name`: `kubelet`, `kubelet@worker-1`) that use
/// it, in table order. By instance, not component: a node's own certificate restarts its own
/// kubelet only.
pub type Users = BTreeMap<String, Vec<String>>;

/// Which instances use which certificate, from their unit files and config files in the state dir.
pub fn users(env: &Env) -> Users {
    let plan = &env.plan;
    let root = Root::open(&plan.state_dir).ok();
    let read = |rel: &str| {
        root.as_ref()
            .and_then(|r| r.read_string(rel).ok())
            .unwrap_or_default()
    };
    let texts: Vec<(&str, String)> = env
        .units
        .iter()
        .map(|(i, unit)| {
            let c = i.component;
            let mut text = String::new();
            for (_, value) in &unit.properties {
                match value {
                    Value::Str(s) => text.push_str(s),
                    Value::Strings(list) => text.push_str(&list.join("\n")),
                    Value::Exec(cmds) => {
                        for (path, argv, _) in cmds {
                            text.push_str(path);
                            text.push('\n');
                            text.push_str(&argv.join("\n"));
                        }
                    }
                    Value::EnvFiles(_) => text.push_str(&read(&paths::env_file(c.name))),
                    // LoadCredential='s files (a key the unit reads through systemd).
                    Value::Pairs(pairs) => {
                        for (_, path) in pairs {
                            text.push_str(path);
                            text.push('\n');
                        }
                    }
                    Value::Bool(_)
                    | Value::U64(_)
                    | Value::U32(_)
                    | Value::I32(_)
                    | Value::Calendar(_)
                    | Value::Binds(_) => {}
                }
                text.push('\n');
            }
            for file in c.files.iter().filter(|f| (f.when)(&i.plan)) {
                text.push_str(&read(&i.file_path(file.path)));
                text.push('\n');
            }
            (i.name.as_str(), text)
        })
        .collect();
    pki::specs(plan)
        .into_iter()
        .map(|spec| {
            let mut names = vec![spec.cert_path.clone(), spec.key_path.clone()];
            names.extend(spec.kubeconfig_path.clone());
            let needles: Vec<String> = names.iter().map(|rel| plan.path(rel)).collect();
            let using: Vec<String> = texts
                .iter()
                .filter(|(_, text)| needles.iter().any(|n| names_path(text, n)))
                .map(|(name, _)| name.to_string())
                .collect();
            (spec.name, using)
        })
        .collect()
}

/// Whether `text` names the path `needle` as a whole (not as the start of a longer path).
fn names_path(text: &str, needle: &str) -> bool {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "._-/".contains(c);
    text.match_indices(needle).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + needle.len()..].chars().next();
        !before.is_some_and(path_char) && !after.is_some_and(path_char)
    })
}

/// Every certificate of the environment (CAs first, table order) with its expiry, read from the
/// state dir. A certificate that is missing or unreadable is an error naming it.
pub fn expiration(
    plan: &Plan,
    users: &Users,
    now: time::OffsetDateTime,
) -> Result<Vec<CertExpiry>, Error> {
    let root = Root::open(&plan.state_dir).map_err(Error::io(&plan.state_dir, "open"))?;
    let specs = pki::specs(plan);
    let read = |spec: &CertSpec| -> Result<String, Error> {
        let rel = &spec.cert_path;
        root.read_string(rel).map_err(|e| Error::Artifact {
            path: plan.state_dir.join(rel),
            message: format!("cannot read the certificate: {e}"),
            fix: "restore it with `kubeunit gen` (keys and CAs are kept)".into(),
        })
    };
    let mut out = Vec::new();
    for spec in &specs {
        let pem = read(spec)?;
        let rel = spec.cert_path.clone();
        let info = issue::inspect(&pem).map_err(|e| Error::Artifact {
            path: plan.state_dir.join(&rel),
            message: e.to_string(),
            fix: "restore it with `kubeunit gen` (keys and CAs are kept)".into(),
        })?;
        let ca_pem = match spec.ca {
            None => Some(pem.clone()),
            Some(ca) => specs
                .iter()
                .find(|s| s.name == ca)
                .and_then(|s| read(s).ok()),
        };
        let residual = (info.not_after - now).whole_seconds();
        out.push(CertExpiry {
            name: spec.name.clone(),
            path: rel,
            ca: spec.ca.map(String::from),
            is_ca: spec.usage == Usage::Ca,
            kubeconfig: spec.kubeconfig_path.clone(),
            not_before: rfc3339(info.not_before),
            not_after: rfc3339(info.not_after),
            residual_seconds: residual,
            expired: info.not_after <= now,
            not_yet_valid: info.not_before > now,
            serial: info.serial,
            signed_by_ca: ca_pem.is_some_and(|ca| issue::signed_by(&pem, &ca)),
            used_by: users.get(&spec.name).cloned().unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The certificates that expire within `WARN_WITHIN` of `now` (or have expired).
pub fn expiring(certs: &[CertExpiry]) -> Vec<&CertExpiry> {
    let limit = WARN_WITHIN.as_secs() as i64;
    certs
        .iter()
        .filter(|c| c.residual_seconds < limit)
        .collect()
}

/// The instances (table order) whose component uses any of `renewed`, with the renewed
/// certificates each uses.
pub fn affected<'e>(
    env: &'e Env,
    users: &Users,
    renewed: &[String],
) -> Vec<(
    &'e Instance<'static>,
    &'e crate::unit::UnitFile,
    Vec<String>,
)> {
    env.units
        .iter()
        .filter_map(|(i, unit)| {
            let certs: Vec<String> = renewed
                .iter()
                .filter(|name| users.get(*name).is_some_and(|u| u.contains(&i.name)))
                .cloned()
                .collect();
            (!certs.is_empty()).then_some((i, unit, certs))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_times_read_like_kubeadm_but_finer() {
        for (secs, want) in [
            (-5, "expired"),
            (0, "0s"),
            (59, "59s"),
            (245, "4m05s"),
            (3600 + 7 * 60 + 3, "1h07m"),
            (364 * 86_400 + 5, "364d"),
            (3650 * 86_400, "10y"),
        ] {
            assert_eq!(residual(secs), want, "{secs}");
        }
    }

    fn generated(profile: &str, sets: &[&str]) -> (tempfile::TempDir, Env) {
        Env::generated_for_tests(profile, sets)
    }

    fn generated_at(dir: &std::path::Path, profile: &str, sets: &[&str]) -> Env {
        Env::generated_at_for_tests(dir, profile, sets)
    }

    #[test]
    fn who_uses_which_certificate_follows_from_units_and_config_files() {
        let (_tmp, env) = generated("dev", &[]);
        let used = users(&env);
        let of = |name: &str| used[name].clone();
        for (cert, want) in [
            ("apiserver", &["kube-apiserver"][..]),
            ("apiserver-kubelet-client", &["kube-apiserver"]),
            ("apiserver-etcd-client", &["kube-apiserver"]),
            ("front-proxy-client", &["kube-apiserver"]),
            ("etcd/server", &["etcd"]),
            ("etcd/peer", &["etcd"]),
            // kubeunit's own identities: etcd's probe, the addons and the user.
            ("etcd/healthcheck-client", &[]),
            ("admin", &[]),
            ("controller-manager", &["kube-controller-manager"]),
            ("controller-manager-server", &["kube-controller-manager"]),
            // Its kubeconfig is named in its config file, not on its command line.
            ("scheduler", &["kube-scheduler"]),
            ("scheduler-server", &["kube-scheduler"]),
            // The serving certificate in the kubelet's config file, the client one by kubeconfig.
            ("kubelet", &["kubelet"]),
            ("kubelet-client", &["kubelet"]),
            ("kube-proxy", &["kube-proxy"]),
        ] {
            assert_eq!(of(cert), want.to_vec(), "{cert}");
        }
        assert!(
            of("ca").iter().any(|u| u == "kube-controller-manager"),
            "its signing key"
        );
        assert!(of("etcd/ca").iter().any(|u| u == "etcd"));

        // A flag the profile adds counts as much as kubeunit's own.
        let (_tmp, env) = generated(
            "control-plane",
            &["components.kube-scheduler.extraArgs.tls-cert-file=/s/none.crt"],
        );
        assert_eq!(
            users(&env)["scheduler-server"],
            vec!["kube-scheduler"],
            "its key is still named"
        );
        let (_tmp, env) = generated(
            "control-plane",
            &[
                "components.kube-scheduler.extraArgs.tls-cert-file=/s/none.crt",
                "components.kube-scheduler.extraArgs.tls-private-key-file=/s/none.key",
            ],
        );
        assert_eq!(
            users(&env)["scheduler-server"],
            vec![] as Vec<&str>,
            "no longer named"
        );
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let flag = format!(
            "components.kube-scheduler.extraArgs.tls-cert-file={}",
            dir.join(paths::cert("front-proxy-client")).display()
        );
        let env = generated_at(&dir, "control-plane", &[flag.as_str()]);
        assert_eq!(
            users(&env)["front-proxy-client"],
            vec!["kube-apiserver", "kube-scheduler"]
        );
    }

    /// gen dev with a second node (`worker-1`: profiles cannot name one yet) and load it as
    /// `Env::load` does, with that plan.
    fn generated_two_nodes() -> (tempfile::TempDir, Env) {
        use crate::spec::HostFacts;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let sets = ["binDir=/usr/local/bin".to_string()];
        let profile = crate::pipeline::profile_with_binaries("dev", &sets, None).unwrap();
        let plan = Plan::new(profile, &dir, &HostFacts::fixed(Some("192.0.2.5")))
            .unwrap()
            .with_extra_node_for_tests("worker-1");
        let opts = crate::artifacts::Options {
            entropy: crate::pki::Entropy::Seed(7),
            force: false,
        };
        crate::pipeline::gen(&plan, &opts, None, Duration::from_secs(5), &mut |_| {}).unwrap();
        let read = |name: &str| {
            let path = dir.join(paths::unit(name));
            crate::unit::parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap()
        };
        let units = crate::components::instances(&plan)
            .into_iter()
            .map(|i| {
                let unit = read(&i.unit);
                (i, unit)
            })
            .collect();
        let env = Env {
            slice: read(&plan.slice_name()),
            plan,
            units,
            timers: vec![],
        };
        (tmp, env)
    }

    #[test]
    fn a_nodes_own_certificates_are_used_by_its_own_instances() {
        let (_tmp, env) = generated_two_nodes();
        let used = users(&env);
        for (cert, want) in [
            ("kubelet", &["kubelet"][..]),
            ("kubelet-client", &["kubelet"]),
            ("kube-proxy", &["kube-proxy"]),
            ("kubelet@worker-1", &["kubelet@worker-1"]),
            ("kubelet-client@worker-1", &["kubelet@worker-1"]),
            ("kube-proxy@worker-1", &["kube-proxy@worker-1"]),
        ] {
            assert_eq!(used[cert], want.to_vec(), "{cert}");
        }
        // The cluster CA: every kubelet checks its clients with it.
        for kubelet in ["kubelet", "kubelet@worker-1"] {
            assert!(used["ca"].iter().any(|u| u == kubelet), "{kubelet}");
        }
        // Renewing a node's identity restarts that node's kubelet only.
        let affected: Vec<(String, Vec<String>)> =
            affected(&env, &used, &["kubelet-client@worker-1".to_string()])
                .into_iter()
                .map(|(i, _, certs)| (i.name.clone(), certs))
                .collect();
        assert_eq!(
            affected,
            [(
                "kubelet@worker-1".to_string(),
                vec!["kubelet-client@worker-1".to_string()]
            )]
        );
        // check-expiration lists them with their files.
        let now = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(1);
        let certs = expiration(&env.plan, &used, now).unwrap();
        let of = |name: &str| certs.iter().find(|c| c.name == name).unwrap();
        let c = of("kubelet-client@worker-1");
        assert_eq!(c.path, "nodes/worker-1/pki/kubelet-client.crt");
        assert_eq!(
            c.kubeconfig.as_deref(),
            Some("nodes/worker-1/kubeconfig/kubelet.kubeconfig")
        );
        assert!(c.signed_by_ca && c.ca.as_deref() == Some("ca"), "{c:?}");
        assert_eq!(
            of("kubelet@worker-1").path,
            "nodes/worker-1/pki/kubelet.crt"
        );
        assert_eq!(of("kubelet").path, "pki/kubelet.crt");
        assert_eq!(certs.len(), pki::specs(&env.plan).len());
        // `certs renew` takes the further node's by name; an unknown node is named as such.
        let names = crate::pipeline::renewable(
            &env.plan,
            &["kube-proxy@worker-1".to_string(), "kubelet".to_string()],
        )
        .unwrap();
        assert_eq!(names, ["kubelet", "kube-proxy@worker-1"]);
        let all = crate::pipeline::renewable(&env.plan, &["all".to_string()]).unwrap();
        assert!(all.contains(&"kubelet@worker-1".to_string()));
        let e = crate::pipeline::renewable(&env.plan, &["kubelet@nowhere".to_string()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no certificate 'kubelet@nowhere'") && !e.contains("not enabled"),
            "{e}"
        );
    }

    #[test]
    fn expiry_is_read_from_the_certificates() {
        // HostFacts::fixed issues at the Unix epoch: 365d leaves, 3650d CAs.
        let (_tmp, env) = generated("control-plane", &[]);
        let day = time::Duration::days(1);
        let now = time::OffsetDateTime::UNIX_EPOCH + day * 100;
        let certs = expiration(&env.plan, &users(&env), now).unwrap();
        assert_eq!(certs.iter().filter(|c| c.is_ca).count(), 3);
        for c in &certs {
            let days: i64 = if c.is_ca { 3650 } else { 365 };
            assert_eq!(c.residual_seconds, (days - 100) * 86_400, "{}", c.name);
            assert_eq!(c.not_before, "1970-01-01T00:00:00Z");
            assert!(c.signed_by_ca && !c.expired && !c.not_yet_valid, "{c:?}");
        }
        assert_eq!(expiring(&certs).len(), 0);
        let late = time::OffsetDateTime::UNIX_EPOCH + day * 340;
        let certs = expiration(&env.plan, &users(&env), late).unwrap();
        let soon: Vec<&str> = expiring(&certs).iter().map(|c| c.name.as_str()).collect();
        assert_eq!(soon.len(), 12, "every leaf within 30 days: {soon:?}");
        let after = time::OffsetDateTime::UNIX_EPOCH + day * 400;
        let certs = expiration(&env.plan, &users(&env), after).unwrap();
        assert!(certs.iter().all(|c| c.expired != c.is_ca));
        assert_eq!(certs[3].residual(), "expired");
    }

    #[test]
    fn a_path_is_named_only_as_a_whole() {
        let text = "--cert-file=/s/pki/etcd/server.crt\nkubeconfig: \"/s/kubeconfig/scheduler.kubeconfig\"\n/s/pki/ca.crt.bak";
        assert!(names_path(text, "/s/pki/etcd/server.crt"));
        assert!(names_path(text, "/s/kubeconfig/scheduler.kubeconfig"));
        assert!(!names_path(text, "/s/pki/ca.crt"), "only a longer path");
        assert!(
            !names_path(text, "/pki/etcd/server.crt"),
            "a suffix of a path"
        );
        assert!(!names_path(text, "/s/pki/etcd/server"));
    }
}
