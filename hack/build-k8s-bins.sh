#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# kube-proxy from the pinned module test/e2e/k8sbins and caches them under
# ${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-e2e/<hash of go.mod, go.sum and go version>/.
# Prints the directory holding the binaries on its last line of stdout.
# A cold build takes ~11 minutes and ~4 GB of build cache on 2 cores.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/k8s-build.sh
source "$root/hack/lib/k8s-build.sh"

cache="$(k8s_build "k8s binaries" "$root/test/e2e/k8sbins" svcproxy-e2e \
	etcd=go.etcd.io/etcd/server/v3 \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	kube-proxy=k8s.io/kubernetes/cmd/kube-proxy | tail -n1)"
"$cache/kube-apiserver" --version >&2
echo "$cache"
