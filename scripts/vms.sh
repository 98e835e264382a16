#!/usr/bin/env bash
# The VM test in full: `ha` on QEMU VMs up by cloud-init alone, then a worker's power cut (kill -9 of its qemu:
# its pods move, and it boots again into a Ready node with no command) and a worker joining later by a bootstrap
# token (no other VM's state dir or units change). About 40 minutes on 2 cores under TCG, more than CI's 90
# minutes carry beside the rest: CI runs the test up to the power cut (tests/it/vms.rs), and this script the
# whole of it, writing its dated result.
#
#   scripts/vms.sh [--results FILE]
#
#   --results FILE   where the result goes (default: benches/results/vms-DATE.txt)
#
# Offline like the suite: the VMs' bridge routes nowhere, and the run fails when a packet of the tests'
# networks or a DNS query left by the default route. Exit status: the test's (0: passed).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR
. scripts/lib.sh

results=""
while [ $# -gt 0 ]; do
  case $1 in
    --results) [ $# -ge 2 ] || { echo "vms.sh: --results needs a file" >&2; exit 2; }; results=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "vms.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
stamp=$(date -u +%Y%m%dT%H%M%SZ)
results=${results:-benches/results/vms-$stamp.txt}
mkdir -p "$(dirname "$results")"

keep_test_networks_local
export KUBEUNIT_OFFLINE=1 KUBEUNIT_VMS_FULL=1
scripts/build-test-binaries.sh >/dev/null
scripts/build-rootfs.sh >/dev/null
scripts/build-vm-image.sh >/dev/null
cargo build --locked --quiet
cargo test --locked --test it --no-run --quiet
test=vms::ha_on_vms_comes_up_by_cloud_init_alone_and_serves_across_them
log=$(mktemp)
trap 'rm -f "$log"; leak_counter stop' EXIT
leak_counter start
set +e
cargo test --locked --test it -- --exact "$test" --nocapture 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
leaks=0
leak_counter check || leaks=1
{
  echo "# scripts/vms.sh at $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(grep -q ' Ready .*(KVM, ' "$log" && echo KVM || echo TCG)"
  echo "$test, with the power cut and the join (KUBEUNIT_VMS_FULL=1)"
  echo
  grep -oE 'vms: .*' "$log" | sed 's/^/  /'
  echo
  grep -E '^test result:|^test vms::' "$log" | sed 's/^/  /'
  # Where it failed: the panic's place and first lines.
  grep -A3 'panicked at' "$log" | grep -vE '^stack backtrace| +[0-9]+: ' | cut -c1-300 | sed 's/^/  /' || true
  [ "$leaks" = 0 ] && echo "  no packet of the tests' networks and no DNS query left by the default route" ||
    echo "  LEAK: packets of the tests' networks or DNS left by the default route"
} >"$results"
echo "vms.sh: result in $results"
[ "$rc" = 0 ] || exit "$rc"
[ "$leaks" = 0 ] || exit 1
