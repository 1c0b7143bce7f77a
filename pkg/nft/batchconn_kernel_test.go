package nft

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// TestKernelTransactionSocketKeptOpen: transactions and reads share one socket,
// since closing one costs an RCU grace period; a refused transaction drops it, and
// the next one, on a new socket, is applied and reported as applied.
func TestKernelTransactionSocketKeptOpen(t *testing.T) {
	ns := netnstest.New(t, "batchconn")
	k := &Netlink{NetNSFd: ns.Fd}
	defer k.Close()
	if err := k.Apply(t.Context(), PlanFull(sampleRuleset(), NewView())); err != nil {
		t.Fatal(err)
	}
	ip := func(i int) Element {
		return Element{Set: "ips", Key: []Datum{IP(netip.AddrFrom4([4]byte{10, 96, 1, byte(i)}))}}
	}
	steps := []struct {
		name       string
		tx         *Tx
		refused    bool
		wantDialed int
	}{
		{name: "add", tx: &Tx{Family: FamilyIPv4, Table: "sample", AddElements: []Element{ip(1)}}, wantDialed: 1},
		{name: "add again", tx: &Tx{Family: FamilyIPv4, Table: "sample", AddElements: []Element{ip(2)}}, wantDialed: 1},
		{name: "delete", tx: &Tx{Family: FamilyIPv4, Table: "sample", DelElements: []Element{ip(1)}}, wantDialed: 1},
		{name: "refused: delete what is not there", tx: &Tx{Family: FamilyIPv4, Table: "sample", DelElements: []Element{ip(9)}}, refused: true, wantDialed: 1},
		{name: "after a refusal, on a new socket", tx: &Tx{Family: FamilyIPv4, Table: "sample", AddElements: []Element{ip(3)}}, wantDialed: 2},
		{name: "and on it again", tx: &Tx{Family: FamilyIPv4, Table: "sample", AddElements: []Element{ip(4)}}, wantDialed: 2},
	}
	for _, s := range steps {
		err := k.Apply(t.Context(), s.tx)
		if (err != nil) != s.refused {
			t.Fatalf("%s: err = %v, want refused %v", s.name, err, s.refused)
		}
		if k.dialed != s.wantDialed {
			t.Fatalf("%s: %d sockets dialed, want %d", s.name, k.dialed, s.wantDialed)
		}
	}
	// Reads share the socket too, and decode their replies after batches' acks.
	if _, err := k.Generation(t.Context()); err != nil {
		t.Fatal(err)
	}
	v, err := k.Read(t.Context(), FamilyIPv4, "sample")
	if err != nil || !v.TableExists {
		t.Fatalf("read after batches: %v (table exists: %v)", err, v != nil && v.TableExists)
	}
	if _, err := k.Read(t.Context(), FamilyIPv4, "nothing"); err != nil {
		t.Fatalf("read of a missing table (an error reply) after batches: %v", err)
	}
	if k.dialed != 2 {
		t.Fatalf("%d sockets dialed after the reads, want 2", k.dialed)
	}
	set := ns.MustRun(t, "nft", "list", "set", "ip", "sample", "ips")
	for _, want := range []string{"10.96.1.2", "10.96.1.3", "10.96.1.4"} {
		if !strings.Contains(set, want) {
			t.Errorf("set ips lacks %s:\n%s", want, set)
		}
	}
	if strings.Contains(set, "10.96.1.1,") || strings.Contains(set, "10.96.1.1 ") {
		t.Errorf("set ips still holds the deleted 10.96.1.1:\n%s", set)
	}
}
