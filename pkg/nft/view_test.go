package nft

import (
	"hash/fnv"
	"net/netip"
	"testing"
	"time"
)

// TestValueHashIsFNV: valueHash, computed in place, is the FNV-1a of the value's
// bytes, verdict and comment as the view has always hashed them; and so is
// rawValueHash of the value's encoding, which the plan compares with the view's
// hash of what the kernel holds (a difference would rewrite every element).
func TestValueHashIsFNV(t *testing.T) {
	reference := func(e Element) uint64 {
		h := fnv.New64a()
		h.Write(concatBytes(e.Data))
		if e.Verdict != nil {
			h.Write([]byte{0, byte(e.Verdict.Kind)})
			h.Write([]byte(e.Verdict.Chain))
		}
		h.Write([]byte{0})
		h.Write([]byte(limitComment(e.Comment)))
		return h.Sum64()
	}
	ip := IP(netip.MustParseAddr("10.244.1.3"))
	ip6 := IP(netip.MustParseAddr("fd00::3"))
	for _, e := range []Element{
		{},
		{Data: []Datum{ip}},
		{Data: []Datum{ip, Port(8080)}},
		{Data: []Datum{ip6, Port(8080)}},
		{Data: []Datum{Proto(ProtoTCP), Port(80)}},
		{Verdict: &Verdict{Kind: Goto, Chain: "lb-2-10"}, Comment: "ns/svc:http/TCP"},
		{Verdict: &Verdict{Kind: Drop}},
		{Data: []Datum{ip}, Comment: "a \"quoted\" comment", Timeout: 3 * time.Second},
	} {
		if got, want := valueHash(e), reference(e); got != want {
			t.Errorf("valueHash(%v) = %x, want %x", e, got, want)
		}
		if got, want := rawValueHash(encodeValue(&e)), reference(e); got != want {
			t.Errorf("rawValueHash(encodeValue(%v)) = %x, want %x", e, got, want)
		}
	}
}
