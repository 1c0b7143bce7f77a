package proxy

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// ServiceOwner is the ruleset fragment owner for a Service.
func ServiceOwner(k endpoints.ServiceKey) string { return "svc:" + k.String() }

// ChainName is the chain of a ClientIP-affinity Service port. It is keyed by port
// name, not number, so that a port renumbering only moves a map element. Names that
// would pass maxChainName (the kernel refuses chain names over 255 bytes) keep a
// prefix and end in "~" and a hash of the whole name: Kubernetes names contain no
// '~' or '/', so the result stays unique.
func ChainName(n endpoints.ServicePortName) string {
	name := "svc-" + n.Namespace + "/" + n.Name + "/" + strings.ToLower(n.Protocol) + "/" + n.Port
	if len(name) <= maxChainName {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	suffix := fmt.Sprintf("~%016x", h.Sum64())
	return name[:maxChainName-len(suffix)] + suffix
}

// maxChainName leaves room below the kernel's limit (NFT_CHAIN_MAXNAMELEN, 256 with
// the NUL) for tools that add to a name.
const maxChainName = 200

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
// ClientIP affinity needs per-endpoint rules; those ports get a chain of their own.
func RenderService(ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint, node string) nft.Fragment {
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
		switch {
		case noLocal:
			// kube-proxy drops rather than rejects here: the Service has endpoints,
			// just none on this node.
			dispatch.Verdict = &nft.Verdict{Kind: nft.Drop}
		case len(usable) == 0:
			dispatch.Verdict = &nft.Verdict{Kind: nft.Goto, Chain: chainNoEndpoints}
			if proto == nft.ProtoTCP {
				dispatch.Verdict.Chain = chainNoEndpointsTCP
			}
		case sp.SessionAffinity:
			chain := ChainName(sp.Name)
			f.Chains = append(f.Chains, &nft.Chain{Name: chain, Rules: stickyRules(sp, usable)})
			dispatch.Verdict = &nft.Verdict{Kind: nft.Goto, Chain: chain}
		default:
			lb := loadBalanceChain(len(usable), sp.ClusterIP)
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

// stickyRules picks an endpoint for a ClientIP-affinity port: a client seen within
// the timeout goes back to its endpoint while that endpoint exists (removing an
// endpoint removes its rule, so stale entries can never send traffic anywhere);
// others get a cascade "numgen random mod (n-k) 0", 1/n of new connections each,
// recorded in the affinity set.
func stickyRules(sp endpoints.ServicePort, usable []endpoints.Endpoint) []nft.Rule {
	timeout := sp.AffinityTimeout
	if timeout <= 0 {
		timeout = DefaultAffinityTimeout // a zero dynset timeout would mean "never expire"
	}
	var rules []nft.Rule
	for _, e := range usable {
		key := affinityKey(e)
		rules = append(rules, nft.Rule{Stmts: []nft.Stmt{
			nft.Lookup{Key: key, Set: setAffinity},
			nft.Update{Set: setAffinity, Key: key, Timeout: timeout},
			nft.DNAT{Addr: e.Addr, Port: e.Port},
		}})
	}
	n := len(usable)
	for k, e := range usable {
		var stmts []nft.Stmt
		if k < n-1 {
			stmts = append(stmts, nft.Numgen{Mod: uint32(n - k), Value: 0})
		}
		stmts = append(stmts, nft.Update{Set: setAffinity, Key: affinityKey(e), Timeout: timeout}, nft.DNAT{Addr: e.Addr, Port: e.Port})
		rules = append(rules, nft.Rule{Stmts: stmts})
	}
	return rules
}

func affinityKey(e endpoints.Endpoint) []nft.Operand {
	return []nft.Operand{
		nft.F(nft.FieldIPSaddr), nft.F(nft.FieldIPDaddr), nft.F(nft.FieldThDport),
		nft.C(nft.IP(e.Addr)), nft.C(nft.Port(e.Port)),
	}
}
