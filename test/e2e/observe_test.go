//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/test/e2e/readback"
)

// rssKiB reads VmRSS of a process from /proc.
func rssKiB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// rssSampler samples the RSS of every node's proxy every interval.
type rssSampler struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	kib  map[string][]int // node name -> samples
	errs []error
}

func (c *cluster) sampleRSS(every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{}), kib: map[string][]int{}}
	take := func() {
		for _, n := range c.nodes {
			n.mu.Lock()
			pid := n.proxy.pid()
			n.mu.Unlock()
			v, err := rssKiB(pid)
			s.mu.Lock()
			if err != nil {
				s.errs = append(s.errs, fmt.Errorf("%s: %w", n.name, err))
			} else {
				s.kib[n.name] = append(s.kib[n.name], v)
			}
			s.mu.Unlock()
		}
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		take()
		for {
			select {
			case <-s.stop:
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()
	return s
}

// finish stops sampling and returns, per node, the smallest and largest
// sample in KiB and how many were taken.
func (s *rssSampler) finish() (minKiB, maxKiB, samples map[string]int, errs []error) {
	close(s.stop)
	<-s.done
	minKiB, maxKiB, samples = map[string]int{}, map[string]int{}, map[string]int{}
	for node, vs := range s.kib {
		lo, hi := vs[0], vs[0]
		for _, v := range vs {
			lo, hi = min(lo, v), max(hi, v)
		}
		minKiB[node], maxKiB[node], samples[node] = lo, hi, len(vs)
	}
	return minKiB, maxKiB, samples, s.errs
}

// report stops sampling, fails t on sampling errors and, when boundKiB > 0, on a
// node whose proxy's RSS moved by more than that, and returns "node lo-hi" in MiB
// per node for the scenario's metric line.
func (s *rssSampler) report(t *testing.T, c *cluster, boundKiB int) string {
	t.Helper()
	lo, hi, n, errs := s.finish()
	for _, err := range errs {
		t.Errorf("RSS: %v", err)
	}
	var out []string
	for _, nd := range c.nodes {
		out = append(out, fmt.Sprintf("%s %d-%d", nd.short, lo[nd.name]/1024, hi[nd.name]/1024))
		if boundKiB > 0 && hi[nd.name]-lo[nd.name] > boundKiB {
			t.Errorf("proxy on %s: RSS moved from %d to %d KiB over %d samples, bound %d KiB", nd.name, lo[nd.name], hi[nd.name], n[nd.name], boundKiB)
		}
	}
	return strings.Join(out, ", ")
}

// ruleset lists, with handles, what the proxy under test holds in the node's
// namespace: svcproxy's table, kube-proxy's nftables table, or (iptables
// mode) the whole ruleset that iptables-nft writes. One normalised line per
// rule, chain, set and element line.
func (c *cluster) ruleset(n *node) ([]string, error) {
	if c.proxyKind == "kube-proxy-iptables" {
		out, err := netns.Exec(n.netns, "nft", "-a", "list", "ruleset")
		if err != nil {
			return nil, err
		}
		return readback.RulesetLines(out), nil
	}
	// The proxy's table of every family of the cluster; each line names its
	// table's family, so that a rule lost in one is not hidden by the same
	// rule in the other.
	table := "svcproxy"
	if c.proxyKind == "kube-proxy-nftables" {
		table = "kube-proxy"
	}
	var lines []string
	for _, fam := range c.family.pick("ip", "ip6") {
		out, err := netns.Exec(n.netns, "nft", "-a", "list", "table", fam, table)
		if err != nil {
			return nil, err
		}
		for _, l := range readback.RulesetLines(out) {
			lines = append(lines, fam+" "+l)
		}
	}
	return lines, nil
}
