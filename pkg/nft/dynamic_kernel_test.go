package nft

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// The kernel's entries in a dynamic map read back as elements, and destroying them
// tolerates entries already gone (expired); a plain delete of a missing entry fails
// with ENOENT, which the caller reads as "read again".
func TestKernelDynamicElements(t *testing.T) {
	ns := netnstest.New(t, "dyn")
	k := &Netlink{NetNSFd: ns.Fd}
	r := sampleRuleset()
	if err := k.Apply(t.Context(), PlanFull(r, NewView())); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "nft", "add", "element", "ip", "sample", "affinity",
		"{ 10.244.2.9 . 10.96.0.10 . tcp . 80 timeout 1m : 10.244.1.2 . 8080, 10.244.2.8 . 10.96.0.10 . udp . 53 timeout 1m : 10.244.1.3 . 53 }")
	texts := func() []string {
		t.Helper()
		els, err := k.DynamicElements(t.Context(), FamilyIPv4, "sample", r.Sets["affinity"])
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range els {
			e.Timeout = 0
			out = append(out, e.String())
		}
		slices.Sort(out)
		return out
	}
	want := []string{"10.244.2.8 . 10.96.0.10 . udp . 53 : 10.244.1.3 . 53", "10.244.2.9 . 10.96.0.10 . tcp . 80 : 10.244.1.2 . 8080"}
	if got := texts(); !slices.Equal(got, want) {
		t.Fatalf("dynamic elements %q, want %q", got, want)
	}
	els, _ := k.DynamicElements(t.Context(), FamilyIPv4, "sample", r.Sets["affinity"])
	missing := els[0]
	missing.Key = slices.Clone(missing.Key)
	missing.Key[0] = IP(netip.MustParseAddr("10.244.7.7"))
	if err := k.deleteElements(FamilyIPv4, "sample", []Element{missing}, false); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("plain delete of a missing entry: %v, want ENOENT", err)
	}
	if err := k.DestroyElements(t.Context(), FamilyIPv4, "sample", []Element{els[0], missing}); err != nil {
		t.Fatalf("destroy with one entry already gone: %v", err)
	}
	if got := texts(); len(got) != 1 {
		t.Fatalf("after destroying one of two entries: %q", got)
	}
}
