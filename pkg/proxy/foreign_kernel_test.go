package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// recordingKernel keeps every transaction the proxy applies.
type recordingKernel struct {
	nft.Kernel
	txs []*nft.Tx
}

func (r *recordingKernel) Apply(ctx context.Context, tx *nft.Tx) error {
	r.txs = append(r.txs, tx)
	return r.Kernel.Apply(ctx, tx)
}

// TestKernelForeignObjectsInOurTable: what other programs leave in our table (sets
// and maps of types we never use, chains, a rule with damaged user data) neither
// stops the next sync nor a restart: they are removed in place, in the transaction
// that also programs a new Service, without touching the served Service's elements.
func TestKernelForeignObjectsInOurTable(t *testing.T) {
	e := newKenv(t)
	e.tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	e.tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	e.sync(t)
	webElements := map[string]bool{}
	for _, el := range e.p.Desired().Elements() {
		webElements[el.ID()] = true
	}

	script := `add set ip svcproxy foreign { type ether_addr; }
add map ip svcproxy fmap { type ipv4_addr : ether_addr; elements = { 1.2.3.4 : 00:11:22:33:44:55 } }
add chain ip svcproxy fchain
add rule ip svcproxy fchain counter
add map ip svcproxy fvmap { type ether_addr : verdict; elements = { 00:11:22:33:44:55 : jump fchain } }`
	e.w.Node.MustRun(t, "sh", "-c", `printf '%s\n' "$0" | nft -f -`, script)
	addDamagedRule(t, e.w.Node, chainServices)

	// A restart finds the table like this.
	e.tr.OnServiceAdd(testService("api", "10.96.0.11", false, httpPort))
	e.tr.OnEndpointSliceAdd(testSlice("api", readyEP("pod3")))
	rec := &recordingKernel{Kernel: e.kernel}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{})
	tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	tr.OnServiceAdd(testService("api", "10.96.0.11", false, httpPort))
	tr.OnEndpointSliceAdd(testSlice("api", readyEP("pod3")))
	p2 := New(Config{Tracker: tr, Kernel: rec, Options: e.p.cfg.Options})
	if err := p2.Sync(t.Context()); err != nil {
		t.Fatalf("first sync of a restarted proxy: %v", err)
	}
	for _, tx := range rec.txs {
		if tx.Recreate {
			t.Fatal("the table was recreated; deleting the foreign objects in place suffices")
		}
		for _, el := range tx.DelElements {
			if webElements[el.ID()] {
				t.Fatalf("served element %v was deleted", el)
			}
		}
	}
	listing := e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)
	for _, name := range []string{"foreign", "fmap", "fvmap", "fchain"} {
		if strings.Contains(listing, name) {
			t.Fatalf("%s is still in the table:\n%s", name, listing)
		}
	}
	if got := nft.NormalizeListing(listing); got != p2.Desired().Text() {
		t.Fatalf("kernel differs from desired:\n%s", got)
	}
	if got := e.who(t, "10.96.0.11:80", 3); got["pod3"] != 3 {
		t.Fatalf("new Service: %v", got)
	}
	if got := e.who(t, "10.96.0.10:80", 10); got["pod1"]+got["pod2"] != 10 {
		t.Fatalf("existing Service: %v", got)
	}

	// The running proxy repairs the same on its next resync, and --cleanup's
	// DeleteTable copes with a table it could not read.
	e.w.Node.MustRun(t, "sh", "-c", `printf '%s\n' "$0" | nft -f -`, script)
	addDamagedRule(t, e.w.Node, chainServices)
	e.p.RequestResync()
	e.sync(t)
	if got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)); got != e.p.Desired().Text() {
		t.Fatalf("after resync the kernel differs from desired:\n%s", got)
	}
	addDamagedRule(t, e.w.Node, chainServices)
	if err := e.kernel.DeleteTable(context.Background(), nft.FamilyIPv4, TableName); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
}

// addDamagedRule adds a rule whose user data TLV runs past its end.
func addDamagedRule(t *testing.T, ns *netnstest.NS, chain string) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd))
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	c.AddRule(&nftables.Rule{Table: tb, Chain: &nftables.Chain{Table: tb, Name: chain},
		Exprs: []expr.Any{&expr.Counter{}}, UserData: []byte{0xbe, 0xff, 1, 2}})
	if err := c.Flush(); err != nil {
		t.Fatalf("add damaged rule: %v", err)
	}
}
