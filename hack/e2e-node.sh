#!/usr/bin/env bash
# Runs the node suite (test/e2enode): test/e2e's control plane plus a real
# kubelet and containerd with the standard CNI plugins on each worker, so that
# svcproxy runs as its DaemonSet's pod from its image. Offline: the images are
# built here as OCI archives and imported. E2ENODE_RUN=regexp selects tests,
# E2ENODE_KEEP=1 keeps the logs after a pass. Must run as root.
#
# Everything runs in a private mount namespace (hack/lib/e2enode.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=hack/lib/e2enode.sh
source hack/lib/e2enode.sh

if [[ $(id -u) -ne 0 ]]; then
	echo "e2e-node: must run as root (network namespaces, cgroups, containerd)" >&2
	exit 1
fi
e2enode_packages
e2enode_enter_mountns "$0" "$@"

start=$SECONDS
k8s="$(hack/build-k8s-bins.sh | tail -n1)"
nodebins="$(hack/build-kubelet.sh | tail -n1)"
prometheus="$(hack/build-prometheus.sh | tail -n1)/prometheus"
helm="$(hack/build-helm.sh | tail -n1)/helm"
images="$root/bin/e2enode-images"
e2enode_images "$images" "$k8s"
e2enode_prepare_run
args=(-test.v -test.count=1 -test.timeout=40m)
[[ -n ${E2ENODE_RUN:-} ]] && args+=(-test.run "$E2ENODE_RUN")
echo "e2e-node: k8s binaries $k8s, kubelet $nodebins, prefix $prefix, prepared in $((SECONDS - start))s" >&2
ls -l "$images" >&2
rc=0
e2enode_run "$k8s" "$nodebins" "$images" E2ENODE_PROMETHEUS="$prometheus" E2ENODE_HELM="$helm" -- "${args[@]}" || rc=$?
echo "e2e-node: total $((SECONDS - start))s" >&2
exit "$rc"
