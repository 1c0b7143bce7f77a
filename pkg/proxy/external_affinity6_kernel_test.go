package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelNodePortAffinity6 is TestKernelNodePortAffinity in the ip6 table:
// outside clients with IPv6 source addresses reach an IPv6 node address's
// NodePort; each client keeps its endpoint, clients spread (Cluster: every
// endpoint; Local: only this node's, the client's address kept), and the sweeper
// deletes the entries of an endpoint that goes, so only its clients move.
func TestKernelNodePortAffinity6(t *testing.T) {
	e := newKenv6(t)
	const node = "fd00:172:18::2"
	out := addOutside6(t, e, "aff6", node, "fd00:172:18::1")
	var clients []string
	for i := 0; i < 12; i++ {
		a := fmt.Sprintf("fd00:172:18::%x", 0x10+i)
		out.MustRun(t, "ip", "-6", "addr", "add", a+"/64", "dev", "eth0", "nodad")
		clients = append(clients, a)
	}
	cluster := stickyExternal(testService6("cluster", "fd00:10:96::30", false, httpPort, dnsPort))
	cluster.Spec.Type, cluster.Spec.Ports[0].NodePort, cluster.Spec.Ports[1].NodePort = v1.ServiceTypeNodePort, 30080, 30081
	local := stickyExternal(testService6("local", "fd00:10:96::31", false, httpPort, dnsPort))
	local.Spec.Type, local.Spec.Ports[0].NodePort, local.Spec.Ports[1].NodePort = v1.ServiceTypeNodePort, 30090, 30091
	local.Spec.ExternalTrafficPolicy, local.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
	e.tr.OnServiceAdd(cluster)
	e.tr.OnServiceAdd(local)
	nodes := map[string]string{"pod1": "node-a", "pod2": "node-a", "pod3": "node-b"}
	e.tr.OnEndpointSliceAdd(testSlice6("cluster", nodes, "pod1", "pod2", "pod3"))
	e.tr.OnEndpointSliceAdd(testSlice6("local", nodes, "pod1", "pod2", "pod3"))
	e.sync(t)
	np := func(port int) string { return ip6Port(node, port) }

	stuck := map[string]string{}
	t.Run("Cluster: each outside client sticks, clients spread", func(t *testing.T) {
		for _, c := range clients {
			stuck[c] = stickFrom(t, out, c, np(30080), 5)
		}
		if n := len(distinct(stuck)); n < 2 {
			t.Fatalf("%d clients all went to one endpoint: %v", len(clients), stuck)
		}
	})
	t.Run("Cluster: the node sticks too", func(t *testing.T) {
		stickTo2(t, e.w.Node, np(30080), 10)
	})
	t.Run("Local: each outside client sticks to an endpoint of this node, its address kept", func(t *testing.T) {
		got := map[string]string{}
		for _, c := range clients {
			got[c] = stickFrom(t, out, c, np(30090), 5)
			if got[c] == "pod3" {
				t.Fatalf("client %s sent to pod3 on another node", c)
			}
			if ip, err := out.GetFrom(c, np(30090), "/clientip", 2*time.Second); err != nil || ip != c {
				t.Fatalf("client %s: endpoint saw %q (%v), want the client's own address", c, ip, err)
			}
		}
		if n := len(distinct(got)); n < 2 {
			t.Fatalf("%d clients all went to one local endpoint: %v", len(clients), got)
		}
	})
	t.Run("Local: a pod sticks to any endpoint", func(t *testing.T) {
		stickTo2(t, e.client, np(30090), 10)
	})
	t.Run("kernel listing equals render and holds the clients' entries", func(t *testing.T) {
		listing := e.w.Node.MustRun(t, "nft", "list", "table", "ip6", TableName)
		if got, want := nft.NormalizeListing(listing), e.p.Desired().Text(); got != want {
			t.Fatalf("kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
		}
		if !strings.Contains(listing, "map "+nodePortAffinityMap(30080)) || !strings.Contains(listing, clients[0]+" . "+node+" . tcp . 30080") {
			t.Fatalf("no NodePort affinity entries in the listing:\n%s", listing)
		}
		if l := e.w.Node.MustRun(t, "nft", "list", "tables"); strings.Contains(l, "table ip "+TableName) {
			t.Fatalf("an IPv6 proxy created an ip table: %s", l)
		}
		// No nft -f round trip: nft 1.0.6 cannot load an ip6 affinity update (see
		// TestKernelIP6ListingLoadsBackWithNft).
	})
	t.Run("an endpoint goes: its entries are swept, its clients move, the others stay", func(t *testing.T) {
		var gone string
		for _, pod := range stuck {
			gone = pod
			break
		}
		amap := nodePortAffinityMap(30080)
		entry := " : " + pod6IPs[gone] + " . 80"
		if l := e.w.Node.MustRun(t, "nft", "list", "map", "ip6", TableName, amap); !strings.Contains(l, entry) {
			t.Fatalf("no entry for %s in %s to start from:\n%s", gone, amap, l)
		}
		var left []string
		for _, pod := range []string{"pod1", "pod2", "pod3"} {
			if pod != gone {
				left = append(left, pod)
			}
		}
		e.tr.OnEndpointSliceUpdate(nil, testSlice6("cluster", nodes, left...))
		e.sync(t)
		if l := e.w.Node.MustRun(t, "nft", "list", "map", "ip6", TableName, amap); strings.Contains(l, entry) {
			t.Fatalf("%s still sends clients to the removed %s:\n%s", amap, gone, l)
		}
		for _, c := range clients {
			after := stickFrom(t, out, c, np(30080), 5)
			switch before := stuck[c]; {
			case before == gone && after == gone:
				t.Errorf("client %s still sent to removed endpoint %s", c, gone)
			case before != gone && after != before:
				t.Errorf("client %s moved from %s to %s when %s went", c, before, after, gone)
			}
		}
	})
}
