package proxy

import (
	"net/netip"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// nodePortsChain is the chain that decides which destination addresses NodePorts
// are served on, then dispatches on proto . port through service-nodeports. With all
// local addresses it asks the kernel's routing table per packet ("fib daddr type
// local"), so an address added to the node serves NodePorts at once and nothing
// tracks addresses; otherwise it matches the nodeport-ips set, filled from na.Addrs.
// Loopback addresses serve NodePorts only with LocalhostNodePorts, as in kube-proxy's
// iptables mode, and never ::1: IPv6 has no route_localnet, and kube-proxy serves no
// IPv6 localhost NodePorts either.
func nodePortsChain(o Options, na NodeAddresses) (*nft.Chain, []nft.Element) {
	x := fieldsOf(o.Family)
	dispatch := nft.VMap{Key: nft.Fs(nft.FieldL4Proto, nft.FieldThDport), Map: mapServiceNodePorts}
	var elems []nft.Element
	var stmts []nft.Stmt
	if na.All {
		stmts = append(stmts, nft.FibLocal{})
		switch {
		case o.Family == endpoints.IPv6:
			stmts = append(stmts, nft.Match{Field: x.daddr, Negate: true, Value: nft.IP(netip.IPv6Loopback())})
		case !o.LocalhostNodePorts:
			stmts = append(stmts, nft.MatchPrefix{Field: x.daddr, Negate: true, Prefix: localnet})
		}
	} else {
		stmts = append(stmts, nft.Lookup{Key: []nft.Operand{nft.F(x.daddr)}, Set: setNodePortIPs})
		for _, a := range na.Addrs {
			if x.ofFamily(a) && !a.IsLoopback() || a.Is4() && o.Family == endpoints.IPv4 && o.LocalhostNodePorts {
				elems = append(elems, nft.Element{Set: setNodePortIPs, Key: []nft.Datum{nft.IP(a)}})
			}
		}
	}
	return &nft.Chain{Name: chainNodePorts, Rules: []nft.Rule{{Stmts: append(stmts, dispatch)}}}, elems
}

// servesLocalhost reports whether NodePorts answer on 127.0.0.1, which needs
// route_localnet.
func servesLocalhost(o Options, na NodeAddresses) bool {
	if !o.LocalhostNodePorts || o.Family != endpoints.IPv4 {
		return false
	}
	if na.All {
		return true
	}
	for _, a := range na.Addrs {
		if localnet.Contains(a) {
			return true
		}
	}
	return false
}
