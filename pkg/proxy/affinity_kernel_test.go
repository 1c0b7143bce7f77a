package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// When an endpoint of a ClientIP-affinity Service goes, the clients that stuck to it
// spread over the endpoints left (and stick there), and every other client keeps its
// endpoint. The removed pod still answers here, so a client sent to it by a stale
// affinity entry would show.
func TestKernelAffinityEndpointRemoved(t *testing.T) {
	e := newKenv(t)
	e.tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort, dnsPort))
	e.tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod2"), readyEP("pod3")))
	e.sync(t)

	// Clients until two endpoints have some: which one each gets is random.
	stuck := map[*netnstest.NS]string{}
	clients := map[string][]*netnstest.NS{}
	for i := 0; len(clients) < 2 || len(stuck) < 6; i++ {
		if i == 16 {
			t.Fatalf("16 clients all stuck to %v", clients)
		}
		c := e.w.AddPod(fmt.Sprintf("c%d", i), fmt.Sprintf("10.244.3.%d", 10+i))
		pod := stickTo(t, c, 5)
		stuck[c] = pod
		clients[pod] = append(clients[pod], c)
	}
	var gone string
	for pod := range clients {
		gone = pod
		break
	}
	var left []epSpec
	for _, pod := range []string{"pod1", "pod2", "pod3"} {
		if pod != gone {
			left = append(left, readyEP(pod))
		}
	}
	e.tr.OnEndpointSliceUpdate(nil, testSlice("sticky", left...))
	e.sync(t)

	for c, before := range stuck {
		after := stickTo(t, c, 5)
		switch {
		case before == gone && after == gone:
			t.Errorf("client %s still sent to removed endpoint %s", c.Name, gone)
		case before != gone && after != before:
			t.Errorf("client %s moved from %s to %s when %s went", c.Name, before, after, gone)
		}
	}
}

// stickTo sends n requests from c to the sticky Service and returns the one endpoint
// that answered them all.
func stickTo(t *testing.T, c *netnstest.NS, n int) string {
	t.Helper()
	got := map[string]int{}
	for i := 0; i < n; i++ {
		body, err := c.Get("10.96.0.11:80", 2*time.Second)
		if err != nil {
			t.Fatalf("%s: request %d: %v", c.Name, i, err)
		}
		got[body]++
	}
	if len(got) != 1 {
		t.Fatalf("%s is not sticky: answers from %v", c.Name, got)
	}
	return firstKey(got)
}

// The node's own connections are recorded too (the output hook), so the node sticks
// like a pod does.
func TestKernelAffinityFromTheNode(t *testing.T) {
	e := newKenv(t)
	e.tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort))
	e.tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod2"), readyEP("pod3")))
	e.sync(t)
	stickTo(t, e.w.Node, 10)
}
