#!/usr/bin/env bash
# Build the container images the upstream e2e [Conformance] specs of each pinned Kubernetes version use
# (KUBERNETES_VERSIONS in scripts/versions.env), and those of the addons' specs (ADDON_SPEC_IMAGES below),
# byte-reproducibly, as docker-archive tars for
# `ctr -n k8s.io images import`, each under the exact reference that version's e2e framework runs
# (test/utils/image/manifest.go), so the specs find them without a registry.
#
#   scripts/build-e2e-images.sh                 # every pinned version
#   scripts/build-e2e-images.sh VERSION...      # those pinned versions (scripts/test.sh: the newest alone)
#   scripts/build-e2e-images.sh --list [VER...] # the images the specs of VER (default: every pinned version) use
#   scripts/build-e2e-images.sh --print         # the output dirs, one per line; builds nothing
#
# Output: $KUBEUNIT_CACHE/e2e-images-<kubernetes version>/<name>-<tag>.tar
#           (+ images.txt: "FILE REFERENCE" per line, as build-test-binaries.sh writes; "#" lines say what
#           each image was built from: Debian packages and versions, Go module versions)
#         $KUBEUNIT_CACHE/e2e-parts/  binaries several images share (busybox, agnhost, etcd, ...)
#         $KUBEUNIT_CACHE/e2e-debs/   the Debian packages downloaded
# Like build-test-binaries.sh: a dir with a .complete stamp is reused as is; each is built in <dir>.tmp and
# renamed when done. A lock on $KUBEUNIT_CACHE/.e2e-images.lock keeps two runs apart (build-test-binaries.sh
# has its own lock: they may run side by side).
#
# The list is derived, not kept: scripts/e2e-images.go reads the k8s.io/kubernetes module of the version
# (every Conformance spec, the helpers it calls, manifest.go's registry table; see its header). An image this
# script has no builder for fails the build, so a new minor that needs another image says so.
#
# Contents (no downloaded binary but Alpine's own minirootfs):
# - Alpine's minirootfs (ALPINE_VERSION, versions.env) under the images whose upstream Dockerfile starts FROM
#   alpine: what the official alpine image is made of, from its source repository as a Go module.
# - Debian bookworm packages (this machine's apt lists; apt-get download, dpkg-deb -x of the package and its
#   Depends/Pre-Depends closure as apt resolves it for an empty system; no maintainer scripts run, their effects
#   that matter are redone: passwd/group from base-passwd, update-alternatives links). Docs, man pages and
#   locales are left out, as in debian:*-slim (copyright files kept).
# - busybox: upstream's release source (the .orig tarball of Debian's busybox source package, checked against
#   BUSYBOX_SOURCE_SHA256, Debian's patches not applied), `make defconfig`, linked against Debian's libc6.
#   Debian's own busybox builds cannot be used: Debian patches ash to drop environment variables whose names are
#   not shell identifiers (data-1, the ConfigMap env specs' names), which upstream's ash passes on. The images on
#   Alpine use Alpine's busybox.
# - Go binaries from the Go module proxy: agnhost and nnp from the k8s.io/kubernetes release whose
#   test/images/<name>/VERSION is the image's tag, sample-apiserver from k8s.io/sample-apiserver at the tag its
#   test/images Makefile checks out, etcd from go.etcd.io/etcd, CoreDNS at COREDNS_VERSION (versions.env).
# - pause from build/pause/linux/pause.c of the release whose build/pause/Makefile TAG is the tag, built as
#   build-test-binaries.sh builds it (same bytes for the same tag).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
cache=$(kubeunit_cache)
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
parts=$cache/e2e-parts
debcache=$cache/e2e-debs

# Where the source of an image tag lives when no k8s.io/kubernetes tag has it: "NAME:TAG=MODULE_VERSION".
# agnhost 2.55 (AgnhostPrev since v1.35): master bumped agnhost to 2.55 (kubernetes#131879) and to 2.56
# (kubernetes#131924, netexec /serverport) between v1.34.0-alpha.0 (2.53) and v1.34.0-alpha.1 (2.56); no tag holds
# 2.55. v1.34.0-alpha.1 is the nearest tagged source: 2.55 plus netexec's /serverport endpoint.
# resource-consumer 1.13 (v1.35's manifest.go; the HPA specs of scripts/e2e-addons.sh): v1.28.15's source says 1.13
# (checked); the search above does not reach it, as the proxy's version list here has nothing between v1.13.0 and
# v1.29.6 (whose source says 1.14).
SOURCE_OVERRIDES="agnhost:2.55=v1.34.0-alpha.1 resource-consumer:1.13=v1.28.15"
# Images beyond the Conformance specs': those of the addons' specs (scripts/e2e-addons.sh), by manifest.go's
# ImageID, each checked against the version's manifest.go: resource-consumer, the HPA specs' load.
ADDON_SPEC_IMAGES="ResourceConsumer"
# The image's PATH (alpine's and Debian's default).
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

die() { echo "build-e2e-images: $*" >&2; exit 1; }

mode=all
build_versions=$KUBERNETES_VERSIONS
case ${1:-} in
  "") ;;
  v*)
    for v in "$@"; do
      case " $KUBERNETES_VERSIONS " in *" $v "*) ;; *) die "$v: not a pinned Kubernetes (versions.env: $KUBERNETES_VERSIONS)" ;; esac
    done
    build_versions=$* ;;
  --print) mode=print; [ $# -eq 1 ] || die "--print takes no arguments" ;;
  --list) mode=list; shift ;;
  *) die "unknown argument '$1' (usage: $0 [VERSION... | --print | --list [VERSION...]])" ;;
esac

if [ "$mode" = print ]; then
  for v in $KUBERNETES_VERSIONS; do echo "$cache/e2e-images-$v"; done
  exit 0
fi

command -v go >/dev/null || die "go is not installed"

# derive_images K8S_DIR: "ID REFERENCE" per image the Conformance specs of that source tree use (comments start
# with #). The helper checks its spec count against test/conformance/testdata/conformance.yaml.
derive_images() {
  (cd "$here" && GOFLAGS="" go run ./e2e-images.go "$1") || die "cannot derive the image list of $1"
}

if [ "$mode" = list ]; then
  if [ $# -eq 0 ]; then read -r -a pinned <<<"$KUBERNETES_VERSIONS"; set -- "${pinned[@]}"; fi
  for v in "$@"; do
    echo "# k8s.io/kubernetes@$v"
    derive_images "$(mod_dir "k8s.io/kubernetes@$v")"
  done
  exit 0
fi

command -v python3 >/dev/null || die "python3 is missing"
command -v gcc >/dev/null || die "gcc is missing (scripts/install-deps.sh installs it)"
command -v make >/dev/null || die "make is missing"
arch=$(go env GOARCH)
[ "$(dpkg --print-architecture)" = "$arch" ] || die "Debian architecture $(dpkg --print-architecture) is not Go's $arch"

mkdir -p "$cache" "$parts" "$debcache"
# One run at a time per cache; not build-test-binaries.sh's lock (.build.lock), which it holds for an hour.
exec 8>"$cache/.e2e-images.lock"
flock 8

# every scratch dir lives in $scratch, removed on exit (DIR.tmp of a build that failed is cleared on the next run)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
work=$scratch tmp=""

# cached NAME VERSION DIR BUILDER [ARGS...]: unless DIR/.complete exists, build_dir NAME VERSION DIR BUILDER ARGS...
cached() {
  if [ -f "$3/.complete" ]; then echo "$1 $2: cached in $3"; return; fi
  build_dir "$@"
}

# build_dir NAME VERSION DIR BUILDER [ARGS...]: run BUILDER ARGS... with $tmp (an empty DIR.tmp) and $work (a
# scratch dir) set, then replace DIR with DIR.tmp and stamp it (a failed build leaves DIR as it was).
# Nested calls (a part built while an image dir is being built) keep the caller's $tmp and $work.
build_dir() {
  local name=$1 ver=$2 out=$3; shift 3
  local start=$SECONDS outer_tmp=${tmp:-} outer_work=${work:-}
  echo "$name $ver: building into $out"
  tmp=$out.tmp work=$(mktemp -d -p "$scratch")
  rm -rf "$tmp"; mkdir -p "$tmp"
  "$@"
  rm -rf "$work" "$out"
  mv "$tmp" "$out"
  touch "$out/.complete"
  tmp=$outer_tmp work=$outer_work
  echo "$name $ver: built in $(( SECONDS - start ))s"
}

# go_get PACKAGE@VERSION...: a throwaway main module in $work requiring their modules (the versions
# `go install pkg@version` would use). Output only on failure.
go_get() {
  (cd "$work" && go mod init kubeunit.test/e2e >/dev/null 2>&1 && go get "$@" >"$work/get.log" 2>&1) ||
    { cat "$work/get.log" >&2; die "go get $* failed"; }
}

# --- where an image's source is ---

# image_version NAME K8S_DIR: the tag the k8s.io/kubernetes tree at K8S_DIR builds image NAME with (pause: its
# build/pause/Makefile TAG, else test/images/NAME/VERSION); empty when it has none.
image_version() {
  if [ "$1" = pause ]; then
    sed -n 's/^TAG ?= //p' "$2/build/pause/Makefile" 2>/dev/null
  else
    cat "$2/test/images/$1/VERSION" 2>/dev/null || true
  fi
}

# k8s_source NAME TAG: the k8s.io/kubernetes version whose image NAME has this TAG. Tried: SOURCE_OVERRIDES,
# the pinned versions, then the versions the Go proxy lists, newest first, down to the first older tag.
k8s_source() {
  local name=$1 want=$2 v have o
  for o in $SOURCE_OVERRIDES; do
    if [ "${o%%=*}" = "$name:$want" ]; then echo "${o#*=}"; return; fi
  done
  for v in $KUBERNETES_VERSIONS; do
    [ "$(image_version "$name" "$(mod_dir "k8s.io/kubernetes@$v")")" = "$want" ] && { echo "$v"; return; }
  done
  local newest=${KUBERNETES_VERSIONS%% *}
  for v in $( (cd / && go list -m -versions k8s.io/kubernetes) | tr ' ' '\n' | grep -E '^v1\.[0-9]+\.[0-9]+$' | sort -rV); do
    [ "$(printf '%s\n' "$v" "$newest" | sort -V | tail -n1)" = "$newest" ] || continue
    have=$(image_version "$name" "$(mod_dir "k8s.io/kubernetes@$v")")
    [ "$have" = "$want" ] && { echo "$v"; return; }
    if [ -n "$have" ] && [ "$(printf '%s\n' "$have" "$want" | sort -V | head -n1)" = "$have" ]; then break; fi
  done
  die "no k8s.io/kubernetes release has $name $want (test/images/$name/VERSION); add it to SOURCE_OVERRIDES"
}

# --- Debian packages ---

# debs_closure PKG...: "NAME VERSION" per package apt installs for PKG... on an empty system (Depends and
# Pre-Depends, no Recommends), from this machine's apt lists; each must come from a Debian archive.
debs_closure() {
  local empty=$work/empty-status out
  : >"$empty"
  apt-cache show "$@" >/dev/null 2>&1 || apt-get update -qq || die "apt-get update failed"
  out=$(apt-get -s -o Dir::State::status="$empty" -o APT::Install-Recommends=false install "$@" 2>&1) ||
    { echo "$out" >&2; die "apt cannot resolve $*"; }
  local bad
  bad=$(echo "$out" | sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) \(.*\)$/\1 \2 \3/p' | grep -v '^[^ ]* [^ ]* Debian' || true)
  [ -z "$bad" ] || die "not from a Debian archive: $bad"
  echo "$out" | sed -n 's/^Inst \([^ ]*\) (\([^ ]*\) .*$/\1 \2/p' | sort
}

# debs_only PKG...: "NAME VERSION" of PKG... alone (checked as debs_closure checks them), without what they depend on.
debs_only() {
  local all p
  all=$(debs_closure "$@")
  for p in "$@"; do
    grep "^$p " <<<"$all" || die "apt would not install $p"
  done
}

# deb_file NAME VERSION: the package's .deb in $debcache (downloaded there when missing; kept).
deb_file() {
  local f
  f=$(find "$debcache" -maxdepth 1 -name "${1}_${2//:/%3a}_*.deb" | head -n1)
  if [ -z "$f" ]; then
    (cd "$debcache" && apt-get download -q -o APT::Sandbox::User=root "$1=$2" >/dev/null 2>&1) ||
      die "apt-get download $1=$2 failed"
    f=$(find "$debcache" -maxdepth 1 -name "${1}_${2//:/%3a}_*.deb" | head -n1)
    [ -n "$f" ] || die "apt-get download $1=$2 wrote no .deb"
  fi
  echo "$f"
}

# debs_extract ROOT "NAME VERSION"...: unpack each package into ROOT, then leave out docs, man pages and
# locales; appends "# NAME=VERSION ..." to $work/debs.txt.
debs_extract() {
  local root=$1 pv f; shift
  mkdir -p "$root"
  for pv in "$@"; do
    f=$(deb_file "${pv% *}" "${pv#* }")
    dpkg-deb -x "$f" "$root"
  done
  rm -rf "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/locale" "$root/usr/share/lintian" \
    "$root/usr/share/bug"
  if [ -d "$root/usr/share/doc" ]; then
    find "$root/usr/share/doc" ! -type d ! -name copyright -delete
    find "$root/usr/share/doc" -depth -type d -empty -delete
  fi
  printf '%s\n' "$@" | tr ' ' '=' | paste -sd' ' | sed 's/^/#   debian: /' >>"$work/debs.txt"
}

# debs_alternatives ROOT: the links update-alternatives would make (--install LINK NAME PATH PRIORITY and its
# --slave LINK NAME PATH; the highest priority per link), read from the postinst scripts of the packages
# unpacked (those named in $work/debs.txt). Links to files not in ROOT (man pages) are left out.
debs_alternatives() {
  local root=$1 pv link target
  : >"$work/postinst"
  for pv in $(sed 's/^#   debian: //' "$work/debs.txt" | tr ' ' '\n'); do
    rm -rf "$work/ctrl"; dpkg-deb -e "$(deb_file "${pv%%=*}" "${pv#*=}")" "$work/ctrl"
    if [ -f "$work/ctrl/postinst" ]; then cat "$work/ctrl/postinst" >>"$work/postinst"; fi
  done
  # one line per command (backslash-newline joined), then its links
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$work/postinst" | awk '/update-alternatives/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "--install") { prio = $(i + 4); print prio, $(i + 1), $(i + 3); i += 4 }
        else if ($i == "--slave") { print prio, $(i + 1), $(i + 3); i += 3 }
      } }' | awk '$2 ~ /^\/[^$]*$/ && $3 ~ /^\/[^$]*$/' | sort -k2,2 -k1,1nr | awk '!seen[$2]++ { print $2, $3 }' |
    while read -r link target; do
      if [ -e "$root$target" ] && [ ! -e "$root$link" ] && [ ! -L "$root$link" ]; then
        mkdir -p "$root$(dirname "$link")"
        ln -s "$target" "$root$link"
      fi
    done
}

# base_etc ROOT: /etc/passwd and /etc/group from base-passwd's master files (what its postinst installs; the
# package itself when it is in ROOT, else only those two files), an nsswitch.conf (libc-bin's, else files
# before dns), and the usual dirs.
base_etc() {
  local root=$1 bp=$1/usr/share/base-passwd pv
  if [ ! -f "$bp/passwd.master" ]; then
    pv=$(debs_only base-passwd)
    dpkg-deb -x "$(deb_file "${pv% *}" "${pv#* }")" "$work/base-passwd"
    bp=$work/base-passwd/usr/share/base-passwd
    echo "#   debian: ${pv/ /=} (its passwd.master and group.master only)" >>"$work/debs.txt"
  fi
  mkdir -p "$root/etc" "$root/root" "$root/tmp" "$root/var/tmp" "$root/home" "$root/proc" "$root/sys" \
    "$root/dev" "$root/run"
  chmod 700 "$root/root"; chmod 1777 "$root/tmp" "$root/var/tmp"
  [ -e "$root/var/run" ] || ln -s /run "$root/var/run"
  cp "$bp/passwd.master" "$root/etc/passwd"
  cp "$bp/group.master" "$root/etc/group"
  # root's shell is bash in Debian; sh where there is no bash
  [ -e "$root/bin/bash" ] || sed -i 's#^\(root:.*:\)/bin/bash$#\1/bin/sh#' "$root/etc/passwd"
  if [ -f "$root/usr/share/libc-bin/nsswitch.conf" ]; then
    cp "$root/usr/share/libc-bin/nsswitch.conf" "$root/etc/nsswitch.conf"
  else
    printf '%s\n' 'passwd: files' 'group: files' 'shadow: files' 'hosts: files dns' 'networks: files' \
      'protocols: files' 'services: files' 'ethers: files' 'rpc: files' >"$root/etc/nsswitch.conf"
  fi
}

# add_user ROOT NAME UID GID HOME SHELL [GROUP...]: as alpine's `adduser -D -u UID NAME` (a group NAME with GID;
# the home made and owned by the user: $work/owners gets "--owner HOME:UID:GID") plus membership in GROUPs.
add_user() {
  local root=$1 name=$2 uid=$3 gid=$4 home=$5 shell=$6 g; shift 6
  echo "$name:x:$uid:$gid:Linux User,,,:$home:$shell" >>"$root/etc/passwd"
  grep -q "^$name:" "$root/etc/group" || echo "$name:x:$gid:" >>"$root/etc/group"
  for g in "$@"; do
    awk -F: -v OFS=: -v g="$g" -v u="$name" '$1 == g { $4 = ($4 == "" ? u : $4 "," u) } { print }' \
      "$root/etc/group" >"$work/group" && cat "$work/group" >"$root/etc/group"
  done
  mkdir -p "$root$home"
  echo "--owner=$home:$uid:$gid" >>"$work/owners"
}

# --- parts shared by images (in $parts, each built once) ---

# busybox VERSION: upstream's release, defconfig, dynamically linked against this machine's (Debian's) glibc.
busybox_part() {
  local ver=$1 src epoch
  src=$(busybox_source "$ver" "$work")
  tar -xjf "$src" -C "$work"
  # the build date busybox prints: its release's (the top Makefile's mtime in the tarball)
  epoch=$(stat -c %Y "$work/busybox-$ver/Makefile")
  (cd "$work/busybox-$ver" && export SOURCE_DATE_EPOCH=$epoch &&
    make -s defconfig >/dev/null && make -s -j"$(nproc)" busybox >"$work/make.log" 2>&1) ||
    { tail -n 30 "$work/make.log" >&2; die "busybox $ver did not build"; }
  cp "$work/busybox-$ver/busybox" "$tmp/busybox"
  echo "busybox $ver from busybox_$ver.orig.tar.bz2 (Debian $BUSYBOX_SOURCE_SUITE), make defconfig" >"$tmp/SOURCE"
}

# the parts: each ensure_* builds its part unless cached (log on stderr); the file is at a known path
ensure_busybox() { cached busybox "$1" "$parts/busybox-$1" busybox_part "$1" >&2; }

# alpine VERSION: Alpine's minirootfs of this architecture from ALPINE_MODULE (versions.env) as rootfs.tar.gz,
# checked against ALPINE_MINIROOTFS_SHA256_<arch>; owners: an --owner option per entry not owned by 0:0 (the
# image archives are 0:0 unless told); SOURCE: where it came from.
alpine_part() {
  local ver=$1 dir alparch sum want shavar
  case $arch in amd64) alparch=x86_64 ;; arm64) alparch=aarch64 ;; *) die "no Alpine minirootfs name for $arch" ;; esac
  dir=$(mod_dir "$ALPINE_MODULE")
  [ -f "$dir/$alparch/alpine-minirootfs-$ver-$alparch.tar.gz" ] ||
    die "$ALPINE_MODULE has no $alparch/alpine-minirootfs-$ver-$alparch.tar.gz (ALPINE_VERSION in versions.env)"
  sum=$(sha256sum "$dir/$alparch/alpine-minirootfs-$ver-$alparch.tar.gz" | cut -d' ' -f1)
  shavar=ALPINE_MINIROOTFS_SHA256_$arch
  want=${!shavar:-}
  [ "$sum" = "$want" ] || die "alpine-minirootfs-$ver-$alparch.tar.gz has sha256 $sum, not '$want' (ALPINE_MINIROOTFS_SHA256_$arch)"
  cp "$dir/$alparch/alpine-minirootfs-$ver-$alparch.tar.gz" "$tmp/rootfs.tar.gz"
  tar -tzvf "$tmp/rootfs.tar.gz" --numeric-owner |
    awk '$2 != "0/0" { split($2, o, "/"); p = $6; sub(/^\.\//, "/", p); print "--owner=" p ":" o[1] ":" o[2] }' \
    >"$tmp/owners"
  echo "alpine-minirootfs-$ver-$alparch.tar.gz from $ALPINE_MODULE (sha256 $sum)" >"$tmp/SOURCE"
}
ensure_alpine() { cached alpine "$ALPINE_VERSION" "$parts/alpine-$ALPINE_VERSION" alpine_part "$ALPINE_VERSION" >&2; }

# k8s_module_build K8S_VERSION OUT LDFLAGS PKG...: packages of k8s.io/kubernetes at K8S_VERSION, in a throwaway
# main module whose staging modules point at their v0.<minor>.<patch> tags (as build-test-binaries.sh's k8s_build).
k8s_module_build() (
  ver=$1 out=$2 ld=$3; shift 3
  cd "$work"
  go mod init kubeunit.test/e2e >/dev/null 2>&1
  gomod=$(go mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -n "$gomod" ] || die "cannot download k8s.io/kubernetes@$ver"
  go mod edit -require="k8s.io/kubernetes@$ver"
  while read -r mod; do
    go mod edit -replace="$mod=$mod@v0.${ver#v1.}"
  done < <(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/src/.*#\1#p' "$gomod")
  go get "${@/%/@$ver}" >"$work/get.log" 2>&1 || { cat "$work/get.log" >&2; die "go get $* failed"; }
  go build -trimpath -ldflags "$ld" -o "$out/" "$@"
)

# agnhost K8S_VERSION: the agnhost binary of that release (as its Makefile: -w, main.Version from its VERSION)
# and the files its image adds (porter's localhost.crt and localhost.key).
agnhost_part() {
  local ver=$1 dir
  dir=$(mod_dir "k8s.io/kubernetes@$ver")
  k8s_module_build "$ver" "$tmp" "-w -X main.Version=$(cat "$dir/test/images/agnhost/VERSION")" \
    k8s.io/kubernetes/test/images/agnhost
  cp "$dir/test/images/agnhost/porter/localhost.crt" "$dir/test/images/agnhost/porter/localhost.key" "$tmp/"
  cp "$dir/test/images/agnhost/VERSION" "$tmp/VERSION"
}

ensure_agnhost() { cached agnhost "$1" "$parts/agnhost-$1" agnhost_part "$1" >&2; }

# The same build as build-test-binaries.sh's: without CoreDNS's cloud plugins and trace (scripts/go/coredns/main.go).
coredns_part() {
  local m=github.com/coredns/coredns
  go_get "$m@$COREDNS_VERSION"
  mkdir -p "$work/coredns" && cp "$here/go/coredns/main.go" "$work/coredns/main.go"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" ./coredns)
}

# CoreDNS at COREDNS_VERSION into $coredns: build-test-binaries.sh's if it is there (the same build), else built here.
ensure_coredns() {
  coredns=$cache/bin/coredns-$COREDNS_VERSION/coredns
  [ -f "$cache/bin/coredns-$COREDNS_VERSION/.complete" ] && return
  cached coredns "$COREDNS_VERSION" "$parts/coredns-$COREDNS_VERSION" coredns_part >&2
  coredns=$parts/coredns-$COREDNS_VERSION/coredns
}

etcd_part() {
  local ver=$1
  go_get "go.etcd.io/etcd/server/v3@$ver" "go.etcd.io/etcd/etcdctl/v3@$ver"
  (cd "$work" && go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ver" -o "$tmp/etcd" \
    go.etcd.io/etcd/server/v3 &&
    go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ver" -o "$tmp/etcdctl" \
      go.etcd.io/etcd/etcdctl/v3)
  grep -qx "etcd Version: ${ver#v}" <<<"$("$tmp/etcd" --version)" || die "the etcd built is not $ver"
}

sample_apiserver_part() {
  go_get "k8s.io/sample-apiserver@$1"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$tmp/sample-apiserver" k8s.io/sample-apiserver)
}

# --- images (each builder: REF FILE, writes $tmp/FILE and "#" lines about it to $work/notes) ---

archive() { python3 "$here/docker-archive.py" "$@" --arch "$arch"; }

# note TEXT: a comment line for images.txt about the image being built.
note() { echo "#   $*" >>"$work/notes"; }

# tag_of REF: the tag of an image reference.
tag_of() { echo "${1##*:}"; }

# busybox_root ROOT BUSYBOX: busybox at /bin/busybox and a link in /bin per applet (busybox --list-full), as the
# busybox image has them, except where ROOT's PATH dirs have the command already.
busybox_root() {
  local root=$1 bb=$2 a d taken
  mkdir -p "$root/bin"
  cp "$bb" "$root/bin/busybox"; chmod 755 "$root/bin/busybox"
  for a in $("$root/bin/busybox" --list-full); do
    case $a in bin/*|sbin/*|usr/bin/*|usr/sbin/*) ;; *) continue ;; esac
    taken=""
    for d in ${IMAGE_PATH//:/ }; do
      if [ -e "$root$d/${a##*/}" ] || [ -L "$root$d/${a##*/}" ]; then taken=1; fi
    done
    [ -n "$taken" ] || ln -s /bin/busybox "$root/bin/${a##*/}"
  done
}

# busybox: upstream's is busybox.net's release on glibc (no distribution). Here that release on Debian's glibc and
# libc-bin, every applet in /bin.
busybox_image() {
  local ref=$1 file=$2 tag ver closure txt root=$work/root
  tag=$(tag_of "$ref"); ver=${tag%-*}
  txt=$(debs_closure libc6 libc-bin)
  mapfile -t closure <<<"$txt"
  debs_extract "$root" "${closure[@]}"
  ensure_busybox "$ver"
  busybox_root "$root" "$parts/busybox-$ver/busybox"
  base_etc "$root"
  note "busybox $ver: $(cat "$parts/busybox-$ver/SOURCE")"
  archive "$tmp/$file" --ref "$ref" --cmd '["sh"]' --tree "$root"
  note "upstream: busybox:$ver (busybox.net); here busybox $ver on Debian's glibc"
}

# is_busybox_link PATH: PATH is a link to /bin/busybox (an applet of busybox).
is_busybox_link() { [ -L "$1" ] && [ "$(readlink "$1")" = /bin/busybox ]; }

# alpine_like ROOT [PKG...]: an upstream image FROM alpine: Alpine's minirootfs (ALPINE_VERSION, versions.env),
# then Debian's packages PKG... and what they depend on, for what the upstream Dockerfile adds with `apk add`.
# They are laid over Alpine the way apk lays packages over busybox: a package's file replaces busybox's link at
# the same path, and a busybox link elsewhere in PATH that would shadow a command of the packages goes (nc is
# netcat-openbsd's, as on Alpine). Alpine's other files win over Debian's at the same path (musl-utils' getent
# and ldd), and Debian's base-files is left out: the base is Alpine's, and /etc/os-release says so (the v1.36
# ImageVolume spec reads it from kitten). Sets $work/owners to the minirootfs' non-root owners.
alpine_like() {
  local root=$1 stage=$work/debian closure txt p d name other shadowed; shift
  ensure_alpine
  mkdir -p "$root"
  tar -xzf "$parts/alpine-$ALPINE_VERSION/rootfs.tar.gz" -C "$root" --numeric-owner
  cp "$parts/alpine-$ALPINE_VERSION/owners" "$work/owners"
  note "alpine $ALPINE_VERSION: $(cat "$parts/alpine-$ALPINE_VERSION/SOURCE")"
  [ $# -gt 0 ] || return 0
  txt=$(debs_closure "$@" | grep -v '^base-files ')
  mapfile -t closure <<<"$txt"
  debs_extract "$stage" "${closure[@]}"
  debs_alternatives "$stage"
  while read -r p; do
    if is_busybox_link "$root/$p"; then rm "$root/$p"; fi
  done < <(cd "$stage" && find . ! -type d)
  cp -a -n "$stage/." "$root/"
  for d in ${IMAGE_PATH//:/ }; do
    [ -d "$root$d" ] || continue
    for p in "$root$d"/*; do
      is_busybox_link "$p" || continue
      name=${p##*/} shadowed=""
      for other in ${IMAGE_PATH//:/ }; do
        if { [ -e "$root$other/$name" ] || [ -L "$root$other/$name" ]; } && ! is_busybox_link "$root$other/$name"; then
          shadowed=1
        fi
      done
      if [ -n "$shadowed" ]; then rm "$p"; fi
    done
  done
}

# agnhost_root ROOT K8S_VERSION: test/images/agnhost/Dockerfile's image (alpine + bind-tools curl netcat-openbsd
# iproute2 iperf bash util-linux; coredns; porter's certs; /uploads; agnhost, agnhost-2; the image's user and group).
agnhost_root() {
  local root=$1 ver=$2 dir=$parts/agnhost-$2
  ensure_agnhost "$ver"
  ensure_coredns
  alpine_like "$root" bind9-dnsutils curl netcat-openbsd iproute2 iperf bash util-linux
  mkdir -p "$root/usr/local/bin" "$root/uploads"
  ln -s /usr/bin/iperf "$root/usr/local/bin/iperf"
  cp "$coredns" "$root/coredns"
  cp "$dir/localhost.crt" "$dir/localhost.key" "$root/"
  cp "$dir/agnhost" "$root/agnhost"
  ln -s agnhost "$root/agnhost-2"
  chmod 755 "$root/coredns" "$root/agnhost"; chmod 644 "$root/localhost.crt" "$root/localhost.key"
  echo "group-defined-in-image:x:50000:" >>"$root/etc/group"
  add_user "$root" user-defined-in-image 1000 1000 /home/user-defined-in-image /bin/sh group-defined-in-image
  note "agnhost $(cat "$dir/VERSION") from k8s.io/kubernetes@$ver; coredns $COREDNS_VERSION (upstream: 1.6.2)"
}

agnhost_image() {
  local ref=$1 file=$2 tag src owners
  tag=$(tag_of "$ref")
  src=$(k8s_source agnhost "$tag")
  agnhost_root "$work/root" "$src"
  mapfile -t owners <"$work/owners"
  archive "$tmp/$file" --ref "$ref" --entrypoint '["/agnhost"]' --cmd '["pause"]' \
    --expose 80 --expose 8080 --expose 8081 --expose 9376 --expose 5000 --tree "$work/root" "${owners[@]}"
  [ "$(image_version agnhost "$(mod_dir "k8s.io/kubernetes@$src")")" = "$tag" ] ||
    note "agnhost $tag is not a tagged source: built from $src (SOURCE_OVERRIDES)"
}

# kitten, nautilus: agnhost plus html/NAME.jpg and html/data.json, CMD test-webserver. The agnhost under them is
# the one of the Kubernetes version being built (upstream's Dockerfile names an agnhost in its BASEIMAGE).
webserver_image() {
  local name=$1 ref=$2 file=$3 tag src k8s=$4 owners base
  tag=$(tag_of "$ref")
  src=$(mod_dir "k8s.io/kubernetes@$(k8s_source "$name" "$tag")")
  agnhost_root "$work/root" "$k8s"
  cp "$src/test/images/$name/html/$name.jpg" "$src/test/images/$name/html/data.json" "$work/root/"
  chmod 644 "$work/root/$name.jpg" "$work/root/data.json"
  mapfile -t owners <"$work/owners"
  archive "$tmp/$file" --ref "$ref" --entrypoint '["/agnhost"]' --cmd '["test-webserver"]' \
    --expose 80 --expose 8080 --expose 8081 --expose 9376 --expose 5000 --tree "$work/root" "${owners[@]}"
  base=$(sed -n 's#^linux/amd64=REGISTRY/agnhost:\([^-]*\)-.*#\1#p' "$src/test/images/$name/BASEIMAGE")
  note "$name $tag: html/ from k8s.io/kubernetes@$(k8s_source "$name" "$tag"); on agnhost of $k8s (upstream: agnhost ${base:-?})"
}

# nginx: upstream is the official nginx:<version>-alpine image; here Debian's nginx with that image's config:
# /etc/nginx/nginx.conf and conf.d/default.conf (port 80, /usr/share/nginx/html), user nginx (101), logs to
# stdout/stderr, CMD nginx -g 'daemon off;', STOPSIGNAL SIGTERM.
nginx_image() {
  local ref=$1 file=$2 root=$work/root
  local owners
  alpine_like "$root" nginx-light
  echo "nginx:x:101:" >>"$root/etc/group"
  echo "nginx:x:101:101:nginx:/var/cache/nginx:/sbin/nologin" >>"$root/etc/passwd"
  mkdir -p "$root/var/cache/nginx" "$root/var/log/nginx" "$root/var/lib/nginx" "$root/etc/nginx/conf.d"
  ln -sf /dev/stdout "$root/var/log/nginx/access.log"
  ln -sf /dev/stderr "$root/var/log/nginx/error.log"
  cat >"$root/etc/nginx/nginx.conf" <<'EOF'

user  nginx;
worker_processes  1;

error_log  /var/log/nginx/error.log warn;
pid        /var/run/nginx.pid;


events {
    worker_connections  1024;
}


http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;

    log_format  main  '$remote_addr - $remote_user [$time_local] "$request" '
                      '$status $body_bytes_sent "$http_referer" '
                      '"$http_user_agent" "$http_x_forwarded_for"';

    access_log  /var/log/nginx/access.log  main;

    sendfile        on;
    #tcp_nopush     on;

    keepalive_timeout  65;

    #gzip  on;

    include /etc/nginx/conf.d/*.conf;
}
EOF
  cat >"$root/etc/nginx/conf.d/default.conf" <<'EOF'
server {
    listen       80;
    server_name  localhost;

    location / {
        root   /usr/share/nginx/html;
        index  index.html index.htm;
    }

    error_page   500 502 503 504  /50x.html;
    location = /50x.html {
        root   /usr/share/nginx/html;
    }
}
EOF
  [ -f "$root/usr/share/nginx/html/index.html" ] || die "Debian's nginx has no /usr/share/nginx/html/index.html"
  mapfile -t owners <"$work/owners"
  archive "$tmp/$file" --ref "$ref" --cmd '["nginx","-g","daemon off;"]' --expose 80 --stop-signal SIGTERM \
    --tree "$root" "${owners[@]}"
  note "upstream: nginx:$(tag_of "$ref" | sed 's/-[0-9]*$//')-alpine; here Debian's nginx (its index.html)"
}

# nonewprivs: test/images/nonewprivs (nnp.go, setuid and setgid: chmod +s), CMD nnp.
nonewprivs_image() {
  local ref=$1 file=$2 tag src root=$work/root owners
  tag=$(tag_of "$ref")
  src=$(k8s_source nonewprivs "$tag")
  alpine_like "$root"
  mkdir -p "$root/usr/local/bin" "$work/nnp"
  cp "$(mod_dir "k8s.io/kubernetes@$src")/test/images/nonewprivs/nnp.go" "$work/nnp/"
  (cd "$work/nnp" && GOFLAGS="" go build -trimpath -ldflags "-w" -o "$root/usr/local/bin/nnp" nnp.go)
  chmod 6755 "$root/usr/local/bin/nnp"
  mapfile -t owners <"$work/owners"
  archive "$tmp/$file" --ref "$ref" --cmd '["nnp"]' --tree "$root" "${owners[@]}"
  note "nnp from k8s.io/kubernetes@$src"
}

# resource-consumer (the HPA specs' load): /consumer and /consume-cpu/consume-cpu of the release whose
# test/images/resource-consumer/VERSION is the tag, on debian-base plus stress (its memory load) upstream; here
# Debian bookworm's Priority: required packages plus stress. The consumer runs ./consume-cpu/consume-cpu from /.
resource_consumer_part() {
  k8s_module_build "$1" "$tmp" "-s -w" k8s.io/kubernetes/test/images/resource-consumer \
    k8s.io/kubernetes/test/images/resource-consumer/consume-cpu
}

resource_consumer_image() {
  local ref=$1 file=$2 tag src root=$work/root closure required txt
  tag=$(tag_of "$ref")
  src=$(k8s_source resource-consumer "$tag")
  cached resource-consumer "$src" "$parts/resource-consumer-$src" resource_consumer_part "$src" >&2
  txt=$(apt-cache dumpavail | awk '/^Package:/ { p = $2 } /^Priority: required$/ { print p }' | sort -u)
  mapfile -t required <<<"$txt"
  [ ${#required[@]} -gt 10 ] || die "no Priority: required packages in the apt lists"
  txt=$(debs_closure "${required[@]}" stress)
  mapfile -t closure <<<"$txt"
  debs_extract "$root" "${closure[@]}"
  debs_alternatives "$root"
  base_etc "$root"
  mkdir -p "$root/consume-cpu"
  cp "$parts/resource-consumer-$src/resource-consumer" "$root/consumer"
  cp "$parts/resource-consumer-$src/consume-cpu" "$root/consume-cpu/consume-cpu"
  chmod 755 "$root/consumer" "$root/consume-cpu/consume-cpu"
  archive "$tmp/$file" --ref "$ref" --entrypoint '["/consumer"]' --workdir / --expose 8080 --tree "$root"
  note "consumer and consume-cpu from k8s.io/kubernetes@$src; upstream: debian-base + stress, here Debian bookworm's Priority: required packages + stress"
}

# glibc-dns-testing (jessie-dnsutils before it): debian:bookworm-slim plus dnsutils and a coredns binary. Here
# Debian's Priority: required packages (what bookworm-slim is made of) plus dnsutils; coredns at COREDNS_VERSION.
dnsutils_image() {
  local ref=$1 file=$2 root=$work/root closure required txt
  txt=$(apt-cache dumpavail | awk '/^Package:/ { p = $2 } /^Priority: required$/ { print p }' | sort -u)
  mapfile -t required <<<"$txt"
  [ ${#required[@]} -gt 10 ] || die "no Priority: required packages in the apt lists"
  txt=$(debs_closure "${required[@]}" dnsutils)
  mapfile -t closure <<<"$txt"
  debs_extract "$root" "${closure[@]}"
  debs_alternatives "$root"
  base_etc "$root"
  ensure_coredns
  cp "$coredns" "$root/coredns"; chmod 755 "$root/coredns"
  archive "$tmp/$file" --ref "$ref" --cmd '["bash"]' --tree "$root"
  note "upstream: $(basename "${ref%:*}") is debian + dnsutils + coredns; here Debian bookworm's Priority: required packages + dnsutils, coredns $COREDNS_VERSION"
}

# sample-apiserver: k8s.io/sample-apiserver at the tag test/images/sample-apiserver/Makefile checks out for this
# image version, on Alpine (its BASEIMAGE), ENTRYPOINT /sample-apiserver.
sample_apiserver_image() {
  local ref=$1 file=$2 tag src modver root=$work/root owners
  tag=$(tag_of "$ref")
  src=$(mod_dir "k8s.io/kubernetes@$(k8s_source sample-apiserver "$tag")")
  modver=$(sed -n 's#.*git checkout tags/\(v[0-9.]*\).*#\1#p' "$src/test/images/sample-apiserver/Makefile" | head -n1)
  [ -n "$modver" ] || die "no 'git checkout tags/...' in $src/test/images/sample-apiserver/Makefile"
  cached sample-apiserver "$modver" "$parts/sample-apiserver-$modver" sample_apiserver_part "$modver" >&2
  alpine_like "$root"
  cp "$parts/sample-apiserver-$modver/sample-apiserver" "$root/sample-apiserver"
  chmod 755 "$root/sample-apiserver"
  mapfile -t owners <"$work/owners"
  archive "$tmp/$file" --ref "$ref" --entrypoint '["/sample-apiserver"]' --tree "$root" "${owners[@]}"
  note "k8s.io/sample-apiserver@$modver"
}

# etcd: registry.k8s.io/etcd:X.Y.Z-N is etcd X.Y.Z (/usr/local/bin/etcd, etcdctl and their -X.Y.Z copies) on
# distroless static with bash-static as /bin/sh, WORKDIR /. Here the same files with Debian's bash-static,
# netbase and tzdata, and distroless' users (root, nobody, nonroot 65532). Not here: the older bundled etcd
# versions and the migrate tools (for upgrading etcd data; the specs run a fresh etcd).
etcd_image() {
  local ref=$1 file=$2 tag ver root=$work/root d debs txt
  tag=$(tag_of "$ref"); ver=v${tag%-*}
  cached etcd "$ver" "$parts/etcd-$ver" etcd_part "$ver" >&2
  d=$parts/etcd-$ver
  txt=$(debs_only bash-static netbase tzdata)
  mapfile -t debs <<<"$txt"
  debs_extract "$root" "${debs[@]}"
  mkdir -p "$root/usr/local/bin" "$root/bin" "$root/tmp" "$root/home/nonroot" "$root/etc" "$root/root"
  chmod 1777 "$root/tmp"; chmod 700 "$root/root"
  mv "$root/bin/bash-static" "$root/bin/sh"
  cp "$d/etcd" "$d/etcdctl" "$root/usr/local/bin/"
  ln "$root/usr/local/bin/etcd" "$root/usr/local/bin/etcd-${ver#v}"
  ln "$root/usr/local/bin/etcdctl" "$root/usr/local/bin/etcdctl-${ver#v}"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$root/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'tty:x:5:' 'staff:x:50:' 'nonroot:x:65532:' >"$root/etc/group"
  printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"
  archive "$tmp/$file" --ref "$ref" --workdir / --expose 2379 --expose 2380 --expose 4001 --expose 7001 \
    --tree "$root" --owner /home/nonroot:65532:65532
  note "etcd $ver (go.etcd.io/etcd)"
}

# pause: build/pause/linux/pause.c of the release whose build/pause/Makefile TAG is the tag, as
# build-test-binaries.sh builds and packs it.
pause_image() {
  local ref=$1 file=$2 tag src dir
  tag=$(tag_of "$ref")
  src=$(k8s_source pause "$tag")
  dir=$(mod_dir "k8s.io/kubernetes@$src")
  gcc -static -O2 -Wall -Werror -s -DVERSION="v$tag-kubernetes-$src" -o "$work/pause" "$dir/build/pause/linux/pause.c"
  archive "$tmp/$file" --ref "$ref" --entrypoint '["/pause"]' --user 65535:65535 --file "$work/pause:/pause:755"
  note "pause.c from k8s.io/kubernetes@$src"
}

# build_image ID REF K8S_VERSION: the image ID (manifest.go's ImageID) into $tmp; prints its file name.
build_image() {
  local id=$1 ref=$2 k8s=$3 name file
  name=${ref%:*}; name=${name##*/}
  file=$name-$(tag_of "$ref").tar
  if grep -q "^$file " "$tmp/images.txt.parts"; then echo "  $ref ($id): built already" >&2; return; fi
  local outer_work=$work
  work=$(mktemp -d -p "$scratch")
  : >"$work/notes"; : >"$work/debs.txt"
  local start=$SECONDS
  case $id in
    Agnhost|AgnhostPrev) agnhost_image "$ref" "$file" ;;
    Kitten) webserver_image kitten "$ref" "$file" "$k8s" ;;
    Nautilus) webserver_image nautilus "$ref" "$file" "$k8s" ;;
    BusyBox) busybox_image "$ref" "$file" ;;
    Nginx|NginxNew) nginx_image "$ref" "$file" ;;
    Nonewprivs) nonewprivs_image "$ref" "$file" ;;
    GlibcDnsTesting|JessieDnsutils) dnsutils_image "$ref" "$file" ;;
    APIServer) sample_apiserver_image "$ref" "$file" ;;
    Etcd) etcd_image "$ref" "$file" ;;
    Pause) pause_image "$ref" "$file" ;;
    ResourceConsumer) resource_consumer_image "$ref" "$file" ;;
    *) die "the Conformance specs of $k8s use $id ($ref): this script has no builder for it" ;;
  esac
  {
    echo "$file $ref"
    cat "$work/notes" "$work/debs.txt" | sed "s/^#   /# $file: /"
  } >>"$tmp/images.txt.parts"
  echo "  $ref: $file, $(( SECONDS - start ))s" >&2
  rm -rf "$work"
  work=$outer_work
}

# addon_spec_images K8S_DIR: "ID REFERENCE" of each ADDON_SPEC_IMAGES image, as that source's manifest.go
# configures it (registry, name, tag).
addon_spec_images() {
  local id line registry name tag
  for id in $ADDON_SPEC_IMAGES; do
    line=$(grep -E "^[[:space:]]*configs\[$id\] = Config\{" "$1/test/utils/image/manifest.go") ||
      die "$1/test/utils/image/manifest.go configures no $id"
    read -r registry name tag < <(sed -E 's/.*Config\{list\.([A-Za-z0-9]+), "([^"]+)", "([^"]+)"\}.*/\1 \2 \3/' <<<"$line")
    case $registry in
      PromoterE2eRegistry) registry=registry.k8s.io/e2e-test-images ;;
      *) die "$id: registry $registry of $1's manifest.go is not one this script maps" ;;
    esac
    echo "$id $registry/$name:$tag"
  done
}

# e2e_images K8S_VERSION: every image the Conformance specs of that version use, into $tmp.
e2e_images() {
  local k8s=$1 dir list id ref line
  dir=$(mod_dir "k8s.io/kubernetes@$k8s")
  list=$(derive_images "$dir")$'\n'$(addon_spec_images "$dir")
  echo "images the Conformance specs of $k8s use (scripts/e2e-images.go), and the addons' specs (ADDON_SPEC_IMAGES):"
  while read -r line; do echo "  $line"; done <<<"$list"
  # check every image has a builder before building any
  while read -r id ref; do
    case $id in
      \#*|"") ;;
      Agnhost|AgnhostPrev|Kitten|Nautilus|BusyBox|Nginx|NginxNew|Nonewprivs|GlibcDnsTesting|JessieDnsutils) ;;
      APIServer|Etcd|Pause|ResourceConsumer) ;;
      *) die "the Conformance specs of $k8s use $id ($ref): this script has no builder for it" ;;
    esac
  done <<<"$list"
  : >"$tmp/images.txt.parts"
  while read -r id ref; do
    case $id in \#*|"") continue ;; esac
    build_image "$id" "$ref" "$k8s" </dev/null
  done <<<"$list"
  {
    grep -v '^#' "$tmp/images.txt.parts"
    echo "# Kubernetes $k8s: the images of its Conformance specs ($(echo "$list" | sed -n 's/^# //p'))"
    grep '^#' "$tmp/images.txt.parts"
  } >"$tmp/images.txt"
  rm "$tmp/images.txt.parts"
  echo "$recipe" >"$tmp/.recipe"
}

# An image dir is rebuilt when its recipe changed (this script, its helpers, versions.env), so a warm cache never
# serves images of an older recipe; the parts stay cached (their dirs are named by their versions).
recipe=$(cat "$here/build-e2e-images.sh" "$here/e2e-images.go" "$here/docker-archive.py" "$here/lib.sh" "$here/go/coredns/main.go" \
  "$here/versions.env" | sha256sum | cut -d' ' -f1)
for v in $build_versions; do
  if [ -f "$cache/e2e-images-$v/.complete" ] && [ "$(cat "$cache/e2e-images-$v/.recipe" 2>/dev/null)" != "$recipe" ]; then
    echo "e2e-images $v: built by another recipe; rebuilding"
    rm "$cache/e2e-images-$v/.complete"
  fi
  cached e2e-images "$v" "$cache/e2e-images-$v" e2e_images "$v"
done
