//go:build e2e

package e2e

import (
	"fmt"
	"slices"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/test/e2e/readback"
)

// kernelEndpoints reads from node n's kernel which endpoints each TCP
// Service port is load balanced to: keyed by ClusterIP (svcproxy) or by
// Service name (kube-proxy nftables), sorted endpoint addresses. Each
// family of the cluster has its own table (ip, ip6); a dual-stack Service
// keyed by name has the endpoints of both. Not available for kube-proxy's
// iptables mode.
func (c *cluster) kernelEndpoints(n *node) (map[string][]string, error) {
	var table string
	var parse func(string) map[string][]string
	switch c.proxyKind {
	case "svcproxy":
		table, parse = "svcproxy", readback.SvcproxyEndpoints
	case "kube-proxy-nftables":
		table, parse = "kube-proxy", readback.KubeProxyEndpoints
	default:
		return nil, fmt.Errorf("reading endpoints back is not implemented for %s", c.proxyKind)
	}
	out := map[string][]string{}
	for _, fam := range c.family.pick("ip", "ip6") {
		listing, err := netns.Exec(n.netns, "nft", "list", "table", fam, table)
		if err != nil {
			return nil, err
		}
		for k, eps := range parse(listing) {
			out[k] = append(out[k], eps...)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out, nil
}
