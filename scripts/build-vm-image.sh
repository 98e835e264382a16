#!/usr/bin/env bash
# Build (once) the disk image the VM tests boot under QEMU: a debootstrapped Debian bookworm with its cloud
# kernel, systemd, cloud-init (NoCloud only) and what a host of an environment needs (iproute2, iptables,
# conntrack, haproxy). Prints the image's directory: `root.qcow2` (the base each VM gets a copy-on-write
# overlay of), `vmlinuz` and `initrd.img` (booted directly by QEMU: no boot loader in the image).
# Cached under $KUBEUNIT_CACHE; a directory with a .complete stamp is reused.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
cache=$(kubeunit_cache)
# The name carries a revision: a change below makes a new image, never a stale one.
image="$cache/vm-bookworm-r2"
if [ -f "$image/.complete" ]; then echo "$image"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/.vm-image.lock"
flock 9
if [ -f "$image/.complete" ]; then echo "$image"; exit 0; fi
# Stdout is the image's directory alone (the tests read it): what the build says goes to stderr.
exec 3>&1 1>&2
for tool in debootstrap mkfs.ext4 qemu-img; do
  command -v "$tool" >/dev/null || { echo "build-vm-image: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done
die() { echo "build-vm-image: $*" >&2; exit 1; }
mirror=$(debian_mirror)
work="$image.tmp"
rm -rf "$work"
mkdir -p "$work"
root="$work/root"
# linux-image-cloud-amd64: virtio built in, a small initramfs. cloud-init renders the seed's network
# config for systemd-networkd. e2fsprogs: the root's fsck at boot after a power cut. qemu-guest-agent:
# the tests run commands in a VM through it (no SSH, no network of its own).
# python3-cffi-backend: debootstrap does not resolve the virtual package cloud-init needs through it.
debootstrap --variant=minbase \
  --include=systemd,systemd-sysv,udev,dbus,kmod,e2fsprogs,iproute2,procps,ca-certificates,iptables,conntrack,haproxy,linux-image-cloud-amd64,initramfs-tools,cloud-init,python3-cffi-backend,qemu-guest-agent \
  bookworm "$root" "$mirror" >&2
# NoCloud only (no probing for clouds that are not here), its network config for networkd; no locale
# to generate and no SSH host keys (no SSH here).
cat >"$root/etc/cloud/cloud.cfg.d/90-kubeunit-test.cfg" <<'EOF'
datasource_list: [NoCloud, None]
system_info:
  network:
    renderers: [networkd]
locale: false
ssh_genkeytypes: []
EOF
echo 'LABEL=root / ext4 errors=remount-ro 0 1' >"$root/etc/fstab"
# A quick boot: no getty but the serial console's, no timers that reach a network, no local haproxy of
# Debian's own (kubeunit runs its own on a worker), no cloud-init cache or machine id from this build.
chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1
chroot "$root" systemctl mask getty@tty1.service systemd-timesyncd.service apt-daily.timer \
  apt-daily-upgrade.timer e2scrub_reap.service haproxy.service >/dev/null 2>&1 || true
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
rm -rf "$root/var/lib/cloud" "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*_Packages
kernel=$(find "$root/boot" -name 'vmlinuz-*' | sort | tail -n1)
initrd=$(find "$root/boot" -name 'initrd.img-*' | sort | tail -n1)
[ -f "$kernel" ] && [ -f "$initrd" ] || { echo "build-vm-image: no kernel or initramfs in $root/boot" >&2; exit 1; }
cp "$kernel" "$work/vmlinuz"
cp "$initrd" "$work/initrd.img"
# Room for the binaries, the images and a node's containers; qcow2 keeps only what is written.
mkfs.ext4 -q -L root -d "$root" "$work/root.raw" 8G
qemu-img convert -f raw -O qcow2 "$work/root.raw" "$work/root.qcow2"
rm -rf "$work/root.raw" "$root"
rm -rf "$image"
mv "$work" "$image"
touch "$image/.complete"
echo "$image" >&3
