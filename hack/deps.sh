#!/usr/bin/env bash
# Installs, idempotently, what one of svcproxy's entry points needs on a fresh Debian
# machine, and says why each package is there:
#   hack/deps.sh demo    make demo: only what the demo runs
#   hack/deps.sh test    make test (and make bench): the demo's, plus the tests' tools
set -euo pipefail
purpose="${1:-test}"

need=() why=()
want() { # want COMMAND PACKAGE REASON
  command -v "$1" >/dev/null && return 0
  need+=("$2") why+=("$2: $3")
}
want nft nftables "nft lists the table the demo and tests program (svcproxy itself talks netlink)"
want ip iproute2 "ip creates the network namespaces and veths that stand in for nodes and pods"
want sysctl procps "sysctl turns on forwarding inside the namespaces"
if [ "$purpose" = test ]; then
  want conntrack conntrack "tests compare svcproxy's netlink conntrack cleanup with the conntrack tool"
  want iptables iptables "tests check that svcproxy leaves other programs' iptables-nft rules alone"
  want prometheus prometheus "a real Prometheus scrapes svcproxy's metrics in the metrics test"
  want ctr containerd "hack/image's TestCtrImport loads the image as kind load image-archive does, into a containerd of its own (own root and socket, never the system one), and runs it with runc"
fi

install() {
  if [ "$(id -u)" != 0 ]; then echo "deps: need root to install: $*" >&2; return 1; fi
  [ -n "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock)" ] || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
}
if [ "${#need[@]}" -gt 0 ]; then
  printf 'deps (%s): installing with apt\n' "$purpose" >&2
  printf '  %s\n' "${why[@]}" >&2
  if ! install "${need[@]}"; then
    # Prometheus' and containerd's packages may try to start a system service;
    # without them the metrics test and TestCtrImport say they skipped, so try the
    # rest on their own.
    rest=()
    for p in "${need[@]}"; do [ "$p" = prometheus ] || [ "$p" = containerd ] || rest+=("$p"); done
    [ "${#rest[@]}" -gt 0 ] && install "${rest[@]}"
    command -v prometheus >/dev/null || echo "deps: prometheus could not be installed; the Prometheus test will skip" >&2
    command -v ctr >/dev/null || echo "deps: containerd could not be installed; TestCtrImport will skip" >&2
  fi
fi
# The demo's go build fetches only the modules it compiles; tests need them all.
[ "$purpose" = test ] && go mod download
exit 0
