#!/usr/bin/env bash
# One command from a fresh machine to a running Kubernetes environment:
#   scripts/up.sh [PROFILE] [extra `kubeunit gen` arguments...]      (PROFILE defaults to dev: a node; apps: dev
#                                                                     with metrics-server, MetalLB and Traefik)
#   KUBEUNIT_KUBERNETES=v1.35.4 scripts/up.sh                        (another pinned Kubernetes)
# Offline (KUBEUNIT_OFFLINE=1): pods reach nothing beyond this machine and CoreDNS answers for the cluster only,
# so that no packet or query leaves it; `KUBEUNIT_OFFLINE=0 scripts/up.sh dev --set network.egress=on
# --set addons.corednsForward=/etc/resolv.conf` lets pods out and forwards other names to this host's resolvers.
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
export KUBEUNIT_OFFLINE=${KUBEUNIT_OFFLINE-1}
# KUBEUNIT_KUBERNETES: one of the pinned versions (default: the newest).
k8s_version=${KUBEUNIT_KUBERNETES:-${KUBERNETES_VERSIONS%% *}}
case " $KUBERNETES_VERSIONS " in
  *" $k8s_version "*) ;;
  *) echo "up.sh: KUBEUNIT_KUBERNETES=$k8s_version is not pinned (scripts/versions.env: $KUBERNETES_VERSIONS)" >&2; exit 2 ;;
esac
# Each step's wall time, printed at the end (README and docs/setup.md quote one cold run of it).
steps=() step_name="" step_start=$SECONDS up_start=$SECONDS
step() {
  [ -z "$step_name" ] || steps+=("$(printf '%-34s %5ss' "$step_name" $((SECONDS - step_start)))")
  step_name=$1 step_start=$SECONDS
}
step "dependencies (apt)"
scripts/install-deps.sh
# The systemd rootfs is mostly downloads: built beside the compiles, which are CPU.
rootfs_pid=""
if ! host_has_systemd; then
  echo "==> the systemd rootfs, in the background (log: $cache/rootfs-build.log)"
  mkdir -p "$cache"
  scripts/build-rootfs.sh >"$cache/rootfs-build.log" 2>&1 &
  rootfs_pid=$!
fi
step "kubeunit (cargo build --release)"
echo "==> building kubeunit"
cargo build --release --locked --quiet
kubeunit=$here/target/release/kubeunit
# The addons this profile turns on, of those dev leaves off: only theirs are built and imported.
enabled=$("$kubeunit" profile show "$profile" "$@" |
  awk '/^addons:/ {a = 1; next} /^[^ ]/ {a = 0} a && /^  (metricsServer|loadBalancer|gateway): true$/ {sub(":", "", $1); print $1}' |
  paste -sd, -)
# Only what this environment needs; scripts/test.sh builds the rest (the other minor, dlv, e2e).
echo "==> pinned binaries and node images for Kubernetes $k8s_version${enabled:+ and $enabled} (cached in $cache)"
step "pinned binaries and images (Go)"
scripts/build-test-binaries.sh --node "$k8s_version" --addons "$enabled"
step "systemd rootfs (after the builds)"
if [ -n "$rootfs_pid" ] && ! wait "$rootfs_pid"; then
  tail -n 20 "$cache/rootfs-build.log" >&2
  echo "up.sh: building the systemd rootfs failed (log: $cache/rootfs-build.log)" >&2
  exit 1
fi
bin_dir=$cache/bin/kubernetes-$k8s_version
etcd_bin=$cache/bin/etcd-$ETCD_VERSION/etcd
images_dir=$(scripts/build-test-binaries.sh --print-images --addons "$enabled")
# The archives of the addons this profile turns off stay out (the images dir may have every addon's, built
# for the tests): start imports every archive it is given, before the kubelet starts (Traefik's is 178 MB).
images=$(find "$images_dir" -name '*.tar' | sort | while read -r archive; do
  case $(basename "$archive") in
    metrics-server.tar) addon=metricsServer ;;
    metallb-*.tar) addon=loadBalancer ;;
    traefik.tar) addon=gateway ;;
    *) addon="" ;;
  esac
  [ -z "$addon" ] || [[ ",$enabled," == *",$addon,"* ]] || continue
  echo "$archive"
done | paste -sd, -)

state_base=/var/lib/kubeunit
step "systemd container boot"
if ! host_has_systemd; then
  echo "==> PID 1 is $(cat /proc/1/comm), not systemd: booting systemd in a container (shares the host network)"
  # The whole cache: binaries and every image archive (the e2e images of scripts/conformance.sh too).
  boot_dev_container "$state_base" "$cache" "$here/target/release"
fi

name=$("$kubeunit" profile show "$profile" "$@" | sed -n 's/^name: //p' | head -n1)
state=$state_base/$name
step "kubeunit gen"
echo "==> kubeunit gen --profile $profile --state-dir $state"
"$kubeunit" gen --profile "$profile" --state-dir "$state" --bin-dir "$bin_dir" \
  --set "components.etcd.binary=$etcd_bin" --set "versions.kubernetes=$k8s_version" \
  --set "components.containerd.binary=$cache/bin/containerd-$CONTAINERD_VERSION/containerd" \
  --set "containerd.runtime=$cache/bin/runc-$RUNC_VERSION/runc" \
  --set "containerd.cniBinDir=$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION" \
  --set "components.registry.binary=$cache/bin/registry-$REGISTRY_VERSION/registry" \
  --set "images=[$images]" --set addons.corednsForward= "$@" >/dev/null
# A profile whose etcd runs as a user of its own (cis): that user is made where systemd runs it, as a package
# would make it (kubeunit start refuses without it, naming this command).
etcd_user=$("$kubeunit" profile show "$profile" "$@" | awk '/^etcd:/ {e = 1; next} /^[^ ]/ {e = 0} e && /^  user: / {print $2}')
if [ -n "$etcd_user" ] && [ "$etcd_user" != "''" ]; then
  echo "==> the system user $etcd_user for etcd"
  in_systemd sh -c "getent passwd '$etcd_user' >/dev/null || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin '$etcd_user'"
fi
step "kubeunit start"
echo "==> kubeunit start"
in_systemd "$kubeunit" start --state-dir "$state"
step ""
echo
echo "up.sh's steps (wall time; the systemd rootfs is built beside the Go builds, its line is the wait after them):"
printf '  %s\n' "${steps[@]}"
printf '  %-34s %5ss\n' total $((SECONDS - up_start))
cat <<MSG

kubectl for this cluster: $bin_dir/kubectl
  export PATH=$bin_dir:\$PATH KUBECONFIG=$state/kubeconfig/admin.kubeconfig
  kubectl get nodes
  kubectl create deployment hello --image=$TEST_IMAGE -- sh -c 'echo hello; exec sleep 3600'
kubeunit where systemd is:   scripts/kubeunit status --state-dir $state   (logs -f, restart COMPONENT, stop)
images without Docker:       scripts/kubeunit images load --state-dir $state app.tar   (then --image-pull-policy=Always works too)
tear down:                   scripts/down.sh $name
MSG
