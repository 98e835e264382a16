//! `upgrade --drain`: a node's pods go elsewhere before its kubelet is upgraded, and it takes pods
//! again after (<https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/>:
//! "Prepare the node for maintenance by marking it unschedulable and evicting the workloads").
//! kubectl's drain is upstream's (eviction API, PodDisruptionBudgets, retries, DaemonSets left
//! alone): it runs as the admin identity, from the binaries' dir, rather than a copy of it here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::components;
use crate::error::Error;
use crate::run::Env;
use crate::spec::paths;

/// How to drain and uncordon the environment's nodes.
#[derive(Debug, Clone)]
pub struct Drain {
    pub kubectl: PathBuf,
    pub kubeconfig: PathBuf,
    /// How long one node's drain may take.
    pub timeout: Duration,
    /// Drain nodes (`--drain`); without it only the nodes an earlier run drained are uncordoned.
    pub nodes: bool,
}

impl Drain {
    /// The drain of `env`'s nodes, refused (exit 2, nothing done) where it cannot work: with
    /// transient units a restart of kube-apiserver restarts the kubelets that need it at once,
    /// before their node's turn to be drained (`restart`), and a host without the admin
    /// identity cannot evict pods.
    pub fn for_env(
        env: &Env,
        installed: bool,
        nodes: bool,
        timeout: Duration,
    ) -> Result<Drain, Error> {
        Drain::beside(env, installed, nodes, timeout, None)
    }

    /// The same, with kubectl beside `kubelet` (the new binary of an upgrade whose state dir is
    /// not rendered yet: asked before anything is written) instead of the unit's.
    pub fn beside(
        env: &Env,
        installed: bool,
        nodes: bool,
        timeout: Duration,
        kubelet: Option<PathBuf>,
    ) -> Result<Drain, Error> {
        let name = env.plan.name();
        if nodes && !installed {
            return Err(Error::Usage {
                message: format!(
                    "--drain: environment '{name}' runs as transient units (kubeunit start): restarting kube-apiserver restarts the kubelets with it, before their node is drained"
                ),
                fix: "upgrade it without --drain, or install it first (kubeunit stop && kubeunit install --now): installed units restart one at a time".into(),
            });
        }
        let kubeconfig = env.plan.state_dir.join(paths::kubeconfig("admin"));
        if !kubeconfig.is_file() {
            return Err(Error::Usage {
                message: format!(
                    "--drain: environment '{name}' has no admin identity here ({} is missing)",
                    kubeconfig.display()
                ),
                fix: "drain from a control-plane host of the environment (where the admin kubeconfig is), or drain and uncordon by hand (kubectl drain NODE)".into(),
            });
        }
        let kubelet = kubelet.or_else(|| {
            env.units
                .iter()
                .find(|(i, _)| i.component.name == components::KUBELET)
                .map(|(i, _)| i.component.binary_path(&i.plan))
        });
        let kubectl = kubelet
            .as_deref()
            .and_then(Path::parent)
            .map(|d| d.join("kubectl"))
            .filter(|k| crate::spec::host::executable(k).is_ok())
            .ok_or_else(|| Error::Usage {
                message: format!(
                    "--drain: no kubectl beside the kubelet's binary ({})",
                    kubelet
                        .as_deref()
                        .map(|k| k.display().to_string())
                        .unwrap_or_else(|| "no kubelet runs here".into())
                ),
                fix: "put kubectl of the environment's Kubernetes version into its binDir (kubeunit fetch does)".into(),
            })?;
        Ok(Drain {
            kubectl,
            kubeconfig,
            timeout,
            nodes,
        })
    }

    /// `kubectl drain NODE`: cordoned, and every pod but a DaemonSet's evicted (emptyDir data
    /// goes with its pod, as it would on any restart of the node).
    pub fn drain(&self, node: &str) -> Result<(), Error> {
        let timeout = format!("--timeout={}s", self.timeout.as_secs().max(1));
        self.kubectl(&[
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            &timeout,
        ])
    }

    pub fn uncordon(&self, node: &str) -> Result<(), Error> {
        self.kubectl(&["uncordon", node])
    }

    fn kubectl(&self, args: &[&str]) -> Result<(), Error> {
        let out = Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .map_err(Error::io(&self.kubectl, "run"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(Error::Start(format!(
            "kubectl {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_is_refused_where_it_would_come_too_late_or_has_no_kubectl_or_admin() {
        use std::os::unix::fs::PermissionsExt;
        let bin = tempfile::tempdir().unwrap();
        let set = format!("binDir={}", bin.path().display());
        let (_tmp, env) = Env::generated_for_tests("multi", &[&set]);
        let t = Duration::from_secs(60);
        // Transient units: the kubelets restart with the API server.
        let e = Drain::for_env(&env, false, true, t).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("transient units"), "{e}");
        // No kubectl in binDir.
        let e = Drain::for_env(&env, true, true, t).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("no kubectl beside"), "{e}");
        let kubectl = bin.path().join("kubectl");
        std::fs::write(&kubectl, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
        let drain = Drain::for_env(&env, true, true, t).unwrap();
        assert_eq!(drain.kubectl, kubectl);
        // The new binaries' dir of an upgrade not rendered yet: without kubectl there, refused.
        let new = tempfile::tempdir().unwrap();
        let e = Drain::beside(&env, true, true, t, Some(new.path().join("kubelet"))).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains(&new.path().join("kubelet").display().to_string()),
            "{e}"
        );
        // Only uncordoning what an earlier run drained is no drain: transient units are fine.
        assert!(!Drain::for_env(&env, false, false, t).unwrap().nodes);
        // A host without the admin kubeconfig.
        let admin = env.plan.state_dir.join(paths::kubeconfig("admin"));
        std::fs::remove_file(&admin).unwrap();
        let e = Drain::for_env(&env, true, true, t).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("no admin identity"), "{e}");
        assert!(e.to_string().contains(&admin.display().to_string()), "{e}");
    }
}
