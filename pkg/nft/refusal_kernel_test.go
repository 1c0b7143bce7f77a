package nft

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// A refused batch names the kernel's reason and the object and owner it refused,
// whichever message of the batch failed.
func TestKernelRefusalNamesReasonAndOwner(t *testing.T) {
	ns := netnstest.New(t, "extack")
	k := &Netlink{NetNSFd: ns.Fd}
	base := sampleRuleset()
	if err := k.Apply(context.Background(), PlanFull(base, NewView())); err != nil {
		t.Fatal(err)
	}
	long := "svc-" + strings.Repeat("n", 300)
	tests := []struct {
		name  string
		frag  Fragment
		errno syscall.Errno
		want  []string
	}{
		{"a chain name longer than the kernel's limit",
			Fragment{Chains: []*Chain{{Name: long, Rules: []Rule{{Stmts: []Stmt{Reject{}}}}}}},
			syscall.ERANGE, []string{"numerical result out of range", "chain ip sample svc-nnnn", "svc:ns/long"}},
		{"an element whose verdict jumps to a chain that does not exist",
			Fragment{Elements: []Element{
				{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.96.7.1"))}},
				{Set: "dispatch", Key: []Datum{IP(netip.MustParseAddr("10.96.7.7")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Goto, Chain: "nowhere"}},
			}},
			syscall.ENOENT, []string{"no such file or directory", "element", "dispatch", "10.96.7.7 . tcp . 80", "svc:ns/long"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleRuleset()
			v, err := k.Read(context.Background(), FamilyIPv4, "sample")
			if err != nil {
				t.Fatal(err)
			}
			PlanFull(r, v) // nothing left dirty
			r.SetFragment("svc:ns/long", tc.frag)
			err = k.Apply(context.Background(), Plan(r, v))
			if err == nil {
				t.Fatal("the kernel accepted the batch")
			}
			if !errors.Is(err, tc.errno) {
				t.Errorf("error %q does not wrap %v", err, tc.errno)
			}
			msg := strings.ToLower(err.Error())
			for _, w := range tc.want {
				if !strings.Contains(msg, strings.ToLower(w)) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
