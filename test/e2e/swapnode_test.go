//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/test/e2e/readback"
)

// kubeletIPv4 and kubeletIPv6 are what kubelet v1.37 creates in iptables at
// start (pkg/kubelet/kubelet_network_linux.go): the hint chain, the canary
// chains it monitors, and for IPv4 KUBE-FIREWALL, jumped to first from
// INPUT and OUTPUT, with its localnet drop rule. The node agent does not
// create them; a real node has them before kube-proxy starts.
const (
	kubeletIPv4 = `*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*filter
:KUBE-FIREWALL - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
-I INPUT -j KUBE-FIREWALL
-I OUTPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
COMMIT
*nat
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
`
	kubeletIPv6 = `*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*filter
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*nat
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
`
)

// iptablesSave is iptables-nft-save (ip6tables-nft-save for "ip6") inside n.
func iptablesSave(n *node, family string) (string, error) {
	bin := "iptables-nft-save"
	if family == "ip6" {
		bin = "ip6tables-nft-save"
	}
	return netns.Exec(n.netns, bin)
}

// ensureKubeletChains creates kubelet's chains in n, as kubelet would have
// before any proxy started, unless they are there.
func ensureKubeletChains(n *node) error {
	for _, f := range []struct{ family, restore, rules string }{
		{"ip", "iptables-nft-restore", kubeletIPv4},
		{"ip6", "ip6tables-nft-restore", kubeletIPv6},
	} {
		save, err := iptablesSave(n, f.family)
		if err != nil {
			return err
		}
		if strings.Contains(save, ":KUBE-IPTABLES-HINT ") {
			continue
		}
		cmd := netns.Command(n.netns, f.restore, "--noflush")
		cmd.Stdin = strings.NewReader(f.rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubelet's chains on %s (%s): %w: %s", n.name, f.family, err, out)
		}
	}
	return nil
}

// kubeletState is kubelet's part of n's iptables, both families: a
// takeover must leave it exactly as it was.
func kubeletState(n *node) ([]string, error) {
	var out []string
	for _, family := range []string{"ip", "ip6"} {
		save, err := iptablesSave(n, family)
		if err != nil {
			return nil, err
		}
		for _, l := range readback.KubeletIptables(save) {
			out = append(out, family+" "+l)
		}
	}
	return out, nil
}

// kubeProxyLeftovers lists what kube-proxy (any mode) has in n: KUBE-
// chains other than kubelet's and the jumps to them in iptables-nft's
// tables, and the ip/ip6 kube-proxy tables.
func kubeProxyLeftovers(n *node) ([]string, error) {
	var out []string
	for _, family := range []string{"ip", "ip6"} {
		save, err := iptablesSave(n, family)
		if err != nil {
			return nil, err
		}
		out = append(out, readback.KubeProxyIptables(family, save)...)
	}
	tables, err := netns.Exec(n.netns, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	return append(out, readback.KubeProxyTables(tables)...), nil
}

// hasSvcproxyTable says whether n holds svcproxy's table of the cluster's
// primary family (the swaps' Services name no family).
func hasSvcproxyTable(n *node) (bool, error) {
	tables, err := netns.Exec(n.netns, "nft", "list", "tables")
	if err != nil {
		return false, err
	}
	return strings.Contains(tables+"\n", "table "+theCluster.family.nftFamily()+" svcproxy\n"), nil
}

// switchTimes is what happened on a node when its proxy was replaced.
type switchTimes struct {
	node                string
	from, to            string
	begin               time.Time     // SIGTERM sent
	exited              time.Duration // until the old proxy exited
	killed              bool          // it ignored SIGTERM for the grace period
	cleanup             time.Duration // svcproxy --cleanup, if run
	started, healthy    time.Time     // the new proxy started, answered /healthz 200
	cleanupOut, exitErr string
}

// terminationGrace is a DaemonSet pod's default terminationGracePeriodSeconds:
// kubelet sends SIGTERM, and SIGKILL after it.
const terminationGrace = 30 * time.Second

// switchProxy replaces n's proxy by kind the way a DaemonSet rollout does:
// SIGTERM to the old one (never its --cleanup), then, if cleanup, `svcproxy
// --cleanup` inside the node (the way back), then the new one, until its
// /healthz answers 200.
func (c *cluster) switchProxy(ctx context.Context, n *node, kind string, cleanup bool) (switchTimes, error) {
	n.mu.Lock()
	old, oldKind := n.proxy, n.proxyKind
	n.mu.Unlock()
	st := switchTimes{node: n.name, from: oldKind, to: kind, begin: time.Now()}
	if old != nil {
		old.stop(terminationGrace)
		st.exited = time.Since(st.begin)
		st.killed = st.exited >= terminationGrace
		st.exitErr = fmt.Sprint(old.Err())
	}
	if cleanup {
		var err error
		if st.cleanup, st.cleanupOut, err = svcproxyCleanup(c, n); err != nil {
			return st, err
		}
	}
	st.started = time.Now()
	if err := c.startProxyAs(kind, n); err != nil {
		return st, err
	}
	if err := c.waitProxyHealthy(ctx, n, 60*time.Second); err != nil {
		return st, err
	}
	st.healthy = time.Now()
	c.logf("%s: %s -> %s: old exited after %v (%s), cleanup %v, healthy %v after start",
		n.name, st.from, st.to, st.exited.Round(time.Millisecond), st.exitErr, st.cleanup.Round(time.Millisecond), st.healthy.Sub(st.started).Round(time.Millisecond))
	return st, nil
}

// waitKubeProxyRules waits until kube-proxy's iptables rules in n name
// every target's ClusterIP, and returns when they first did. kube-proxy's
// /healthz is no sign of that: v1.37 answered 200 about 0.4 s before its
// first sync was written, before its informers had even synced.
func waitKubeProxyRules(ctx context.Context, n *node, targets []swapTarget) (time.Time, error) {
	var missing []string
	err := poll.Until(ctx, 30*time.Second, 20*time.Millisecond, func() (bool, string) {
		save, err := iptablesSave(n, theCluster.family.nftFamily())
		if err != nil {
			return false, err.Error()
		}
		missing = missing[:0]
		for _, tg := range targets {
			if !strings.Contains(save, "-d "+hostCIDR(tg.ip)+" ") {
				missing = append(missing, tg.svc)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no rules for %v", missing)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("kube-proxy's rules on %s: %w", n.name, err)
	}
	return time.Now(), nil
}

// svcproxyCleanup runs `svcproxy --cleanup` with args inside n, as an
// operator would on the node, and says how long it took and what it said.
func svcproxyCleanup(c *cluster, n *node, args ...string) (time.Duration, string, error) {
	begin := time.Now()
	out, err := netns.Exec(n.netns, append([]string{c.svcproxyBin, "--cleanup"}, args...)...)
	took, out := time.Since(begin), strings.TrimSpace(out)
	if err != nil {
		return took, out, fmt.Errorf("svcproxy --cleanup %s on %s: %w", strings.Join(args, " "), n.name, err)
	}
	c.logf("%s: svcproxy --cleanup %s took %v: %s", n.name, strings.Join(args, " "), took.Round(time.Millisecond), lastLines(out, 3))
	return took, out, nil
}

// currentProxy is the kind of proxy n runs, "" if it is not running.
func currentProxy(n *node) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proxy == nil || n.proxy.exited() {
		return ""
	}
	if n.proxyKind == "" {
		return theCluster.proxyKind
	}
	return n.proxyKind
}

// untranslatedConntrack lists n's conntrack entries towards ip that were
// never translated (the reply comes from ip itself): connections whose
// first packet met no Service rule. A TCP one stays in SYN_SENT for two
// minutes and its retransmissions, or a later connection that reuses its
// source port, follow it untranslated.
func untranslatedConntrack(n *node, ip string) ([]string, error) {
	out, err := netns.Exec(n.netns, append([]string{"conntrack", "-L", "--orig-dst", ip}, conntrackFamily(ip)...)...)
	if err != nil && !strings.Contains(out, "flow entries have been shown") {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		// The reply tuple is the second "src=".
		if i := strings.Index(l, "src="); i >= 0 {
			if j := strings.Index(l[i+1:], "src="); j >= 0 && strings.HasPrefix(l[i+1+j:], "src="+ip+" ") {
				lines = append(lines, strings.TrimSpace(l))
			}
		}
	}
	return lines, nil
}
