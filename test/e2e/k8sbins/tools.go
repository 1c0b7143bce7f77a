//go:build tools

// Package k8sbins pins the Kubernetes control plane, kube-proxy and etcd used
// by the svcproxy end-to-end tests. It is a separate module so that the main
// module never depends on k8s.io/kubernetes. hack/build-k8s-bins.sh builds the
// binaries from it.
package k8sbins

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
