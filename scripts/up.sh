#!/usr/bin/env bash
# One command from a fresh machine to a running Kubernetes environment:
#   scripts/up.sh [PROFILE] [extra `kubeunit gen` arguments...]      (PROFILE defaults to dev: a node)
# Installs dependencies, builds kubeunit, the pinned Kubernetes/etcd/node binaries and the offline images
# (cached), boots systemd in a container where PID 1 is not systemd, then `kubeunit gen` + `kubeunit start`.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
profile=${1:-dev}
[ $# -gt 0 ] && shift
. scripts/versions.env
. scripts/systemd-host.sh

[ "$(id -u)" = 0 ] || { echo "up.sh: run as root (it installs packages and runs system units)" >&2; exit 1; }
scripts/install-deps.sh
echo "==> building kubeunit"
cargo build --release --locked --quiet
kubeunit=$here/target/release/kubeunit
echo "==> pinned binaries and node images (cached in $cache; a cold build takes about an hour)"
scripts/build-test-binaries.sh
k8s_version=${KUBERNETES_VERSIONS%% *}
bin_dir=$cache/bin/kubernetes-$k8s_version
etcd_bin=$cache/bin/etcd-$ETCD_VERSION/etcd
images_dir=$(scripts/build-test-binaries.sh --print | grep '/images-' | head -n1)
images=$(find "$images_dir" -name '*.tar' | sort | paste -sd, -)

state_base=/var/lib/kubeunit
if ! host_has_systemd; then
  echo "==> PID 1 is $(cat /proc/1/comm), not systemd: booting systemd in a container (shares the host network)"
  boot_dev_container "$state_base" "$cache/bin" "$images_dir" "$here/target/release"
fi

name=$("$kubeunit" profile show "$profile" "$@" | sed -n 's/^name: //p' | head -n1)
state=$state_base/$name
echo "==> kubeunit gen --profile $profile --state-dir $state"
"$kubeunit" gen --profile "$profile" --state-dir "$state" --bin-dir "$bin_dir" \
  --set "components.etcd.binary=$etcd_bin" --set "versions.kubernetes=$k8s_version" \
  --set "components.containerd.binary=$cache/bin/containerd-$CONTAINERD_VERSION/containerd" \
  --set "containerd.runtime=$cache/bin/runc-$RUNC_VERSION/runc" \
  --set "containerd.cniBinDir=$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION" \
  --set "components.registry.binary=$cache/bin/registry-$REGISTRY_VERSION/registry" \
  --set "images=[$images]" "$@" >/dev/null
echo "==> kubeunit start"
in_systemd "$kubeunit" start --state-dir "$state"
cat <<MSG

kubectl for this cluster: $bin_dir/kubectl
  export PATH=$bin_dir:\$PATH KUBECONFIG=$state/kubeconfig/admin.kubeconfig
  kubectl get nodes
  kubectl create deployment hello --image=$TEST_IMAGE -- sh -c 'echo hello; exec sleep 3600'
kubeunit where systemd is:   scripts/kubeunit status --state-dir $state   (logs -f, restart COMPONENT, stop)
images without Docker:       scripts/kubeunit images load --state-dir $state app.tar   (then --image-pull-policy=Always works too)
tear down:                   scripts/down.sh $name
MSG
