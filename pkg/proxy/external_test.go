package proxy

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// Addresses of the external-path tests: this node (node-a) and what is around it.
var (
	nodeIP    = netip.MustParseAddr("172.18.0.2")
	otherNode = netip.MustParseAddr("172.18.0.3")
	extIP     = netip.MustParseAddr("203.0.113.7")
	lbIP      = netip.MustParseAddr("192.0.2.10")
	loopback  = netip.MustParseAddr("127.0.0.1")
	podCIDR   = netip.MustParsePrefix("10.244.0.0/16")
)

// TestTraceExternal follows new connections through every external path, from an
// outside client, another node, a pod, the node itself and 127.0.0.1.
func TestTraceExternal(t *testing.T) {
	np := port("http", "TCP", 80)
	np.NodePort = 30080
	npUDP := port("dns", "UDP", 53)
	npUDP.NodePort = 30053
	npSCTP := port("s", "SCTP", 9)
	npSCTP.NodePort = 30009
	ext := port("http", "TCP", 80)
	ext.ExternalIPs = endpoints.NewAddrList([]netip.Addr{extIP})
	stickyExt := ext
	stickyExt.SessionAffinity, stickyExt.AffinityTimeout = true, time.Minute
	lb := port("http", "TCP", 80)
	lb.LoadBalancerIPs = endpoints.NewAddrList([]netip.Addr{lbIP})
	fenced := lb
	fenced.SourceRanges = endpoints.NewPrefixList([]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")})
	local := np
	local.ExternalLocal = true
	local.ExternalIPs = ext.ExternalIPs
	localITP := local
	localITP.InternalLocal = true
	stickyNP := np
	stickyNP.SessionAffinity, stickyNP.AffinityTimeout = true, time.Minute
	stickyLocal := local
	stickyLocal.SessionAffinity, stickyLocal.AffinityTimeout = true, time.Minute
	// entry is an affinity entry: client, address, port -> endpoint ep:8080, in the
	// map a lookup for that address and port reads.
	entry := func(set string, c, addr netip.Addr, p uint16, to netip.Addr) []nft.Element {
		return []nft.Element{{Set: set, Key: []nft.Datum{nft.IP(c), nft.IP(addr), nft.Proto(nft.ProtoTCP), nft.Port(p)},
			Data: []nft.Datum{nft.IP(to), nft.Port(8080)}}}
	}
	npAff := nodePortAffinityMap(30080)

	remote := onNode(ep(ep3, 8080, true, true, false), "node-b")
	mixed := []endpoints.Endpoint{ep(ep1, 8080, true, true, false), remote}
	all := []nft.Outcome{dnat(ep1, 8080, true), dnat(ep3, 8080, true)}
	allPlain := []nft.Outcome{dnat(ep1, 8080, false), dnat(ep3, 8080, false)}
	withCIDR := Options{ClusterCIDR: podCIDR, NodeName: "node-a"}
	withLocalhost := Options{ClusterCIDR: podCIDR, NodeName: "node-a", LocalhostNodePorts: true}
	pkt := func(src, dst netip.Addr, dport uint16) nft.Packet {
		return nft.Packet{Src: src, Dst: dst, Proto: nft.ProtoTCP, DPort: dport, NodeAddrs: []netip.Addr{nodeIP}}
	}
	fromNode := func(src, dst netip.Addr, dport uint16) nft.Packet {
		p := pkt(src, dst, dport)
		p.Local = true
		return p
	}
	tests := []struct {
		name  string
		opts  Options
		na    *NodeAddresses
		ports []endpoints.ServicePort
		eps   []endpoints.Endpoint
		pkt   nft.Packet
		want  []nft.Outcome
		// affinity is the affinity maps' content.
		affinity []nft.Element
	}{
		{name: "NodePort from outside: masqueraded to any endpoint", opts: withCIDR, ports: []endpoints.ServicePort{np}, eps: mixed,
			pkt: pkt(outsider, nodeIP, 30080), want: all},
		{name: "NodePort from another node", opts: withCIDR, ports: []endpoints.ServicePort{np}, eps: mixed,
			pkt: pkt(otherNode, nodeIP, 30080), want: all},
		{name: "NodePort from a pod (Cluster policy masquerades all external paths, as kube-proxy)", opts: withCIDR,
			ports: []endpoints.ServicePort{np}, eps: mixed, pkt: pkt(client, nodeIP, 30080), want: all},
		{name: "NodePort from the node", opts: withCIDR, ports: []endpoints.ServicePort{np}, eps: mixed,
			pkt: fromNode(nodeIP, nodeIP, 30080), want: all},
		{name: "NodePort on another node's address: not ours", opts: withCIDR, ports: []endpoints.ServicePort{np}, eps: mixed,
			pkt: pkt(client, otherNode, 30080), want: []nft.Outcome{{}}},
		{name: "NodePort on the wrong protocol: untouched", opts: withCIDR, ports: []endpoints.ServicePort{np}, eps: mixed,
			pkt: nft.Packet{Src: outsider, Dst: nodeIP, Proto: nft.ProtoUDP, DPort: 30080, NodeAddrs: []netip.Addr{nodeIP}}, want: []nft.Outcome{{}}},
		{name: "UDP NodePort", opts: withCIDR, ports: []endpoints.ServicePort{npUDP}, eps: []endpoints.Endpoint{ep(ep1, 53, true, true, false)},
			pkt: nft.Packet{Src: outsider, Dst: nodeIP, Proto: nft.ProtoUDP, DPort: 30053, NodeAddrs: []netip.Addr{nodeIP}}, want: []nft.Outcome{dnat(ep1, 53, true)}},
		{name: "SCTP NodePort", opts: withCIDR, ports: []endpoints.ServicePort{npSCTP}, eps: []endpoints.Endpoint{ep(ep1, 9, true, true, false)},
			pkt: nft.Packet{Src: outsider, Dst: nodeIP, Proto: nft.ProtoSCTP, DPort: 30009, NodeAddrs: []netip.Addr{nodeIP}}, want: []nft.Outcome{dnat(ep1, 9, true)}},
		{name: "NodePort without endpoints: rejected", opts: withCIDR, ports: []endpoints.ServicePort{np},
			pkt: pkt(outsider, nodeIP, 30080), want: []nft.Outcome{{Reject: true}}},
		{name: "localhost NodePort off by default", opts: withCIDR, ports: []endpoints.ServicePort{np}, eps: mixed,
			pkt: fromNode(loopback, loopback, 30080), want: []nft.Outcome{{}}},
		{name: "localhost NodePort: masqueraded", opts: withLocalhost, ports: []endpoints.ServicePort{np}, eps: mixed,
			pkt: fromNode(loopback, loopback, 30080), want: all},
		{name: "--nodeport-addresses: a listed address serves", opts: withCIDR, na: &NodeAddresses{Addrs: []netip.Addr{nodeIP}},
			ports: []endpoints.ServicePort{np}, eps: mixed, pkt: pkt(outsider, nodeIP, 30080), want: all},
		{name: "--nodeport-addresses: another local address does not", opts: withCIDR, na: &NodeAddresses{Addrs: []netip.Addr{otherNode}},
			ports: []endpoints.ServicePort{np}, eps: mixed, pkt: pkt(outsider, nodeIP, 30080), want: []nft.Outcome{{}}},
		{name: "--nodeport-addresses with 127.0.0.1 but localhost NodePorts off", opts: withCIDR, na: &NodeAddresses{Addrs: []netip.Addr{loopback}},
			ports: []endpoints.ServicePort{np}, eps: mixed, pkt: fromNode(loopback, loopback, 30080), want: []nft.Outcome{{}}},
		{name: "externalIP from outside: masqueraded", opts: withCIDR, ports: []endpoints.ServicePort{ext}, eps: mixed,
			pkt: pkt(outsider, extIP, 80), want: all},
		{name: "externalIP from the node", opts: withCIDR, ports: []endpoints.ServicePort{ext}, eps: mixed,
			pkt: fromNode(nodeIP, extIP, 80), want: all},
		{name: "externalIP other port: untouched", opts: withCIDR, ports: []endpoints.ServicePort{ext}, eps: mixed,
			pkt: pkt(outsider, extIP, 81), want: []nft.Outcome{{}}},
		{name: "ClientIP affinity on an external IP: a new client spreads, masqueraded", opts: withCIDR, ports: []endpoints.ServicePort{stickyExt}, eps: mixed,
			pkt: pkt(outsider, extIP, 80), want: all},
		{name: "ClientIP affinity on an external IP: a known client sticks", opts: withCIDR, ports: []endpoints.ServicePort{stickyExt}, eps: mixed,
			pkt: pkt(outsider, extIP, 80), want: []nft.Outcome{dnat(ep3, 8080, true)},
			affinity: []nft.Element{{Set: affinityMap(extIP), Key: []nft.Datum{nft.IP(outsider), nft.IP(extIP), nft.Proto(nft.ProtoTCP), nft.Port(80)},
				Data: []nft.Datum{nft.IP(ep3), nft.Port(8080)}}}},
		{name: "ClientIP affinity on a NodePort: a new client spreads, masqueraded", opts: withCIDR, ports: []endpoints.ServicePort{stickyNP}, eps: mixed,
			pkt: pkt(outsider, nodeIP, 30080), want: all},
		{name: "ClientIP affinity on a NodePort: a known client sticks", opts: withCIDR, ports: []endpoints.ServicePort{stickyNP}, eps: mixed,
			pkt: pkt(outsider, nodeIP, 30080), want: []nft.Outcome{dnat(ep3, 8080, true)}, affinity: entry(npAff, outsider, nodeIP, 30080, ep3)},
		{name: "ClientIP affinity on a NodePort: the node sticks too", opts: withCIDR, ports: []endpoints.ServicePort{stickyNP}, eps: mixed,
			pkt: fromNode(nodeIP, nodeIP, 30080), want: []nft.Outcome{dnat(ep3, 8080, true)}, affinity: entry(npAff, nodeIP, nodeIP, 30080, ep3)},
		{name: "ClientIP affinity on a NodePort: an entry of a gone endpoint is swept, the client spreads", opts: withCIDR,
			ports: []endpoints.ServicePort{stickyNP}, eps: mixed, pkt: pkt(outsider, nodeIP, 30080), want: all,
			affinity: entry(npAff, outsider, nodeIP, 30080, ep2)},
		{name: "ClientIP affinity on a NodePort: another Service's entry under a ClusterIP with the same port is not read", opts: withCIDR,
			ports: []endpoints.ServicePort{stickyNP}, eps: mixed, pkt: pkt(outsider, nodeIP, 30080), want: all,
			affinity: entry(npAff, outsider, clusterIP, 30080, ep3)},
		{name: "ClientIP affinity, Local: an outside client sticks to its local endpoint", opts: withCIDR, ports: []endpoints.ServicePort{stickyLocal}, eps: mixed,
			pkt: pkt(outsider, nodeIP, 30080), want: []nft.Outcome{dnat(ep1, 8080, false)}, affinity: entry(npAff, outsider, nodeIP, 30080, ep1)},
		{name: "ClientIP affinity, Local: a pod sticks to its endpoint on another node, not masqueraded", opts: withCIDR,
			ports: []endpoints.ServicePort{stickyLocal}, eps: mixed, pkt: pkt(client, nodeIP, 30080), want: []nft.Outcome{dnat(ep3, 8080, false)},
			affinity: entry(npAff, client, nodeIP, 30080, ep3)},
		{name: "ClientIP affinity, Local: a new pod spreads over every endpoint", opts: withCIDR,
			ports: []endpoints.ServicePort{stickyLocal}, eps: mixed, pkt: pkt(client, nodeIP, 30080), want: allPlain},
		{name: "ClientIP affinity, Local: the node sticks, masqueraded", opts: withCIDR,
			ports: []endpoints.ServicePort{stickyLocal}, eps: mixed, pkt: fromNode(nodeIP, nodeIP, 30080), want: []nft.Outcome{dnat(ep3, 8080, true)},
			affinity: entry(npAff, nodeIP, nodeIP, 30080, ep3)},
		{name: "ClientIP affinity, Local external IP: an outside client sticks to its local endpoint", opts: withCIDR,
			ports: []endpoints.ServicePort{stickyLocal}, eps: mixed, pkt: pkt(outsider, extIP, 80), want: []nft.Outcome{dnat(ep1, 8080, false)},
			affinity: entry(affinityMap(extIP), outsider, extIP, 80, ep1)},
		{name: "ClientIP affinity, Local without an endpoint here: outside clients dropped whatever the map says", opts: withCIDR,
			ports: []endpoints.ServicePort{stickyLocal}, eps: []endpoints.Endpoint{remote}, pkt: pkt(outsider, nodeIP, 30080),
			want: []nft.Outcome{{Drop: true}}, affinity: entry(npAff, outsider, nodeIP, 30080, ep3)},
		{name: "load balancer IP", opts: withCIDR, ports: []endpoints.ServicePort{lb}, eps: mixed,
			pkt: pkt(outsider, lbIP, 80), want: all},
		{name: "source ranges: outside the ranges dropped", opts: withCIDR, ports: []endpoints.ServicePort{fenced}, eps: mixed,
			pkt: pkt(outsider, lbIP, 80), want: []nft.Outcome{{Drop: true}}},
		{name: "source ranges: inside the ranges served", opts: withCIDR, ports: []endpoints.ServicePort{fenced}, eps: mixed,
			pkt: pkt(netip.MustParseAddr("198.51.100.9"), lbIP, 80), want: all},
		{name: "source ranges: a pod outside the ranges dropped too, as kube-proxy", opts: withCIDR, ports: []endpoints.ServicePort{fenced}, eps: mixed,
			pkt: pkt(client, lbIP, 80), want: []nft.Outcome{{Drop: true}}},
		{name: "source ranges do not guard the ClusterIP", opts: withCIDR, ports: []endpoints.ServicePort{fenced}, eps: mixed,
			pkt: pkt(client, clusterIP, 80), want: allPlain},
		{name: "Local: outside client keeps its address, local endpoint only", opts: withCIDR, ports: []endpoints.ServicePort{local}, eps: mixed,
			pkt: pkt(outsider, nodeIP, 30080), want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "Local: another node's client too", opts: withCIDR, ports: []endpoints.ServicePort{local}, eps: mixed,
			pkt: pkt(otherNode, extIP, 80), want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "Local: a pod reaches every endpoint, not masqueraded (not #131765)", opts: withCIDR, ports: []endpoints.ServicePort{local}, eps: mixed,
			pkt: pkt(client, extIP, 80), want: allPlain},
		{name: "Local: the node reaches every endpoint, masqueraded", opts: withCIDR, ports: []endpoints.ServicePort{local}, eps: mixed,
			pkt: fromNode(nodeIP, nodeIP, 30080), want: all},
		{name: "Local: no endpoint here drops outside clients", opts: withCIDR, ports: []endpoints.ServicePort{local},
			eps: []endpoints.Endpoint{remote}, pkt: pkt(outsider, nodeIP, 30080), want: []nft.Outcome{{Drop: true}}},
		{name: "Local: no endpoint here, a pod still reaches the others", opts: withCIDR, ports: []endpoints.ServicePort{local},
			eps: []endpoints.Endpoint{remote}, pkt: pkt(client, nodeIP, 30080), want: []nft.Outcome{dnat(ep3, 8080, false)}},
		{name: "Local: no endpoints anywhere rejects", opts: withCIDR, ports: []endpoints.ServicePort{local},
			pkt: pkt(outsider, extIP, 80), want: []nft.Outcome{{Reject: true}}},
		{name: "Local: terminating fallback on the local set alone", opts: withCIDR, ports: []endpoints.ServicePort{local},
			eps: []endpoints.Endpoint{ep(ep1, 8080, false, true, true), remote},
			pkt: pkt(outsider, nodeIP, 30080), want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "Local: the cluster set keeps ready endpoints first", opts: withCIDR, ports: []endpoints.ServicePort{local},
			eps: []endpoints.Endpoint{ep(ep1, 8080, false, true, true), remote},
			pkt: pkt(client, nodeIP, 30080), want: []nft.Outcome{dnat(ep3, 8080, false)}},
		{name: "Local external, Local internal: the ClusterIP keeps to this node", opts: withCIDR, ports: []endpoints.ServicePort{localITP}, eps: mixed,
			pkt: pkt(client, clusterIP, 80), want: []nft.Outcome{dnat(ep1, 8080, false)}},
		{name: "without a cluster CIDR pods count as outside (kube-proxy without local detection)", opts: Options{NodeName: "node-a"},
			ports: []endpoints.ServicePort{local}, eps: mixed, pkt: pkt(client, extIP, 80), want: []nft.Outcome{dnat(ep1, 8080, false)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRuleset(tc.opts)
			if tc.na != nil {
				r.SetFragment(skeletonOwner, SkeletonFor(tc.opts, *tc.na))
			}
			eps := endpoints.EndpointMap{}
			for _, p := range tc.ports {
				eps[p.Name] = tc.eps
			}
			f := RenderServiceWith(tc.ports, eps, tc.opts)
			r.SetFragment("svc", f)
			got, err := nft.Trace(r, tc.pkt, swept(tc.affinity, stickyOf(f)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Fatalf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}
