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
# Dual-stack (issue 9): BENCH_DUAL_SIZES (default "10000"; "none" skips) run once more
# with every Service dual-stack (an IPv4 and an IPv6 ClusterIP, a slice per family)
# fed to two per-family proxies programming `ip svcproxy` and `ip6 svcproxy`: cold
# sync, one change in one family and in both, heap and RSS, a data-plane check
# (hack/bench -family dual; about a minute at 10k on a quiet machine). BENCH_FAMILY=dual
# runs BENCH_SIZES dual-stack instead of IPv4 (and no extra dual sizes).
#
# BENCH_SHAPE (default "disjoint": every Service its own 10 endpoints, over 100 nodes)
# picks the objects of both parts; "shared" (issue 22, internal/benchshape) has pods
# behind 3 Services each, mixed sizes (most 1-3 endpoints, one in 1000 with 1650),
# named ports, a third of the slices without nodeName and some NodePort and
# LoadBalancer Services. The report labels the tables by shape, and a shared run's
# plots are docs/bench/*-shared.png. No dual-stack run with it (its slices are IPv4).
#
# BENCH_PROXIES (default "svcproxy kube-proxy-nftables") picks the side by side's
# proxies; "svcproxy-before" runs the svcproxy binary BENCH_SVCPROXY_BEFORE (another
# commit's build) on the same objects, for before/after numbers from one run.
# BENCH_WRITE=etcd writes the side by side's objects straight into its etcd (the
# apiserver's write path took an hour for 30k on a loaded 2-core machine).
# BENCH_STICKY=1: every Service has ClientIP affinity. BENCH_EXTERNAL=1: a third of
# the Services have a NodePort (issue 8; some LoadBalancer, some externalIPs).
# BENCH_SIDE_HEAPPROFILE=DIR: svcproxy's heap profile after each side-by-side cold
# sync goes to DIR/<kind>-<size>.heap (it runs with --profiling). BENCH_SIDE_CPUPROFILE=DIR:
# a CPU profile of svcproxy's first 15 s (lists and cold sync) goes to DIR/<kind>-<size>.cpu,
# and kube-apiserver's over the same 15 s to DIR/kube-apiserver-<kind>-<size>.cpu.
# BENCH_FLEET="50 200" (off by default; make bench's time does not change): the
# fleet's view of a rollout (TestBenchFleet in test/e2e, E2E_FLEET=1): that many
# simulated proxies (svcproxy's informers, in one process, one connection each)
# list and watch BENCH_FLEET_SERVICES (default 30000) Services x10 together, once
# with svcproxy's first List and once with kube-proxy's first watch-list
# (BENCH_FLEET_MODES; "list-uncompressed" is the List without gzip), measuring
# kube-apiserver's CPU and peak RSS; see docs/bench.md, "The fleet's view: a
# rollout". JSON lines in BENCH_OUT/fleet.jsonl.
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
shape=${BENCH_SHAPE:-disjoint}
family=${BENCH_FAMILY:-ipv4}
dual_sizes=${BENCH_DUAL_SIZES:-10000}
case "$shape" in
  disjoint) ;;
  shared)
    if [ "$family" != ipv4 ] || [ -n "${BENCH_EXTERNAL:-}" ]; then
      echo "bench: BENCH_SHAPE=shared goes with neither BENCH_FAMILY=dual nor BENCH_EXTERNAL (it has NodePorts of its own)" >&2
      exit 2
    fi
    dual_sizes=none ;;
  *) echo "bench: BENCH_SHAPE=$shape: want disjoint or shared" >&2; exit 2 ;;
esac
flags+=(-shape "$shape")
case "$family" in
  ipv4) ;;
  dual) dual_sizes=none ;; # the sizes below are dual-stack already
  *) echo "bench: BENCH_FAMILY=$family: want ipv4 or dual" >&2; exit 2 ;;
esac
for n in ${BENCH_SIZES:-1000 10000 30000}; do
  [ "$n" = none ] && continue
  churn=0
  if [ "$n" = "${BENCH_CHURN_AT:-30000}" ]; then churn=60s; fi
  echo "bench: $n Services, $shape shape, $family (churn ${churn}) ..." >&2
  ./bin/bench -services "$n" -family "$family" -churn "$churn" "${flags[@]}" >>"$out/kernel.jsonl"
done
for n in $dual_sizes; do
  [ "$n" = none ] && continue
  echo "bench: $n dual-stack Services x 10 endpoints per family ..." >&2
  ./bin/bench -services "$n" -family dual "${flags[@]}" >>"$out/kernel.jsonl"
done

# The e2e runs' namespaces, removed on exit.
prefixes=()
cleanup() { for p in "${prefixes[@]}"; do suite_delete_netns "$p"; done; }
trap cleanup EXIT

# harness_build builds what test/e2e's harness runs (svcproxy, the test binary)
# and picks a namespace prefix for it, removed on exit.
harness_build() {
  go build -ldflags "$(hack/version-ldflags.sh)" -o bin/svcproxy ./cmd/svcproxy
  go test -c -tags e2e -o bin/e2e.test ./test/e2e/
  # shellcheck source=hack/lib/suite.sh
  source hack/lib/suite.sh
  prefix="$(suite_prefix spe2e)"
  prefixes+=("$prefix")
}

side=${BENCH_SIDE_SIZES:-1000}
if [ "$side" != none ]; then
  # The Kubernetes binaries e2e builds (11 minutes cold): used when cached, never
  # built here.
  # shellcheck source=hack/lib/k8s-build.sh
  source hack/lib/k8s-build.sh
  bins="$(k8s_cache_dir test/e2e/k8sbins svcproxy-e2e)"
  if [ ! -x "$bins/etcd" ] || [ ! -x "$bins/kube-apiserver" ] || [ ! -x "$bins/kube-controller-manager" ] || [ ! -x "$bins/kube-scheduler" ]; then
    echo "bench: side by side skipped: no control plane binaries in $bins (hack/build-k8s-bins.sh builds them)" >&2
  else
    harness_build
    echo "bench: side by side at $side Services (kube-proxy up to ${BENCH_KUBEPROXY_MAX:-10000}) ..." >&2
    E2E_BENCH=1 E2E_K8S_BINS="$bins" E2E_SVCPROXY_BIN="$PWD/bin/svcproxy" E2E_PREFIX="$prefix" \
      E2E_BENCH_SIZES="$side" E2E_BENCH_SHAPE="$shape" E2E_BENCH_KUBEPROXY_MAX="${BENCH_KUBEPROXY_MAX:-10000}" \
      E2E_BENCH_OUT="$out/side.jsonl" E2E_BENCH_PROXIES="${BENCH_PROXIES:-svcproxy kube-proxy-nftables}" \
      E2E_BENCH_SVCPROXY_BEFORE="${BENCH_SVCPROXY_BEFORE:-}" E2E_BENCH_WRITE="${BENCH_WRITE:-api}" \
      E2E_BENCH_HEAPPROFILE="${BENCH_SIDE_HEAPPROFILE:-}" E2E_BENCH_CPUPROFILE="${BENCH_SIDE_CPUPROFILE:-}" \
      bin/e2e.test -test.run '^TestBenchSideBySide$' -test.v -test.count=1 -test.timeout=3h >&2
  fi
fi

fleet=${BENCH_FLEET:-}
if [ -n "$fleet" ] && [ "$fleet" != none ]; then
  # shellcheck source=hack/lib/k8s-build.sh
  source hack/lib/k8s-build.sh
  bins="$(k8s_cache_dir test/e2e/k8sbins svcproxy-e2e)"
  if [ ! -x "$bins/etcd" ] || [ ! -x "$bins/kube-apiserver" ]; then
    echo "bench: fleet skipped: no control plane binaries in $bins (hack/build-k8s-bins.sh builds them)" >&2
  else
    harness_build # the harness wants a svcproxy binary even when no proxy process runs
    : >"$out/fleet.jsonl"
    echo "bench: fleet of $fleet proxies against ${BENCH_FLEET_SERVICES:-30000} Services ..." >&2
    E2E_FLEET=1 E2E_K8S_BINS="$bins" E2E_SVCPROXY_BIN="$PWD/bin/svcproxy" E2E_PREFIX="$prefix" \
      E2E_FLEET_PROXIES="$fleet" E2E_FLEET_SERVICES="${BENCH_FLEET_SERVICES:-30000}" \
      E2E_FLEET_MODES="${BENCH_FLEET_MODES:-list watch-list}" E2E_FLEET_OUT="$out/fleet.jsonl" \
      bin/e2e.test -test.run '^TestBenchFleet$' -test.v -test.count=1 -test.timeout=3h >&2
  fi
fi

plots=${BENCH_PLOTS:-docs/bench}
echo "bench: JSON lines in $out; plots in $plots/" >&2
./bin/benchreport -kernel "$out/kernel.jsonl" -side "$out/side.jsonl" -plots "$plots"
