#!/usr/bin/env bash
# Stop an environment (default: control-plane) and, where scripts/up.sh booted one, the systemd container.
#   scripts/down.sh [NAME] [--destroy]     --destroy also deletes the environment's runtime data
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/systemd-host.sh"
name=${1:-control-plane}
verb=stop; [ "${2:-}" = --destroy ] && verb=destroy
if [ -d "/var/lib/kubeunit/$name" ]; then
  in_systemd "$here/target/release/kubeunit" "$verb" --state-dir "/var/lib/kubeunit/$name" || true
fi
if ! host_has_systemd && [ -n "$(dev_leader)" ]; then
  nspawn=$(cat "$dev_pidfile")
  nsenter -t "$(dev_leader)" -m -u -i -p -r -w systemctl poweroff --no-block || true
  for _ in $(seq 1 100); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.1; done
  kill "$nspawn" 2>/dev/null || true
  rm -f "$dev_pidfile"
  echo "systemd container stopped"
fi
