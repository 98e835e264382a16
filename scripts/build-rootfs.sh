#!/usr/bin/env bash
# Build (once) the Debian rootfs in which the tests boot systemd as PID 1 with systemd-nspawn.
# Prints the rootfs path. Cached under $KUBEUNIT_CACHE; a rootfs with a .complete stamp is reused.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
cache=$(kubeunit_cache)
# The name carries a revision: a change of the package list below makes a new rootfs, never a stale one.
rootfs="$cache/rootfs-bookworm-r4"
if [ -f "$rootfs/.complete" ]; then echo "$rootfs"; exit 0; fi
# One build at a time (tests boot containers in parallel); the others wait for it and reuse it.
mkdir -p "$cache"
exec 9>"$cache/.rootfs.lock"
flock 9
if [ -f "$rootfs/.complete" ]; then echo "$rootfs"; exit 0; fi
command -v debootstrap >/dev/null || { echo "build-rootfs: debootstrap missing (scripts/install-deps.sh)" >&2; exit 1; }
die() { echo "build-rootfs: $*" >&2; exit 1; }
mirror=$(debian_mirror)
rm -rf "$rootfs.tmp"
# haproxy: the API servers behind one address on a worker host of an environment across hosts.
# iptables and conntrack: kube-proxy and the CNI bridge's masquerading run them on a node.
# libpam-systemd and dbus-user-session: a lingering user's own systemd and its session bus (rootless).
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,dbus,iproute2,procps,ca-certificates,iptables,conntrack,libpam-systemd,dbus-user-session,haproxy \
  bookworm "$rootfs.tmp" "$mirror" >&2
# A quiet, quick boot: no getty, no network management (the container shares the host network).
chroot "$rootfs.tmp" systemctl mask console-getty.service getty.target systemd-networkd.service \
  systemd-resolved.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer haproxy.service >/dev/null 2>&1 || true
echo kubeunit-test > "$rootfs.tmp/etc/hostname"
rm -rf "$rootfs"
mv "$rootfs.tmp" "$rootfs"
touch "$rootfs/.complete"
echo "$rootfs"
