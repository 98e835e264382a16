#!/usr/bin/env bash
# Where kubeunit finds systemd on this machine. Sourced by scripts/up.sh, scripts/kubeunit, scripts/down.sh.
#
# On a host booted with systemd, kubeunit talks to PID 1 directly. Where PID 1 is something else (CI
# sandboxes, containers), a long-lived systemd-nspawn container boots systemd on the cached rootfs
# (scripts/build-rootfs.sh), sharing the host network and bind-mounting the state, binaries and kubeunit
# at the same paths, and kubeunit runs inside it through nsenter.
cache=${KUBEUNIT_CACHE:-${HOME:-/root}/.cache/kubeunit-test}
dev_pidfile=$cache/dev-container.pid

host_has_systemd() { [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; }

# Host PID of the dev container's systemd, or nothing.
dev_leader() {
  local nspawn
  nspawn=$(cat "$dev_pidfile" 2>/dev/null) || return 0
  [ -n "$nspawn" ] && kill -0 "$nspawn" 2>/dev/null || return 0
  # nspawn forks through an intermediate process: the leader is the child that runs systemd.
  local pid
  for pid in $(cat /proc/"$nspawn"/task/*/children 2>/dev/null); do
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = systemd ] && { echo "$pid"; return 0; }
  done
}

# Boot the dev container unless it runs already. Args: directories to bind read-write.
boot_dev_container() {
  [ -n "$(dev_leader)" ] && return 0
  local rootfs binds=() d
  rootfs=$("$(dirname "${BASH_SOURCE[0]}")"/build-rootfs.sh)
  for d in "$@"; do mkdir -p "$d"; binds+=("--bind=$d"); done
  mkdir -p "$cache"
  setsid systemd-nspawn --quiet --boot --register=no --keep-unit --volatile=overlay \
    --machine=kubeunit-dev -D "$rootfs" "${binds[@]}" \
    </dev/null >"$cache/dev-container.log" 2>&1 &
  echo $! >"$dev_pidfile"
  local leader="" i
  for i in $(seq 1 600); do
    leader=$(dev_leader)
    if [ -n "$leader" ] && nsenter -t "$leader" -m -u -i -p -r -w systemctl is-system-running --wait 2>/dev/null \
        | grep -Eq 'running|degraded'; then
      return 0
    fi
    sleep 0.1
  done
  echo "the systemd container did not boot; see $cache/dev-container.log" >&2
  return 1
}

# Run a command where systemd is.
in_systemd() {
  if host_has_systemd; then
    "$@"
  else
    local leader; leader=$(dev_leader)
    [ -n "$leader" ] || { echo "no systemd: run scripts/up.sh first (it boots one)" >&2; return 1; }
    nsenter -t "$leader" -m -u -i -p -r -w -- "$@"
  fi
}
