#!/usr/bin/env bash
# make bench, in two parts, then the report (docs/bench.md's tables, docs/bench/*.png):
#
# 1. svcproxy against the real kernel, in process (hack/bench), at BENCH_SIZES
#    (default "1000 10000 30000"; add 100000 for the curve's end; "none" skips): cold sync, one
#    endpoint change p50/p99 over 50, heap and RSS, the data plane (new connections
#    through a ClusterIP vs straight to the pod), and at BENCH_CHURN_AT (default
#    30000) the churn: 1% of the Services changing every second for 60 s. Each size
#    runs in its own process so RSS is per size.
# 2. Side by side (TestBenchSideBySide in test/e2e, E2E_BENCH=1): svcproxy and
#    upstream kube-proxy nftables through a real apiserver, traffic deciding, at
#    BENCH_SIDE_SIZES (default "1000"; "1000 10000 30000" for the full run; kube-proxy
#    up to 10000, see BENCH_KUBEPROXY_MAX; "none" skips the part).
#
# BENCH_STICKY=1: every Service has ClientIP affinity. BENCH_EXTERNAL=1: a third of
# the Services have a NodePort (issue 8; some LoadBalancer, some externalIPs).
# BENCH_OUT=DIR keeps the JSON lines (default: a temporary directory); BENCH_PLOTS=DIR
# is where the plots go (default docs/bench).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/deps.sh
if [ "$(id -u)" != 0 ]; then echo "bench: needs root (network namespaces)" >&2; exit 1; fi
mkdir -p bin
go build -o bin/bench ./hack/bench
go build -o bin/benchreport ./hack/benchreport

out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
: >"$out/kernel.jsonl"
: >"$out/side.jsonl"
flags=()
if [ -n "${BENCH_STICKY:-}" ]; then flags+=(-sticky); fi
if [ -n "${BENCH_EXTERNAL:-}" ]; then flags+=(-external); fi
for n in ${BENCH_SIZES:-1000 10000 30000}; do
  [ "$n" = none ] && continue
  churn=0
  if [ "$n" = "${BENCH_CHURN_AT:-30000}" ]; then churn=60s; fi
  echo "bench: $n Services x 10 endpoints (churn ${churn}) ..." >&2
  ./bin/bench -services "$n" -churn "$churn" "${flags[@]}" >>"$out/kernel.jsonl"
done

side=${BENCH_SIDE_SIZES:-1000}
if [ "$side" != none ]; then
  # The Kubernetes binaries e2e builds (11 minutes cold): used when cached, never
  # built here.
  key="$( (cat test/e2e/k8sbins/go.mod test/e2e/k8sbins/go.sum; go version) | sha256sum | cut -c1-16)"
  bins="${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-e2e/$key"
  if [ ! -x "$bins/etcd" ] || [ ! -x "$bins/kube-apiserver" ] || [ ! -x "$bins/kube-controller-manager" ] || [ ! -x "$bins/kube-scheduler" ]; then
    echo "bench: side by side skipped: no control plane binaries in $bins (hack/build-k8s-bins.sh builds them)" >&2
  else
    go build -ldflags "$(hack/version-ldflags.sh)" -o bin/svcproxy ./cmd/svcproxy
    go test -c -tags e2e -o bin/e2e.test ./test/e2e/
    prefix="spe2e-$$-$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')-"
    cleanup() {
      local n p
      for n in $(ls /run/netns 2>/dev/null | grep "^${prefix}" || true); do
        for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del "$n" 2>/dev/null || true
      done
    }
    trap cleanup EXIT
    echo "bench: side by side at $side Services (kube-proxy up to ${BENCH_KUBEPROXY_MAX:-10000}) ..." >&2
    E2E_BENCH=1 E2E_K8S_BINS="$bins" E2E_SVCPROXY_BIN="$PWD/bin/svcproxy" E2E_PREFIX="$prefix" \
      E2E_BENCH_SIZES="$side" E2E_BENCH_KUBEPROXY_MAX="${BENCH_KUBEPROXY_MAX:-10000}" \
      E2E_BENCH_OUT="$out/side.jsonl" \
      bin/e2e.test -test.run '^TestBenchSideBySide$' -test.v -test.count=1 -test.timeout=3h >&2
  fi
fi

plots=${BENCH_PLOTS:-docs/bench}
echo "bench: JSON lines in $out; plots in $plots/" >&2
./bin/benchreport -kernel "$out/kernel.jsonl" -side "$out/side.jsonl" -plots "$plots"
