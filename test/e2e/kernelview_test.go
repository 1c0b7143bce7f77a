//go:build e2e

package e2e

import (
	"fmt"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/test/e2e/readback"
)

// kernelEndpoints reads from node n's kernel which endpoints each TCP
// Service port is load balanced to: keyed by ClusterIP (svcproxy) or by
// Service name (kube-proxy nftables), sorted endpoint addresses. Not
// available for kube-proxy's iptables mode.
func (c *cluster) kernelEndpoints(n *node) (map[string][]string, error) {
	switch c.proxyKind {
	case "svcproxy":
		out, err := netns.Exec(n.netns, "nft", "list", "table", "ip", "svcproxy")
		if err != nil {
			return nil, err
		}
		return readback.SvcproxyEndpoints(out), nil
	case "kube-proxy-nftables":
		out, err := netns.Exec(n.netns, "nft", "list", "table", "ip", "kube-proxy")
		if err != nil {
			return nil, err
		}
		return readback.KubeProxyEndpoints(out), nil
	}
	return nil, fmt.Errorf("reading endpoints back is not implemented for %s", c.proxyKind)
}
