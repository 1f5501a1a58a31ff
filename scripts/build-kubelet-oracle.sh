#!/usr/bin/env bash
# Builds the kubelet oracle (tests/oracle/kubelet: the kubelet's own Topology, CPU, memory and
# device managers of the Kubernetes release pinned in tests/kubernetes-version) for the
# differential test tests/kubelet/test_oracle.py.
#
# The binary goes to ${TOPOSCHED_CACHE:-$HOME/.cache/toposched}/kubelet-oracle-<version>-<hash>/,
# where <hash> covers the oracle's Go sources, go.mod and go.sum: it is rebuilt only when the pin
# or the sources change. The last line printed is the binary's path. Exit 3 when there is no Go
# toolchain (the test then skips), 2 when tests/oracle/kubelet/go.mod does not require the pin.
#
#   bash scripts/build-kubelet-oracle.sh           # build if needed, print the binary
#   bash scripts/build-kubelet-oracle.sh --force   # rebuild even when the binary exists
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/oracle/kubelet
version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3} $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "$src/go.mod")"
if [ -f tests/kubernetes-version ]; then
  pin="$(tr -d '[:space:]' < tests/kubernetes-version)"
  if [ "$version" != "$pin" ]; then
    echo "build-kubelet-oracle.sh: $src/go.mod requires k8s.io/kubernetes $version, tests/kubernetes-version pins $pin" >&2
    exit 2
  fi
fi
hash="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-16)"
dir="${TOPOSCHED_CACHE:-$HOME/.cache/toposched}/kubelet-oracle-$version-$hash"
bin="$dir/kubelet-oracle"

if [ "${1:-}" != "--force" ] && [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if ! command -v go >/dev/null; then
  echo "build-kubelet-oracle.sh: no Go toolchain on PATH: cannot build the kubelet oracle" >&2
  exit 3
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
bin="$dir/kubelet-oracle"
tmp="$(mktemp "$dir/.build.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
echo "build-kubelet-oracle.sh: building the kubelet oracle against Kubernetes $version (minutes on a cold cache)" >&2
(cd "$src" && GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -ldflags='-s -w' -o "$tmp" .)
chmod 755 "$tmp"
mv "$tmp" "$bin"
echo "$bin"
