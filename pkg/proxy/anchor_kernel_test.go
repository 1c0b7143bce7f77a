package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// keepAlive is one HTTP/1.1 connection asked again and again, as the soak's
// long-lived callers ask theirs.
type keepAlive struct {
	from string
	c    net.Conn
	r    *bufio.Reader
}

func dialKeepAlive(t *testing.T, ns *netnstest.NS, from, addr string) *keepAlive {
	t.Helper()
	c, err := ns.Dial("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", from, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &keepAlive{from: from, c: c, r: bufio.NewReader(c)}
}

// ask sends one request on the connection and returns who answered.
func (k *keepAlive) ask(timeout time.Duration) (string, error) {
	_ = k.c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(k.c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// askHeld asks each connection n times, 200 ms apart, while the table is held, and
// returns how many answers each got before its first failure, and that failure.
func askHeld(conns []*keepAlive, n int) (answered map[string]int, failed map[string]error) {
	answered, failed = map[string]int{}, map[string]error{}
	for i := range n {
		for _, k := range conns {
			if failed[k.from] != nil {
				continue
			}
			if who, err := k.ask(time.Second); err != nil || who != "pod1" {
				failed[k.from] = fmt.Errorf("request %d: answer %q, %v", i+1, who, err)
				continue
			}
			answered[k.from]++
		}
		time.Sleep(200 * time.Millisecond)
	}
	return answered, failed
}

// TestKernelEstablishedSurvivesHeldTable: the soak's held-table fault (issue 23).
// Another program swaps svcproxy's table for an empty one it owns; new connections
// to the ClusterIP fail until it lets go, but connections established before must go
// on being answered, from a pod (prerouting/postrouting) and from the node itself
// (output/input): conntrack holds their translation. Without the anchor table
// (deleted first, as before it existed) nothing else in the namespace uses conntrack
// or NAT, the kernel unregisters both, and the same requests time out: the control
// half, which shows the cause. In each family.
func TestKernelEstablishedSurvivesHeldTable(t *testing.T) {
	for _, tc := range []struct {
		family    nft.Family
		env       func(*testing.T) *kenv
		clusterIP string
		addWeb    func(e *kenv)
	}{
		{nft.FamilyIPv4, newKenv, "10.96.0.10:80", func(e *kenv) { addWeb(e.tr, "web", "10.96.0.10", "pod1") }},
		{nft.FamilyIPv6, newKenv6, "[fd00:10:96::10]:80", func(e *kenv) {
			e.tr.OnServiceAdd(testService6("web", "fd00:10:96::10", false, httpPort))
			e.tr.OnEndpointSliceAdd(testSlice6("web", nil, "pod1"))
		}},
	} {
		t.Run(tc.family.String(), func(t *testing.T) {
			e := tc.env(t)
			tc.addWeb(e)
			e.sync(t)
			fam := tc.family.String()
			want := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", fam, AnchorTableName))
			if got := AnchorRuleset(tc.family).Text(); want != got {
				t.Fatalf("anchor table in the kernel differs from its render\n--- kernel\n%s\n--- render\n%s", want, got)
			}
			run := func(t *testing.T, anchor bool) (answered map[string]int, failed map[string]error) {
				if !anchor {
					e.w.Node.MustRun(t, "nft", "delete", "table", fam, AnchorTableName)
				}
				conns := []*keepAlive{
					dialKeepAlive(t, e.client, "pod", tc.clusterIP),
					dialKeepAlive(t, e.w.Node, "node", tc.clusterIP),
				}
				for _, k := range conns {
					for i := range 5 {
						if who, err := k.ask(time.Second); err != nil || who != "pod1" {
							t.Fatalf("%s: request %d before the table was taken: %q, %v", k.from, i+1, who, err)
						}
					}
				}
				release := holdTableOf(t, e.w.Node, tc.family)
				if body, err := e.client.Get(tc.clusterIP, 500*time.Millisecond); err == nil {
					t.Fatalf("a new connection was answered (%q) while our table is held", body)
				}
				answered, failed = askHeld(conns, heldRequests)
				release()
				// The kernel deleted the held table with its socket: write ours again.
				e.p.RequestResync()
				e.sync(t)
				poll.Eventually(t, 10*time.Second, "the Service after the release", func() (bool, string) {
					body, err := e.client.Get(tc.clusterIP, time.Second)
					return err == nil && body == "pod1", fmt.Sprintf("answer %q, %v", body, err)
				})
				return answered, failed
			}

			t.Run("without the anchor table", func(t *testing.T) {
				answered, failed := run(t, false)
				for _, from := range []string{"pod", "node"} {
					t.Logf("%s: 5 of 5 requests answered before the hold, %d of %d during it; %v", from, answered[from], heldRequests, failed[from])
					if failed[from] == nil {
						t.Errorf("%s: the established connection was answered %d times without the anchor table: "+
							"this kernel keeps conntrack and NAT without users, and the anchor is not what keeps it working", from, answered[from])
					}
				}
			})
			t.Run("with the anchor table", func(t *testing.T) {
				// Written again by the last sync's resync.
				if got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", fam, AnchorTableName)); got != want {
					t.Fatalf("anchor table after the resync:\n%s", got)
				}
				answered, failed := run(t, true)
				for _, from := range []string{"pod", "node"} {
					t.Logf("%s: 5 of 5 requests answered before the hold, %d of %d during it", from, answered[from], heldRequests)
					if failed[from] != nil {
						t.Errorf("%s: established connection broken while our table was held: %v", from, failed[from])
					}
				}
			})
		})
	}
}

// heldRequests is how many requests each established connection makes while our
// table is held, 200 ms apart.
const heldRequests = 10

// TestKernelAnchorIsRepairedAtOnce: another program deleting the anchor table, or
// changing it, is repaired as the main table is (the notifications name it), not
// at the next resync an hour later; our own writes of it are not foreign.
func TestKernelAnchorIsRepairedAtOnce(t *testing.T) {
	e := newKenv(t)
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	m := NewMetrics(nil)
	watchingProxy(t, e, m)
	want := AnchorRuleset(nft.FamilyIPv4).Text()
	listing := func() (bool, string) {
		out, err := e.w.Node.Run("nft", "list", "table", "ip", AnchorTableName)
		if err != nil {
			return false, "(no table: " + err.Error() + ")"
		}
		got := nft.NormalizeListing(out)
		return got == want, got
	}
	poll.Eventually(t, 10*time.Second, "the anchor table", listing)
	for _, change := range []string{
		"delete table ip " + AnchorTableName,
		"delete chain ip " + AnchorTableName + " " + chainPostrouting,
		"flush chain ip " + AnchorTableName + " " + anchorChainConntrack,
		"add chain ip " + AnchorTableName + " intruder",
		"add rule ip " + AnchorTableName + " " + chainPrerouting + " counter drop",
	} {
		time.Sleep(1100 * time.Millisecond) // the repair interval: repaired at once, not when it ends
		e.w.Node.MustRun(t, "nft", change)
		start := time.Now()
		poll.Eventually(t, 3*time.Second, "the anchor table after: nft "+change, listing)
		t.Logf("nft %s: repaired in %v", change, time.Since(start).Round(time.Millisecond))
	}
}
