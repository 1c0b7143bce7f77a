// Package offline renders and traces svcproxy's rules for a directory of
// Service and EndpointSlice manifests without a cluster, a kernel or root: what
// `svcproxy render` prints and what `svcproxy trace` walks, for a node described
// by flags (Node) rather than found.
package offline

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"

	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// Node is the node render and trace pretend to be, from their flags: the
// name Local traffic policies compare endpoints' nodeName with, its addresses
// (as on its interfaces), and the NodePort settings a real svcproxy would read.
type Node struct {
	Name      string
	IPs       []string
	NodePorts []string
	Localhost bool
}

// AddFlags binds n to render's and trace's node flags on fs.
func (n *Node) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&n.Name, "hostname-override", "", "The node's name, for externalTrafficPolicy and internalTrafficPolicy: Local (endpoints' nodeName).")
	fs.StringSliceVar(&n.IPs, "node-ip", nil, "The node's addresses, as on its interfaces (repeat or comma-separate); the first of each family is its primary IP. 127.0.0.1 and ::1 are always local.")
	fs.StringSliceVar(&n.NodePorts, "nodeport-addresses", nil, "As svcproxy's --nodeport-addresses: CIDRs and 'primary', 'localhost', 'all'; default all.")
	fs.BoolVar(&n.Localhost, "iptables-localhost-nodeports", true, "As svcproxy's: NodePorts also answer on 127.0.0.1 from the node.")
}

// Resolve returns the node's local addresses (its --node-ip values and
// loopback) and which of them serve NodePorts.
func (n Node) Resolve() (local []netip.Addr, sel nodeaddr.Selection, err error) {
	spec, err := nodeaddr.Parse(n.NodePorts)
	if err != nil {
		return nil, sel, fmt.Errorf("--nodeport-addresses: %w", err)
	}
	var primary []netip.Addr
	for _, s := range n.IPs {
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
