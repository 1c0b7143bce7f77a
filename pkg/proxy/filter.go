package proxy

import (
	"net/netip"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// localnet is 127.0.0.0/8.
var localnet = netip.MustParsePrefix("127.0.0.0/8")

// filterChains are the filter-hook chains of the skeleton, as kube-proxy has them:
//
//   - filter-forward drops packets conntrack finds invalid, unless
//     nf_conntrack_tcp_be_liberal is set. Such a packet (a retransmission outside the
//     TCP window, say) would otherwise be forwarded untranslated to the pod's real
//     address, whose answer is a reset that kills a long-lived NodePort connection
//     (kubernetes #74839, #117924).
//   - filter-input, with localhost NodePorts, drops new connections to 127.0.0.0/8
//     that do not come from 127.0.0.0/8: route_localnet=1, which localhost NodePorts
//     need, makes the kernel accept them, and a node's localhost services must stay
//     local (kubernetes #90259, kube-proxy's "block incoming localnet connections").
func filterChains(o Options) []*nft.Chain {
	var out []*nft.Chain
	if !o.ConntrackTCPLiberal {
		out = append(out, &nft.Chain{Name: chainFilterForward, Hook: &nft.ChainHook{Type: "filter", Hook: "forward", Priority: 0},
			Rules: []nft.Rule{{Stmts: []nft.Stmt{nft.CtStateInvalid{}, nft.Verdict{Kind: nft.Drop}}}}})
	}
	if o.LocalhostNodePorts && o.Family == endpoints.IPv4 { // localhost NodePorts are IPv4 only
		out = append(out, &nft.Chain{Name: chainFilterInput, Hook: &nft.ChainHook{Type: "filter", Hook: "input", Priority: 0},
			Rules: []nft.Rule{{Stmts: []nft.Stmt{
				nft.MatchPrefix{Field: nft.FieldIPDaddr, Prefix: localnet},
				nft.MatchPrefix{Field: nft.FieldIPSaddr, Negate: true, Prefix: localnet},
				nft.CtStateNew{}, nft.Verdict{Kind: nft.Drop}}, Comment: "block incoming localnet connections"}}})
	}
	return out
}
