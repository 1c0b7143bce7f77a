#!/usr/bin/env bash
# Builds kubelet and kubectl from the pinned module test/e2enode/kubeletbin
# (k8s.io/kubernetes v1.37.2, the same replaces as test/e2e/k8sbins) and caches
# them under ${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-e2enode/<hash of go.mod,
# go.sum and go version>/. A module and a cache of their own: the control
# plane's cache key (test/e2e/k8sbins) stays as it is.
# Prints the directory holding the binaries on its last line of stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="$root/test/e2enode/kubeletbin"
k8s_version="v1.37.2"
bins=(kubelet kubectl)

key="$( (cat "$mod/go.mod" "$mod/go.sum"; go version) | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-e2enode/$key"

have_all() {
	local b
	for b in "${bins[@]}"; do [[ -x "$cache/$b" ]] || return 1; done
}

if have_all; then
	echo "kubelet and kubectl cached in $cache" >&2
	echo "$cache"
	exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
ldflags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000"

cd "$mod"
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
start=$SECONDS
go mod download
for c in "${bins[@]}"; do
	echo "building $c" >&2
	go build -trimpath -ldflags "$ldflags" -o "$tmp/$c" "k8s.io/kubernetes/cmd/$c"
done
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$cache/$b"; done
echo "built kubelet and kubectl in $((SECONDS - start))s into $cache" >&2
"$cache/kubelet" --version >&2
echo "$cache"
