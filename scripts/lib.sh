# shellcheck shell=bash
# Shared by every script (sourced; defines functions only). The tests ask `scripts/container.sh cache-dir`.

# The cache: pinned binaries, the systemd rootfs, the dev container's log.
kubeunit_cache() { printf '%s\n' "${KUBEUNIT_CACHE:-${HOME:-/root}/.cache/kubeunit-test}"; }

# The Debian mirror apt already uses on this machine (no host named here), for debootstrap. Fails through the
# caller's `die`.
debian_mirror() {
  local mirror
  mirror=$(sed -n 's/^URIs: *\([^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
  [ -n "$mirror" ] || mirror=$(sed -n 's/^deb \([^ ]*\/debian\) .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)
  [ -n "$mirror" ] || die "no Debian mirror found in apt's sources"
  echo "$mirror"
}

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
# This machine's own networks: the addresses of its default routes' interfaces, and its gateways (test
# environments' veths and bridges are not among them).
machine_networks() {
  local ifc
  for ifc in $( (ip -4 route show default; ip -6 route show default) | awk '{print $5}' | sort -u); do
    ip -o addr show dev "$ifc" | awk '$3 == "inet" || $3 == "inet6" {print $4}'
  done
  (ip -4 route show default; ip -6 route show default) | awk '{print $3}'
}

# The networks the tests use, but never one of this machine's (scripts/test-networks.py), one per line.
test_networks() {
  local net keep=()
  for net in $(machine_networks); do keep+=(--keep "$net"); done
  python3 "$(dirname "${BASH_SOURCE[0]}")/test-networks.py" "${keep[@]}"
}

keep_test_networks_local() {
  local net family
  for net in $(test_networks); do
    case $net in *:*) family=-6 ;; *) family=-4 ;; esac
    ip "$family" route replace unreachable "$net" metric 4294967295 2>/dev/null ||
      echo "warning: could not add 'unreachable $net' (a stray packet for it would take the default route)" >&2
  done
}

# The whole suite's leak counter: iptables rules (mangle POSTROUTING, before NAT: a pod's packet still has its
# pod's source) counting packets that leave through a default route's interface to or from a network the tests
# use (scripts/test-networks.py), or for a DNS server (port 53: nothing may resolve a real name). Host-wide: any
# process's packet counts. `leak_counter start`, then `leak_counter check` prints what was counted, removes the
# rules and fails when anything was; `leak_counter stop` only removes them.
leak_counter() {
  local chain=KU-SUITE-LEAK tool family net ifc
  for tool in iptables ip6tables; do
    "$tool" -t mangle -D POSTROUTING -j "$chain" 2>/dev/null || true
    case $1 in start | stop) "$tool" -t mangle -F "$chain" 2>/dev/null || true ;; esac
  done
  case $1 in
    start)
      local nets
      nets=$(test_networks)
      for tool in iptables ip6tables; do
        case $tool in iptables) family=-4 ;; *) family=-6 ;; esac
        "$tool" -t mangle -N "$chain" 2>/dev/null || "$tool" -t mangle -F "$chain"
        for ifc in $(ip "$family" route show default | awk '{print $5}' | sort -u); do
          for net in $nets; do
            case $net in *:*) [ "$family" = -6 ] || continue ;; *) [ "$family" = -4 ] || continue ;; esac
            "$tool" -t mangle -A "$chain" -o "$ifc" -d "$net" -j RETURN
            "$tool" -t mangle -A "$chain" -o "$ifc" -s "$net" -j RETURN
          done
          "$tool" -t mangle -A "$chain" -o "$ifc" -p udp --dport 53 -j RETURN
          "$tool" -t mangle -A "$chain" -o "$ifc" -p tcp --dport 53 -j RETURN
        done
        "$tool" -t mangle -I POSTROUTING -j "$chain"
      done
      ;;
    check)
      local counted=0 line
      for tool in iptables ip6tables; do
        while read -r line; do
          echo "leak: $tool $line" >&2
          counted=1
        done < <("$tool" -t mangle -L "$chain" -v -x -n 2>/dev/null | awk 'NR > 2 && $1 > 0')
        "$tool" -t mangle -F "$chain" 2>/dev/null || true
        "$tool" -t mangle -X "$chain" 2>/dev/null || true
      done
      [ "$counted" = 0 ] || { echo "packets of the tests' networks or DNS left through the default route (above)" >&2; return 1; }
      echo "no packet of the tests' networks and no DNS query left through the default route"
      ;;
    stop)
      for tool in iptables ip6tables; do "$tool" -t mangle -X "$chain" 2>/dev/null || true; done
      ;;
  esac
}

# busybox_source VERSION DIR: upstream's busybox VERSION release tarball (busybox_VERSION.orig.tar.bz2 of Debian's
# source package in BUSYBOX_SOURCE_SUITE, versions.env), downloaded into DIR and checked against
# BUSYBOX_SOURCE_SHA256; prints its path. A private apt dir under the cache holds only that suite's deb-src index
# (fetched once and kept; fetched again when the source it names is gone from the mirror). Shared by the node's
# test image (build-test-binaries.sh) and the e2e busybox (build-e2e-images.sh). Fails through the caller's `die`.
busybox_source() {
  local ver=$1 dir=$2 apt src
  apt=$(kubeunit_cache)/e2e-apt/$BUSYBOX_SOURCE_SUITE-src
  local o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/none"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::State::status=$apt/status" -o "Dir::Cache=$apt/cache"
    -o "Acquire::Languages=none" -o APT::Sandbox::User=root)
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  : >"$apt/status"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $BUSYBOX_SOURCE_SUITE main" \
    >"$apt/sources.list"
  if ! apt-cache "${o[@]}" showsrc busybox >/dev/null 2>&1 ||
    ! (cd "$dir" && apt-get "${o[@]}" source --download-only -qq busybox >/dev/null 2>&1); then
    apt-get "${o[@]}" update -qq >&2 || die "apt-get update of the $BUSYBOX_SOURCE_SUITE sources failed"
    (cd "$dir" && apt-get "${o[@]}" source --download-only -qq busybox >/dev/null 2>&1) ||
      die "apt-get source busybox ($BUSYBOX_SOURCE_SUITE) failed"
  fi
  src=$dir/busybox_$ver.orig.tar.bz2
  [ -f "$src" ] || die "Debian's busybox source in $BUSYBOX_SOURCE_SUITE is not $ver: $(cd "$dir" && echo busybox_*.orig.*)"
  echo "$BUSYBOX_SOURCE_SHA256  $src" | sha256sum -c --quiet - >&2 || die "$src: not BUSYBOX_SOURCE_SHA256"
  echo "$src"
}
