#!/usr/bin/env bash
# Side-by-side bring-up benchmark of the control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler): kubeunit's control-plane profile against Kubernetes' hack/local-up-cluster.sh and kwokctl
# (--runtime binary), all on the same pinned binaries (scripts/versions.env), all in one systemd container
# (scripts/container.sh; kubeunit needs systemd as PID 1), alternately, N runs each, fresh data each run.
# scripts/bench-peers.py measures: one poller, the same four checks every 0.1 s, from the tool's command
# start (nothing running) to all four ok; then the stop, until nothing runs and the ports are free; then the
# floor: kube-apiserver run directly with kubeunit's flags on a running etcd, exec to /readyz.
#
#   scripts/bench-peers.sh           build or fetch the peers (cached), run, print a Markdown table
#   scripts/bench-peers.sh --build   only build or fetch the peers
#
# Environment: BENCH_RUNS (3) runs per tool; BENCH_TOOLS ("kubeunit kwokctl local-up"); BENCH_JSON (the
# results as JSON; default $KUBEUNIT_CACHE/bench-peers/results-DATE.json); BENCH_CONTAINER
# (kubeunit-bench-peers); BENCH_KWOK_CONTROLLER=1 keeps kwokctl's kwok-controller (default: disabled, so
# every tool runs the same four components); BENCH_PORT_WAIT seconds to wait for busy ports (0);
# BENCH_TIMEOUT (180) seconds per bring-up; KUBEUNIT_BIN (default target/release/kubeunit, built when missing).
#
# Peers, built once into $KUBEUNIT_CACHE/bin (never downloaded from release pages):
#   kwok-<KWOK_VERSION>/{kwok,kwokctl}       go install sigs.k8s.io/kwok/cmd/...@KWOK_VERSION
#   cfssl-<CFSSL_VERSION>/{cfssl,cfssljson}  go install github.com/cloudflare/cfssl/cmd/...@CFSSL_VERSION
#   local-up-cluster.sh                      from the k8s.io/kubernetes module of the newest pinned
#                                            Kubernetes (go mod download; used read-only in GOMODCACHE),
#                                            run with GO_OUT= the pinned binaries, so it builds nothing
#   $KUBEUNIT_CACHE/bench-peers/debs-<rootfs>/  what local-up-cluster.sh needs and the test rootfs lacks
#                                            (curl, openssl, sudo): Debian packages, installed in the
#                                            container at each boot (its root is a volatile overlay)
set -euo pipefail
# Offline, as every script here (scripts/up.sh says what it means; KUBEUNIT_OFFLINE=0 lifts it).
export KUBEUNIT_OFFLINE=${KUBEUNIT_OFFLINE-1}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
cache=$(kubeunit_cache)
die() { echo "bench-peers: $*" >&2; exit 1; }

k8s=${KUBERNETES_VERSIONS%% *}
k8s_bin=$cache/bin/kubernetes-$k8s
etcd_bin=$cache/bin/etcd-$ETCD_VERSION
kwok_dir=$cache/bin/kwok-$KWOK_VERSION
cfssl_dir=$cache/bin/cfssl-$CFSSL_VERSION
name=${BENCH_CONTAINER:-kubeunit-bench-peers}
work=/tmp/$name

build_only=""
case ${1:-} in
  "") ;;
  --build) build_only=1 ;;
  *) die "unknown argument '$1' (usage: $0 [--build])" ;;
esac

# go install PKG@VERSION... into DIR (via DIR.tmp, stamped .complete). Static binaries: they run in the
# container. nice: the machine's other builds keep their share of the CPUs.
go_install() {
  local dir=$1
  shift
  [ -f "$dir/.complete" ] && return 0
  echo "bench-peers: building $* into $dir" >&2
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  GOBIN=$dir.tmp CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    nice go install -trimpath -ldflags="-s -w" "$@"
  touch "$dir.tmp/.complete"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
}

build_peers() {
  command -v go >/dev/null || die "go missing (scripts/install-deps.sh)"
  go_install "$kwok_dir" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
  go_install "$cfssl_dir" "github.com/cloudflare/cfssl/cmd/cfssl@$CFSSL_VERSION" \
    "github.com/cloudflare/cfssl/cmd/cfssljson@$CFSSL_VERSION"
  # The Kubernetes source of the pinned version, for hack/local-up-cluster.sh (GOMODCACHE, read-only).
  k8s_src=$(cd / && GOFLAGS='' go mod download -json "k8s.io/kubernetes@$k8s" | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(d["Error"]) if d.get("Error") else print(d["Dir"])')
  [ -f "$k8s_src/hack/local-up-cluster.sh" ] ||
    die "no hack/local-up-cluster.sh in $k8s_src"

  # Packages for local-up-cluster.sh that the test rootfs (debootstrap minbase) lacks, resolved against
  # the rootfs' own dpkg status, so exactly the missing ones (and their missing dependencies) come.
  local rootfs
  rootfs=$("$here/build-rootfs.sh")
  debs=$cache/bench-peers/debs-$(basename "$rootfs")
  if [ ! -f "$debs/.complete" ]; then
    command -v apt-get >/dev/null || die "apt-get missing: local-up-cluster.sh needs curl, openssl and sudo"
    rm -rf "$debs.tmp"
    mkdir -p "$debs.tmp/partial"
    local apt=(apt-get install -y -qq --download-only --no-install-recommends
      -o APT::Sandbox::User=root -o "Dir::State::status=$rootfs/var/lib/dpkg/status"
      -o "Dir::Cache::archives=$debs.tmp"
      curl openssl sudo)
    "${apt[@]}" >/dev/null || { apt-get update -qq && "${apt[@]}" >/dev/null; } ||
      die "cannot download curl, openssl and sudo for the container"
    rm -rf "$debs.tmp/partial" "$debs.tmp/lock"
    touch "$debs.tmp/.complete"
    rm -rf "$debs"
    mv "$debs.tmp" "$debs"
  fi
}

for t in ${BENCH_TOOLS:-}; do
  case $t in kubeunit | kwokctl | local-up) ;; *) die "BENCH_TOOLS: unknown tool '$t' (kubeunit, kwokctl, local-up)" ;; esac
done
for d in "$k8s_bin" "$etcd_bin"; do
  [ -f "$d/.complete" ] || die "pinned binaries missing in $d: run scripts/build-test-binaries.sh"
done
build_peers
[ -z "$build_only" ] || exit 0

kubeunit=${KUBEUNIT_BIN:-$repo/target/release/kubeunit}
if [ -z "${KUBEUNIT_BIN:-}" ]; then
  (cd "$repo" && nice cargo build --release --locked --quiet)
fi
[ -x "$kubeunit" ] || die "no kubeunit binary at $kubeunit"
kubeunit=$(realpath "$kubeunit")

# The host network is shared with every other container: the default ports must be free.
ports='(2379|2380|6443|10257|10259)'
busy() { ss -Htln | awk '{print $4}' | grep -Eq ":$ports\$"; }
deadline=$((SECONDS + ${BENCH_PORT_WAIT:-0}))
while busy; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    ss -Htlnp | grep -E ":$ports " >&2 || true
    die "ports 2379/2380/6443/10257/10259 are in use (another environment?); BENCH_PORT_WAIT=SECONDS waits"
  fi
  sleep 10
done

# A container of this name left by an interrupted run would be reused with its old binds: stop it first.
"$here/container.sh" stop "$name" >/dev/null
rm -rf "$work"
mkdir -p "$work"
"$here/container.sh" boot "$name" --log="$work/container.log" --bind-ro="$cache/bin" \
  --bind-ro="$(dirname "$kubeunit")" --bind-ro="$k8s_src" --bind-ro="$debs" --bind="$work" >/dev/null
trap '"$here/container.sh" stop "$name" >/dev/null || true' EXIT
"$here/container.sh" exec "$name" -- sh -c "dpkg -i $debs/*.deb >/dev/null 2>&1" ||
  die "installing curl, openssl and sudo in the container failed"

export BENCH_CONTAINER=$name BENCH_CONTAINER_SH=$here/container.sh BENCH_WORK=$work \
  BENCH_KUBEUNIT=$kubeunit BENCH_K8S_VERSION=$k8s BENCH_ETCD_VERSION=$ETCD_VERSION BENCH_K8S_BIN=$k8s_bin \
  BENCH_ETCD_BIN=$etcd_bin BENCH_KWOK_DIR=$kwok_dir BENCH_KWOK_VERSION=$KWOK_VERSION BENCH_CFSSL_DIR=$cfssl_dir \
  BENCH_CFSSL_VERSION=$CFSSL_VERSION BENCH_K8S_SRC=$k8s_src \
  BENCH_JSON=${BENCH_JSON:-$cache/bench-peers/results-$(date -u +%Y%m%dT%H%M%SZ).json}
python3 "$here/bench-peers.py"
