//! kube-bench's view of the host: a private mount namespace in which `/etc` is an overlay of the
//! host's (its changes in a tmpfs) with `/etc/kubernetes/admin.conf` and `/etc/kubernetes/pki`
//! the environment's. Several checks of the benchmark name kubeadm's paths in their audit
//! commands (1.1.13, 1.1.14, 1.1.19-1.1.21), which no config.yaml changes; kube-bench's own job
//! manifests answer them with host mounts in its pod, and this is the same without a pod. Nothing
//! is written on the host: the namespace and its mounts go with kube-bench.
//!
//! By `unshare` and `mount` (util-linux) and a short sh script: the mounts follow each other with
//! checks between them, which a fork-time hook in Rust could not report as clearly.

use std::path::Path;
use std::process::Command;

use crate::error::Error;

/// The view's setup. `$1` the state dir, `$2` a private temporary directory, then the command.
/// A kubeadm `admin.conf` or `pki` the host has is covered by the environment's (bind mounts
/// over it), never removed.
const SCRIPT: &str = r#"set -eu
state=$1 tmp=$2
shift 2
mkdir "$tmp/view"
mount -t tmpfs -o mode=0700 kubeunit-view "$tmp/view"
mkdir "$tmp/view/upper" "$tmp/view/work"
mount -t overlay kubeunit-etc -o "lowerdir=/etc,upperdir=$tmp/view/upper,workdir=$tmp/view/work" /etc
mkdir -p /etc/kubernetes
if [ -f "$state/kubeconfig/admin.kubeconfig" ]; then
  [ -e /etc/kubernetes/admin.conf ] || : >/etc/kubernetes/admin.conf
  mount --bind "$state/kubeconfig/admin.kubeconfig" /etc/kubernetes/admin.conf
fi
if [ -d "$state/pki" ]; then
  mkdir -p /etc/kubernetes/pki
  mount --bind "$state/pki" /etc/kubernetes/pki
fi
exec "$@"
"#;

/// `kube_bench args` inside the view of `state_dir`, set up in `tmp` (private, removed by the
/// caller).
pub fn command(
    state_dir: &Path,
    tmp: &Path,
    kube_bench: &Path,
    args: &[String],
) -> Result<Command, Error> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::Usage {
            message: "kube-bench's view of /etc is a private mount, which needs root".into(),
            fix: "run it as root (sudo kubeunit kube-bench ...)".into(),
        });
    }
    // overlayfs takes its options as one comma-separated string: no path in it may hold , : or \.
    let tmp_text = tmp.to_string_lossy();
    if tmp_text.contains([',', ':', '\\']) {
        return Err(Error::Usage {
            message: format!(
                "the temporary directory {tmp_text} holds a character overlayfs options cannot (',', ':' or '\\')"
            ),
            fix: "set TMPDIR to a plain path such as /tmp".into(),
        });
    }
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        SCRIPT,
        "sh",
    ])
    .arg(state_dir)
    .arg(tmp)
    .arg(kube_bench)
    .args(args);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_directory_overlayfs_cannot_name_is_refused() {
        // Root here (the tests run as root); a non-root run is refused before this check.
        for bad in ["/tmp/a,b", "/tmp/a:b", "/tmp/a\\b"] {
            let e = command(Path::new("/s"), Path::new(bad), Path::new("/kb"), &[]).unwrap_err();
            assert!(e.to_string().contains("TMPDIR"), "{bad}: {e}");
        }
        let c = command(
            Path::new("/s t"),
            Path::new("/tmp/x"),
            Path::new("/kb"),
            &["--json".into()],
        )
        .unwrap();
        // Paths go to the script as arguments, never into its text.
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[args.len() - 4..], ["/s t", "/tmp/x", "/kb", "--json"]);
    }
}
