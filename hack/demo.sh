#!/usr/bin/env bash
# make demo: svcproxy's main job for real, without a cluster. It builds a tiny world of
# network namespaces (a node, a client, three backend pods), runs svcproxy in the node
# namespace on the seed example's manifests, sends requests to the ClusterIP, then
# scales the Service to 3 and to 1 by rewriting the EndpointSlice manifest, live.
# Nothing outside its own namespaces is touched; everything is removed on exit.
set -euo pipefail
# Issue 7's promise: from a fresh clone (empty Go caches) to the first answer
# through the ClusterIP within 3 minutes. The line printed then makes it checkable.
START=$EPOCHREALTIME
cd "$(dirname "$0")/.."
hack/deps.sh demo
mkdir -p bin
go build -o bin/svcproxy ./cmd/svcproxy
go build -o bin/echoserver ./hack/echoserver

P="spdemo$$"
NODE="$P-node"; CLIENT="$P-client"
WORK=$(mktemp -d)
LOG=$(mktemp)
SVCPROXY_PID=""
cleanup() {
  set +e
  [ -n "$SVCPROXY_PID" ] && kill "$SVCPROXY_PID" 2>/dev/null && wait "$SVCPROXY_PID" 2>/dev/null
  for ns in $(ip netns list | awk '{print $1}' | grep "^$P-"); do
    for pid in $(ip netns pids "$ns"); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns"
  done
  rm -rf "$WORK" "$LOG"
}
trap cleanup EXIT INT TERM
# Remove leftovers of demos that were killed before their trap ran.
for ns in $(ip netns list | awk '{print $1}' | grep -E '^spdemo[0-9]+-' || true); do
  pid=${ns#spdemo}; pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null || ip netns del "$ns"
done

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
inns() { ip netns exec "$@"; }

ip netns add "$NODE"
inns "$NODE" ip link set lo up
inns "$NODE" sysctl -qw net.ipv4.ip_forward=1
# attach NS ADDR: a namespace whose only route is via the node, like a pod on kind.
attach() {
  local ns=$1 addr=$2 i=$3
  ip netns add "$ns"
  ip link add "$P-h$i" netns "$NODE" type veth peer name eth0 netns "$ns"
  inns "$ns" ip link set lo up
  inns "$ns" ip addr add "$addr/32" dev eth0
  inns "$ns" ip link set eth0 up
  inns "$ns" ip route add 169.254.1.1 dev eth0 scope link
  inns "$ns" ip route add default via 169.254.1.1 dev eth0
  inns "$NODE" ip addr add 169.254.1.1/32 dev "$P-h$i"
  inns "$NODE" ip link set "$P-h$i" up
  inns "$NODE" ip route add "$addr/32" dev "$P-h$i"
  inns "$NODE" sysctl -qw "net.ipv4.conf.$P-h$i.proxy_arp=1"
}
attach "$CLIENT" 10.244.2.9 0
for i in 1 2 3; do
  attach "$P-pod$i" "10.244.1.$((i+1))" "$i"
  (inns "$P-pod$i" ./bin/echoserver serve "my-nginx-pod$i" >/dev/null 2>&1 &)
done
# The node reaches the service network through a default route of its own world.
inns "$NODE" ip route add default dev "$P-h0"

slice() { # slice N: the EndpointSlice the controller would write for N replicas
  cat <<YAML
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: my-nginx-7x5qp, namespace: default, labels: {kubernetes.io/service-name: my-nginx}}
addressType: IPv4
ports: [{name: "", port: 80, protocol: TCP}]
endpoints:
YAML
  for i in $(seq 1 "$1"); do echo "- {addresses: [10.244.1.$((i+1))], conditions: {ready: true}, nodeName: worker}"; done
}
# The seed example's Service, with the slice split out so the demo can rewrite it.
./bin/svcproxy render >/dev/null # proves the embedded default renders
sed -n '/^kind: Service/,/^---/p' deploy/examples/my-nginx.yaml | sed '$d' | sed '1i apiVersion: v1' > "$WORK/service.yaml"
slice 2 > "$WORK/slice.yaml"

say "svcproxy runs in the node namespace on $WORK"
inns "$NODE" ./bin/svcproxy --manifests "$WORK" --cluster-cidr 10.244.0.0/16 \
  --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256 >"$LOG" 2>&1 &
SVCPROXY_PID=$!
for _ in $(seq 50); do inns "$NODE" nft list table ip svcproxy >/dev/null 2>&1 && break; sleep 0.1; done

say "the ruleset (nft list table ip svcproxy)"
inns "$NODE" nft list table ip svcproxy

ask() { # ask N: N requests from the client pod to the ClusterIP, counted by backend
  inns "$CLIENT" ./bin/echoserver get 10.96.0.10:80 "$1" | sort | uniq -c
}
wait_backends() { # wait until N distinct backends answer
  for _ in $(seq 50); do
    [ "$(inns "$CLIENT" ./bin/echoserver get 10.96.0.10:80 30 2>/dev/null | sort -u | grep -c pod)" = "$1" ] && return 0
    sleep 0.1
  done
  echo "timed out waiting for $1 backends" >&2; return 1
}
say "20 requests to my-nginx (10.96.0.10:80) from the client pod: both endpoints answer"
wait_backends 2
awk -v s="$START" -v e="$EPOCHREALTIME" 'BEGIN { printf "first answer through the ClusterIP %.1f s after make demo started (packages, build and all)\n", e - s }'
ask 20

say "scale to 3: the EndpointSlice manifest gains a third endpoint"
slice 3 > "$WORK/slice.yaml.tmp" && mv "$WORK/slice.yaml.tmp" "$WORK/slice.yaml"
wait_backends 3; ask 30
inns "$NODE" nft list map ip svcproxy endpoints-10 # 10.96.0.10's shard

say "scale to 1"
slice 1 > "$WORK/slice.yaml.tmp" && mv "$WORK/slice.yaml.tmp" "$WORK/slice.yaml"
wait_backends 1; ask 10

say "a port the Service does not have is refused at once"
if inns "$CLIENT" ./bin/echoserver get 10.96.0.10:81 1; then echo "unexpected answer" >&2; exit 1; fi

say "metrics (kube-proxy names) and health"
inns "$NODE" ./bin/echoserver get 127.0.0.1:10256/healthz 1 2>/dev/null || true
inns "$NODE" bash -c 'exec 3<>/dev/tcp/127.0.0.1/10249; printf "GET /metrics HTTP/1.0\r\n\r\n" >&3; cat <&3' | grep -E '^kubeproxy_sync_proxy_rules_(duration_seconds_count|last_timestamp_seconds)|^kubeproxy_network_programming_duration_seconds_count'
say "done: svcproxy log"
tail -n 5 "$LOG"
