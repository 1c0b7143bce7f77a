#!/usr/bin/env bash
# The cause of TestSwapFromKubeProxy's old occasional timeouts, shown
# deterministically in namespaces of its own (docs/e2e-node.md, Results): a
# SYN to a ClusterIP before any DNAT rule leaves an untranslated conntrack
# entry (SYN_SENT, 120 s) in the node; once the rule exists, a new connection
# from the same source port follows that entry into nothing, while one from
# another port is served at once. Root; touches only its own namespaces.
set -euo pipefail
p="untrsyn-$$"
cl="$p-cl" nd="$p-node" sv="$p-srv" gw="$p-gw"
cleanup() {
	local n
	for n in "$cl" "$nd" "$sv" "$gw"; do
		ip netns pids "$n" 2>/dev/null | xargs -r kill -9
		ip netns del "$n" 2>/dev/null || true
	done
}
trap cleanup EXIT
for n in "$cl" "$nd" "$sv" "$gw"; do ip netns add "$n"; ip -n "$n" link set lo up; done
# client 10.244.1.2 -- node -- server 10.244.2.2; the node's default route
# leads to a gateway that forwards nothing, as the suite's bridge does.
ip -n "$nd" link add c0 type veth peer name eth0 netns "$cl"
ip -n "$nd" link add s0 type veth peer name eth0 netns "$sv"
ip -n "$nd" link add g0 type veth peer name eth0 netns "$gw"
ip -n "$nd" addr add 10.244.1.1/24 dev c0
ip -n "$nd" addr add 10.244.2.1/24 dev s0
ip -n "$nd" addr add 192.0.2.1/24 dev g0
for l in c0 s0 g0; do ip -n "$nd" link set "$l" up; done
ip -n "$cl" addr add 10.244.1.2/24 dev eth0
ip -n "$sv" addr add 10.244.2.2/24 dev eth0
ip -n "$gw" addr add 192.0.2.2/24 dev eth0
for n in "$cl" "$sv" "$gw"; do ip -n "$n" link set eth0 up; done
ip -n "$cl" route add default via 10.244.1.1
ip -n "$sv" route add default via 10.244.2.1
ip -n "$nd" route add default via 192.0.2.2
ip netns exec "$nd" sysctl -qw net.ipv4.ip_forward=1
# conntrack on in the node (kubelet's KUBE-FIREWALL matches on ct state there),
# and an empty nat chain: no proxy serves the ClusterIP yet.
ip netns exec "$nd" nft 'add table ip demo
add chain ip demo pre { type nat hook prerouting priority dstnat; }
add chain ip demo filt { type filter hook forward priority 0; }
add rule ip demo filt ct state invalid drop'
ip netns exec "$sv" python3 -m http.server 80 >/dev/null 2>&1 &
disown
sleep 1
conn() { # local port, timeout in s
	ip netns exec "$cl" python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1])))
s.settimeout(float(sys.argv[2]))
t = time.time()
try:
    s.connect(("10.96.0.10", 80))
    print("  from port %s: connected in %.3fs" % (sys.argv[1], time.time() - t))
except Exception as e:
    print("  from port %s: %s after %.1fs" % (sys.argv[1], e, time.time() - t))
' "$1" "$2"
}
entries() { ip netns exec "$nd" conntrack -L -p tcp --orig-dst 10.96.0.10 2>/dev/null | sed 's/^/  /'; }
echo "1. a connection before any rule (TestDaemonSetApply's 'nothing answers yet'):"
conn 40000 1
entries
echo "2. the DNAT rule appears: a proxy serves the ClusterIP"
ip netns exec "$nd" nft 'add rule ip demo pre ip daddr 10.96.0.10 tcp dport 80 dnat to 10.244.2.2:80'
echo "3. new connections, from a fresh port and from the first one's:"
conn 40001 5
conn 40000 5
entries
