package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// ServiceOwner is the ruleset fragment owner for a Service.
func ServiceOwner(k endpoints.ServiceKey) string { return "svc:" + k.String() }

var protoNumbers = map[string]uint8{"TCP": nft.ProtoTCP, "UDP": nft.ProtoUDP, "SCTP": nft.ProtoSCTP}

// RenderService returns one Service's part of the table: per port, the dispatch
// element that leads from ClusterIP . proto . port to where its endpoint is chosen,
// and the ClusterIP and hairpin elements. It is a pure function of its arguments;
// node is the proxy's node, for internalTrafficPolicy: Local.
//
// A port with n endpoints goes to the shared chain lb-n, whose one rule looks the
// endpoint up in the endpoints map under ClusterIP . proto . port . (random mod n).
// Replacing an endpoint then only swaps map elements, and a change of n swaps one
// dispatch element: the kernel re-validates chains reachable from the dispatch map,
// a few per endpoint count, instead of a rule per endpoint of every Service.
// A ClientIP-affinity port goes to sticky-n-SS, which first looks the client up in
// the affinity map of the shard and otherwise picks as lb-n-SS does; its element in
// sticky-ports tells the filter chains after NAT how long to remember where the
// connection went (affinity-T-proto-SS). Sticky ports are element-only changes too.
func RenderService(ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint, node string) nft.Fragment {
	return RenderServiceWith(ports, eps, Options{NodeName: node})
}

// RenderServiceWith is RenderService with the options that shape external paths
// (see renderExternal): the node, and the cluster CIDR whose traffic an
// externalTrafficPolicy: Local port sends to cluster-wide endpoints.
func RenderServiceWith(ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint, o Options) nft.Fragment {
	node := o.NodeName
	var f nft.Fragment
	for _, sp := range ports {
		proto, ok := protoNumbers[sp.Name.Protocol]
		if !ok || !sp.ClusterIP.Is4() || sp.Port == 0 || endpoints.ReservedReason(sp.ClusterIP) != "" {
			// The tracker already reported it; never emit a rule the kernel may refuse,
			// nor capture an address of the node's own (127.0.0.1:80 would be every
			// local client's port 80).
			continue
		}
		usable, noLocal := targets(sp, eps[sp.Name], node)
		dispatch := nft.Element{Set: mapServiceIPs, Key: []nft.Datum{nft.IP(sp.ClusterIP), nft.Proto(proto), nft.Port(sp.Port)},
			Comment: sp.Name.String()}
		renderExternal(&f, sp, proto, eps[sp.Name], o)
		switch {
		case noLocal:
			// kube-proxy drops rather than rejects here: the Service has endpoints,
			// just none on this node.
			dispatch.Verdict = &nft.Verdict{Kind: nft.Drop}
		case len(usable) == 0:
			dispatch.Verdict = noEndpointsVerdict(proto)
		default:
			lb := loadBalanceChain(len(usable), sp.ClusterIP)
			if sp.SessionAffinity {
				lb = stickyChain(len(usable), sp.ClusterIP)
				record := affinityChain(sp.AffinityTimeout, proto, sp.ClusterIP)
				f.Shared = append(f.Shared, record)
				f.Elements = append(f.Elements, nft.Element{Set: mapStickyPorts, Key: dispatch.Key,
					Verdict: &nft.Verdict{Kind: nft.Goto, Chain: record.Name}, Comment: dispatch.Comment})
			}
			f.Shared = append(f.Shared, lb)
			dispatch.Verdict = &nft.Verdict{Kind: nft.Goto, Chain: lb.Name}
			for slot, e := range usable {
				f.Elements = append(f.Elements, nft.Element{Set: endpointsMap(sp.ClusterIP),
					Key:  []nft.Datum{nft.IP(sp.ClusterIP), nft.Proto(proto), nft.Port(sp.Port), nft.Int(uint32(slot))},
					Data: []nft.Datum{nft.IP(e.Addr), nft.Port(e.Port)}})
			}
		}
		f.Elements = append(f.Elements, dispatch, nft.Element{Set: setClusterIPs, Key: []nft.Datum{nft.IP(sp.ClusterIP)}})
		for _, e := range usable {
			f.Elements = append(f.Elements, nft.Element{Set: hairpinSet(e.Addr), Key: []nft.Datum{nft.IP(e.Addr), nft.IP(e.Addr)}})
		}
	}
	return f
}

// loadBalanceChain is the chain shared by every port with n endpoints whose
// ClusterIP falls in the same shard of the endpoints map: lb-N-SS. Each call builds a
// new value; callers that keep many Services deduplicate them (sharedChains).
func loadBalanceChain(n int, clusterIP netip.Addr) *nft.Chain {
	return &nft.Chain{Name: fmt.Sprintf("lb-%d-%02d", n, shardOf(clusterIP)), Rules: []nft.Rule{{Stmts: []nft.Stmt{nft.DNATMap{
		Key: []nft.Operand{nft.F(nft.FieldIPDaddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport), nft.Random(uint32(n))},
		Map: endpointsMap(clusterIP),
	}}}}}
}

// targets picks the endpoints new connections may go to; with internalTrafficPolicy
// Local only those on node (ready ones, else serving terminating ones, among them),
// and noLocal reports that the Service has usable endpoints but none here.
func targets(sp endpoints.ServicePort, eps []endpoints.Endpoint, node string) (usable []endpoints.Endpoint, noLocal bool) {
	eps = programmable(eps)
	if !sp.InternalLocal {
		return endpoints.UsableEndpoints(eps), false
	}
	var local []endpoints.Endpoint
	for _, e := range eps {
		if e.NodeName == node {
			local = append(local, e)
		}
	}
	usable = endpoints.UsableEndpoints(local)
	return usable, len(usable) == 0 && len(endpoints.UsableEndpoints(eps)) > 0
}

// programmable drops endpoints the kernel could not be given or that no connection
// may be sent to (the tracker reports them); what is left is IPv4 with a port.
func programmable(eps []endpoints.Endpoint) []endpoints.Endpoint {
	var out []endpoints.Endpoint
	for _, e := range eps {
		if e.Addr.Is4() && e.Port != 0 && endpoints.ReservedReason(e.Addr) == "" {
			out = append(out, e)
		}
	}
	return out
}

// stickyChain is lb-N-SS for ClientIP-affinity ports: a client the affinity map
// knows for this ClusterIP . proto . port goes back to its endpoint, others are
// spread as lb-N-SS spreads them. It holds no constant of any Service, so every
// sticky port with n endpoints in the shard shares it.
//
// An entry whose endpoint is no longer a usable endpoint of the port would send the
// client to a removed pod: the affinity sweeper deletes such entries after the
// commit that removed the endpoint (see affinity.go).
func stickyChain(n int, clusterIP netip.Addr) *nft.Chain {
	lb := loadBalanceChain(n, clusterIP)
	return &nft.Chain{Name: fmt.Sprintf("sticky-%d-%02d", n, shardOf(clusterIP)), Rules: []nft.Rule{
		{Stmts: []nft.Stmt{nft.DNATMap{Key: affinityKey, Map: affinityMap(clusterIP)}}},
		lb.Rules[0],
	}}
}

// affinityKey is the client . ClusterIP . proto . port of a packet before NAT.
var affinityKey = []nft.Operand{nft.F(nft.FieldIPSaddr), nft.F(nft.FieldIPDaddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport)}

// affinityChain records, after NAT, where a new connection to a sticky port went:
// the key from the connection's original tuple, the endpoint from the packet and
// the reply tuple. Every new connection refreshes the entry's timeout, as
// kube-proxy's "update @affinity-X { ip saddr }" does. One chain per timeout,
// protocol and shard of the affinity map, shared: nft types "ct original proto-dst"
// only after "ct protocol".
func affinityChain(timeout time.Duration, proto uint8, clusterIP netip.Addr) *nft.Chain {
	if timeout <= 0 {
		timeout = DefaultAffinityTimeout // a zero dynset timeout would mean "never expire"
	}
	protoName := strings.ToLower(nft.Proto(proto).String())
	return &nft.Chain{Name: fmt.Sprintf("affinity-%d-%s-%02d", int64(timeout/time.Second), protoName, shardOf(clusterIP)), Rules: []nft.Rule{{Stmts: []nft.Stmt{
		nft.Match{Field: nft.FieldCtProtocol, Value: nft.Proto(proto)},
		nft.Update{Set: affinityMap(clusterIP), Timeout: timeout,
			Key:  []nft.Operand{nft.F(nft.FieldIPSaddr), nft.F(nft.FieldCtOrigDaddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldCtOrigProtoDst)},
			Data: []nft.Operand{nft.F(nft.FieldIPDaddr), nft.F(nft.FieldCtReplyProtoSrc)}},
	}}}}
}
