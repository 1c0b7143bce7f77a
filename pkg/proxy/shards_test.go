package proxy

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestShardsExistOnlyWhileUsed: the table holds the endpoints, hairpin and affinity
// shards its Services use, and nothing else; a shard appears with its first
// element (with the hairpin chain and dispatch element naming it) and goes with
// its last, while an endpoint replaced within shards that exist changes elements
// only. The affinity-recording hook chains exist only while a port is sticky.
func TestShardsExistOnlyWhileUsed(t *testing.T) {
	k := nft.NewFake()
	rec := &recordingKernel{Kernel: k}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	p := New(Config{Tracker: tr, Kernel: rec})
	shardsInKernel := func() []string {
		t.Helper()
		v, err := k.Read(t.Context(), nft.FamilyIPv4, TableName)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for name := range v.Sets {
			if name == mapHairpinShards {
				continue
			}
			if strings.HasPrefix(name, mapEndpoints+"-") || strings.HasPrefix(name, setHairpin+"-") || strings.HasPrefix(name, mapAffinity+"-") {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	sync := func(what string) *nft.Tx {
		t.Helper()
		rec.txs = nil
		if err := p.Sync(t.Context()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(rec.txs) != 1 {
			t.Fatalf("%s: %d transactions, want 1", what, len(rec.txs))
		}
		return rec.txs[0]
	}

	if err := p.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := shardsInKernel(); len(got) != 0 {
		t.Fatalf("no Services, shards %v", got)
	}
	onDemandChains := func() []string {
		t.Helper()
		var out []string
		for _, name := range slices.Sorted(maps.Keys(k.Ruleset(nft.FamilyIPv4, TableName).Chains)) {
			if strings.HasPrefix(name, chainHairpin) || name == chainStickyPrerouting || name == chainStickyOutput {
				out = append(out, name)
			}
		}
		return out
	}
	if got := onDemandChains(); len(got) != 0 {
		t.Fatalf("no Services, on-demand chains %v", got)
	}

	addWeb(tr, "web", "10.96.0.10", "pod1", "pod2") // ClusterIP shard 10, pods in 2 and 3
	sync("first Service")
	if got, want := shardsInKernel(), []string{"endpoints-10", "hairpin-02", "hairpin-03"}; !slices.Equal(got, want) {
		t.Fatalf("shards %v, want %v", got, want)
	}
	if got, want := onDemandChains(), []string{"masquerade-hairpin-02", "masquerade-hairpin-03"}; !slices.Equal(got, want) {
		t.Fatalf("on-demand chains %v, want %v", got, want)
	}

	tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1"), readyEP("pod3"))) // 3 empties, 4 appears
	tx := sync("endpoint moved to a new shard")
	if !slices.Equal(setNames(tx.AddSets), []string{"hairpin-04"}) || !slices.Equal(tx.DelSets, []string{"hairpin-03"}) {
		t.Fatalf("added sets %v, deleted %v; want hairpin-04 and hairpin-03", setNames(tx.AddSets), tx.DelSets)
	}
	if got := routeMasq(t, k, "10.96.0.10", podIPs["pod3"]); !got {
		t.Fatal("hairpin traffic of pod3 is not masqueraded")
	}
	// Every sync that changed something refreshes the on-demand chains: while no
	// shard filled or emptied and no port is sticky, that costs nothing (building
	// and comparing the hairpin chains was a fifth of a one-endpoint sync's bytes).
	if n := testing.AllocsPerRun(20, func() { refreshOnDemand(p.desired) }); n != 0 {
		t.Errorf("refreshOnDemand of unchanged shards allocates %v times", n)
	}

	tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod1"), readyEP("pod4"))) // pod3's shard-mate
	tx = sync("endpoint replaced within its shard")
	if len(tx.AddSets)+len(tx.DelSets)+len(tx.NewChains)+len(tx.Chains)+len(tx.DelChains) != 0 || len(tx.Added()) == 0 {
		t.Fatalf("not element-only: sets +%v -%v, chains new %d, rewritten %d, deleted %v",
			setNames(tx.AddSets), tx.DelSets, len(tx.NewChains), len(tx.Chains), tx.DelChains)
	}

	tr.OnServiceAdd(testService("sticky", "10.96.0.11", true, httpPort))
	tr.OnEndpointSliceAdd(testSlice("sticky", readyEP("pod1")))
	sync("sticky Service")
	if got, want := shardsInKernel(), []string{"affinity-11", "endpoints-10", "endpoints-11", "hairpin-02", "hairpin-04"}; !slices.Equal(got, want) {
		t.Fatalf("shards %v, want %v", got, want)
	}
	if got, want := onDemandChains(), []string{"masquerade-hairpin-02", "masquerade-hairpin-04", chainStickyOutput, chainStickyPrerouting}; !slices.Equal(got, want) {
		t.Fatalf("on-demand chains %v, want %v", got, want)
	}

	tr.OnServiceDelete(testService("web", "10.96.0.10", false, httpPort))
	tr.OnServiceDelete(testService("sticky", "10.96.0.11", true, httpPort))
	sync("all Services deleted")
	if got := shardsInKernel(); len(got) != 0 {
		t.Fatalf("no Services, shards %v", got)
	}
	if got := onDemandChains(); len(got) != 0 {
		t.Fatalf("no Services, on-demand chains %v", got)
	}
	if n := k.Ruleset(nft.FamilyIPv4, TableName).Count(mapHairpinShards); n != 0 {
		t.Fatalf("no Services, %d elements in %s", n, mapHairpinShards)
	}
}

func setNames(sets []*nft.Set) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Name)
	}
	return out
}

// routeMasq reports whether a connection from pod to the ClusterIP's port 80 that
// lands on pod itself is masqueraded.
func routeMasq(t *testing.T, k *nft.Fake, clusterIP, pod string) bool {
	t.Helper()
	out, err := nft.Trace(k.Ruleset(nft.FamilyIPv4, TableName), nft.Packet{Src: netip.MustParseAddr(pod), Dst: netip.MustParseAddr(clusterIP), Proto: nft.ProtoTCP, DPort: 80}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if o.DNAT.Addr() == netip.MustParseAddr(pod) && o.Masquerade {
			return true
		}
	}
	return false
}
