//go:build tools

// Package e2ebin pins upstream's end-to-end test binary (e2e.test, from
// k8s.io/kubernetes/test/e2e), the programs of its test images (agnhost,
// regression-issue-74839) and the ginkgo CLI that runs e2e.test in parallel
// at the Kubernetes version of test/e2e/k8sbins, with the same staging
// replaces. hack/build-conformance-bins.sh builds them from it. A module of its own so that the
// control plane's cache key (test/e2e/k8sbins) stays as it is.
package e2ebin

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/regression-issue-74839"
)
