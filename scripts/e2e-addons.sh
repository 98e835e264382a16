#!/usr/bin/env bash
# Run upstream's e2e specs of the areas kubeunit's addons serve (test/e2e of the pinned k8s.io/kubernetes, built
# here), offline, each area on a fresh environment of the profile it needs, through scripts/conformance.sh:
#
#   scripts/e2e-addons.sh [AREA...] [--minor 1.36] [--results DIR] [--dry-run]
#
# Areas (default: all, in this order):
#   loadbalancer  sig-network's LoadBalancer specs (label Feature:LoadBalancer; none asks for a cloud provider,
#                 test/e2e/network/loadbalancer.go) on multi, served by MetalLB in layer 2 (addons.loadBalancer)
#   storage       sig-storage's "External Storage" suites with local-path-provisioner as the driver
#                 (scripts/e2e-local-path-driver.yaml), on multi (its topology specs need two nodes): the test
#                 patterns of what the driver does. Not selected, as a CSI driver's CI selects its own: immediate
#                 binding (local-path provisions for a pod's node only: WaitForFirstConsumer), expansion,
#                 cloning, snapshots and block volumes (it has none of them), "any volume data source" (its
#                 populator images are not published as modules here), and the Disruptive ones (they ssh to
#                 nodes)
#   metrics       sig-instrumentation's metrics specs (the MetricsGrabber, the kubelet's /metrics/resource that
#                 metrics-server reads) on dev
#   hpa           sig-autoscaling's HorizontalPodAutoscaler specs on CPU (Deployment, ReplicaSet; Resource and
#                 ContainerResource metrics, from metrics-server) on multi: they scale to 5 pods of 500m, more
#                 than one node of 2 CPUs holds, so one spec at a time (two at once left pods Pending for CPU);
#                 the load is resource-consumer (scripts/build-e2e-images.sh)
#   dualstack     sig-network's dual-stack specs (label Feature:IPv6DualStack, test/e2e/network/dual_stack.go) on
#                 multi with network.ipFamily: dual (the two-node ones too), but those needing SCTP (below)
#
# Each area's results go to DIR/AREA (default DIR: conformance-results/addons-DATE-VERSION): conformance.sh's
# JUnit, e2e logs and summary.txt; DIR/summary.txt has one line per area. The environment of the last area is
# left running (scripts/down.sh NAME stops it). Exit status: 0 when every spec passed, 1 when one failed, 2 on
# bad usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"

bad() { echo "e2e-addons.sh: $*" >&2; echo "  see: scripts/e2e-addons.sh --help" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

areas=() minor="" results="" dry_run=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --minor|--results)
      [ $# -ge 2 ] || bad "$1 needs a value"
      case $1 in --minor) minor=$2 ;; --results) results=$2 ;; esac
      shift 2 ;;
    --dry-run) dry_run=(--dry-run); shift ;;
    loadbalancer|storage|metrics|hpa|dualstack) areas+=("$1"); shift ;;
    *) bad "unknown argument '$1' (areas: loadbalancer storage metrics hpa dualstack)" ;;
  esac
done
[ ${#areas[@]} -gt 0 ] || areas=(loadbalancer storage metrics hpa dualstack)
version=${KUBERNETES_VERSIONS%% *}
if [ -n "$minor" ]; then
  version=""
  for v in $KUBERNETES_VERSIONS; do case ${v#v} in "${minor#v}"|"${minor#v}".*) version=$v; break ;; esac; done
  [ -n "$version" ] || bad "--minor '$minor' is not a pinned Kubernetes minor ($KUBERNETES_VERSIONS)"
fi
results=${results:-conformance-results/addons-$(date -u +%Y%m%dT%H%M%SZ)-$version}
mkdir -p "$results"
results=$(cd "$results" && pwd)

# AREA: its profile, conformance.sh's selection and gen arguments ($profile, $args, $gen_args).
area_args() {
  gen_args=()
  case $1 in
    loadbalancer)
      profile=multi
      args=(--labels 'Feature: containsAny LoadBalancer')
      gen_args=(--set addons.loadBalancer=true) ;;
    storage)
      profile=multi
      args=(--labels '' --e2e-arg "-storage.testdriver=$here/e2e-local-path-driver.yaml"
        --focus 'External Storage \[Driver: local-path\.rancher\.io\] \[Testpattern: (Dynamic PV \(default fs\)\] (subPath|volumes|volumeIO|read-write-once-pod|volume-stress) |Dynamic PV \(filesystem volmode\)\] (multiVolume .*same node|volumeMode should not mount)|Dynamic PV \(block volmode\)\] volumeMode should fail in binding|Dynamic PV \(delayed binding\)\] topology|Generic Ephemeral-volume \(default fs\) \(late-binding\)\] ephemeral)'
        --skip 'kubelet is down|expansion|different volume mode|clone|restored snapshot') ;;
    metrics)
      profile=dev
      args=(--labels '' --focus '\[sig-instrumentation\] (MetricsGrabber|Metrics should grab)')
      gen_args=(--set addons.metricsServer=true) ;;
    hpa)
      profile=multi
      # One at a time: each spec's pods burn real CPU, and the HPA reads it; up to 5 pods of 500m each.
      args=(--labels '' --procs 1
        --focus '\[Feature:HPA\] Horizontal pod autoscaling \(scale resource: CPU\) (Deployment \((Pod|Container) Resource\)|ReplicaSet)')
      gen_args=(--set addons.metricsServer=true) ;;
    # Not SCTPConnectivity: "Marks tests that require a pod networking implementation that supports SCTP
    # traffic between pods" (test/e2e/feature/feature.go), and a kernel without SCTP has none (this machine's:
    # socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT).
    dualstack)
      profile=multi
      args=(--labels 'Feature: containsAny IPv6DualStack && !(Feature: containsAny SCTPConnectivity)')
      gen_args=(--set network.ipFamily=dual) ;;
  esac
}

failed=() up="" profile="" args=() gen_args=()
: >"$results/summary.txt"
for area in "${areas[@]}"; do
  area_args "$area"
  # A fresh environment per area: the one before goes, whatever its profile.
  [ -z "$up" ] || scripts/down.sh "$up" --destroy >/dev/null
  up=$profile
  echo "==> $area on a fresh $profile"
  rc=0
  scripts/conformance.sh --profile "$profile" --minor "$version" --results "$results/$area" "${args[@]}" \
    ${dry_run[@]+"${dry_run[@]}"} -- ${gen_args[@]+"${gen_args[@]}"} || rc=$?
  line=$(grep -E '^[0-9]+ (Conformance specs|specs run): ' "$results/$area/summary.txt" 2>/dev/null | tail -n1 || true)
  echo "$area ($profile): ${line:-no summary} (exit $rc)" | tee -a "$results/summary.txt"
  [ "$rc" = 0 ] || failed+=("$area")
done
echo "results: $results"
[ ${#failed[@]} -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
