#!/usr/bin/env bash
# The Gateway API CRDs kubeunit applies with its gateway addon (addons/gateway-api-crds.yaml): the standard
# channel of sigs.k8s.io/gateway-api at GATEWAY_API_VERSION (scripts/versions.env), config/crd/standard/*.yaml
# in the order of config/crd/kustomization.yaml. That is what the release's standard-install.yaml holds; the
# release assets cannot be downloaded here, the module can (checked against sum.golang.org).
#
#   scripts/gateway-api-crds.sh           # write addons/gateway-api-crds.yaml
#   scripts/gateway-api-crds.sh --check   # exit 1 when it differs from the module's (build-test-binaries.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/versions.env"
die() { echo "gateway-api-crds: $*" >&2; exit 1; }
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
out=$(cd "$here/.." && pwd)/addons/gateway-api-crds.yaml

render() {
  local dir f
  dir=$(mod_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")/config/crd
  echo "# The Gateway API's standard channel, sigs.k8s.io/gateway-api $GATEWAY_API_VERSION: config/crd/standard/*.yaml as"
  echo "# they are, in the order of config/crd/kustomization.yaml (the release's standard-install.yaml)."
  echo "# Written by scripts/gateway-api-crds.sh; scripts/build-test-binaries.sh checks it against the module."
  for f in $(sed -n 's/^- \(standard\/.*\.yaml\)$/\1/p' "$dir/kustomization.yaml"); do
    echo "---"
    cat "$dir/$f"
  done
}

case ${1:-} in
  "") render >"$out.tmp" && mv "$out.tmp" "$out"; echo "wrote $out" ;;
  --check)
    render | cmp -s - "$out" ||
      die "$out is not the standard channel of sigs.k8s.io/gateway-api $GATEWAY_API_VERSION: run $0" ;;
  *) die "usage: $0 [--check]" ;;
esac
