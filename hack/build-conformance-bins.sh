#!/usr/bin/env bash
# Builds upstream's e2e.test, agnhost, regression-issue-74839 and the ginkgo CLI (k8s.io/kubernetes v1.37.2 from the
# pinned module test/conformance/e2ebin) and a CoreDNS (test/conformance/corednsbin)
# and caches them like hack/build-k8s-bins.sh, under
# ${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-conformance/<key> and
# .../svcproxy-coredns/<key>. Prints the two directories on the last two lines
# of stdout: the directory of the first four, then coredns'.
# Cold, e2e.test is the long one: ~28 min of CPU on 2 cores (~5 GB of build
# cache, half of it shared with hack/build-k8s-bins.sh when that ran first).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=hack/lib/k8s-build.sh
source "$root/hack/lib/k8s-build.sh"

e2e="$(k8s_build "e2e.test and agnhost" "$root/test/conformance/e2ebin" svcproxy-conformance \
	agnhost=k8s.io/kubernetes/test/images/agnhost \
	e2e.test=test:k8s.io/kubernetes/test/e2e | tail -n1)"
# The Conntrack spec's "invalid conntrack state" server (its own image upstream)
# and the ginkgo CLI, which runs e2e.test's specs in parallel processes.
k8s_build "regression-issue-74839 and ginkgo" "$root/test/conformance/e2ebin" svcproxy-conformance \
	regression-issue-74839=k8s.io/kubernetes/test/images/regression-issue-74839 \
	ginkgo=github.com/onsi/ginkgo/v2/ginkgo >/dev/null
dns="$(k8s_build "coredns" "$root/test/conformance/corednsbin" svcproxy-coredns \
	coredns=github.com/svcproxy/svcproxy/test/conformance/corednsbin | tail -n1)"
echo "$e2e"
echo "$dns"
