#!/usr/bin/env bash
# The test suite, in two tiers (docs/testing.md says what runs where, and why):
#
#   scripts/test.sh          the presubmit tier, what CI runs (.ci/run): fmt, clippy, the lib and doc tests and
#                            every area of tests/it but those tests/full-only.txt names; 30 minutes warm
#   scripts/test.sh --full   everything: every area (the VMs, five hosts, upgrades, kube-bench, Nix) and what
#                            they need built (the VM disk image); writes benches/results/suite-full-DATE.txt
#
# Each builds what its areas need (cached under ~/.cache/kubeunit-test, cargo's target dir too, so that a fresh
# clone reuses the compiled dependencies), then lints and tests. One run at a time: a second is refused. Before
# its tests a run removes what an earlier run killed with SIGTERM or SIGKILL left (scripts/leftovers.sh), saying
# what it found; after them, it fails naming anything its own tests left. It ends with a table of its steps and
# areas, and each failed test's panic last: CI keeps the tail.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,8s/^# \{0,1\}//p' "$0"; }
tier=presubmit
case ${1:-} in
  "") ;;
  --full) tier=full ;;
  -h | --help) usage; exit 0 ;;
  *) { echo "test.sh: unknown argument '$1'"; usage; } >&2; exit 2 ;;
esac

scripts/install-deps.sh
. scripts/lib.sh
. scripts/versions.env
. scripts/systemd-host.sh
cache=$(kubeunit_cache)
mkdir -p "$cache"

# One run at a time: a second would take the first one's test processes and containers for leftovers. The run's
# PID in a file, checked and written under a lock that is let go at once: a held lock's descriptor would pass to
# the containers and VMs the tests start, and one that outlived a killed run would hold it.
exec {suite_lock}>"$cache/.suite.lock"
flock "$suite_lock"
other=""
read -r other 2>/dev/null <"$cache/.suite.pid" || true
if [ -n "$other" ] && [ "$other" != $$ ] && { tr '\0' ' ' <"/proc/$other/cmdline"; } 2>/dev/null | grep -q 'scripts/test\.sh'; then
  echo "test.sh: another scripts/test.sh runs (PID $other): wait for it, or end it (kill $other)" >&2
  exit 2
fi
# A PID file with no such run behind it: that run was killed (its leftovers are cleaned below).
[ -z "$other" ] || [ "$other" = $$ ] || echo "==> an earlier run (PID $other) ended without its clean-up: killed"
echo $$ >"$cache/.suite.pid"
exec {suite_lock}>&-

# What scripts/up.sh or scripts/conformance.sh left running (the kubeunit-dev container) shares this host's
# network: its node namespaces, routes and ports would meet the tests' environments, which use the same
# defaults. The suite runs without it, and says that it stopped it.
if ! host_has_systemd && [ -n "$(dev_leader)" ]; then
  echo "==> stopping the environments scripts/up.sh left running, and its systemd container (kubeunit-dev)"
  for dir in /var/lib/kubeunit/*/; do
    [ -f "$dir/profile.yaml" ] && [ -x target/release/kubeunit ] || continue
    in_systemd target/release/kubeunit stop --state-dir "${dir%/}" || true
  done
  stop_dev_container
fi
# What an earlier run left: one killed with SIGTERM or SIGKILL leaves its containers, VMs and namespaces.
echo "==> leftovers of earlier runs"
found=$(scripts/leftovers.sh list) || { echo "test.sh: scripts/leftovers.sh list failed (above)" >&2; exit 1; }
if [ -n "$found" ]; then
  printf '%s\n' "$found" | sed 's/^/  found /'
  scripts/leftovers.sh clean | sed 's/^/  /'
else
  echo "  none"
fi

# Steps and their seconds, for the report at the end. Each runs as a job waited for, so that a SIGTERM to this
# script is taken at once (bash runs a trap only once its foreground command ends).
steps=()
step() {
  local name=$1 t0=$SECONDS
  shift
  echo "==> $name"
  "$@" &
  wait $!
  steps+=("$(printf '%-34s %6s' "$name" $((SECONDS - t0)))")
}
report=$(mktemp)
# Whatever ends the run: the leak counter's rules and the reject routes go, and so does what its tests left.
# SIGTERM or SIGINT first ends the tests (their children: containers, VMs) through the same clean-up.
finish() {
  local rc=$?
  trap - EXIT INT TERM
  leak_counter stop
  if [ "$rc" != 0 ]; then
    pkill -TERM -P $$ 2>/dev/null || true
    scripts/leftovers.sh clean >/dev/null 2>&1 || true
  fi
  drop_test_network_guards
  rm -f "$report" "$cache/.suite.pid"
  exit "$rc"
}
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
# The reject routes of keep_test_networks_local, removed when the run ends: nothing of the tests is left to
# send a packet to their networks then (scripts/leftovers.sh checked), and no route to one stays behind.
drop_test_network_guards() {
  local net family
  for net in $(test_networks); do
    case $net in *:*) family=-6 ;; *) family=-4 ;; esac
    ip "$family" route del unreachable "$net" metric 4294967295 2>/dev/null || true
  done
}
keep_test_networks_local
# Offline: no environment of a test reaches beyond this machine (egress off, CoreDNS forwarding nothing); the
# harness passes it into the test containers, and only the simulated-internet tests lift it.
export KUBEUNIT_OFFLINE=1
# Golden files are compared, never rewritten, in a run of the suite.
unset KUBEUNIT_UPDATE_GOLDEN
# cargo's target dir in the cache: CI's fresh clone compiles only kubeunit, not its dependencies again.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/target}
# kubeunit's own artifacts built from another checkout (CI's clone) look fresh to cargo when this tree's
# files are older than that build: cargo compares mtimes of paths relative to the package. Their tests
# would read that checkout's files (CARGO_MANIFEST_DIR is compiled in). So kubeunit alone is rebuilt
# when the checkout changes; the dependencies stay.
checkout_mark=$CARGO_TARGET_DIR/.kubeunit-checkout
if [ -d "$CARGO_TARGET_DIR" ] && [ "$(cat "$checkout_mark" 2>/dev/null)" != "$PWD" ]; then
  echo "==> kubeunit was last built here from $(cat "$checkout_mark" 2>/dev/null || echo 'an unknown checkout'): rebuilding it from $PWD"
  cargo clean --quiet -p kubeunit
fi
mkdir -p "$CARGO_TARGET_DIR"
echo "$PWD" >"$checkout_mark"
start=$SECONDS
newest=${KUBERNETES_VERSIONS%% *}

# What the tier's areas run: the pinned binaries and the systemd rootfs; --full adds the e2e suites, the
# conformance images of the newest minor (scripts/conformance.sh builds an older minor's when asked), the
# Gateway API's suite, kube-bench and the VM disk image. debootstrap resolves and fetches from the Debian
# mirror, so the images are built here, before the leak counter starts, never inside a test.
step "pinned binaries ($tier)" scripts/build-test-binaries.sh "--$tier"
if [ "$tier" = full ]; then
  step "conformance images ($newest)" scripts/build-e2e-images.sh "$newest"
  step "Gateway API conformance suite" scripts/gateway-conformance.sh --build
fi
step "systemd rootfs" scripts/build-rootfs.sh >/dev/null
[ "$tier" = presubmit ] || step "VM disk image" scripts/build-vm-image.sh >/dev/null
step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy" cargo clippy --all-targets --locked -- -D warnings
threads=${KUBEUNIT_TEST_THREADS:-2}
step "cargo test --no-run" cargo test --locked --no-run
step "lib and bin tests" cargo test --locked --lib --bins -- --test-threads="$threads"
step "doc tests" cargo test --locked --doc
echo "built and linted after $((SECONDS - start))s"

# No packet of a test network and no DNS query may leave by the default route in the whole run (each simulated
# internet test counts its own too).
leak_counter start
areas=0
areas_start=$SECONDS
scripts/test-areas.sh --tier "$tier" --report "$report" &
wait $! || areas=$?
steps+=("$(printf '%-34s %6s' "tests/it ($tier tier)" $((SECONDS - areas_start)))")
# The count is read whatever the areas did: a failed area must not hide a leak.
leaked=0
leak_counter check || leaked=1
left=0
if scripts/leftovers.sh check; then
  echo "nothing left behind: no test process, container, VM, namespace, test route or mount (scripts/leftovers.sh)"
else
  left=1
  scripts/leftovers.sh clean >/dev/null || true
fi
total=$((SECONDS - start))
ok=$([ "$areas$leaked$left" = 000 ] && echo ok || echo FAILED)

if [ "$tier" = full ]; then
  record=benches/results/suite-full-$(date -u +%Y%m%dT%H%M%SZ).txt
  {
    echo "# scripts/test.sh --full: $ok in ${total}s"
    echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD && echo '' || echo ' (with uncommitted changes)')"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB"
    echo "leak counter: $([ "$leaked" = 0 ] && echo 'nothing through the default route' || echo 'LEAKED (see the log)')"
    echo "leftovers: $([ "$left" = 0 ] && echo none || echo 'FOUND (see the log)')"
    echo
    printf '%-34s %6s\n' STEP SECONDS
    printf '%s\n' "${steps[@]}"
    echo
    sed '/^==> what failed/,$d' "$report"
  } >"$record"
  echo "==> record: $record"
fi

# The report, last: the steps' times, the areas' table, and each failed test's panic (CI keeps the tail).
echo "==> scripts/test.sh ($tier tier): steps"
printf '%-34s %6s\n' STEP SECONDS
printf '%s\n' "${steps[@]}"
cat "$report"
[ "$leaked" = 0 ] || echo "test.sh: packets of the tests' networks or DNS left through the default route (above)"
[ "$left" = 0 ] || echo "test.sh: the tests left processes, containers or network state behind (above)"
echo "test.sh: $ok, $tier tier, in ${total}s"
[ "$ok" = ok ]
