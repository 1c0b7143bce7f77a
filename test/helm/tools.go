//go:build tools

// Package helm keeps Helm out of svcproxy's own go.mod: its Go SDK renders
// deploy/helm/svcproxy in this module's test (render_test.go, run by make
// test), and hack/build-helm.sh builds the helm CLI of the same version from
// here for make e2e-node's TestHelmInstall, which installs the chart as a
// user does.
package helm

import _ "helm.sh/helm/v4/cmd/helm"
