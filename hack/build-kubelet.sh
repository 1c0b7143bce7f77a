#!/usr/bin/env bash
# Builds kubelet and kubectl from the pinned module test/e2enode/kubeletbin
# (k8s.io/kubernetes v1.37.2, the same replaces as test/e2e/k8sbins) and caches
# them under ${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-e2enode/<hash of go.mod,
# go.sum and go version>/. A module and a cache of their own: the control
# plane's cache key (test/e2e/k8sbins) stays as it is.
# Prints the directory holding the binaries on its last line of stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/k8s-build.sh
source "$root/hack/lib/k8s-build.sh"

cache="$(k8s_build "kubelet and kubectl" "$root/test/e2enode/kubeletbin" svcproxy-e2enode \
	kubelet=k8s.io/kubernetes/cmd/kubelet \
	kubectl=k8s.io/kubernetes/cmd/kubectl | tail -n1)"
"$cache/kubelet" --version >&2
echo "$cache"
