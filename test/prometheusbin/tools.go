//go:build tools

// Package prometheusbin pins the Prometheus that make e2e-node's
// TestKubePrometheusStack runs: Debian's package is built without Kubernetes
// service discovery (its kubernetes_sd_configs is "field not found"), which is
// how kube-prometheus-stack finds kube-proxy. hack/build-prometheus.sh builds
// cmd/prometheus from this module with only that discovery
// (-tags remove_all_sd,enable_kubernetes_sd).
package prometheusbin

import _ "github.com/prometheus/prometheus/cmd/prometheus"
