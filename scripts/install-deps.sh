#!/usr/bin/env bash
# Install what building and testing kubeunit needs on a Debian machine (idempotent, quiet when done).
set -euo pipefail
need=()
for pair in systemd-nspawn:systemd-container debootstrap:debootstrap openssl:openssl \
            systemd-analyze:systemd ss:iproute2 nsenter:util-linux nix-build:nix-bin iptables:iptables; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
# nix-bin: Nix 2.8, single-user, for tests/it/nix.rs (builds lib.mkState with real nix-build; no nixpkgs).
# The node build (scripts/build-test-binaries.sh): gcc and libc6-dev for the static pause binary and the
# static runc, libseccomp-dev + pkg-config for runc's seccomp support, python3 for the image tars.
# The test image's busybox is built from its release source there (make; bzip2 unpacks the tarball; readelf
# checks it is static).
# The tests' simulated internet (tests/it/common/internet.rs): iptables (its leak counter) and Debian's
# /usr/bin/python3 (its web servers, standard library only).
# The VM tests (tests/it/vms.rs): QEMU (TCG), qemu-img for copy-on-write overlays, genisoimage for the
# cloud-init seed volumes.
for pair in gcc:gcc make:make bzip2:bzip2 readelf:binutils pkg-config:pkg-config python3:python3 /usr/bin/python3:python3 dpkg-deb:dpkg \
            iptables:iptables ip6tables:iptables qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils genisoimage:genisoimage; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
# kubeunit itself: libssl-dev (+ pkg-config) for the openssl crate (RSA prime search, src/pki/key.rs).
for pkg in libc6-dev libseccomp-dev libssl-dev; do
  grep -q 'ok installed' <<<"$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${need[@]}" >&2
fi
command -v cargo >/dev/null || { echo "install-deps: cargo (Rust) is required" >&2; exit 1; }
command -v go >/dev/null || { echo "install-deps: go is required to build the pinned test binaries" >&2; exit 1; }
