//go:build tools

// Package kubeletbin pins the kubelet and kubectl that the node suite
// (test/e2enode) runs. It is a module of its own, separate from
// test/e2e/k8sbins, because that module's go.mod and go.sum are the cache key
// of the control plane binaries: adding kubelet there would rebuild all five.
// hack/build-kubelet.sh builds the binaries from it.
package kubeletbin

import (
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
