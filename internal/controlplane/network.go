package controlplane

import (
	"fmt"
	"strings"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// The bridge network of both suites: kind's docker network, 172.18.0.0/16
// with the gateway on the bridge namespace, and for IPv6 a /64 of our own.
const (
	GatewayIP   = "172.18.0.1"
	BridgeBits  = "/16"
	GatewayIP6  = "fd00:172:18::1"
	BridgeBits6 = "/64"
)

// Node is what the network needs of a node: its namespace, its addresses on
// the bridge (one per family, primary first) and its pod CIDRs (in the same
// order, each routed to it from every other node via its address of that
// family).
type Node struct {
	Netns    string
	IPs      []string
	PodCIDRs []string
}

// SetupNetwork creates the bridge namespace (bridge br0 holding the gateway
// of each family the nodes have) and one namespace per node, linked to the
// bridge by a veth (vn<i> on the bridge, eth0 in the node), with a default
// route per family to the gateway and a route to every other node's pod CIDRs
// via that node; forwarding on, rp_filter off. The root namespace is never
// changed: every link is made with `ip -n`.
func SetupNetwork(bridge string, nodes []Node) error {
	var v6 bool
	if len(nodes) > 0 {
		for _, ip := range nodes[0].IPs {
			v6 = v6 || isIPv6(ip)
		}
	}
	cmds := [][]string{
		{"netns", "add", bridge},
		{"-n", bridge, "link", "set", "lo", "up"},
		{"-n", bridge, "link", "add", "br0", "type", "bridge"},
	}
	for _, ip := range gateways(nodes) {
		cmds = append(cmds, addrCmd(bridge, "br0", ip))
	}
	cmds = append(cmds, []string{"-n", bridge, "link", "set", "br0", "up"})
	for i, n := range nodes {
		port := fmt.Sprintf("vn%d", i)
		cmds = append(cmds,
			[]string{"netns", "add", n.Netns},
			[]string{"-n", n.Netns, "link", "set", "lo", "up"},
			[]string{"-n", bridge, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
			[]string{"-n", bridge, "link", "set", port, "master", "br0"},
			[]string{"-n", bridge, "link", "set", port, "up"},
		)
		for _, ip := range n.IPs {
			cmds = append(cmds, addrCmd(n.Netns, "eth0", ip))
		}
		cmds = append(cmds, []string{"-n", n.Netns, "link", "set", "eth0", "up"})
		// A namespace without a default route answers locally originated
		// ClusterIP traffic with ENETUNREACH before any nat hook: the bridge
		// namespace has none, so nothing leaves.
		for _, gw := range gateways(nodes) {
			cmds = append(cmds, []string{"-n", n.Netns, "route", "add", "default", "via", gw})
		}
		for j, m := range nodes {
			if j == i {
				continue
			}
			for k, cidr := range m.PodCIDRs {
				cmds = append(cmds, []string{"-n", n.Netns, "route", "add", cidr, "via", m.IPs[k]})
			}
		}
	}
	for _, a := range cmds {
		if err := netns.IP(a...); err != nil {
			return err
		}
	}
	sysctls := []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"}
	if v6 {
		sysctls = append(sysctls, "net.ipv6.conf.all.forwarding=1")
	}
	for _, n := range nodes {
		if _, err := netns.Exec(n.Netns, append([]string{"sysctl", "-q", "-w"}, sysctls...)...); err != nil {
			return err
		}
	}
	return nil
}

// gateways are the bridge's addresses, in the order of the nodes' families.
func gateways(nodes []Node) []string {
	var out []string
	if len(nodes) == 0 {
		return nil
	}
	for _, ip := range nodes[0].IPs {
		if isIPv6(ip) {
			out = append(out, GatewayIP6)
		} else {
			out = append(out, GatewayIP)
		}
	}
	return out
}

// addrCmd puts ip on dev with its family's bridge prefix length (IPv6 without
// duplicate address detection, which would hold the address for a second).
func addrCmd(ns, dev, ip string) []string {
	if isIPv6(ip) {
		return []string{"-n", ns, "addr", "add", ip + BridgeBits6, "dev", dev, "nodad"}
	}
	return []string{"-n", ns, "addr", "add", ip + BridgeBits, "dev", dev}
}

func isIPv6(ip string) bool { return strings.Contains(ip, ":") }
