#!/usr/bin/env bash
# Where kubeunit finds systemd on this machine. Sourced by scripts/up.sh, scripts/kubeunit, scripts/down.sh.
#
# On a host booted with systemd, kubeunit talks to PID 1 directly. Where PID 1 is something else (CI
# sandboxes, containers), a long-lived container named kubeunit-dev boots systemd (scripts/container.sh),
# sharing the host network and bind-mounting the state, binaries and kubeunit at the same paths, and
# kubeunit runs inside it.
_systemd_host_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$_systemd_host_dir/lib.sh"
cache=$(kubeunit_cache)
container_sh=$_systemd_host_dir/container.sh
dev_container=kubeunit-dev

host_has_systemd() { [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; }

# Host PID of the dev container's systemd, or nothing.
dev_leader() { "$container_sh" leader "$dev_container" 2>/dev/null || true; }

# Boot the dev container unless it runs already. Args: directories to bind read-write.
boot_dev_container() {
  local binds=() d
  for d in "$@"; do binds+=("--bind=$d"); done
  # --node: the dev container can run a node (capabilities, writable cgroups); harmless otherwise.
  "$container_sh" boot "$dev_container" --node --log="$cache/dev-container.log" "${binds[@]}" >/dev/null
}

stop_dev_container() { "$container_sh" stop "$dev_container"; }

# Run a command where systemd is.
in_systemd() {
  if host_has_systemd; then
    "$@"
  else
    [ -n "$(dev_leader)" ] || { echo "no systemd: run scripts/up.sh first (it boots one)" >&2; return 1; }
    "$container_sh" exec "$dev_container" -- "$@"
  fi
}
