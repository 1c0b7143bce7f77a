#!/usr/bin/env bash
# Builds Prometheus (cmd/prometheus of the pinned module test/prometheusbin) with
# Kubernetes service discovery only, for make e2e-node's TestKubePrometheusStack:
# Debian's package has no kubernetes_sd_configs. Cached like the other binaries,
# under ${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-prometheus/<key>; ~3 min cold on
# 2 cores. Prints the directory holding it on the last line of stdout.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/k8s-build.sh
source "$root/hack/lib/k8s-build.sh"

BUILD_TAGS=remove_all_sd,enable_kubernetes_sd k8s_build "prometheus" "$root/test/prometheusbin" svcproxy-prometheus \
	prometheus=github.com/prometheus/prometheus/cmd/prometheus | tail -n1
