# shellcheck shell=bash
# Shared by every script (sourced; defines functions only). The tests ask `scripts/container.sh cache-dir`.

# The cache: pinned binaries, the systemd rootfs, the dev container's log.
kubeunit_cache() { printf '%s\n' "${KUBEUNIT_CACHE:-${HOME:-/root}/.cache/kubeunit-test}"; }

# mod_dir MODULE@VERSION: its source dir, downloaded into the Go module cache if needed (run outside any
# module). Fails through the caller's `die`.
mod_dir() {
  local d
  d=$( (cd / && go mod download -json "$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$d" ] || die "cannot download $1"
  echo "$d"
}

# The networks the tests and scripts/conformance.sh give their environments (the node links 198.18.0.0/15,
# pod networks 10.88.0.0/13, Service networks 10.0.0.0/16) and the tests' simulated internet (198.19.255.0/24,
# inside the first, which no node link picks). While an environment runs, its node's routes take its ranges,
# and a simulated internet's veth its /28; when none does (stopped, or a test's client still dialling after
# the link went), a packet for them would follow the default route off this machine. Reject routes of the
# lowest priority keep them here (idempotent; they stay, and carry nothing: `start` ignores reject routes).
# Not TEST-NET-3: this workplace's machines reach their package registries at 203.0.113.80.
keep_test_networks_local() {
  local net
  for net in 198.18.0.0/15 10.88.0.0/13 10.0.0.0/16; do
    ip route replace unreachable "$net" metric 4294967295 2>/dev/null ||
      echo "warning: could not add 'unreachable $net' (a stray packet for it would take the default route)" >&2
  done
}
