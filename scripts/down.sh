#!/usr/bin/env bash
# Stop an environment (default: dev) and, where scripts/up.sh booted one, the systemd container.
#   scripts/down.sh [NAME] [--destroy]     --destroy also deletes the environment's runtime data
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/systemd-host.sh"
name=${1:-dev}
verb=stop; [ "${2:-}" = --destroy ] && verb=destroy
if [ -d "/var/lib/kubeunit/$name" ]; then
  in_systemd "$here/target/release/kubeunit" "$verb" --state-dir "/var/lib/kubeunit/$name" || true
fi
if ! host_has_systemd && [ -n "$(dev_leader)" ]; then
  stop_dev_container
  echo "systemd container stopped"
fi
