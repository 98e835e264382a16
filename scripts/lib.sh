# shellcheck shell=bash
# Shared by every script (sourced; defines functions only). The tests ask `scripts/container.sh cache-dir`.

# The cache: pinned binaries, the systemd rootfs, the dev container's log.
kubeunit_cache() { printf '%s\n' "${KUBEUNIT_CACHE:-${HOME:-/root}/.cache/kubeunit-test}"; }
