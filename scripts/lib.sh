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

# The networks the tests and scripts give their environments (node links, pod and Service networks, the
# simulated internet: no literal here, which would count), as scripts/test-networks.py finds them
# in profiles/, tests/ and scripts/ (never by hand: a test that takes a new range is covered by it). While an
# environment runs, its node's routes take its ranges, and a simulated internet's veth its /28; when none
# does (stopped, or a test's client still dialling after the link went), a packet for them would follow the
# default route off this machine. Reject routes of the lowest priority keep them here (idempotent; they
# stay, and carry nothing: `start` ignores reject routes). Never over this machine's own networks and
# gateways, nor TEST-NET-3: this workplace's machines reach their package registries at 203.0.113.80.
keep_test_networks_local() {
  local net keep=() lib_dir
  lib_dir=$(dirname "${BASH_SOURCE[0]}")
  for net in $(ip -o addr show | awk '$3 == "inet" || $3 == "inet6" {print $4}') \
    $(ip route show default | awk '{print $3}') $(ip -6 route show default | awk '{print $3}'); do
    keep+=(--keep "$net")
  done
  for net in $(python3 "$lib_dir/test-networks.py" "${keep[@]}"); do
    case $net in *:*) family=-6 ;; *) family=-4 ;; esac
    ip "$family" route replace unreachable "$net" metric 4294967295 2>/dev/null ||
      echo "warning: could not add 'unreachable $net' (a stray packet for it would take the default route)" >&2
  done
}
