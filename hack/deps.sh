#!/usr/bin/env bash
# Installs what svcproxy's demo and tests need on a fresh Debian machine, idempotently.
set -euo pipefail
need=()
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
command -v conntrack >/dev/null || need+=(conntrack)
command -v iptables >/dev/null || need+=(iptables)
command -v sysctl >/dev/null || need+=(procps) # sysctl and kill inside test namespaces
command -v prometheus >/dev/null || need+=(prometheus) # the metrics test scrapes svcproxy for real
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "need root to install: ${need[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
go mod download
