//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// Where kube-proxy's two modes differ, svcproxy follows iptables mode (issue
// 8): the scenarios ask here what the proxy under test should do.

// localhostNodePort is what a connection from a node to 127.0.0.1:<nodePort>
// gets: iptables mode serves it (route_localnet and a masquerade for the
// martian source); nftables mode does not implement localhost NodePorts,
// and nothing listens there.
func localhostNodePort(proxy string) string {
	if proxy == "kube-proxy-nftables" {
		return refused
	}
	return answered
}

// path is one way to a Service: from whom, to which address, and what must
// happen (want: answered, refused or dropped; for answered, by whom).
type path struct {
	name string
	from caller
	addr string // host:port
	want string
	by   string // the pod that must answer ("" any)
}

// check tries p until its outcome is the wanted one, within a bound, and
// records the outcome. An attempt that is answered when it should not be
// fails at once; negative outcomes must hold for two attempts in a row
// (each scenario first proves, through a positive path on the same node,
// that the proxy there has programmed the Service, so a drop is the
// proxy's doing, not a rule still missing).
func (p path) check(t *testing.T, r *result) {
	t.Helper()
	timeout := 2 * time.Second
	var last string
	streak := 0
	err := poll.Until(ctxFor(t, 60*time.Second), 45*time.Second, 100*time.Millisecond, func() (bool, string) {
		got, err := p.from.who(p.addr, timeout)
		out := outcomeOf(err)
		last = out
		if out == answered {
			last = answered + " by " + got
		}
		if p.want != answered && out == answered {
			return true, "" // judged below: a negative path was answered
		}
		if out != p.want || (p.by != "" && got != p.by) {
			streak = 0
			return false, fmt.Sprintf("%s: %s", last, errString(err))
		}
		streak++
		return p.want == answered || streak >= 2, last
	})
	r.metric(t, "outcome", "%s", last)
	if err != nil || !strings.HasPrefix(last, p.want) {
		t.Errorf("%s -> %s: want %s%s, got %s (%v)", p.from.name, p.addr, p.want, byWhom(p.by), last, err)
		logRulesFor(t, p.addr)
	}
}

// logRulesFor logs every node's rules that mention addr's host, so that a
// failure report shows what the proxy programmed for it.
func logRulesFor(t *testing.T, addr string) {
	t.Helper()
	host, _, _ := net.SplitHostPort(addr)
	for _, n := range theCluster.nodes {
		ct, _ := netns.Exec(n.netns, "conntrack", "-L", "-d", host)
		t.Logf("rules of %s mentioning %s:\n%s\nconntrack entries to it:\n%s", n.name, host, grepLines(theCluster.rules(n), host), ct)
	}
}

func byWhom(pod string) string {
	if pod == "" {
		return ""
	}
	return " by " + pod
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// runPaths runs each path as a subtest with its own matrix row.
func runPaths(t *testing.T, paths []path) {
	t.Helper()
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			r := track(t)
			p.check(t, r)
		})
	}
}

func hostPort(ip string, port int32) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }
