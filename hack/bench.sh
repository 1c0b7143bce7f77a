#!/usr/bin/env bash
# make bench: svcproxy against the real kernel (in a network namespace it creates) at
# 1k, 10k and 30k Services x 10 endpoints. Each size runs in its own process so RSS is
# per size. Ratios are against the 1k run of the same invocation, so they do not depend
# on how fast or busy this machine is.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/deps.sh
if [ "$(id -u)" != 0 ]; then echo "bench: needs root (network namespaces)" >&2; exit 1; fi
mkdir -p bin
go build -o bin/bench ./hack/bench
sizes=${BENCH_SIZES:-"1000 10000 30000"}
# BENCH_STICKY=1 gives every Service ClientIP affinity.
flags=()
if [ -n "${BENCH_STICKY:-}" ]; then flags+=(-sticky); fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for n in $sizes; do
  echo "bench: $n Services x 10 endpoints ..." >&2
  ./bin/bench -services "$n" "${flags[@]}" >>"$out"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = rows[0]
print("| Services x10 eps" + (" (ClientIP affinity)" if base.get("sticky") else "") + " | cold full sync | one endpoint replaced (median of 7) | one endpoint added | add one Service | resync, nothing committed | full table read (drift check after a foreign commit) | RSS after sync | peak RSS |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['services']} | {r['cold_sync_s']:.2f} s | {r['endpoint_change_s']*1000:.1f} ms | {r['endpoint_added_s']*1000:.1f} ms | {r['add_service_s']*1000:.1f} ms | {r['resync_s']*1000:.1f} ms | {r['resync_full_read_s']:.2f} s | {r['rss_mib']:.0f} MiB | {r['peak_rss_mib']:.0f} MiB |")
last = rows[-1]
if len(rows) > 1:
    k = last['services'] / base['services']
    print()
    print(f"Ratios {last['services']}/{base['services']} (Services x{k:.0f}): cold sync x{last['cold_sync_s']/base['cold_sync_s']:.1f}, "
          f"endpoint replaced x{last['endpoint_change_s']/base['endpoint_change_s']:.1f}, endpoint added x{last['endpoint_added_s']/base['endpoint_added_s']:.1f}, add Service x{last['add_service_s']/base['add_service_s']:.1f}, "
          f"RSS x{last['rss_mib']/base['rss_mib']:.1f}")
PY
