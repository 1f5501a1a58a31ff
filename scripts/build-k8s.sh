#!/usr/bin/env bash
# Builds the control plane the end-to-end tests run against: kube-apiserver and kube-scheduler of
# the Kubernetes release pinned in tests/kubernetes-version, and the etcd that release requires,
# all from the Go module proxy (tests/e2e/go.mod pins every module; Go is test infrastructure
# only, the product stays Python).
#
# Binaries go to ${TOPOSCHED_CACHE:-$HOME/.cache/toposched}/k8s-<version>/bin, a directory that
# survives between runs; a pin whose three binaries are there already is not rebuilt. The last
# line printed is that bin directory. Exit 3 when there is no Go toolchain (the tests then skip).
#
#   bash scripts/build-k8s.sh           # build if needed, print the bin directory
#   bash scripts/build-k8s.sh --force   # rebuild even when the binaries exist
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(tr -d '[:space:]' < tests/kubernetes-version)"
cache="${TOPOSCHED_CACHE:-$HOME/.cache/toposched}"
bin="$cache/k8s-$version/bin"
binaries=(etcd kube-apiserver kube-scheduler)

have_all() {
  local name
  for name in "${binaries[@]}"; do [ -x "$bin/$name" ] || return 1; done
}

if [ "${1:-}" != "--force" ] && have_all; then
  echo "$bin"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "build-k8s.sh: no Go toolchain on PATH: cannot build Kubernetes $version" >&2
  exit 3
fi
if ! grep -Eq "^\s*k8s.io/kubernetes $version( |\$)" tests/e2e/go.mod; then
  echo "build-k8s.sh: tests/e2e/go.mod does not require k8s.io/kubernetes $version (tests/kubernetes-version)" >&2
  exit 2
fi

mkdir -p "$bin"
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "build-k8s.sh: building Kubernetes $version (kube-apiserver, kube-scheduler) and etcd into $bin" >&2
started=$SECONDS
(
  cd tests/e2e
  # What Kubernetes' own build stamps in: the servers report this version (/version, logs).
  stamp="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
  stamp="$stamp -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
  stamp="$stamp -X k8s.io/client-go/pkg/version.gitVersion=$version"
  export CGO_ENABLED=0
  go build -trimpath -buildvcs=false "-ldflags=-s -w $stamp" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  go build -trimpath -buildvcs=false "-ldflags=-s -w $stamp" -o "$tmp/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
  go build -trimpath -buildvcs=false "-ldflags=-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
)
for name in "${binaries[@]}"; do mv -f "$tmp/$name" "$bin/$name"; done
echo "build-k8s.sh: built in $((SECONDS - started)) s" >&2
echo "$bin"
