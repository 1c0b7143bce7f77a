package proxy

import (
	"strings"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// ServiceOwner is the ruleset fragment owner for a Service.
func ServiceOwner(k endpoints.ServiceKey) string { return "svc:" + k.String() }

// ChainName is the per-service-port chain. It is keyed by port name, not number, so
// that a port renumbering only moves a map element.
func ChainName(n endpoints.ServicePortName) string {
	return "svc-" + n.Namespace + "/" + n.Name + "/" + strings.ToLower(n.Protocol) + "/" + n.Port
}

var protoNumbers = map[string]uint8{"TCP": nft.ProtoTCP, "UDP": nft.ProtoUDP, "SCTP": nft.ProtoSCTP}

// RenderService returns one Service's part of the table: per port, a chain that picks
// an endpoint, the dispatch element that leads to it, and the ClusterIP and hairpin
// elements. It is a pure function of its arguments.
//
// Endpoint choice uses a cascade "numgen random mod (n-k) 0" so that each of n
// endpoints gets 1/n of new connections without anonymous sets or endpoint chains:
// when endpoints change only this chain's rules are replaced and no goto is added,
// which keeps the kernel from re-validating the whole table.
//
// node is the proxy's node, for internalTrafficPolicy: Local.
func RenderService(ports []endpoints.ServicePort, eps map[endpoints.ServicePortName][]endpoints.Endpoint, node string) nft.Fragment {
	var f nft.Fragment
	for _, sp := range ports {
		proto, ok := protoNumbers[sp.Name.Protocol]
		if !ok || !sp.ClusterIP.Is4() || sp.Port == 0 {
			continue // the tracker already reported it; never emit a rule the kernel may refuse
		}
		usable, noLocal := targets(sp, eps[sp.Name], node)
		chain := ChainName(sp.Name)
		rules := portRules(sp, proto, usable)
		if noLocal {
			// kube-proxy drops rather than rejects here: the Service has endpoints,
			// just none on this node.
			rules = []nft.Rule{{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Drop}}, Comment: sp.Name.String() + " has no local endpoints"}}
		}
		f.Chains = append(f.Chains, &nft.Chain{Name: chain, Rules: rules})
		f.Elements = append(f.Elements,
			nft.Element{Set: setClusterIPs, Key: []nft.Datum{nft.IP(sp.ClusterIP)}},
			nft.Element{Set: mapServiceIPs, Key: []nft.Datum{nft.IP(sp.ClusterIP), nft.Proto(proto), nft.Port(sp.Port)},
				Verdict: &nft.Verdict{Kind: nft.Goto, Chain: chain}})
		for _, e := range usable {
			f.Elements = append(f.Elements, nft.Element{Set: setHairpin, Key: []nft.Datum{nft.IP(e.Addr), nft.IP(e.Addr)}})
		}
	}
	return f
}

// targets picks the endpoints new connections may go to; with internalTrafficPolicy
// Local only those on node (ready ones, else serving terminating ones, among them),
// and noLocal reports that the Service has usable endpoints but none here.
func targets(sp endpoints.ServicePort, eps []endpoints.Endpoint, node string) (usable []endpoints.Endpoint, noLocal bool) {
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

func portRules(sp endpoints.ServicePort, proto uint8, eps []endpoints.Endpoint) []nft.Rule {
	var usable []endpoints.Endpoint
	for _, e := range eps {
		if e.Addr.Is4() && e.Port != 0 {
			usable = append(usable, e)
		}
	}
	if len(usable) == 0 {
		return []nft.Rule{{Stmts: []nft.Stmt{nft.Reject{TCPReset: proto == nft.ProtoTCP}}, Comment: sp.Name.String() + " has no endpoints"}}
	}
	var rules []nft.Rule
	timeout := sp.AffinityTimeout
	if timeout <= 0 {
		timeout = DefaultAffinityTimeout // a zero dynset timeout would mean "never expire"
	}
	if sp.SessionAffinity {
		// A client seen within the timeout goes back to its endpoint while that
		// endpoint exists; removing an endpoint removes its rule, so stale entries
		// can never send traffic anywhere.
		for _, e := range usable {
			key := affinityKey(e)
			rules = append(rules, nft.Rule{Stmts: []nft.Stmt{
				nft.Lookup{Key: key, Set: setAffinity},
				nft.Update{Set: setAffinity, Key: key, Timeout: timeout},
				nft.DNAT{Addr: e.Addr, Port: e.Port},
			}})
		}
	}
	n := len(usable)
	for k, e := range usable {
		var stmts []nft.Stmt
		if k < n-1 {
			stmts = append(stmts, nft.Numgen{Mod: uint32(n - k), Value: 0})
		}
		if sp.SessionAffinity {
			stmts = append(stmts, nft.Update{Set: setAffinity, Key: affinityKey(e), Timeout: timeout})
		}
		rules = append(rules, nft.Rule{Stmts: append(stmts, nft.DNAT{Addr: e.Addr, Port: e.Port})})
	}
	return rules
}

func affinityKey(e endpoints.Endpoint) []nft.Operand {
	return []nft.Operand{
		nft.F(nft.FieldIPSaddr), nft.F(nft.FieldIPDaddr), nft.F(nft.FieldThDport),
		nft.C(nft.IP(e.Addr)), nft.C(nft.Port(e.Port)),
	}
}
