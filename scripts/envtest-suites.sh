#!/usr/bin/env bash
# controller-runtime's own envtest suites against kubeunit's `envtest` profile, as operator developers point
# theirs at a cluster (USE_EXISTING_CLUSTER=true), each suite on a fresh start (`kubeunit destroy`, then
# `start`: the reset between suites); then the start itself beside envtest's own, on the same binaries.
#
#   scripts/envtest-suites.sh [--rounds N] [--results FILE] [SUITE...]
#
# SUITE: client cache controller builder webhook (default: all), the packages of sigs.k8s.io/controller-runtime
# at CONTROLLER_RUNTIME_VERSION (scripts/versions.env, the release for the newest pinned Kubernetes) whose tests
# start an envtest.Environment; each built here (`go test -c`) and run from its source dir (their testdata).
# --rounds N: the start measured N times each, kubeunit and envtest in turns (default 5).
# Results (FILE, default benches/results/envtest-DATE.txt): per suite its specs passed/failed (Ginkgo's JUnit),
# then the start times. The environment is left stopped. Exit status: 0 when every suite passed, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
# shellcheck source-path=SCRIPTDIR
. "$here/systemd-host.sh"
export KUBEUNIT_OFFLINE=${KUBEUNIT_OFFLINE-1} GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
cache=$(kubeunit_cache)
die() { echo "envtest-suites: $*" >&2; exit 1; }

rounds=5 results="" suites=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --results) results=${2:?}; shift 2 ;;
    client|cache|controller|builder|webhook) suites+=("$1"); shift ;;
    *) echo "envtest-suites: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $rounds in ''|*[!0-9]*|0) echo "envtest-suites: --rounds '$rounds' is not a positive number" >&2; exit 2 ;; esac
[ ${#suites[@]} -gt 0 ] || suites=(client cache controller builder webhook)
k8s=${KUBERNETES_VERSIONS%% *}
results=${results:-benches/results/envtest-$(date -u +%Y%m%dT%H%M%SZ).txt}
mkdir -p "$(dirname "$results")"
results=$(cd "$(dirname "$results")" && pwd)/$(basename "$results")  # the suites run from their source dirs

# The suites and envtest-start, built once per version.
ver=$CONTROLLER_RUNTIME_VERSION m=sigs.k8s.io/controller-runtime
bin=$cache/bin/controller-runtime-$ver
build() {
  local work p
  work=$(mktemp -d)
  (cd "$work" && go mod init kubeunit.test/envtest >/dev/null 2>&1 && go get "$m@$ver" >get.log 2>&1) ||
    { cat "$work/get.log" >&2; die "go get $m@$ver failed"; }
  mkdir -p "$bin.tmp"
  for p in client cache internal/controller builder webhook; do
    (cd "$work" && go test -c -o "$bin.tmp/${p##*/}.test" "$m/pkg/$p") || die "go test -c $m/pkg/$p failed"
  done
  mkdir -p "$work/envtest-start" && cp "$here/go/envtest-start/main.go" "$work/envtest-start/"
  (cd "$work" && go build -o "$bin.tmp/envtest-start" ./envtest-start) || die "envtest-start did not build"
  rm -rf "$bin" "$work"; mv "$bin.tmp" "$bin"; touch "$bin/.complete"
}
[ -f "$bin/.complete" ] || { echo "==> controller-runtime $ver's suites (go test -c)"; build; }
src=$(cd / && go mod download -json "$m@$ver" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[ -d "$src" ] || die "no source of $m@$ver"

# The envtest environment (up.sh: the systemd container where PID 1 is not systemd), left started.
scripts/up.sh envtest >/dev/null
kubeunit=$PWD/target/release/kubeunit
state=/var/lib/kubeunit/envtest
ku() { in_systemd "$kubeunit" "$@" --state-dir "$state"; }
# envtest's own: the same pinned binaries (KUBEBUILDER_ASSETS: etcd, kube-apiserver, kubectl).
assets=$(mktemp -d)
ln -s "$cache/bin/etcd-$ETCD_VERSION/etcd" "$assets/etcd"
ln -s "$cache/bin/kubernetes-$k8s/kube-apiserver" "$cache/bin/kubernetes-$k8s/kubectl" "$assets/"

{
  echo "controller-runtime $ver envtest suites against kubeunit's envtest profile (USE_EXISTING_CLUSTER=true),"
  echo "Kubernetes $k8s, etcd $ETCD_VERSION, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
} >"$results"
failed=()
for s in "${suites[@]}"; do
  pkg=$s; [ "$s" = controller ] && pkg=internal/controller
  ku destroy >/dev/null; ku start >/dev/null
  junit=$(mktemp)
  start=$SECONDS rc=0
  (cd "$src/pkg/$pkg" && USE_EXISTING_CLUSTER=true KUBECONFIG=$state/kubeconfig/admin.kubeconfig \
    KUBEBUILDER_ASSETS=$assets "$bin/${pkg##*/}.test" -ginkgo.junit-report="$junit" >"$results.$s.log" 2>&1) || rc=$?
  counts=$(python3 - "$junit" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except Exception as e:
    print(f"no JUnit ({e})"); sys.exit()
n = {"passed": 0, "failed": 0, "skipped": 0}
for c in cases:
    st = c.get("status") or "passed"
    n["failed" if st in ("failed", "panicked", "interrupted", "timedout") else "skipped" if st in ("skipped", "pending") else "passed"] += 1
print(f"{n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped")
PY
  )
  rm -f "$junit"
  echo "$s ($m/pkg/$pkg): $counts, exit $rc, $((SECONDS - start)) s (log: $results.$s.log)" | tee -a "$results"
  [ "$rc" = 0 ] || failed+=("$s")
done

# The start: `kubeunit start` of the stopped, destroyed profile until it returns (usable), and envtest's
# Start, in turns.
echo | tee -a "$results"
echo "start, $rounds rounds in turns (s): kubeunit start of envtest (fresh etcd) / envtest.Environment.Start" | tee -a "$results"
for i in $(seq "$rounds"); do
  ku destroy >/dev/null
  t0=$(date +%s.%N); ku start >/dev/null; t1=$(date +%s.%N)
  own=$(KUBEBUILDER_ASSETS=$assets "$bin/envtest-start")
  printf 'round %d: kubeunit %.2f / envtest %.2f\n' "$i" "$(awk "BEGIN { print $t1 - $t0 }")" "$own" | tee -a "$results"
done
ku stop >/dev/null
rm -rf "$assets"
echo "results: $results"
[ ${#failed[@]} -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
