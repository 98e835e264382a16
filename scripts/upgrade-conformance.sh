#!/usr/bin/env bash
# Upstream's conformance specs on an environment upgraded in place: brought up on the older pinned Kubernetes
# minor with scripts/up.sh, `kubeunit upgrade` to the newer (its output and the time the API did not answer go
# to the results), then scripts/conformance.sh against it with the newer minor's e2e.test: the subset of the
# suite (tests/conformance-subset.txt) or, with --full, every spec.
#
#   scripts/upgrade-conformance.sh [--profile dev|multi|cis] [--full] [--results DIR]
#
#   --profile NAME  the environment (default dev; multi: three nodes)
#   --full          the whole conformance suite after the upgrade, not the subset
#   --results DIR   where upgrade.log, api-gaps.txt and conformance.sh's results go
#                   (default: conformance-results/upgrade-DATE-PROFILE)
#
# The environment is left running (scripts/down.sh NAME --destroy removes it). Exit status: 0 when the upgrade
# and every spec passed, 1 when one did not, 2 on bad usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
cache=$(kubeunit_cache)

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
bad() { echo "upgrade-conformance.sh: $*" >&2; echo "  see: scripts/upgrade-conformance.sh --help" >&2; exit 2; }

profile=dev full="" results=""
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --profile|--results)
      [ $# -ge 2 ] || bad "$1 needs a value"
      case $1 in --profile) profile=$2 ;; --results) results=$2 ;; esac
      shift 2 ;;
    --full) full=1; shift ;;
    *) bad "unknown argument '$1'" ;;
  esac
done
case $profile in dev|multi|cis) ;; *) bad "--profile '$profile': dev, multi or cis" ;; esac
read -r new old _ <<<"$KUBERNETES_VERSIONS"
[ -n "${old:-}" ] || bad "scripts/versions.env pins one Kubernetes version ($KUBERNETES_VERSIONS): nothing to upgrade from"

stamp=$(date -u +%Y%m%dT%H%M%SZ)
results=${results:-conformance-results/upgrade-$stamp-$profile}
mkdir -p "$results"
results=$(cd "$results" && pwd)

echo "==> both minors' binaries, the newer one's e2e.test and the images its specs use (cached in $cache)"
scripts/build-test-binaries.sh >/dev/null
scripts/build-e2e-images.sh "$new" >/dev/null
e2e_images=$(scripts/build-e2e-images.sh --print | grep -- "/e2e-images-$new\$")
node_images=$(scripts/build-test-binaries.sh --print | grep '/images-' | head -n1)
archives=$( (find "$node_images" "$e2e_images" -name '*.tar') | sort | paste -sd, -)

echo "==> $profile on $old"
KUBEUNIT_KUBERNETES=$old scripts/up.sh "$profile" --set "images=[$archives]"
name=$(target/release/kubeunit profile show "$profile" | sed -n 's/^name: //p' | head -n1)
state=/var/lib/kubeunit/$name
kubectl=$cache/bin/kubernetes-$new/kubectl
kubeconfig=$state/kubeconfig/admin.kubeconfig

# The API server's longest silence during the upgrade, asked every 100 ms (as the upgrade test does).
poll_api() {
  local last now longest=0
  last=$(date +%s.%N)
  while [ ! -e "$results/.upgraded" ]; do
    if "$kubectl" --kubeconfig "$kubeconfig" get --raw=/readyz --request-timeout=1s >/dev/null 2>&1; then
      now=$(date +%s.%N)
      longest=$(awk -v a="$longest" -v b="$(awk -v n="$now" -v l="$last" 'BEGIN {print n - l}')" 'BEGIN {print (b > a ? b : a)}')
      last=$now
    fi
    sleep 0.1
  done
  echo "the API server did not answer for ${longest}s at most (/readyz every 100 ms)" >"$results/api-gaps.txt"
}
rm -f "$results/.upgraded"
poll_api &
poller=$!

echo "==> kubeunit upgrade to $new (log: $results/upgrade.log)"
rc=0
start=$SECONDS
since=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
scripts/kubeunit upgrade --state-dir "$state" --bin-dir "$cache/bin/kubernetes-$new" \
  --set "versions.kubernetes=$new" >"$results/upgrade.log" 2>&1 || rc=$?
echo "upgrade exited $rc after $((SECONDS - start))s" | tee -a "$results/upgrade.log"
touch "$results/.upgraded"
wait "$poller" || true
rm -f "$results/.upgraded"
# Where the silence went: the API server unit's stop, exit, start and first listen, and systemd's view
# of the units that stop with it, from the journal of the systemd the environment runs under.
{
  echo "journal of kube-apiserver's unit since $since (UTC):"
  (. "$here/systemd-host.sh"
    in_systemd env TZ=UTC journalctl --no-pager -o short-precise --since "$since" \
      -u "kubeunit-$name-kube-apiserver.service" -u "kubeunit-$name-kubelet.service" \
      -u "kubeunit-$name-kube-controller-manager.service" -u "kubeunit-$name-kube-scheduler.service") |
    grep -E 'systemd\[1\]: (Stopping|Stopped|Starting|Started)|Serving securely|"Shutdown|shutting down|ShutdownInitiated' || true
} >>"$results/api-gaps.txt"
cat "$results/api-gaps.txt"
if [ "$rc" != 0 ]; then
  tail -n 30 "$results/upgrade.log" >&2
  exit 1
fi
"$kubectl" --kubeconfig "$kubeconfig" get nodes -o wide | tee "$results/nodes.txt"
if grep -v "^NAME" "$results/nodes.txt" | grep -vq " $new "; then
  echo "upgrade-conformance.sh: a node does not report $new" >&2
  exit 1
fi

specs=(--specs tests/conformance-subset.txt) what="the subset"
[ -z "$full" ] || { specs=(); what="every spec"; }
echo "==> the conformance specs on the upgraded $name ($what)"
scripts/conformance.sh --state-dir "$state" --minor "$new" ${specs[@]+"${specs[@]}"} --results "$results/conformance"
