package healthcheck

import (
	"slices"

	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// bind is one address every health check node port listens on.
type bind struct {
	network string // tcp, tcp4 or tcp6
	host    string // "" with tcp: every address of both families
}

// Binds turns the NodePort address selection into listen addresses, as
// kube-proxy binds its health check ports to the node IPs --nodeport-addresses
// selects, or to every address when it selects all: a family served on all its
// addresses gets one wildcard listener, the other family one per address.
func Binds(sel nodeaddr.Selection) []bind {
	if sel.AllIPv4 && sel.AllIPv6 {
		return []bind{{network: "tcp"}}
	}
	var out []bind
	if sel.AllIPv4 {
		out = append(out, bind{network: "tcp4", host: "0.0.0.0"})
	}
	if sel.AllIPv6 {
		out = append(out, bind{network: "tcp6", host: "::"})
	}
	for _, a := range sel.Addrs {
		if a.IsLinkLocalUnicast() {
			continue // needs a zone to bind; kube-proxy's listener fails on it
		}
		if a.Is4() && !sel.AllIPv4 || a.Is6() && !sel.AllIPv6 {
			out = append(out, bind{network: "tcp", host: a.String()})
		}
	}
	return out
}

func equalBinds(a, b []bind) bool { return slices.Equal(a, b) }
