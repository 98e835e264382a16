#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, pinned binaries, the conformance images and the systemd
# rootfs (cached under ~/.cache/kubeunit-test), lint, then every test (a conformance subset among them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/lib.sh
# What scripts/up.sh or scripts/conformance.sh left running (the kubeunit-dev container) shares this host's
# network: its node namespaces, routes and ports would meet the tests' environments, which use the same
# defaults. The suite runs without it, and says that it stopped it.
. scripts/systemd-host.sh
if ! host_has_systemd && [ -n "$(dev_leader)" ]; then
  echo "==> stopping the environments scripts/up.sh left running, and its systemd container (kubeunit-dev)"
  for dir in /var/lib/kubeunit/*/; do
    [ -f "$dir/profile.yaml" ] && [ -x target/release/kubeunit ] || continue
    in_systemd target/release/kubeunit stop --state-dir "${dir%/}" || true
  done
  stop_dev_container
fi
keep_test_networks_local
# Offline: no environment of a test reaches beyond this machine (egress off, CoreDNS forwarding nothing); the
# harness passes it into the test containers, and only the simulated-internet tests lift it.
export KUBEUNIT_OFFLINE=1
# Golden files are compared, never rewritten, in a run of the suite.
unset KUBEUNIT_UPDATE_GOLDEN
start=$(date +%s)
scripts/build-test-binaries.sh
echo "test binaries ready after $(( $(date +%s) - start ))s"
# The images of the upstream [Conformance] specs, for tests/it/conformance.rs (and scripts/conformance.sh).
scripts/build-e2e-images.sh
# The Gateway API's conformance suite and its images, for tests/it/conformance.rs (scripts/gateway-conformance.sh).
scripts/gateway-conformance.sh --build
echo "conformance images ready after $(( $(date +%s) - start ))s"
scripts/build-rootfs.sh >/dev/null
# The VM tests' disk image: debootstrap resolves and fetches from the Debian mirror, so it is built here, before
# the leak counter starts, never inside a test.
scripts/build-vm-image.sh >/dev/null
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
threads=${KUBEUNIT_TEST_THREADS:-2}
cargo test --locked --no-run
cargo test --locked --lib --bins -- --test-threads="$threads"
cargo test --locked --doc
# No packet of a test network and no DNS query may leave by the default route in the whole run (each simulated
# internet test counts its own too).
leak_counter start
trap 'leak_counter stop' EXIT
# The count is read whatever the areas did: a failed area must not hide a leak.
areas=0
scripts/test-areas.sh || areas=$?
leak_counter check
[ "$areas" = 0 ] || exit "$areas"
echo "tests done after $(( $(date +%s) - start ))s"
