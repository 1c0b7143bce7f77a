package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// affinityEntry is what the kernel's record chain leaves in the affinity map for a
// client of the sticky test Service (10.96.0.11) that went to pod.
func affinityEntry(clientIP string, proto uint8, port uint16, pod string) nft.Element {
	return nft.Element{Set: affinityMap(netip.MustParseAddr("10.96.0.11")),
		Key:  []nft.Datum{nft.IP(netip.MustParseAddr(clientIP)), nft.IP(netip.MustParseAddr("10.96.0.11")), nft.Proto(proto), nft.Port(port)},
		Data: []nft.Datum{nft.IP(netip.MustParseAddr(podIPs[pod])), nft.Port(port)}}
}

// clientsOf lists the clients (first key part) of the affinity map's entries.
func clientsOf(t *testing.T, k *nft.Fake) []string {
	t.Helper()
	var set *nft.Set
	for _, s := range Sets(endpoints.IPv4) {
		if s.Name == affinityMap(netip.MustParseAddr("10.96.0.11")) {
			set = s
		}
	}
	if v, err := k.Read(t.Context(), nft.FamilyIPv4, TableName); err != nil || v.Sets[set.Name] == nil {
		return nil // the shard is not in the table (nor its entries)
	}
	entries, err := k.DynamicElements(t.Context(), nft.FamilyIPv4, TableName, set)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s->%s", e.Key[0], e.Data[0]))
	}
	slices.Sort(out)
	return out
}

func TestAffinitySweep(t *testing.T) {
	sticky := func(pods ...string) (*v1.Service, []epSpec) {
		var eps []epSpec
		for _, p := range pods {
			eps = append(eps, readyEP(p))
		}
		return testService("sticky", "10.96.0.11", true, httpPort, dnsPort), eps
	}
	// Three clients: one on each pod, the third over UDP.
	seed := []nft.Element{
		affinityEntry("10.244.2.1", nft.ProtoTCP, 80, "pod1"),
		affinityEntry("10.244.2.2", nft.ProtoTCP, 80, "pod2"),
		affinityEntry("10.244.2.3", nft.ProtoUDP, 53, "pod3"),
	}
	tests := []struct {
		name string
		// change is applied once the entries exist, then one sync runs (two with
		// nextSync: the second changes nothing, only a pending sweep can run).
		change       func(tr *endpoints.Tracker, k *nft.Fake)
		nextSync     bool
		want         []string
		wantDeleted  float64
		destroyFails func(call int) error
	}{
		{name: "an unrelated change keeps every entry",
			change:   func(tr *endpoints.Tracker, _ *nft.Fake) { addWeb(tr, "web", "10.96.0.10", "pod1") },
			nextSync: true,
			want:     []string{"10.244.2.1->10.244.1.2", "10.244.2.2->10.244.1.3", "10.244.2.3->10.244.1.4"}},
		{name: "endpoint removed: only its entries go",
			change: func(tr *endpoints.Tracker, _ *nft.Fake) {
				tr.OnEndpointSliceUpdate(nil, testSlice("sticky", readyEP("pod1"), readyEP("pod3")))
			},
			want: []string{"10.244.2.1->10.244.1.2", "10.244.2.3->10.244.1.4"}, wantDeleted: 1},
		{name: "endpoint no longer ready",
			change: func(tr *endpoints.Tracker, _ *nft.Fake) {
				notReady := readyEP("pod1")
				f := false
				notReady.ready = &f
				tr.OnEndpointSliceUpdate(nil, testSlice("sticky", notReady, readyEP("pod2"), readyEP("pod3")))
			},
			want: []string{"10.244.2.2->10.244.1.3", "10.244.2.3->10.244.1.4"}, wantDeleted: 1},
		{name: "affinity switched off",
			change: func(tr *endpoints.Tracker, _ *nft.Fake) {
				tr.OnServiceUpdate(nil, testService("sticky", "10.96.0.11", false, httpPort, dnsPort))
			},
			// The shard's map went with its last sticky port, entries included: nothing to sweep.
			want: nil, wantDeleted: 0},
		{name: "Service deleted",
			change: func(tr *endpoints.Tracker, _ *nft.Fake) {
				svc, _ := sticky()
				tr.OnServiceDelete(svc)
			},
			want: nil, wantDeleted: 0}, // as above
		{name: "an entry that expired before the delete: read again and retry",
			change: func(tr *endpoints.Tracker, _ *nft.Fake) {
				tr.OnEndpointSliceUpdate(nil, testSlice("sticky", readyEP("pod1"), readyEP("pod3")))
			},
			destroyFails: func(call int) error {
				if call == 1 {
					return fmt.Errorf("fake: %w", unix.ENOENT)
				}
				return nil
			},
			want: []string{"10.244.2.1->10.244.1.2", "10.244.2.3->10.244.1.4"}, wantDeleted: 1},
		{name: "a refused sweep does not fail the sync and is retried on the next",
			change: func(tr *endpoints.Tracker, _ *nft.Fake) {
				tr.OnEndpointSliceUpdate(nil, testSlice("sticky", readyEP("pod1"), readyEP("pod3")))
			},
			destroyFails: func(call int) error {
				if call == 1 {
					return errors.New("fake: refused")
				}
				return nil
			},
			nextSync: true,
			want:     []string{"10.244.2.1->10.244.1.2", "10.244.2.3->10.244.1.4"}, wantDeleted: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := nft.NewFake()
			tr := endpoints.NewTracker(endpoints.TrackerOptions{})
			m := NewMetrics(nil)
			p := New(Config{Tracker: tr, Kernel: k, Metrics: m})
			svc, eps := sticky("pod1", "pod2", "pod3")
			tr.OnServiceAdd(svc)
			tr.OnEndpointSliceAdd(testSlice("sticky", eps...))
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			for _, e := range seed {
				k.AddDynamic(nft.FamilyIPv4, TableName, e)
			}
			calls := 0
			if tc.destroyFails != nil {
				k.DestroyFails = func([]nft.Element) error { calls++; return tc.destroyFails(calls) }
			}
			tc.change(tr, k)
			if err := p.Sync(t.Context()); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if tc.nextSync {
				if got := clientsOf(t, k); len(got) != 3 {
					t.Fatalf("the refused sweep changed the map: %v", got)
				}
				if err := p.Sync(t.Context()); err != nil {
					t.Fatalf("second sync: %v", err)
				}
			}
			if got := clientsOf(t, k); !slices.Equal(got, tc.want) {
				t.Fatalf("affinity entries %v, want %v", got, tc.want)
			}
			if got := testutil.ToFloat64(m.AffinityEntriesDeleted); got != tc.wantDeleted {
				t.Fatalf("deleted entries metric %v, want %v", got, tc.wantDeleted)
			}
		})
	}
}

// A restarted svcproxy sweeps what an earlier run (or traffic while none ran) left
// for endpoints that are gone, once, on its first sync.
func TestAffinitySweepAtStart(t *testing.T) {
	k := nft.NewFake()
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort, dnsPort))
	tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"), readyEP("pod2")))
	if err := New(Config{Tracker: tr, Kernel: k}).Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	k.AddDynamic(nft.FamilyIPv4, TableName, affinityEntry("10.244.2.1", nft.ProtoTCP, 80, "pod1"))
	k.AddDynamic(nft.FamilyIPv4, TableName, affinityEntry("10.244.2.2", nft.ProtoTCP, 80, "pod2"))

	tr2 := endpoints.NewTracker(endpoints.TrackerOptions{})
	tr2.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort, dnsPort))
	tr2.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1"))) // pod2 went while no svcproxy ran
	m := NewMetrics(nil)
	if err := New(Config{Tracker: tr2, Kernel: k, Metrics: m}).Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := clientsOf(t, k), []string{"10.244.2.1->10.244.1.2"}; !slices.Equal(got, want) {
		t.Fatalf("after a restart the affinity map holds %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(m.AffinityEntriesDeleted); got != 1 {
		t.Fatalf("deleted entries metric %v, want 1", got)
	}
}
