package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// offlineNode is the node render and trace pretend to be, from their flags: the
// name Local traffic policies compare endpoints' nodeName with, its addresses
// (as on its interfaces), and the NodePort settings a real svcproxy would read.
type offlineNode struct {
	name      string
	ips       []string
	nodePorts []string
	localhost bool
}

func addOfflineNodeFlags(fs *pflag.FlagSet, n *offlineNode) {
	fs.StringVar(&n.name, "hostname-override", "", "The node's name, for externalTrafficPolicy and internalTrafficPolicy: Local (endpoints' nodeName).")
	fs.StringSliceVar(&n.ips, "node-ip", nil, "The node's addresses, as on its interfaces (repeat or comma-separate); the first of each family is its primary IP. 127.0.0.1 and ::1 are always local.")
	fs.StringSliceVar(&n.nodePorts, "nodeport-addresses", nil, "As svcproxy's --nodeport-addresses: CIDRs and 'primary', 'localhost', 'all'; default all.")
	fs.BoolVar(&n.localhost, "iptables-localhost-nodeports", true, "As svcproxy's: NodePorts also answer on 127.0.0.1 from the node.")
}

// resolve returns the node's local addresses (its --node-ip values and
// loopback) and which of them serve NodePorts.
func (n offlineNode) resolve() (local []netip.Addr, sel nodeaddr.Selection, err error) {
	spec, err := nodeaddr.Parse(n.nodePorts)
	if err != nil {
		return nil, sel, fmt.Errorf("--nodeport-addresses: %w", err)
	}
	var primary []netip.Addr
	for _, s := range n.ips {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return nil, sel, fmt.Errorf("--node-ip: %w", err)
		}
		a = a.Unmap()
		local = append(local, a)
		if len(primary) == 0 || len(primary) == 1 && primary[0].Is4() != a.Is4() {
			primary = append(primary, a)
		}
	}
	local = append(local, netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback())
	return local, nodeaddr.Select(spec, primary, local), nil
}
