#!/usr/bin/env bash
# Run the upstream Kubernetes [Conformance] specs (test/e2e of the pinned k8s.io/kubernetes, built here)
# against a kubeunit environment, offline, as the upstream conformance image does: the parallel specs with
# `ginkgo -p` first, then the [Serial] ones one at a time.
#
#   scripts/conformance.sh [--state-dir DIR | --profile NAME] [--minor 1.36] [--focus RE | --specs FILE]
#                          [--skip RE] [--labels EXPR] [--e2e-arg ARG]... [--procs N] [--results DIR]
#                          [--only parallel|serial] [--dry-run] [-- GEN_ARG...]
#
#   --state-dir DIR  a running environment with a node (default: bring up --profile's with scripts/up.sh, with
#                    every image the specs use loaded, and leave it running)
#   --profile NAME   the profile it brings up: dev (default, one node), multi (a control plane and two
#                    workers: the specs that need two schedulable nodes run too) or cis (dev hardened)
#   --minor M        a pinned Kubernetes minor (scripts/versions.env): 1.36, v1.36 or v1.36.3 (default: newest)
#   --focus RE       only specs whose full text matches RE (Ginkgo regex), within the conformance suite
#   --specs FILE     only the specs FILE names, one per line as `e2e.test --list-tests` prints them ("#" lines
#                    are comments); each must run: one the suite does not have fails the run
#   --skip RE        leave out specs matching RE too (reported as not selected)
#   --labels EXPR    the Ginkgo label filter instead of Conformance (e.g. 'Feature: containsAny LoadBalancer';
#                    '' for every spec --focus selects): scripts/e2e-addons.sh runs the addons' specs so
#   --e2e-arg ARG    one more flag for e2e.test (e.g. -storage.testdriver=FILE); repeat for several
#   --procs N        parallel Ginkgo processes for the non-serial specs (default 6 per core: the specs mostly
#                    wait, on fixed timers such as the probes' 4 minutes, so the parallel part's wall time is
#                    their sum divided by N until one spec's own length bounds it: API chunking's 558 s, which
#                    waits for kube-apiserver's 5-minute etcd compaction; on 2 cores, 12 processes took
#                    11m14s, 8 took 15m16s)
#   --results DIR    JUnit, Ginkgo's JSON reports, the e2e log, summary.txt and phases.txt (where the time
#                    went: scripts/conformance-phases.py) go here (default: conformance-results/DATE-VERSION)
#   --only WHICH     run only the parallel or only the serial part
#   --dry-run        list the specs that would run, run none
#   -- GEN_ARG...    more `kubeunit gen` arguments for the environment it brings up (e.g. --set network.podCIDR=...)
#
# Examples:
#   scripts/conformance.sh                                   # the whole suite on a fresh dev (45 min on 2 cores)
#   scripts/conformance.sh --profile multi                   # ... on three nodes, none left out
#   scripts/conformance.sh --profile cis                     # ... on the hardened profile (makes the user etcd)
#   scripts/conformance.sh --focus 'AdmissionWebhook|Aggregator|Proxy'
#   scripts/conformance.sh --state-dir /var/lib/kubeunit/dev --minor 1.35 --only serial
#
# Specs that cannot pass on one node by upstream's own design are left out and named in the summary, each
# with the upstream line that says why: scripts/conformance-single-node.txt. Exit status: 0 when no spec
# failed, 1 when one did, 2 on bad usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
cache=$(kubeunit_cache)
keep_test_networks_local

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
bad() { echo "conformance.sh: $*" >&2; echo "  see: scripts/conformance.sh --help" >&2; exit 2; }

state="" profile=dev minor="" focus="" specs="" skip="" procs=$((6 * $(nproc))) results="" only="" dry_run=""
labels=Conformance e2e_args=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --state-dir|--profile|--minor|--focus|--specs|--skip|--procs|--results|--only|--labels|--e2e-arg)
      [ $# -ge 2 ] || bad "$1 needs a value"
      case $1 in
        --state-dir) state=$2 ;; --profile) profile=$2 ;; --minor) minor=$2 ;; --focus) focus=$2 ;; --specs) specs=$2 ;; --skip) skip=$2 ;;
        --procs) procs=$2 ;; --results) results=$2 ;; --only) only=$2 ;; --labels) labels=$2 ;; --e2e-arg) e2e_args+=("$2") ;;
      esac
      shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --) shift; break ;;
    *) bad "unknown argument '$1'" ;;
  esac
done
[ -z "$state" ] || [ $# -eq 0 ] || bad "gen arguments after -- are for the environment it brings up, not for --state-dir"
if [ -n "$specs" ]; then
  [ -z "$focus" ] || bad "--focus and --specs: give one of them"
  [ -r "$specs" ] || bad "--specs '$specs' is not a readable file"
  # Each name as a regex of itself (Ginkgo matches a spec's full text).
  focus=$(grep -v '^[[:space:]]*\(#\|$\)' "$specs" | sed 's/[][()\\.*+?^$|{}]/\\&/g' | paste -sd'|' -)
  [ -n "$focus" ] || bad "--specs '$specs' names no spec"
fi
case $procs in ''|*[!0-9]*|0) bad "--procs '$procs' is not a positive number" ;; esac
case $only in ''|parallel|serial) ;; *) bad "--only '$only': write parallel or serial" ;; esac

# The pinned Kubernetes version of --minor.
version=""
want=${minor#v}
for v in $KUBERNETES_VERSIONS; do
  case ${v#v} in
    "$want"|"$want".*) version=$v; break ;;
  esac
done
[ -n "$minor" ] || version=${KUBERNETES_VERSIONS%% *}
[ -n "$version" ] || bad "--minor '$minor' is not a pinned Kubernetes minor (scripts/versions.env: $KUBERNETES_VERSIONS)"

echo "==> pinned binaries, e2e.test and ginkgo for $version (cached in $cache)"
scripts/build-test-binaries.sh >/dev/null
e2e_dir=$cache/bin/e2e-$version
kubectl=$cache/bin/kubernetes-$version/kubectl
for f in "$e2e_dir/e2e.test" "$e2e_dir/ginkgo" "$kubectl"; do
  [ -x "$f" ] || { echo "conformance.sh: $f is missing after the build" >&2; exit 1; }
done
echo "==> the images the conformance specs use (cached)"
scripts/build-e2e-images.sh "$version" >/dev/null
images_dir=$(scripts/build-e2e-images.sh --print | grep -- "/e2e-images-$version\$")

given_state=$state
if [ -z "$state" ]; then
  node_images=$(scripts/build-test-binaries.sh --print | grep '/images-' | head -n1)
  archives=$( (find "$node_images" "$images_dir" -name '*.tar') | sort | paste -sd, -)
  KUBEUNIT_KUBERNETES=$version scripts/up.sh "$profile" --set "images=[$archives]" "$@"
  # up.sh's state dir: the default one of the environment's name (`-- --set name=...` picks another).
  name=$(target/release/kubeunit profile show "$profile" "$@" | sed -n 's/^name: //p' | head -n1)
  state=/var/lib/kubeunit/$name
fi
kubeconfig=$state/kubeconfig/admin.kubeconfig
[ -r "$kubeconfig" ] || bad "--state-dir '$state' has no kubeconfig/admin.kubeconfig (is it a kubeunit state dir?)"
"$kubectl" --kubeconfig "$kubeconfig" get --raw /readyz >/dev/null ||
  bad "the environment of $state does not answer: start it (scripts/kubeunit start --state-dir $state)"

# One node: leave out what upstream says needs more (each line: a regex of the spec text, then why).
single_node=""
nodes=$("$kubectl" --kubeconfig "$kubeconfig" get nodes -o name | wc -l)
if [ "$nodes" -lt 2 ]; then
  single_node=$(grep -v '^[[:space:]]*\(#\|$\)' "$here/conformance-single-node.txt" | cut -f1 | paste -sd'|' -)
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
results=${results:-conformance-results/$stamp-$version}
mkdir -p "$results"
results=$(cd "$results" && pwd)

# An environment it did not bring up: the images the specs use must be on its nodes before any spec runs, else
# the specs would pull them from outside, or wait out their timeouts in ImagePullBackOff offline. Those every
# node lists already (its status' images) are there; the rest are loaded (`kubeunit images load`: into
# containerd and the node's registry, which takes only what it lacks). Where that cannot be done (an
# environment of other hosts), nothing runs and the missing images are named.
if [ -n "$given_state" ] && [ -z "$dry_run" ]; then
  missing=$("$kubectl" --kubeconfig "$kubeconfig" get nodes -o json | "$here/images-missing.py" "$images_dir/images.txt")
  if [ -z "$missing" ]; then
    echo "==> the e2e images: on every node already"
  else
    echo "==> the e2e images onto the node of $state (kubeunit images load): $(echo "$missing" | wc -l) missing"
    if ! scripts/kubeunit images load --state-dir "$state" "$images_dir"/*.tar >"$results/images-load.log" 2>&1; then
      echo "conformance.sh: the images the specs use are not on every node of $state, and could not be loaded:" >&2
      tail -n 5 "$results/images-load.log" | sed 's/^/  /' >&2
      echo "  missing (the specs would pull them, so none runs):" >&2
      echo "$missing" | sed 's/^/    /' >&2
      echo "  fix: load them on each node: kubeunit images load --state-dir STATE $images_dir/*.tar" >&2
      exit 2
    fi
  fi
fi

# The e2e flags of upstream's conformance image (test/conformance/image/go-runner), offline: the images are
# under their upstream names already, so no registry override (KUBE_TEST_REPO_LIST) is needed.
# --num-nodes: the schedulable nodes, as kind's hack/ci/e2e-k8s.sh passes it (without it e2e's NumNodes is -1,
# and the specs that need two nodes skip themselves: "Requires at least 2 nodes (not -1)").
schedulable=$("$kubectl" --kubeconfig "$kubeconfig" get nodes \
  -o jsonpath='{range .items[*]}{.spec.taints[*].effect}{"\n"}{end}' | grep -vc NoSchedule || true)
e2e_flags=(--kubeconfig="$kubeconfig" --provider=skeleton --kubectl-path="$kubectl" --disable-log-dump
  --e2e-output-dir="$results" --num-nodes="$schedulable" ${e2e_args[@]+"${e2e_args[@]}"})

# run NAME LABEL_FILTER [GINKGO_FLAG...]: one ginkgo run of e2e.test; its JUnit in RESULTS/NAME.
run() {
  local name=$1 filter=$2; shift 2
  local skips=()
  [ -z "$single_node" ] || skips+=("$single_node")
  [ -z "$skip" ] || skips+=("$skip")
  local args=(--label-filter="$filter" --timeout=24h --no-color --output-dir="$results"
    --junit-report="junit_$name.xml" --json-report="report_$name.json")
  [ -z "$focus" ] || args+=(--focus="$focus")
  if [ ${#skips[@]} -gt 0 ]; then args+=(--skip="$(IFS='|'; echo "${skips[*]}")"); fi
  # Ginkgo lists specs in series only: a dry run drops -p/--procs.
  if [ -n "$dry_run" ]; then args+=(--dry-run -v); set --; fi
  echo "==> $name specs: ginkgo ${args[*]} $*"
  local start=$SECONDS rc=0
  "$e2e_dir/ginkgo" "${args[@]}" "$@" "$e2e_dir/e2e.test" -- "${e2e_flags[@]}" \
    --report-dir="$results/$name" >"$results/e2e-$name.log" 2>&1 || rc=$?
  echo "$name: ginkgo exited $rc after $((SECONDS - start))s (log: $results/e2e-$name.log)"
  # Its own verdict counts too: a BeforeSuite or AfterSuite failure has every listed spec passed.
  [ "$rc" = 0 ] || ginkgo_failed+=("$name (exit $rc)")
  echo "$name $((SECONDS - start))" >>"$results/wall-seconds.txt"
}

: >"$results/wall-seconds.txt"
ginkgo_failed=()
{
  echo "kubernetes $version, e2e.test $("$e2e_dir/e2e.test" --version 2>/dev/null | head -n1)"
  echo "environment $state, $nodes node(s), $(nproc) cores, $(uname -r)"
  echo "started $stamp"
} >"$results/run.txt"
# --labels '': every spec (of --focus), parallel and serial apart as always.
with=${labels:+($labels) && }
[ "$only" = serial ] || run parallel "$with!Serial" -p --procs="$procs"
[ "$only" = parallel ] || run serial "${with}Serial"

# Each kubelet's metrics (its pod start latency) for where the time went.
for node in $("$kubectl" --kubeconfig "$kubeconfig" get nodes -o name); do
  "$kubectl" --kubeconfig "$kubeconfig" get --raw "/api/v1/nodes/${node#node/}/proxy/metrics" \
    >"$results/kubelet-metrics-${node#node/}.txt" 2>/dev/null || true
done
if [ -z "$dry_run" ]; then
  python3 "$here/conformance-phases.py" "$results" >"$results/phases.txt" || true
  cat "$results/phases.txt"
fi

summary_args=("$results" "$here/conformance-single-node.txt")
[ "$nodes" -ge 2 ] || summary_args+=(--single-node)
[ -z "$specs" ] || summary_args+=(--expect "$specs")
summary_rc=0
python3 "$here/conformance-summary.py" "${summary_args[@]}" | tee "$results/summary.txt" || summary_rc=$?
if [ ${#ginkgo_failed[@]} -gt 0 ]; then
  echo "ginkgo failed: ${ginkgo_failed[*]}: see the e2e logs in $results (a suite-level failure fails the run)" |
    tee -a "$results/summary.txt"
  exit 1
fi
exit "$summary_rc"
