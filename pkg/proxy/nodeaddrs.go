package proxy

import (
	"net/netip"
	"slices"
)

// NodeAddresses are the addresses NodePorts are served on (kube-proxy
// --nodeport-addresses).
type NodeAddresses struct {
	// All serves NodePorts on every local address of the node, whatever it is at the
	// time a packet arrives (the rule asks the kernel: "fib daddr type local"), as
	// kube-proxy's iptables mode does when --nodeport-addresses is empty.
	All bool
	// Addrs are the node's addresses that serve NodePorts. With All they are only used
	// to find the conntrack entries of NodePorts (and by trace); otherwise the rules
	// match exactly these (the nodeport-ips set).
	Addrs []netip.Addr
}

// equal reports whether a and b select the same addresses.
func (a NodeAddresses) equal(b NodeAddresses) bool {
	return a.All == b.All && slices.Equal(a.Addrs, b.Addrs)
}

// SetNodeAddresses tells the Proxy on which addresses to serve NodePorts: all local
// ones (all true, addrs being the node's current addresses, for conntrack) or exactly
// addrs (the addresses of --nodeport-addresses' CIDRs, the caller resolves "primary"
// and re-resolves them when interfaces change). Only addresses of the Proxy's family
// are used. A change
// queues a sync; the same addresses again do nothing. Until it is first called the
// Proxy serves NodePorts on all local addresses. Safe for concurrent use.
func (p *Proxy) SetNodeAddresses(addrs []netip.Addr, all bool) {
	na := NodeAddresses{All: all}
	fam := fieldsOf(p.cfg.Options.Family)
	for _, a := range addrs {
		if a = a.Unmap(); fam.ofFamily(a) {
			na.Addrs = append(na.Addrs, a)
		}
	}
	slices.SortFunc(na.Addrs, netip.Addr.Compare)
	na.Addrs = slices.Compact(na.Addrs)
	p.mu.Lock()
	same := p.nodeAddrs.equal(na)
	p.nodeAddrs = na
	p.mu.Unlock()
	if !same {
		p.Trigger()
	}
}

// nodeAddresses returns the current node addresses.
func (p *Proxy) nodeAddresses() NodeAddresses {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodeAddrs
}

// applyNodeAddresses renders the skeleton for the node addresses last set, if they
// changed since the last sync, and, when NodePorts answer on 127.0.0.1, makes sure
// route_localnet is on before the rules that need it are committed (every sync:
// cheap, and another program may have turned it off).
func (p *Proxy) applyNodeAddresses() error {
	na := p.nodeAddresses()
	if !p.renderedNodeAddrs.equal(na) {
		p.desired.SetFragment(skeletonOwner, SkeletonFor(p.cfg.Options, na))
		p.renderedNodeAddrs = na
	}
	if servesLocalhost(p.cfg.Options, na) {
		return ensureRouteLocalnet(p.cfg.SetSysctl)
	}
	return nil
}
