//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/poll"
)

// Where kube-proxy's two modes differ, svcproxy follows iptables mode (issue
// 8): the scenarios ask here what the proxy under test should do.

// localhostNodePort is what a connection from a node to its loopback
// address and a NodePort gets: over IPv4 (127.0.0.1) iptables mode serves
// it (route_localnet and a masquerade for the martian source); nftables
// mode does not implement localhost NodePorts, and nothing listens there.
// Over IPv6 (::1) no proxy serves it: IPv6 has no route_localnet, iptables
// mode excludes ::1 from its NodePort rules, and svcproxy never captures
// ::1 (docs/ipv6.md).
func localhostNodePort(proxy string, f corev1.IPFamily) string {
	if proxy == "kube-proxy-nftables" || f == corev1.IPv6Protocol {
		return refused
	}
	return answered
}

// udpNodePortWithoutEndpoints is what a client that keeps sending on one UDP
// socket to a NodePort gets once the Service's last endpoint has gone. svcproxy
// deletes the flow's conntrack entry towards the deleted pod, so the next
// datagram is rejected with ICMP port unreachable. Both kube-proxy modes
// (v1.37.2) keep that entry while the Service has no endpoint and delete it
// only when one comes: the datagrams follow it to the deleted pod's address
// and nothing answers (docs/e2e.md).
func udpNodePortWithoutEndpoints(proxy string) string {
	if proxy == "svcproxy" {
		return refused
	}
	return dropped
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
	r.metric(t, "outcome", "%s", p.try(t))
}

// try is check without the record: it returns the last outcome.
func (p path) try(t *testing.T) string {
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
	if err != nil || !strings.HasPrefix(last, p.want) {
		t.Errorf("%s -> %s: want %s%s, got %s (%v)", p.from.name, p.addr, p.want, byWhom(p.by), last, err)
		logRulesFor(t, p.addr)
	}
	return last
}

// logRulesFor logs every node's rules that mention addr's host, so that a
// failure report shows what the proxy programmed for it.
func logRulesFor(t *testing.T, addr string) {
	t.Helper()
	host, _, _ := net.SplitHostPort(addr)
	for _, n := range theCluster.nodes {
		ct, _ := netns.Exec(n.netns, append([]string{"conntrack", "-L", "-d", host}, conntrackFamily(host)...)...)
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

// refusalBound is how fast a new TCP connection to a Service without
// endpoints must be refused. svcproxy answers the SYN with a TCP reset,
// kube-proxy with ICMP port unreachable. Over IPv6 (seen with both
// kube-proxy modes, and in two bare namespaces with an nft reject rule, so
// the kernel's doing, not the proxy's) the connecting socket only takes
// the ICMPv6 error for the retransmitted SYN, one second later: the first
// one arrives while connect() still holds the socket and is kept as a soft
// error. A reset is queued to the socket's backlog instead, and is not
// lost.
func refusalBound(proxy string, ipv6 bool) time.Duration {
	if ipv6 && proxy != "svcproxy" {
		return 1500 * time.Millisecond
	}
	return time.Second
}

// changeAfterOutageBound is how soon after its write an EndpointSlice change
// made right after the API server's return must be served (scenario 9).
// svcproxy retries refused watches itself every 250 ms
// (endpoints.RetryingListerWatcher): within 1 s. Both kube-proxy modes
// (v1.37.2) keep client-go's reflector backoff, which after a minute of
// refusals waits [30, 60) s before the next watch, and one more round when
// that watch meets the new API server's cold RBAC cache ("forbidden"):
// 2.1-14.7 s in IPv4 (docs/e2e.md, Outage and churn), 61-67 s in ipv6 and
// dual runs of 2026-12-01. Bounded by the wait itself (2 min), in every
// family.
func changeAfterOutageBound(proxy string) time.Duration {
	if proxy == "svcproxy" {
		return time.Second
	}
	return 2 * time.Minute
}
