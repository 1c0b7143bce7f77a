package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelNodePortAffinity: ClientIP affinity on NodePorts with real traffic from
// outside clients (one namespace, a source address per client): each client keeps
// its endpoint, different clients spread; under Local only over this node's
// endpoints and with the client's address kept; the sweeper deletes the entries of
// an endpoint that goes, and only its clients move.
func TestKernelNodePortAffinity(t *testing.T) {
	e := newKenv(t)
	e.p.cfg.NodeName = "node-a"
	e.p.desired = NewRuleset(e.p.cfg.Options)
	out := addOutside(t, e, "aff", "172.18.0.2", "172.18.0.1")
	var clients []string
	for i := 0; i < 12; i++ {
		a := fmt.Sprintf("172.18.0.%d", 10+i)
		out.MustRun(t, "ip", "addr", "add", a+"/24", "dev", "eth0")
		clients = append(clients, a)
	}
	cluster := stickyExternal(externalService("cluster", "10.96.0.30", v1.ServiceTypeNodePort, 30080, false))
	local := stickyExternal(externalService("local", "10.96.0.31", v1.ServiceTypeNodePort, 30090, true))
	e.tr.OnServiceAdd(cluster)
	e.tr.OnServiceAdd(local)
	e.tr.OnEndpointSliceAdd(sliceOnNodes("cluster", map[string]string{"pod1": "node-a", "pod2": "node-a", "pod3": "node-b"}))
	e.tr.OnEndpointSliceAdd(sliceOnNodes("local", map[string]string{"pod1": "node-a", "pod2": "node-a", "pod3": "node-b"}))
	e.sync(t)

	stuck := map[string]string{}
	t.Run("Cluster: each outside client sticks, clients spread", func(t *testing.T) {
		for _, c := range clients {
			stuck[c] = stickFrom(t, out, c, "172.18.0.2:30080", 5)
		}
		if n := len(distinct(stuck)); n < 2 {
			t.Fatalf("%d clients all went to one endpoint: %v", len(clients), stuck)
		}
	})
	t.Run("Cluster: the node sticks too", func(t *testing.T) {
		stickTo2(t, e.w.Node, "172.18.0.2:30080", 10)
	})
	t.Run("Local: each outside client sticks to an endpoint of this node, its address kept", func(t *testing.T) {
		got := map[string]string{}
		for _, c := range clients {
			got[c] = stickFrom(t, out, c, "172.18.0.2:30090", 5)
			if got[c] == "pod3" {
				t.Fatalf("client %s sent to pod3 on another node", c)
			}
			if ip, err := out.GetFrom(c, "172.18.0.2:30090", "/clientip", 2*time.Second); err != nil || ip != c {
				t.Fatalf("client %s: endpoint saw %q (%v), want the client's own address", c, ip, err)
			}
		}
		if n := len(distinct(got)); n < 2 {
			t.Fatalf("%d clients all went to one local endpoint: %v", len(clients), got)
		}
	})
	t.Run("Local: a pod sticks to any endpoint", func(t *testing.T) {
		stickTo2(t, e.client, "172.18.0.2:30090", 10)
	})
	t.Run("kernel listing equals render and loads back with nft", func(t *testing.T) {
		listing := e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)
		if got, want := nft.NormalizeListing(listing), e.p.Desired().Text(); got != want {
			t.Fatalf("kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
		}
		if !strings.Contains(listing, "map "+nodePortAffinityMap(30080)) || !strings.Contains(listing, "172.18.0.10 . 172.18.0.2 . tcp . 30080") {
			t.Fatalf("no NodePort affinity entries in the listing:\n%s", listing)
		}
		file := filepath.Join(t.TempDir(), "svcproxy.nft")
		if err := os.WriteFile(file, []byte(listing), 0o644); err != nil {
			t.Fatal(err)
		}
		// Into an empty namespace: nft 1.0.6 cannot check a file against a table
		// that holds these maps' entries ("conflicting protocols specified: ip vs.
		// th" while it reads the kernel's table), though it loads it.
		netnstest.New(t, "reload").MustRun(t, "nft", "-f", file)
	})
	t.Run("an endpoint goes: its entries are swept, its clients move, the others stay", func(t *testing.T) {
		var gone string
		for _, pod := range stuck {
			gone = pod
			break
		}
		amap := nodePortAffinityMap(30080)
		if l := e.w.Node.MustRun(t, "nft", "list", "map", "ip", TableName, amap); !strings.Contains(l, podIPs[gone]+" . 80") {
			t.Fatalf("no entry for %s in %s to start from:\n%s", gone, amap, l)
		}
		nodes := map[string]string{"pod1": "node-a", "pod2": "node-a", "pod3": "node-b"}
		delete(nodes, gone)
		e.tr.OnEndpointSliceUpdate(nil, sliceOnNodes("cluster", nodes))
		e.sync(t)
		if l := e.w.Node.MustRun(t, "nft", "list", "map", "ip", TableName, amap); strings.Contains(l, podIPs[gone]+" . 80") {
			t.Fatalf("%s still sends clients to the removed %s:\n%s", amap, gone, l)
		}
		for _, c := range clients {
			after := stickFrom(t, out, c, "172.18.0.2:30080", 5)
			switch before := stuck[c]; {
			case before == gone && after == gone:
				t.Errorf("client %s still sent to removed endpoint %s", c, gone)
			case before != gone && after != before:
				t.Errorf("client %s moved from %s to %s when %s went", c, before, after, gone)
			}
		}
	})
}

// stickyExternal gives s ClientIP affinity for 60 s.
func stickyExternal(s *v1.Service) *v1.Service {
	s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	return s
}

// stickFrom makes n requests from source address src in ns to addr, each on a new
// connection, and returns the one endpoint that answered them all.
func stickFrom(t *testing.T, ns *netnstest.NS, src, addr string, n int) string {
	t.Helper()
	got := map[string]int{}
	for i := 0; i < n; i++ {
		body, err := ns.GetFrom(src, addr, "/", 2*time.Second)
		if err != nil {
			t.Fatalf("%s: request %d to %s: %v", src, i, addr, err)
		}
		got[body]++
	}
	if len(got) != 1 {
		t.Fatalf("%s is not sticky on %s: answers from %v", src, addr, got)
	}
	return firstKey(got)
}

// stickTo2 is stickFrom from ns's own address.
func stickTo2(t *testing.T, ns *netnstest.NS, addr string, n int) string {
	t.Helper()
	got := answers(ns, addr, n, 2*time.Second)
	if len(got) != 1 || got[""] != 0 {
		t.Fatalf("%s is not sticky on %s: answers from %v", ns.Name, addr, got)
	}
	return firstKey(got)
}

// distinct is the set of values of m.
func distinct(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		out[v] = true
	}
	return out
}
