#!/usr/bin/env bash
# The chaos soak (issue 23, docs/soak.md): the e2e cluster (hack/e2e.sh, same
# PROXY and E2E_FAMILY), ~50 Services under steady traffic, seeded random
# faults for SOAK_DURATION (default 15m). SOAK_SEED repeats a run's faults
# (every run prints its seed). The run rewrites its own section (proxy and
# family) of SOAK_REPORT (default docs/soak.md; empty: none). Fails when an
# invariant breaks for svcproxy; kube-proxy runs only report.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export SOAK_DURATION="${SOAK_DURATION:-15m}"
export SOAK_REPORT="${SOAK_REPORT-$root/docs/soak.md}"

# The test binary's timeout: the soak plus 30 minutes for the cluster, the
# workload and the report (a Go duration of hours, minutes or seconds).
case $SOAK_DURATION in
*h) secs=$((${SOAK_DURATION%h} * 3600)) ;;
*m) secs=$((${SOAK_DURATION%m} * 60)) ;;
*s) secs=$((${SOAK_DURATION%s})) ;;
*) echo "soak: SOAK_DURATION=$SOAK_DURATION: want a whole number of h, m or s" >&2 && exit 2 ;;
esac
export E2E_TIMEOUT="$((secs + 1800))s"
E2E_RUN='^TestSoak$' exec hack/e2e.sh
