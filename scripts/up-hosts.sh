#!/usr/bin/env bash
# An environment across hosts on this one machine: the `ha` profile's five hosts (3 control-plane hosts, 2
# workers), each a systemd container (scripts/container.sh) with a network namespace of its own on the bridge
# ku-hosts (198.19.254.1/24, the profile's addresses), rendered by one `kubeunit gen --out`, each host's dir
# imported on its host and started there.
#
#   scripts/up-hosts.sh [extra `kubeunit gen` arguments...]     bring it up (again: from scratch)
#   scripts/up-hosts.sh down                                    power every host off, remove the bridge
#
# The hosts' roots and runtime data live under /var/lib/kubeunit-hosts/ha (a host's root survives its power cut
# and reboot, as a VM's disk). The admin kubeconfig: /var/lib/kubeunit-hosts/ha/out/cp-1/kubeconfig/admin.kubeconfig
# (cp-2's and cp-3's are beside it). This machine routes the hosts' node links and pod networks to them (so
# that a client here, such as e2e.test, reaches what a client on the hosts' network would); nothing goes
# beyond the bridge: the hosts' default route is this machine, which does not forward.
set -euo pipefail
# Offline, as every script here (scripts/up.sh says what it means; KUBEUNIT_OFFLINE=0 lifts it).
export KUBEUNIT_OFFLINE=${KUBEUNIT_OFFLINE-1}
cd "$(dirname "$0")/.."
here=$(pwd)
. scripts/versions.env
. scripts/lib.sh
cache=$(kubeunit_cache)
base=/var/lib/kubeunit-hosts/ha
out=$base/out
state=/var/lib/kubeunit/ha
data=/var/lib/kubeunit-data/ha
bridge=ku-hosts
gateway=198.19.254.1
kubeunit=$here/target/release/kubeunit

die() { echo "up-hosts.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it boots containers and makes a bridge)"

# The hosts gen rendered: "NAME ADDRESS" lines (each host's profile.yaml records its address as the API
# server's advertise address).
hosts() {
  local dir
  for dir in "$out"/*/; do
    dir=${dir%/}
    echo "${dir##*/} $(sed -n 's/^  advertiseAddress: //p' "$dir/profile.yaml")"
  done
}

down() {
  if [ -d "$out" ]; then
    while read -r name _; do
      scripts/container.sh stop "kubeunit-ha-$name" >/dev/null 2>&1 || true
    done < <(hosts)
  fi
  if [ -r "$base/routes" ]; then
    while read -r net; do ip route del "$net" 2>/dev/null || true; done <"$base/routes"
    rm -f "$base/routes"
  fi
  scripts/container.sh unbridge "$bridge"
}

if [ "${1:-}" = down ]; then
  down
  exit 0
fi

scripts/install-deps.sh
echo "==> building kubeunit"
cargo build --release --locked --quiet
echo "==> pinned binaries, node images and the e2e images (cached in $cache)"
scripts/build-test-binaries.sh
scripts/build-e2e-images.sh >/dev/null
scripts/build-rootfs.sh >/dev/null
keep_test_networks_local
k8s_version=${KUBEUNIT_KUBERNETES:-${KUBERNETES_VERSIONS%% *}}
bin_dir=$cache/bin/kubernetes-$k8s_version
node_images=$(scripts/build-test-binaries.sh --print | grep '/images-' | head -n1)
e2e_images=$(scripts/build-e2e-images.sh --print | grep -- "/e2e-images-$k8s_version\$")
images=$( (find "$node_images" "$e2e_images" -name '*.tar') | sort | paste -sd, -)

down
rm -rf "$base"
mkdir -p "$base"
echo "==> kubeunit gen --profile ha --out $out"
SOURCE_DATE_EPOCH=$(date +%s) "$kubeunit" gen --profile ha --state-dir "$state" --out "$out" --bin-dir "$bin_dir" \
  --set "components.etcd.binary=$cache/bin/etcd-$ETCD_VERSION/etcd" --set "versions.kubernetes=$k8s_version" \
  --set "components.containerd.binary=$cache/bin/containerd-$CONTAINERD_VERSION/containerd" \
  --set "containerd.runtime=$cache/bin/runc-$RUNC_VERSION/runc" \
  --set "containerd.cniBinDir=$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION" \
  --set "components.registry.binary=$cache/bin/registry-$REGISTRY_VERSION/registry" \
  --set "images=[$images]" --set addons.corednsForward= --set "dataDir=$data" "$@"
"$kubeunit" hosts check "$out"

scripts/container.sh bridge "$bridge" "$gateway/24"
echo "==> booting the hosts"
while read -r name address; do
  # containerd's overlay snapshots cannot live on the container's overlay root: the data dir is bound.
  scripts/container.sh boot "kubeunit-ha-$name" --node --persist="$base/$name" \
    --network="$bridge,$address/24,$gateway" --log="$base/$name.log" \
    --bind-ro="$cache" --bind-ro="$here/target/release" --bind-ro="$out" \
    --bind="$base/$name.data:$data" >/dev/null
  scripts/container.sh exec "kubeunit-ha-$name" -- "$kubeunit" import "$out/$name" --state-dir "$state" >/dev/null
done < <(hosts)

echo "==> kubeunit start on every host at once (the etcd members wait for each other)"
pids=()
while read -r name address; do
  scripts/container.sh exec "kubeunit-ha-$name" -- "$kubeunit" start --state-dir "$state" >"$base/$name.start.log" 2>&1 &
  pids+=("$!:$name")
done < <(hosts)
failed=""
for p in "${pids[@]}"; do
  wait "${p%%:*}" || { failed="$failed ${p#*:}"; tail -n 20 "$base/${p#*:}.start.log" >&2; }
done
[ -z "$failed" ] || die "start failed on:$failed (logs: $base/HOST.start.log)"

# This machine reaches the hosts' nodes and pods as a machine on their network would.
: >"$base/routes"
while read -r name address; do
  script=$out/$name/config/node-network.sh
  for var in net pod_cidr; do
    net=$(sed -n "s/^$var=\"\(.*\)\"\$/\1/p" "$script")
    [ -n "$net" ] || die "no $var in $script"
    ip route replace "$net" via "$address"
    echo "$net" >>"$base/routes"
  done
done < <(hosts)

kubeconfig=$out/cp-1/kubeconfig/admin.kubeconfig
cat <<MSG

five hosts up (logs: scripts/container.sh exec kubeunit-ha-HOST -- journalctl -u 'kubeunit-ha-*'):
  export PATH=$bin_dir:\$PATH KUBECONFIG=$kubeconfig
  kubectl get nodes -o wide
  kubectl get endpointslices -l kubernetes.io/service-name=kubernetes
conformance:  scripts/conformance.sh --state-dir $out/cp-1
tear down:    scripts/up-hosts.sh down
MSG
