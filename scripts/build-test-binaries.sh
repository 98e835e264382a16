#!/usr/bin/env bash
# Build the pinned binaries (scripts/versions.env) from the Go module proxy into a versioned cache:
# Kubernetes and etcd, and for a real node containerd, runc, the CNI plugins, crictl, CoreDNS, the local
# registry (distribution), the addons (metrics-server, local-path-provisioner, MetalLB, Traefik) and the offline
# images (pause, coredns, a busybox test image, the addons') that
# `ctr -n k8s.io images import` loads.
#
#   scripts/build-test-binaries.sh            # every pinned version, dlv and the DEBUG_COMPONENTS debug builds
#   scripts/build-test-binaries.sh --full     # the same (scripts/test.sh --full)
#   scripts/build-test-binaries.sh --presubmit
#       # what the presubmit tier of scripts/test.sh runs: the same but kube-bench (tests/it/cis.rs) and the
#       # e2e suites (tests/it/conformance.rs, scripts/conformance.sh and upgrade-conformance.sh)
#   scripts/build-test-binaries.sh --print    # print the bin dirs (one per line), build nothing:
#                                             # kubernetes-* and etcd first, then the node dirs, images,
#                                             # then dlv-*, debug-kubernetes-* and e2e-*
#   scripts/build-test-binaries.sh --node [VERSION] [--addons LIST]
#       # only what one environment with a node needs (scripts/up.sh): Kubernetes VERSION (default: the
#       # newest pinned), etcd, containerd, runc, the CNI plugins, CoreDNS, the registry, local-path and the
#       # images; of the addons dev leaves off, those LIST names (comma-separated, of metricsServer,
#       # loadBalancer, gateway; default: all three) with their images. Not the other minors, crictl, dlv,
#       # the debug builds or e2e, which the test command builds
#   scripts/build-test-binaries.sh --print-images [--addons LIST]
#       # the images dir `--node ... --addons LIST` uses: the one with every addon's images when that is
#       # built already, else the one with LIST's
#   scripts/build-test-binaries.sh --debug [COMPONENT...]
#       # dlv and debug builds (-gcflags=all=-N -l, not stripped) of the newest pinned Kubernetes' COMPONENTs
#       # (default: DEBUG_COMPONENTS), nothing else; added next to those built already. For example
#       #   scripts/build-test-binaries.sh --debug kube-controller-manager
#       # adds bin/debug-kubernetes-<newest>/kube-controller-manager (for dlv exec, kubeunit debug --binary).
#
# Output: $KUBEUNIT_CACHE/bin/kubernetes-<ver>/{kube-apiserver,...,kubectl}
#         $KUBEUNIT_CACHE/bin/etcd-<ver>/{etcd,etcdctl,etcdutl}
#         $KUBEUNIT_CACHE/bin/containerd-<ver>/{containerd,containerd-shim-runc-v2,ctr}
#         $KUBEUNIT_CACHE/bin/runc-<ver>/runc
#         $KUBEUNIT_CACHE/bin/cni-plugins-<ver>/{bridge,host-local,loopback,portmap}
#         $KUBEUNIT_CACHE/bin/crictl-<ver>/crictl
#         $KUBEUNIT_CACHE/bin/coredns-<ver>/coredns
#         $KUBEUNIT_CACHE/bin/registry-<ver>/registry
#         $KUBEUNIT_CACHE/bin/metrics-server-<ver>/metrics-server
#         $KUBEUNIT_CACHE/bin/local-path-provisioner-<ver>/local-path-provisioner
#         $KUBEUNIT_CACHE/bin/metallb-<ver>/{controller,speaker}
#         $KUBEUNIT_CACHE/bin/traefik-<ver>/traefik
#         $KUBEUNIT_CACHE/images-<newest kubernetes>-coredns-<ver>-busybox-<ver>-metrics-server-<ver>-local-path-<ver>-metallb-<ver>-traefik-<ver>/
#           {pause,coredns,busybox,metrics-server,local-path-provisioner,metallb-controller,metallb-speaker,traefik}.tar
#           (+ images.txt: "FILE REFERENCE" per line); `--node --addons` without some addons: the same name
#           and files without theirs
#         $KUBEUNIT_CACHE/bin/dlv-<ver>/dlv
#         $KUBEUNIT_CACHE/bin/kube-bench-<ver>/{kube-bench,cfg/}
#         $KUBEUNIT_CACHE/bin/debug-kubernetes-<newest kubernetes>/{kube-apiserver,kube-scheduler,...}
#           (the debug- prefix keeps it apart from kubernetes-*, which means the normal builds)
#         $KUBEUNIT_CACHE/bin/e2e-<ver>/{e2e.test,ginkgo} for every pinned Kubernetes (the upstream e2e suite:
#           scripts/conformance.sh runs it)
# A directory with a .complete stamp is reused as is; each is built in <dir>.tmp and renamed when done. The
# debug builds' dir grows: the stamp says the binaries in it are complete, those asked for and missing are added.
#
# Why the module juggling: k8s.io/kubernetes' go.mod replaces its staging modules (k8s.io/api, ...) with
# ./staging/src paths and requires them at v0.0.0. Replace directives of a dependency are ignored, so a
# throwaway main module re-points each staging module at its published v0.<minor>.<patch> tag.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
cache=$(kubeunit_cache)
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

k8s_cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

k8s_newest=${KUBERNETES_VERSIONS%% *}
every_addon="metricsServer loadBalancer gateway"
# images_dir_for ADDON...: the images dir with those addons' images (and always pause, coredns, busybox and
# local-path-provisioner's).
images_dir_for() {
  local a=" $* " d=$cache/images-$k8s_newest-coredns-$COREDNS_VERSION-busybox-$BUSYBOX_VERSION
  [[ $a != *" metricsServer "* ]] || d+=-metrics-server-$METRICS_SERVER_VERSION
  d+=-local-path-$LOCAL_PATH_VERSION
  [[ $a != *" loadBalancer "* ]] || d+=-metallb-$METALLB_VERSION
  [[ $a != *" gateway "* ]] || d+=-traefik-$TRAEFIK_VERSION
  printf '%s\n' "$d"
}
# shellcheck disable=SC2086 # a list of words
images_dir=$(images_dir_for $every_addon)
# The addons whose images images_build lays out (every mode but --node with --addons: all).
image_addons=$every_addon
dlv_dir=$cache/bin/dlv-$DLV_VERSION
debug_dir=$cache/bin/debug-kubernetes-$k8s_newest

die() { echo "build-test-binaries: $*" >&2; exit 1; }

mode=all
case ${1:-} in
  "") ;;
  --full) ;;
  --presubmit) mode=presubmit ;;
  --print) mode=print ;;
  --debug) mode=debug ;;
  --node) mode=node ;;
  --print-images) mode=print-images ;;
  *) die "unknown argument '$1' (usage: $0 [--full | --presubmit | --print | --node [VERSION] [--addons LIST] | --print-images [--addons LIST] | --debug [COMPONENT...]])" ;;
esac
node_k8s=$k8s_newest
node_addons=$every_addon
if [ "$mode" = node ] || [ "$mode" = print-images ]; then
  first=$1; shift
  if [ "$mode" = node ] && [ $# -gt 0 ] && [ "$1" != --addons ]; then
    node_k8s=$1; shift
    case " $KUBERNETES_VERSIONS " in
      *" $node_k8s "*) ;;
      *) die "--node $node_k8s: not a pinned Kubernetes (versions.env: $KUBERNETES_VERSIONS)" ;;
    esac
  fi
  if [ $# -gt 0 ] && [ "$1" = --addons ]; then
    [ $# -ge 2 ] || die "--addons takes a list (comma-separated; may be empty): $every_addon"
    node_addons=${2//,/ }
    for a in $node_addons; do
      case " $every_addon " in *" $a "*) ;; *) die "--addons: '$a' is not one of: $every_addon" ;; esac
    done
    shift 2
  fi
  [ $# -eq 0 ] || die "$first: unexpected '$1' (usage: $first [VERSION] [--addons LIST])"
  set -- "$first"
fi
# The images dir of --node: every addon's when built already (a superset; up.sh imports only what the
# profile turns on), else the one with only the addons asked for.
node_images_dir() {
  if [ -f "$images_dir/.complete" ]; then printf '%s\n' "$images_dir"; else images_dir_for $node_addons; fi
}
if [ "$mode" = print-images ]; then node_images_dir; exit 0; fi
[ $# -le 1 ] || [ "$mode" = debug ] || die "$1 takes no arguments"
# The debug builds: the components named after --debug, else DEBUG_COMPONENTS; each a command built above
# (a typo fails here, before anything is built), each once.
debug_cmds=() debug_from="DEBUG_COMPONENTS (versions.env)"
if [ "$mode" = debug ] && [ $# -gt 1 ]; then
  shift
  debug_from=--debug
else
  read -r -a debug_args <<<"$DEBUG_COMPONENTS"
  set -- "${debug_args[@]}"
fi
for c in "$@"; do
  case " ${k8s_cmds[*]} " in
    *" $c "*) ;;
    *) die "$debug_from: '$c' is not a Kubernetes command this script builds (${k8s_cmds[*]})" ;;
  esac
  case " ${debug_cmds[*]} " in *" $c "*) ;; *) debug_cmds+=("$c") ;; esac
done
[ ${#debug_cmds[@]} -gt 0 ] || die "$debug_from: no Kubernetes commands"

if [ "$mode" = print ]; then
  for v in $KUBERNETES_VERSIONS; do echo "$cache/bin/kubernetes-$v"; done
  echo "$cache/bin/etcd-$ETCD_VERSION"
  echo "$cache/bin/containerd-$CONTAINERD_VERSION"
  echo "$cache/bin/runc-$RUNC_VERSION"
  echo "$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION"
  echo "$cache/bin/crictl-$CRICTL_VERSION"
  echo "$cache/bin/coredns-$COREDNS_VERSION"
  echo "$cache/bin/registry-$REGISTRY_VERSION"
  echo "$cache/bin/metrics-server-$METRICS_SERVER_VERSION"
  echo "$cache/bin/local-path-provisioner-$LOCAL_PATH_VERSION"
  echo "$cache/bin/metallb-$METALLB_VERSION"
  echo "$cache/bin/traefik-$TRAEFIK_VERSION"
  echo "$images_dir"
  echo "$dlv_dir"
  echo "$cache/bin/kube-bench-$KUBE_BENCH_VERSION"
  echo "$debug_dir"
  for v in $KUBERNETES_VERSIONS; do echo "$cache/bin/e2e-$v"; done
  exit 0
fi

command -v go >/dev/null || { echo "build-test-binaries: go is not installed" >&2; exit 1; }
mkdir -p "$cache"
# One build at a time per cache (scripts/test.sh and scripts/up.sh may run side by side).
exec 9>"$cache/.build.lock"
flock 9

work=""
trap 'rm -rf "$work"' EXIT   # the scratch dir of a build that failed (DIR.tmp is cleared on the next run)

# cached NAME VERSION DIR BUILDER [ARGS...]: unless DIR/.complete exists, build_dir NAME VERSION DIR BUILDER ARGS...
cached() {
  if [ -f "$3/.complete" ]; then echo "$1 $2: cached in $3"; return; fi
  build_dir "$@"
}

# build_dir NAME VERSION DIR BUILDER [ARGS...]: run BUILDER ARGS... with $tmp (an empty DIR.tmp) and $work (a
# scratch dir) set, then replace DIR with DIR.tmp and stamp it (a failed build leaves DIR as it was).
build_dir() {
  local name=$1 ver=$2 out=$3; shift 3
  echo "$name $ver: building into $out"
  local start=$SECONDS
  tmp=$out.tmp work=$(mktemp -d)
  rm -rf "$tmp"; mkdir -p "$tmp"
  "$@"
  rm -rf "$work" "$out"
  mv "$tmp" "$out"
  touch "$out/.complete"
  echo "$name $ver: built in $(( SECONDS - start ))s"
}

# go_get PACKAGE@VERSION...: a throwaway main module in $work requiring their modules, everything they import
# downloaded (the same versions `go install pkg@version` would use; unlike it, this never asks the proxy for
# the module's version list, which it refuses for sigs.k8s.io/cri-tools here). Output only on failure.
go_get() {
  (cd "$work" && go mod init kubeunit.test/node >/dev/null 2>&1 && go get "$@" >"$work/get.log" 2>&1) ||
    { cat "$work/get.log" >&2; die "go get $* failed"; }
}

# own_main NAME: scripts/go/NAME/main.go as the package ./NAME of the throwaway module in $work.
own_main() {
  mkdir -p "$work/$1" && cp "$here/go/$1/main.go" "$work/$1/main.go"
}

# k8s_module VERSION: make $work a throwaway main module requiring k8s.io/kubernetes@VERSION, each staging
# module re-pointed at its published tag (the module juggling: see the header).
k8s_module() {
  local ver=$1 gomod mod staging_ver="v0.${1#v1.}"
  (cd "$work" && go mod init kubeunit.test/binaries >/dev/null 2>&1)
  gomod=$( (cd "$work" && go mod download -json "k8s.io/kubernetes@$ver") | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -n "$gomod" ] || die "cannot download k8s.io/kubernetes@$ver"
  (cd "$work" && go mod edit -require="k8s.io/kubernetes@$ver")
  # every staging module the kubernetes go.mod points at ./staging/src
  while read -r mod; do
    (cd "$work" && go mod edit -replace="$mod=$mod@$staging_ver")
  done < <(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/src/.*#\1#p' "$gomod")
}

# k8s_version_ldflags VERSION: the -X flags that stamp VERSION in, as upstream's hack/lib/version.sh does.
k8s_version_ldflags() {
  local ver=$1 minor pkg=k8s.io/component-base/version
  minor=${ver#v1.}; minor=${minor%%.*}
  printf '%s' "-X $pkg.gitVersion=$ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  printf '%s' " -X $pkg.buildDate=1970-01-01T00:00:00Z"
  printf '%s' " -X k8s.io/client-go/pkg/version.gitVersion=$ver -X k8s.io/client-go/pkg/version.gitMajor=1"
  printf '%s' " -X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

# k8s_build VERSION OUT LDFLAGS [GO_BUILD_FLAG...] -- CMD...: the Kubernetes commands CMD... (of k8s_cmds) at
# VERSION into the dir OUT, in a throwaway main module in $work (k8s_module). The version is stamped in
# (k8s_version_ldflags); LDFLAGS are added to those -X flags and the GO_BUILD_FLAGs to `go build -trimpath`.
k8s_build() (
  ver=$1 out=$2 extra_ld=$3 flags=() pkgs=(); shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
  [ "${1:-}" = -- ] || die "k8s_build: no -- before the commands"
  shift
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  k8s_module "$ver"
  cd "$work"
  go get "${pkgs[@]/%/@$ver}" >/dev/null
  ldflags=$(k8s_version_ldflags "$ver")
  go build -trimpath "${flags[@]}" -ldflags "${extra_ld:+$extra_ld }$ldflags" -o "$out/" "${pkgs[@]}"
)

# The upstream e2e suite of VERSION into $tmp: e2e.test (`go test -c` of k8s.io/kubernetes/test/e2e, its
# manifests embedded, the version stamped like the binaries so that it checks the server as upstream's
# does) and ginkgo, the runner of parallel specs, at the version k8s.io/kubernetes' go.mod requires (the
# CLI and the library in e2e.test must agree). kubectl, which the sig-cli specs run, is the Kubernetes
# build's (bin/kubernetes-VERSION/kubectl).
e2e_build() (
  ver=$1
  k8s_module "$ver"
  cd "$work"
  go get -t "k8s.io/kubernetes/test/e2e@$ver" >/dev/null
  ginkgo=$(go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
  [ -n "$ginkgo" ] || die "k8s.io/kubernetes@$ver requires no github.com/onsi/ginkgo/v2"
  ldflags=$(k8s_version_ldflags "$ver")
  go test -c -trimpath -ldflags "-s -w $ldflags" -o "$tmp/e2e.test" k8s.io/kubernetes/test/e2e
  go build -trimpath -ldflags "-s -w" -o "$tmp/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
  grep -qx "Ginkgo Version ${ginkgo#v}" <<<"$("$tmp/ginkgo" version)" || die "the ginkgo built is not $ginkgo"
  grep -q "$ver" <<<"$("$tmp/e2e.test" --version 2>/dev/null)" || die "the e2e.test built does not report $ver"
  echo "ginkgo $ginkgo" >"$tmp/versions.txt"
)

# The normal builds: stripped, as upstream releases them.
kubernetes_build() { k8s_build "$1" "$tmp" "-s -w" -- "${k8s_cmds[@]}"; }

# The etcd tools: etcd, etcdctl (client: `kubeunit snapshot save`) and etcdutl (offline: `snapshot status`,
# `snapshot restore`), all of one version. A dir stamped complete before etcdutl was added here lacks it: the
# missing tools are built next to the others (hard links of those there, the dir replaced as a whole).
etcd_tools=(etcd etcdctl etcdutl)
etcd_pkg() {
  case $1 in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    etcdctl) echo go.etcd.io/etcd/etcdctl/v3 ;;
    etcdutl) echo go.etcd.io/etcd/etcdutl/v3 ;;
  esac
}

build_etcd() {
  local ver=$1 out="$cache/bin/etcd-$1" t missing=()
  for t in "${etcd_tools[@]}"; do
    if [ ! -f "$out/.complete" ] || [ ! -x "$out/$t" ]; then missing+=("$t"); fi
  done
  if [ ${#missing[@]} -eq 0 ]; then echo "etcd $ver: cached in $out"; return; fi
  build_dir etcd "$ver (${missing[*]})" "$out" etcd_build "$ver" "${missing[@]}"
}

# etcd_build VERSION TOOL...: the etcd TOOLs at VERSION into $tmp, next to what $tmp's dir holds already.
etcd_build() {
  local ver=$1 t mods=(); shift
  if [ -f "${tmp%.tmp}/.complete" ]; then cp -al "${tmp%.tmp}/." "$tmp/"; rm -f "$tmp/.complete"; fi
  for t in "$@"; do mods+=("$(etcd_pkg "$t")@$ver"); done
  go_get "${mods[@]}"
  local ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ver"
  for t in "$@"; do
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$tmp/$t" "$(etcd_pkg "$t")")
  done
  grep -qx "etcdutl version: ${ver#v}" <<<"$("$tmp/etcdutl" version)" || die "the etcdutl built is not $ver"
}

# --- the node: containerd, runc, CNI plugins, crictl, CoreDNS, images ---

containerd_build() {
  local ver=$CONTAINERD_VERSION m=github.com/containerd/containerd/v2
  go_get "$m/cmd/containerd@$ver" "$m/cmd/ctr@$ver" "$m/cmd/containerd-shim-runc-v2@$ver"
  local ld="-s -w -X $m/version.Version=$ver"
  (cd "$work" &&
    go build -trimpath -tags "$CONTAINERD_BUILDTAGS" -ldflags "$ld" -o "$tmp/" "$m/cmd/containerd" "$m/cmd/ctr" &&
    go build -trimpath -tags "$CONTAINERD_BUILDTAGS no_grpc" -ldflags "$ld" -o "$tmp/" "$m/cmd/containerd-shim-runc-v2")
}

runc_build() {
  local ver=$RUNC_VERSION m=github.com/opencontainers/runc
  pkg-config --exists libseccomp || die "runc needs libseccomp-dev (scripts/install-deps.sh installs it)"
  go_get "$m@$ver"
  (cd "$work" && CGO_ENABLED=1 go build -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs netgo osusergo" \
    -ldflags "-s -w -linkmode external -extldflags -static-pie" \
    -o "$tmp/runc" "$m")
  grep -q '^libseccomp: ' <<<"$("$tmp/runc" --version)" || die "runc $ver was built without seccomp"
}

cni_build() {
  local ver=$CNI_PLUGINS_VERSION m=github.com/containernetworking/plugins p pkgs=()
  for p in $CNI_PLUGINS; do pkgs+=("$m/plugins/$p"); done
  go_get "${pkgs[@]/%/@$ver}"
  (cd "$work" && go build -trimpath -ldflags "-s -w -X $m/pkg/utils/buildversion.BuildVersion=$ver" \
    -o "$tmp/" "${pkgs[@]}")
}

crictl_build() {
  local ver=$CRICTL_VERSION m=sigs.k8s.io/cri-tools
  go_get "$m/cmd/crictl@$ver"
  (cd "$work" && go build -trimpath -ldflags "-s -w -X $m/pkg/version.Version=$ver" -o "$tmp/crictl" "$m/cmd/crictl")
}

# CoreDNS without its cloud plugins and trace (scripts/go/coredns/main.go says why), against the pinned module.
coredns_build() {
  local ver=$COREDNS_VERSION m=github.com/coredns/coredns
  go_get "$m@$ver"
  own_main coredns
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" ./coredns)
  grep -qx kubernetes <<<"$("$tmp/coredns" -plugins)" || die "the coredns built has no kubernetes plugin"
}

# The node's registry, as upstream's Makefile builds it (without cgo, PIE and the revision it reads from git), and
# without the cloud storage drivers (scripts/go/registry/main.go says why).
registry_build() {
  local ver=$REGISTRY_VERSION m=github.com/distribution/distribution/v3
  go_get "$m/cmd/registry@$ver"
  own_main registry
  (cd "$work" && go build -trimpath \
    -ldflags "-s -w -X $m/version.version=$ver -X $m/version.mainpkg=$m" -o "$tmp/registry" ./registry)
  grep -q " $ver\$" <<<"$("$tmp/registry" --version)" || die "the registry built is not $ver"
}

# The pins that must agree with upstream sources: checked on every run (cheap once the modules are cached),
# so bumping Kubernetes or containerd without the rest fails here, not at pod start.
check_pins() {
  local k8s_minor=${k8s_newest#v1.}; k8s_minor=${k8s_minor%%.*}
  local crictl_minor=${CRICTL_VERSION#v1.}; crictl_minor=${crictl_minor%%.*}
  [ "$crictl_minor" = "$k8s_minor" ] ||
    die "CRICTL_VERSION $CRICTL_VERSION does not match the newest pinned Kubernetes $k8s_newest (versions.env)"
  k8s_dir=$(mod_dir "k8s.io/kubernetes@$k8s_newest")
  local kubeadm_coredns
  kubeadm_coredns=$(sed -n 's/^[[:space:]]*CoreDNSVersion = "\(.*\)"/\1/p' "$k8s_dir/cmd/kubeadm/app/constants/constants.go")
  [ "$kubeadm_coredns" = "$COREDNS_VERSION" ] ||
    die "kubeadm $k8s_newest pins CoreDNS '$kubeadm_coredns' but versions.env has COREDNS_VERSION=$COREDNS_VERSION"
  [ "$COREDNS_IMAGE" = "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" ] ||
    die "COREDNS_IMAGE $COREDNS_IMAGE does not name COREDNS_VERSION $COREDNS_VERSION (versions.env)"
  # The Gateway API CRDs applied are those Traefik is built against.
  local traefik_gateway_api
  traefik_gateway_api=$(sed -n 's/^[[:space:]]*sigs.k8s.io\/gateway-api \(v[^ ]*\)$/\1/p' \
    "$(mod_dir "github.com/traefik/traefik/v3@$TRAEFIK_VERSION")/go.mod")
  [ "$traefik_gateway_api" = "$GATEWAY_API_VERSION" ] ||
    die "traefik $TRAEFIK_VERSION requires sigs.k8s.io/gateway-api '$traefik_gateway_api', versions.env has GATEWAY_API_VERSION=$GATEWAY_API_VERSION"
  "$here/gateway-api-crds.sh" --check
  local ctd_dir sandbox pause_tag
  ctd_dir=$(mod_dir "github.com/containerd/containerd/v2@$CONTAINERD_VERSION")
  sandbox=$(sed -n 's/^[[:space:]]*DefaultSandboxImage = "\(.*\)"/\1/p' "$ctd_dir/internal/cri/config/config.go")
  [ "$sandbox" = "$PAUSE_IMAGE" ] ||
    die "containerd $CONTAINERD_VERSION's default sandbox image is '$sandbox' but versions.env has PAUSE_IMAGE=$PAUSE_IMAGE"
  pause_tag=$(sed -n 's/^TAG ?= //p' "$k8s_dir/build/pause/Makefile")
  [ "${PAUSE_IMAGE##*:}" = "$pause_tag" ] ||
    die "Kubernetes $k8s_newest's build/pause is $pause_tag, PAUSE_IMAGE is $PAUSE_IMAGE: pin a containerd whose sandbox image matches"
}

image_addon() { [[ " $image_addons " == *" $1 "* ]]; }
node_addon() { [[ " $node_addons " == *" $1 "* ]]; }

images_build() {
  local arch dpkg_arch
  arch=$(go env GOARCH)
  dpkg_arch=$(dpkg --print-architecture)
  [ "$dpkg_arch" = "$arch" ] || die "Debian architecture $dpkg_arch is not Go's $arch: map it in images_build"
  command -v gcc >/dev/null || die "gcc is missing (scripts/install-deps.sh installs it)"
  command -v python3 >/dev/null || die "python3 is missing"

  # pause, as Kubernetes' build/pause/Makefile builds it (static, stripped), from the newest pinned minor
  local pause_tag=${PAUSE_IMAGE##*:}
  gcc -static -O2 -Wall -Werror -s -DVERSION="v$pause_tag-kubernetes-$k8s_newest" \
    -o "$work/pause" "$k8s_dir/build/pause/linux/pause.c"
  python3 "$here/docker-archive.py" "$tmp/pause.tar" --ref "$PAUSE_IMAGE" --arch "$arch" \
    --entrypoint '["/pause"]' --user 65535:65535 --file "$work/pause:/pause:755"

  # coredns, as upstream's image lays it out (the binary at /coredns, port 53)
  python3 "$here/docker-archive.py" "$tmp/coredns.tar" --ref "$COREDNS_IMAGE" --arch "$arch" \
    --entrypoint '["/coredns"]' --file "$cache/bin/coredns-$COREDNS_VERSION/coredns:/coredns:755"

  # busybox: upstream's release source (lib.sh busybox_source), defconfig, linked static (the image holds
  # nothing else), a link per applet in /bin. Debian's busybox-static 1.35 segfaulted when wget's -T timeout
  # fired (exit 139 in a pod) and its nc has no -z.
  [ "$TEST_IMAGE" = "kubeunit.local/busybox:$BUSYBOX_VERSION" ] ||
    die "TEST_IMAGE $TEST_IMAGE does not name BUSYBOX_VERSION $BUSYBOX_VERSION (versions.env)"
  local src epoch bb a
  src=$(busybox_source "$BUSYBOX_VERSION" "$work")
  tar -xjf "$src" -C "$work"
  bb=$work/busybox-$BUSYBOX_VERSION
  # the build date busybox prints: its release's (the top Makefile's mtime in the tarball)
  epoch=$(stat -c %Y "$bb/Makefile")
  (cd "$bb" && export SOURCE_DATE_EPOCH=$epoch && make -s defconfig >/dev/null &&
    sed -i 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' .config &&
    grep -qx CONFIG_STATIC=y .config &&
    make -s -j"$(nproc)" busybox >"$work/make.log" 2>&1) ||
    { tail -n 30 "$work/make.log" >&2; die "busybox $BUSYBOX_VERSION did not build"; }
  ! grep -q 'program interpreter' <<<"$(readelf -l "$bb/busybox")" ||
    die "busybox $BUSYBOX_VERSION is not statically linked"
  mkdir -p "$work/bb/bin" "$work/bb/etc" "$work/bb/root" "$work/bb/tmp" "$work/bb/var/www"
  chmod 700 "$work/bb/root"; chmod 1777 "$work/bb/tmp"
  cp "$bb/busybox" "$work/bb/bin/busybox"; chmod 755 "$work/bb/bin/busybox"
  for a in $("$bb/busybox" --list-full); do
    mkdir -p "$work/bb/$(dirname "$a")"
    [ "$a" = bin/busybox ] || ln -s /bin/busybox "$work/bb/$a"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$work/bb/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$work/bb/etc/group"
  chmod 644 "$work/bb/etc/passwd" "$work/bb/etc/group"
  python3 "$here/docker-archive.py" "$tmp/busybox.tar" --ref "$TEST_IMAGE" \
    --ref "docker.io/library/busybox:$BUSYBOX_VERSION" --arch "$arch" --cmd '["sh"]' --tree "$work/bb"

  # metrics-server as its Dockerfile lays it out (FROM distroless/static: the binary at /, user 65534)
  ! image_addon metricsServer ||
  python3 "$here/docker-archive.py" "$tmp/metrics-server.tar" --ref "$METRICS_SERVER_IMAGE" --arch "$arch" \
    --entrypoint '["/metrics-server"]' --user 65534 \
    --file "$cache/bin/metrics-server-$METRICS_SERVER_VERSION/metrics-server:/metrics-server:755"
  # local-path-provisioner: its Dockerfile puts the binary at /usr/bin on alpine; the provisioner runs no other
  # program (its helper pods run busybox), so the image holds the static binary alone
  python3 "$here/docker-archive.py" "$tmp/local-path-provisioner.tar" --ref "$LOCAL_PATH_IMAGE" --arch "$arch" \
    --cmd '["local-path-provisioner"]' \
    --file "$cache/bin/local-path-provisioner-$LOCAL_PATH_VERSION/local-path-provisioner:/usr/bin/local-path-provisioner:755"
  # MetalLB as its Dockerfiles lay it out (FROM distroless/static: the binary at /; the speaker's FRR reloader
  # serves its FRR mode, which kubeunit does not run)
  if image_addon loadBalancer; then
    python3 "$here/docker-archive.py" "$tmp/metallb-controller.tar" --ref "$METALLB_CONTROLLER_IMAGE" \
      --arch "$arch" --entrypoint '["/controller"]' --file "$cache/bin/metallb-$METALLB_VERSION/controller:/controller:755"
    python3 "$here/docker-archive.py" "$tmp/metallb-speaker.tar" --ref "$METALLB_SPEAKER_IMAGE" \
      --arch "$arch" --entrypoint '["/speaker"]' --file "$cache/bin/metallb-$METALLB_VERSION/speaker:/speaker:755"
  fi
  # Traefik as its Dockerfile lays it out (the binary at /, on alpine for its ca-certificates and tzdata, which
  # a Gateway in a cluster without internet access does not use)
  ! image_addon gateway ||
  python3 "$here/docker-archive.py" "$tmp/traefik.tar" --ref "$TRAEFIK_IMAGE" --arch "$arch" \
    --entrypoint '["/traefik"]' --file "$cache/bin/traefik-$TRAEFIK_VERSION/traefik:/traefik:755"

  {
    echo "pause.tar $PAUSE_IMAGE"
    echo "coredns.tar $COREDNS_IMAGE"
    echo "busybox.tar $TEST_IMAGE docker.io/library/busybox:$BUSYBOX_VERSION"
    ! image_addon metricsServer || echo "metrics-server.tar $METRICS_SERVER_IMAGE"
    echo "local-path-provisioner.tar $LOCAL_PATH_IMAGE"
    ! image_addon loadBalancer || echo "metallb-controller.tar $METALLB_CONTROLLER_IMAGE"
    ! image_addon loadBalancer || echo "metallb-speaker.tar $METALLB_SPEAKER_IMAGE"
    ! image_addon gateway || echo "traefik.tar $TRAEFIK_IMAGE"
  } >"$tmp/images.txt"
  echo "# busybox $BUSYBOX_VERSION from busybox_$BUSYBOX_VERSION.orig.tar.bz2 (Debian $BUSYBOX_SOURCE_SUITE), defconfig, static ($arch)" >>"$tmp/images.txt"
}

# --- addons: each from its Go module, as its upstream Makefile builds it ---

metrics_server_build() {
  local ver=$METRICS_SERVER_VERSION m=sigs.k8s.io/metrics-server pkg=k8s.io/client-go/pkg
  go_get "$m/cmd/metrics-server@$ver"
  (cd "$work" && go build -trimpath \
    -ldflags "-s -w -X $pkg/version.gitVersion=$ver -X $pkg/version.buildDate=1970-01-01T00:00:00Z" \
    -o "$tmp/metrics-server" "$m/cmd/metrics-server")
  grep -q "$ver" <<<"$("$tmp/metrics-server" --version 2>&1)" || die "the metrics-server built is not $ver"
}

local_path_build() {
  local ver=$LOCAL_PATH_VERSION m=github.com/rancher/local-path-provisioner
  go_get "$m@$ver"
  (cd "$work" && go build -trimpath -ldflags "-s -w -X main.VERSION=$ver" -o "$tmp/local-path-provisioner" "$m")
  grep -q "$ver" <<<"$("$tmp/local-path-provisioner" --version 2>&1)" || die "the local-path-provisioner built is not $ver"
}

# MetalLB's controller and speaker from one module, as its Dockerfiles build them (CGO off; they stamp git's
# commit and branch, the version is a constant of the module); `go version -m` names the module version built.
metallb_build() {
  local ver=$METALLB_VERSION m=go.universe.tf/metallb c
  go_get "$m/controller@$ver" "$m/speaker@$ver"
  for c in controller speaker; do
    (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$tmp/$c" "$m/$c")
    grep -q "mod[[:space:]]*$m[[:space:]]*$ver" <<<"$(go version -m "$tmp/$c")" || die "the MetalLB $c built is not $ver"
  done
}

# Traefik as its Makefile builds it (CGO off, the version stamped in). Its go.mod replaces modules with its own
# paths and forks, which `go get` of a dependency ignores: it is built in a copy of its module, as a checkout.
traefik_build() {
  local ver=$TRAEFIK_VERSION m=github.com/traefik/traefik/v3 src
  src=$(mod_dir "$m@$ver")
  cp -r "$src" "$work/traefik" && chmod -R u+w "$work/traefik"
  # Its few hundred module downloads quietly, as go_get keeps the others' (a failure prints them).
  (cd "$work/traefik" && go build -trimpath \
    -ldflags "-s -w -X $m/pkg/version.Version=$ver -X $m/pkg/version.BuildDate=1970-01-01T00:00:00Z" \
    -o "$tmp/traefik" ./cmd/traefik >"$work/build.log" 2>&1) ||
    { cat "$work/build.log" >&2; die "traefik $ver did not build"; }
  grep -q "Version:[[:space:]]*$ver\$" <<<"$("$tmp/traefik" version)" || die "the traefik built is not $ver"
}

# --- debugging ---

# dlv refuses a binary built by a Go it does not know (pkg/goversion/compat.go): checked on every run, so bumping
# Go without dlv fails here, not when `kubeunit debug` starts a component under it.
check_dlv() {
  local compat min max go_minor
  compat=$(mod_dir "github.com/go-delve/delve@$DLV_VERSION")/pkg/goversion/compat.go
  min=$(sed -n 's/^[[:space:]]*MinSupportedVersionOfGoMinor[[:space:]]*=[[:space:]]*\([0-9]*\)$/\1/p' "$compat")
  max=$(sed -n 's/^[[:space:]]*MaxSupportedVersionOfGoMinor[[:space:]]*=[[:space:]]*\([0-9]*\)$/\1/p' "$compat")
  if [ -z "$min" ] || [ -z "$max" ]; then die "cannot read the Go versions dlv $DLV_VERSION supports from $compat"; fi
  go_minor=$(go env GOVERSION); go_minor=${go_minor#go1.}; go_minor=${go_minor%%[!0-9]*}
  if [ "$go_minor" -lt "$min" ] || [ "$go_minor" -gt "$max" ]; then
    die "dlv $DLV_VERSION debugs go1.$min to go1.$max, not $(go env GOVERSION): pin another DLV_VERSION (versions.env)"
  fi
}

dlv_build() {
  local m=github.com/go-delve/delve
  go_get "$m/cmd/dlv@$DLV_VERSION"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$tmp/dlv" "$m/cmd/dlv")
  grep -qx "Version: ${DLV_VERSION#v}" <<<"$("$tmp/dlv" version)" || die "the dlv built is not $DLV_VERSION"
}

# kube-bench and its cfg/ (the benchmark files, unchanged), laid out as its release tarball: cfg beside the binary.
kube_bench_build() {
  local m=github.com/aquasecurity/kube-bench
  go_get "$m@$KUBE_BENCH_VERSION"
  (cd "$work" && go build -trimpath -ldflags "-s -w -X $m/cmd.KubeBenchVersion=$KUBE_BENCH_VERSION" -o "$tmp/kube-bench" "$m")
  cp -r "$(mod_dir "$m@$KUBE_BENCH_VERSION")/cfg" "$tmp/cfg"
  chmod -R u+w "$tmp/cfg"
  [ -f "$tmp/cfg/cis-1.12/master.yaml" ] || die "kube-bench $KUBE_BENCH_VERSION has no cfg/cis-1.12"
}

# The debug builds: no -s -w, so DWARF and the symbol table stay, and -gcflags=all=-N -l (no optimizations, no
# inlining, in every package), so dlv sees each function and local. The version -X flags as the normal builds.
debug_build() {
  # what the dir holds already is kept (hard links: builds replace dirs, never write a file in place)
  if [ -f "$debug_dir/.complete" ]; then cp -al "$debug_dir/." "$tmp/"; fi
  k8s_build "$k8s_newest" "$tmp" "" "-gcflags=all=-N -l" -- "$@"
}

# debug_kubernetes CMD...: the debug builds of CMD... in $debug_dir; only those missing are built.
debug_kubernetes() {
  local c missing=()
  for c in "$@"; do
    if [ ! -f "$debug_dir/.complete" ] || [ ! -f "$debug_dir/$c" ]; then missing+=("$c"); fi
  done
  if [ ${#missing[@]} -eq 0 ]; then echo "debug-kubernetes $k8s_newest ($*): cached in $debug_dir"; return; fi
  build_dir "debug-kubernetes" "$k8s_newest (${missing[*]})" "$debug_dir" debug_build "${missing[@]}"
}

if [ "$mode" = debug ]; then
  check_dlv
  cached dlv "$DLV_VERSION" "$dlv_dir" dlv_build
  debug_kubernetes "${debug_cmds[@]}"
  exit 0
fi

if [ "$mode" = node ]; then
  build_etcd "$ETCD_VERSION"
  cached kubernetes "$node_k8s" "$cache/bin/kubernetes-$node_k8s" kubernetes_build "$node_k8s"
  check_pins
  cached containerd "$CONTAINERD_VERSION" "$cache/bin/containerd-$CONTAINERD_VERSION" containerd_build
  cached runc "$RUNC_VERSION" "$cache/bin/runc-$RUNC_VERSION" runc_build
  cached cni-plugins "$CNI_PLUGINS_VERSION" "$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION" cni_build
  cached coredns "$COREDNS_VERSION" "$cache/bin/coredns-$COREDNS_VERSION" coredns_build
  cached registry "$REGISTRY_VERSION" "$cache/bin/registry-$REGISTRY_VERSION" registry_build
  cached local-path-provisioner "$LOCAL_PATH_VERSION" "$cache/bin/local-path-provisioner-$LOCAL_PATH_VERSION" local_path_build
  # The addons the profile turns off: neither built nor imaged (Traefik alone is minutes of Go build).
  ! node_addon metricsServer ||
    cached metrics-server "$METRICS_SERVER_VERSION" "$cache/bin/metrics-server-$METRICS_SERVER_VERSION" metrics_server_build
  ! node_addon loadBalancer || cached metallb "$METALLB_VERSION" "$cache/bin/metallb-$METALLB_VERSION" metallb_build
  ! node_addon gateway || cached traefik "$TRAEFIK_VERSION" "$cache/bin/traefik-$TRAEFIK_VERSION" traefik_build
  node_images=$(node_images_dir)
  [ "$node_images" = "$images_dir" ] || image_addons=$node_addons
  cached images "$k8s_newest" "$node_images" images_build
  exit 0
fi

build_etcd "$ETCD_VERSION"
for v in $KUBERNETES_VERSIONS; do cached kubernetes "$v" "$cache/bin/kubernetes-$v" kubernetes_build "$v"; done
check_pins
cached containerd "$CONTAINERD_VERSION" "$cache/bin/containerd-$CONTAINERD_VERSION" containerd_build
cached runc "$RUNC_VERSION" "$cache/bin/runc-$RUNC_VERSION" runc_build
cached cni-plugins "$CNI_PLUGINS_VERSION" "$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION" cni_build
cached crictl "$CRICTL_VERSION" "$cache/bin/crictl-$CRICTL_VERSION" crictl_build
cached coredns "$COREDNS_VERSION" "$cache/bin/coredns-$COREDNS_VERSION" coredns_build
cached registry "$REGISTRY_VERSION" "$cache/bin/registry-$REGISTRY_VERSION" registry_build
cached metrics-server "$METRICS_SERVER_VERSION" "$cache/bin/metrics-server-$METRICS_SERVER_VERSION" metrics_server_build
cached local-path-provisioner "$LOCAL_PATH_VERSION" "$cache/bin/local-path-provisioner-$LOCAL_PATH_VERSION" local_path_build
cached metallb "$METALLB_VERSION" "$cache/bin/metallb-$METALLB_VERSION" metallb_build
cached traefik "$TRAEFIK_VERSION" "$cache/bin/traefik-$TRAEFIK_VERSION" traefik_build
cached images "$k8s_newest" "$images_dir" images_build
check_dlv
cached dlv "$DLV_VERSION" "$dlv_dir" dlv_build
[ "$mode" = presubmit ] ||
  cached kube-bench "$KUBE_BENCH_VERSION" "$cache/bin/kube-bench-$KUBE_BENCH_VERSION" kube_bench_build
debug_kubernetes "${debug_cmds[@]}"
[ "$mode" = presubmit ] ||
  for v in $KUBERNETES_VERSIONS; do cached e2e "$v" "$cache/bin/e2e-$v" e2e_build "$v"; done
