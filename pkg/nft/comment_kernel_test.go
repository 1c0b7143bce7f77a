package nft

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// TestKernelCommentsLoadBack: whatever a comment holds (a Service port name from a
// manifest such as `pört"x`), the table's text is what nft lists, nft -f loads that
// text back, and reading the kernel's table back leaves nothing to do.
func TestKernelCommentsLoadBack(t *testing.T) {
	ns := netnstest.New(t, "comment")
	empty := netnstest.New(t, "comment-load")
	k := &Netlink{NetNSFd: ns.Fd}
	for _, tc := range []struct{ name, comment string }{
		{"plain", "ns/web:http/TCP"},
		{"non-ASCII", "ns/web:pört/TCP"},
		{"a double quote", `ns/web:pört"x/TCP`},
		{"a newline", "ns/web:a\nb/TCP"},
		{"a NUL", "ns/web:a\x00b/TCP"},
		{"long, with quotes", strings.Repeat(`a"`, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRuleset(FamilyIPv4, "comments",
				&Set{Name: "dispatch", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Verdict: true})
			r.SetFragment("svc", Fragment{Chains: []*Chain{
				{Name: "services", Rules: []Rule{{Stmts: []Stmt{VMap{Key: Fs(FieldIPDaddr, FieldL4Proto, FieldThDport), Map: "dispatch"}}, Comment: tc.comment}}},
			}, Elements: []Element{
				{Set: "dispatch", Key: []Datum{IP(netip.MustParseAddr("10.96.0.12")), Proto(ProtoTCP), Port(80)}, Verdict: &Verdict{Kind: Drop}, Comment: tc.comment},
			}})
			if err := k.Apply(t.Context(), PlanFull(r, NewView())); err != nil {
				t.Fatalf("apply: %v", err)
			}
			t.Cleanup(func() { _, _ = ns.Run("nft", "delete", "table", "ip", "comments") })
			text := r.Text()
			if got := NormalizeListing(ns.MustRun(t, "nft", "list", "table", "ip", "comments")); got != text {
				t.Fatalf("nft listing differs from Text\n--- nft\n%s\n--- Text\n%s", got, text)
			}
			v, err := k.Read(t.Context(), FamilyIPv4, "comments")
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if tx := PlanFull(r, v); !tx.Empty() {
				t.Fatalf("plan after read-back is not empty: %+v", tx)
			}
			file := filepath.Join(t.TempDir(), "comments.nft")
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := empty.Run("nft", "-f", file); err != nil {
				t.Fatalf("nft -f of Text: %v\n%s\n--- text\n%s", err, out, text)
			}
			empty.MustRun(t, "nft", "delete", "table", "ip", "comments")
		})
	}
}
