#!/usr/bin/env bash
# Installs what svcproxy's demo and tests need on a fresh Debian machine, idempotently.
set -euo pipefail
need=()
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
command -v conntrack >/dev/null || need+=(conntrack)
command -v iptables >/dev/null || need+=(iptables)
command -v sysctl >/dev/null || need+=(procps) # sysctl and kill inside test namespaces
install() {
  if [ "$(id -u)" != 0 ]; then echo "need root to install: $*" >&2; return 1; fi
  [ -n "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock)" ] || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
}
if [ "${#need[@]}" -gt 0 ]; then install "${need[@]}"; fi
# The metrics test scrapes svcproxy with a real Prometheus. Its package may try to start
# a system service on install; if the install fails the test says it skipped.
if ! command -v prometheus >/dev/null; then
  install prometheus || echo "deps: prometheus could not be installed; the Prometheus test will skip" >&2
fi
go mod download
