//go:build e2e

package e2e

import (
	corev1 "k8s.io/api/core/v1"
)

// addrCmds are the ip(8) commands that give link dev in namespace ns its
// address of each family the cluster has, on the bridge's subnet.
func (f family) addrCmds(ns, dev, ip4, ip6 string) [][]string {
	var cmds [][]string
	if f.hasV4() {
		cmds = append(cmds, []string{"-n", ns, "addr", "add", ip4 + bridgeBits, "dev", dev})
	}
	if f.hasV6() {
		cmds = append(cmds, []string{"-n", ns, "addr", "add", ip6 + bridgeBits6, "dev", dev, "nodad"})
	}
	return cmds
}

// nftFamily is the nftables (and iptables-nft) family of the cluster's
// primary IP family: the table that serves Services naming no family.
func (f family) nftFamily() string {
	if f.hasV4() {
		return "ip"
	}
	return "ip6"
}

// anyAddr is the wildcard the API server binds to: "::" takes both families.
func (f family) anyAddr() string {
	if f.hasV6() {
		return "::"
	}
	return "0.0.0.0"
}

// nodeAddresses are a Node's status addresses: one InternalIP per family,
// primary first (kube-proxy and svcproxy take each family's node IP from
// there), and the hostname.
func nodeAddresses(n *node) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, ip := range n.ips {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.name})
}

// outsideSysctls: no IPv6 redirects either (see setupOutside).
func (f family) outsideSysctls() []string {
	if !f.hasV6() {
		return nil
	}
	return []string{"net.ipv6.conf.all.accept_redirects=0", "net.ipv6.conf.eth0.accept_redirects=0"}
}
