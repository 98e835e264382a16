#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, pinned binaries, the conformance images and the systemd
# rootfs (cached under ~/.cache/kubeunit-test), lint, then every test (a conformance subset among them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/lib.sh
keep_test_networks_local
start=$(date +%s)
scripts/build-test-binaries.sh
echo "test binaries ready after $(( $(date +%s) - start ))s"
# The images of the upstream [Conformance] specs, for tests/conformance.rs (and scripts/conformance.sh).
scripts/build-e2e-images.sh
echo "conformance images ready after $(( $(date +%s) - start ))s"
scripts/build-rootfs.sh >/dev/null
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked -- --test-threads="${KUBEUNIT_TEST_THREADS:-2}"
