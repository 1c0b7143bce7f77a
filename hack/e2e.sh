#!/usr/bin/env bash
# Runs the end-to-end suite (test/e2e) against one proxy in a kind-like
# cluster made of network namespaces. PROXY=svcproxy (default),
# kube-proxy-iptables or kube-proxy-nftables. E2E_RUN=regexp selects tests.
# E2E_RESULTS=file.json writes the per-scenario results for hack/e2e-matrix.sh.
# E2E_TIMEOUT: the test binary's timeout (45m; hack/soak.sh sets it from SOAK_DURATION).
# Must run as root; never touches the root network namespace.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PROXY="${PROXY:-svcproxy}"

if [[ $(id -u) -ne 0 ]]; then
	echo "e2e: must run as root (network namespaces)" >&2
	exit 1
fi

# Tools the harness and the proxies use inside the namespaces.
missing=()
# prometheus: TestPrometheusProgrammingLatency scrapes the proxies with Debian's
# Prometheus and queries it (the package also brings promtool).
for pair in ip:iproute2 nft:nftables iptables:iptables conntrack:conntrack sysctl:procps prometheus:prometheus; do
	command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
	echo "e2e: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "${missing[@]}" >/dev/null ||
		{ apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

bins="$(hack/build-k8s-bins.sh | tail -n1)"
mkdir -p bin
go build -tags e2e -o bin/e2e-nodeagent ./test/e2e/nodeagent
if [[ $PROXY == svcproxy ]]; then
	go build -ldflags "$(hack/version-ldflags.sh)" -o bin/svcproxy ./cmd/svcproxy
	# The pod contract scenario runs the binary it takes out of this image,
	# as the DaemonSet's pod would.
	go run ./hack/image -o bin/svcproxy-image.tar -tag svcproxy:dev
fi

# Per-run prefix: the pid lets the next run remove namespaces of a killed run.
# shellcheck source=hack/lib/suite.sh
source hack/lib/suite.sh
prefix="$(suite_prefix spe2e)"
cleanup() { suite_delete_netns "$prefix"; }

# A compiled test binary (not `go test`) so that a signal reaches the process
# that tears the cluster down.
go test -c -tags e2e -o bin/e2e.test ./test/e2e/
args=(-test.v -test.count=1 "-test.timeout=${E2E_TIMEOUT:-45m}")
[[ -n ${E2E_RUN:-} ]] && args+=(-test.run "$E2E_RUN")
echo "e2e: PROXY=$PROXY E2E_FAMILY=${E2E_FAMILY:-ipv4} k8s binaries $bins prefix $prefix" >&2
rc=0
suite_run cleanup env \
	E2E_K8S_BINS="$bins" \
	E2E_NODEAGENT_BIN="$root/bin/e2e-nodeagent" \
	E2E_SVCPROXY_BIN="$root/bin/svcproxy" \
	E2E_IMAGE_TAR="$root/bin/svcproxy-image.tar" \
	E2E_PREFIX="$prefix" \
	bin/e2e.test "${args[@]}" || rc=$?
exit "$rc"
