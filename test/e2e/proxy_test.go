//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// proxyCommandAs is the command line of proxy kind (svcproxy,
// kube-proxy-iptables, kube-proxy-nftables) on node n: the same kube-proxy
// flags for every implementation.
func (c *cluster) proxyCommandAs(kind string, n *node) []string {
	common := []string{
		"--kubeconfig=" + c.proxyKC,
		"--hostname-override=" + n.name,
		"--cluster-cidr=" + c.family.clusterCIDRs(),
		// On every address, as kubeadm's kube-proxy config does: the e2e
		// Prometheus scrapes each node from the control plane.
		fmt.Sprintf("--metrics-bind-address=0.0.0.0:%d", metricsPort),
		fmt.Sprintf("--healthz-bind-address=0.0.0.0:%d", healthzPort),
		// Conntrack sysctls are global (init netns only): leave them alone.
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"-v=2",
	}
	switch kind {
	case "kube-proxy-iptables":
		return append([]string{c.bin("kube-proxy"), "--proxy-mode=iptables"}, common...)
	case "kube-proxy-nftables":
		return append([]string{c.bin("kube-proxy"), "--proxy-mode=nftables"}, common...)
	default:
		return append([]string{c.svcproxyBin}, common...)
	}
}

func (c *cluster) startProxies(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := c.startProxy(n); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := c.waitProxyHealthy(ctx, n, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) startProxy(n *node) error { return c.startProxyAs(c.proxyKind, n) }

// startProxyAs starts proxy kind on n as n's proxy (the swap scenarios run
// kube-proxy in a svcproxy run). Each kind logs to its own file.
func (c *cluster) startProxyAs(kind string, n *node) error {
	name := "proxy-" + n.short
	if kind != c.proxyKind {
		name = kind + "-" + n.short
	}
	p, err := c.start(name, n.netns, c.proxyCommandAs(kind, n)...)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proxy, n.proxyKind = p, kind
	n.mu.Unlock()
	return nil
}

// waitProxyHealthy polls the proxy's healthz endpoint inside its node.
func (c *cluster) waitProxyHealthy(ctx context.Context, n *node, timeout time.Duration) error {
	n.mu.Lock()
	p := n.proxy
	n.mu.Unlock()
	hc := &http.Client{
		Transport: &http.Transport{DialContext: netns.DialFunc(n.netns, time.Second), DisableKeepAlives: true},
		Timeout:   time.Second,
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort)
	return poll.UntilOrAbort(ctx, timeout, 50*time.Millisecond, func() (bool, string, error) {
		if p.exited() {
			return false, "", fmt.Errorf("proxy on %s exited (%v):\n%s", n.name, p.Err(), tail(filepath.Join(c.logDir, p.Name+".log"), 20))
		}
		resp, err := hc.Get(url)
		if err != nil {
			return false, err.Error(), nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, body), nil
	})
}

// killProxy kills the proxy on n with SIGKILL and waits for it to die.
func (c *cluster) killProxy(n *node) {
	n.mu.Lock()
	p := n.proxy
	n.mu.Unlock()
	p.kill()
	<-p.Done()
}

// rules returns what the kernel holds in the node's namespace: the nftables
// ruleset (which includes iptables-nft rules) and iptables-save's view.
func (c *cluster) rules(n *node) string {
	nft, err := netns.Exec(n.netns, "nft", "list", "ruleset")
	if err != nil {
		nft += "\n" + err.Error()
	}
	// Both families: in an IPv6 cluster kube-proxy's iptables mode writes
	// its rules (and their comments naming Services) with ip6tables only.
	out := nft
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		ipt, err := netns.Exec(n.netns, save)
		if err != nil {
			ipt += "\n" + err.Error()
		}
		out += "\n" + ipt
	}
	return out
}
