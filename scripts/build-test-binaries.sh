#!/usr/bin/env bash
# Build the pinned Kubernetes and etcd binaries from the Go module proxy into a versioned cache.
#
#   scripts/build-test-binaries.sh            # every pinned version
#   scripts/build-test-binaries.sh --print    # print the bin dirs (one per line), build nothing
#
# Output: $KUBEUNIT_CACHE/bin/kubernetes-<ver>/{kube-apiserver,...,kubectl}
#         $KUBEUNIT_CACHE/bin/etcd-<ver>/{etcd,etcdctl}
# A directory with a .complete stamp is reused as is.
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

if [ "${1:-}" = "--print" ]; then
  for v in $KUBERNETES_VERSIONS; do echo "$cache/bin/kubernetes-$v"; done
  echo "$cache/bin/etcd-$ETCD_VERSION"
  exit 0
fi

command -v go >/dev/null || { echo "build-test-binaries: go is not installed" >&2; exit 1; }

build_kubernetes() {
  local ver=$1 out="$cache/bin/kubernetes-$1"
  if [ -f "$out/.complete" ]; then echo "kubernetes $ver: cached in $out"; return; fi
  local minor=${ver#v1.}; minor=${minor%%.*}
  local staging_ver="v0.${ver#v1.}"
  local work; work=$(mktemp -d)
  echo "kubernetes $ver: building into $out (cold builds take a while)"
  (
    cd "$work"
    go mod init kubeunit.test/binaries >/dev/null 2>&1
    gomod=$(go mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    [ -n "$gomod" ] || { echo "cannot download k8s.io/kubernetes@$ver" >&2; exit 1; }
    go mod edit -require="k8s.io/kubernetes@$ver"
    # every staging module the kubernetes go.mod points at ./staging/src
    for mod in $(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/src/.*#\1#p' "$gomod"); do
      go mod edit -replace="$mod=$mod@$staging_ver"
    done
    pkgs=(); for c in "${k8s_cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    go get "${pkgs[@]/%/@$ver}" >/dev/null
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$ver -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$ver -X k8s.io/client-go/pkg/version.gitMajor=1"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=$minor"
    mkdir -p "$out.tmp"
    go build -trimpath -ldflags "$ldflags" -o "$out.tmp/" "${pkgs[@]}"
  )
  rm -rf "$work" "$out"
  mv "$out.tmp" "$out"
  touch "$out/.complete"
}

build_etcd() {
  local ver=$1 out="$cache/bin/etcd-$1"
  if [ -f "$out/.complete" ]; then echo "etcd $ver: cached in $out"; return; fi
  local work; work=$(mktemp -d)
  echo "etcd $ver: building into $out"
  (
    cd "$work"
    go mod init kubeunit.test/etcd >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$ver" "go.etcd.io/etcd/etcdctl/v3@$ver" >/dev/null
    ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ver"
    mkdir -p "$out.tmp"
    go build -trimpath -ldflags "$ldflags" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3
    go build -trimpath -ldflags "$ldflags" -o "$out.tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3
  )
  rm -rf "$work" "$out"
  mv "$out.tmp" "$out"
  touch "$out/.complete"
}

build_etcd "$ETCD_VERSION"
for v in $KUBERNETES_VERSIONS; do build_kubernetes "$v"; done
