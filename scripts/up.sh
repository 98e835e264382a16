#!/usr/bin/env bash
# One command from a fresh machine to a running Kubernetes environment:
#   scripts/up.sh [PROFILE] [extra `kubeunit gen` arguments...]      (PROFILE defaults to control-plane)
# Installs dependencies, builds kubeunit and the pinned Kubernetes/etcd binaries (cached), boots systemd
# in a container where PID 1 is not systemd, then `kubeunit gen` + `kubeunit start`.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
profile=${1:-control-plane}
[ $# -gt 0 ] && shift
. scripts/versions.env
. scripts/systemd-host.sh

[ "$(id -u)" = 0 ] || { echo "up.sh: run as root (it installs packages and runs system units)" >&2; exit 1; }
scripts/install-deps.sh
echo "==> building kubeunit"
cargo build --release --locked --quiet
kubeunit=$here/target/release/kubeunit
echo "==> pinned binaries and node images (cached in $cache; a cold build takes ~40 minutes)"
scripts/build-test-binaries.sh
k8s_version=${KUBERNETES_VERSIONS%% *}
bin_dir=$cache/bin/kubernetes-$k8s_version
etcd_bin=$cache/bin/etcd-$ETCD_VERSION/etcd

state_base=/var/lib/kubeunit
if ! host_has_systemd; then
  echo "==> PID 1 is $(cat /proc/1/comm), not systemd: booting systemd in a container (shares the host network)"
  boot_dev_container "$state_base" "$cache/bin" "$here/target/release"
fi

name=$("$kubeunit" profile show "$profile" "$@" | sed -n 's/^name: //p' | head -n1)
state=$state_base/$name
echo "==> kubeunit gen --profile $profile --state-dir $state"
"$kubeunit" gen --profile "$profile" --state-dir "$state" --bin-dir "$bin_dir" \
  --set "components.etcd.binary=$etcd_bin" --set "versions.kubernetes=$k8s_version" "$@" >/dev/null
echo "==> kubeunit start"
in_systemd "$kubeunit" start --state-dir "$state"
cat <<MSG

kubectl for this cluster: $bin_dir/kubectl
  export PATH=$bin_dir:\$PATH KUBECONFIG=$state/kubeconfig/admin.kubeconfig
  kubectl get namespaces
kubeunit where systemd is:   scripts/kubeunit status --state-dir $state   (logs -f, restart COMPONENT, stop)
tear down:                   scripts/down.sh $name
MSG
