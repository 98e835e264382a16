#!/usr/bin/env bash
# Bring-up of one profile by two kubeunit binaries side by side (e.g. before and after a change), in turns:
# each run is `kubeunit start` of a fresh state dir until every node is Ready and a first pod Running, then
# `destroy`; the binaries alternate run by run (A B, then B A, ...) on the same systemd container, so that a
# noisy minute of this machine falls on both. Prints each run and the medians with the ratio B/A.
#
#   scripts/bench-revisions.sh A_KUBEUNIT B_KUBEUNIT [PROFILE] [ROUNDS]     (PROFILE: dev; ROUNDS: 5)
#
# Example (the binary of an older commit against the current one):
#   git worktree add /tmp/old c270e5f && (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release)
#   scripts/bench-revisions.sh /tmp/old-target/release/kubeunit target/release/kubeunit dev 5
set -euo pipefail
# Offline, as every script here (scripts/up.sh says what it means; KUBEUNIT_OFFLINE=0 lifts it).
export KUBEUNIT_OFFLINE=${KUBEUNIT_OFFLINE-1}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
[ $# -ge 2 ] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
a=$(realpath "$1") b=$(realpath "$2") profile=${3:-dev} rounds=${4:-5}
for k in "$a" "$b"; do [ -x "$k" ] || { echo "bench-revisions.sh: $k is not executable" >&2; exit 2; }; done
case $rounds in ''|*[!0-9]*|0) echo "bench-revisions.sh: ROUNDS '$rounds' is not a positive number" >&2; exit 2 ;; esac
keep_test_networks_local
cache=$(kubeunit_cache)
version=${KUBERNETES_VERSIONS%% *}
bin_dir=$cache/bin/kubernetes-$version
kubectl=$bin_dir/kubectl
images_dir=$(scripts/build-test-binaries.sh --print | grep '/images-' | head -n1)
images=$(find "$images_dir" -name '*.tar' | sort | paste -sd, -)
work=$(mktemp -d /var/tmp/kubeunit-bench-revisions.XXXXXX)
export KUBEUNIT_CONTAINERS_DIR=$work/containers
name=ku-bench-rev
cleanup() { scripts/container.sh stop "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
scripts/container.sh boot "$name" --node --bind="$cache" --bind="$work" --bind="$(dirname "$a")" \
  --bind="$(dirname "$b")" >/dev/null
in_c() { scripts/container.sh exec "$name" -- "$@"; }

# gen DIR KUBEUNIT: the profile on the pinned binaries and images, its own free ports.
gen() {
  "$2" gen --profile "$profile" --state-dir "$1" --bin-dir "$bin_dir" \
    --set "components.etcd.binary=$cache/bin/etcd-$ETCD_VERSION/etcd" --set "versions.kubernetes=$version" \
    --set "components.containerd.binary=$cache/bin/containerd-$CONTAINERD_VERSION/containerd" \
    --set "containerd.runtime=$cache/bin/runc-$RUNC_VERSION/runc" \
    --set "containerd.cniBinDir=$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION" \
    --set "components.registry.binary=$cache/bin/registry-$REGISTRY_VERSION/registry" \
    --set "images=[$images]" --set addons.corednsForward= --set ports=auto >/dev/null
}

# one LABEL KUBEUNIT: a run; prints "LABEL START READY POD" (seconds from the start call).
one() {
  local label=$1 k=$2 dir=$work/$1
  rm -rf "$dir"
  gen "$dir" "$k"
  local kc=$dir/kubeconfig/admin.kubeconfig t0 now
  t0=$(date +%s.%N)
  in_c "$k" start --state-dir "$dir" >/dev/null
  local started ready pod
  started=$(echo "$(date +%s.%N) - $t0" | bc)
  # Every node Ready: one kubelet unit per node.
  local want
  want=$(find "$dir/units" -name '*-kubelet.service' -o -name '*-kubelet@*.service' | wc -l)
  want=$(seq "$want" | sed 's/.*/True/' | paste -sd' ' -) # not `yes | head`: pipefail sees yes's SIGPIPE
  until [ "$("$kubectl" --kubeconfig "$kc" get nodes \
    -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = "$want" ]; do
    sleep 0.1
  done
  ready=$(echo "$(date +%s.%N) - $t0" | bc)
  until "$kubectl" --kubeconfig "$kc" run first --image="$TEST_IMAGE" --restart=Never -- sleep 3600 >/dev/null 2>&1; do
    sleep 0.1
  done
  until [ "$("$kubectl" --kubeconfig "$kc" get pod first -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; do
    sleep 0.1
  done
  now=$(date +%s.%N)
  pod=$(echo "$now - $t0" | bc)
  in_c "$k" destroy --state-dir "$dir" >/dev/null
  printf '%s %.2f %.2f %.2f\n' "$label" "$started" "$ready" "$pod"
}

echo "bring-up of '$profile', A=$a, B=$b, Kubernetes $version, $(nproc) cores, $rounds rounds, alternating"
printf '  %-5s %-3s %8s %11s %16s\n' round bin start "nodes Ready" "first pod Running"
results=$work/results
: >"$results"
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for which in $order; do
    if [ "$which" = A ]; then k=$a; else k=$b; fi
    line=$(one "$which" "$k")
    echo "$line" >>"$results"
    read -r l s rd p <<<"$line"
    printf '  %-5s %-3s %7.2fs %10.2fs %16.2fs\n' "$r" "$l" "$s" "$rd" "$p"
  done
done
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for col in 2 3 4; do
  ma=$(awk -v c=$col '$1=="A"{print $c}' "$results" | median)
  mb=$(awk -v c=$col '$1=="B"{print $c}' "$results" | median)
  what=$(case $col in 2) echo start ;; 3) echo "nodes Ready" ;; 4) echo "first pod Running" ;; esac)
  printf 'median %-18s A %.2fs  B %.2fs  B/A %.3f\n' "$what" "$ma" "$mb" "$(echo "$mb / $ma" | bc -l)"
done
