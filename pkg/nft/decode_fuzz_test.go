package nft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The seeds of these targets are real kernel dumps in testdata/fuzz/Fuzz*/, written
// by TestGenerateFuzzCorpus (SVCPROXY_FUZZ_CORPUS=1, as root).

func FuzzRuleUserData(f *testing.F) {
	f.Add(ruleUserData(Rule{Comment: "wrong port"}))
	f.Add([]byte{byte(ruleHashType), 0xff, 1, 2})
	f.Fuzz(func(t *testing.T, ud []byte) {
		h, ok := ruleHashOf(ud)
		if ok && !bytes.Contains(ud, binary.BigEndian.AppendUint64([]byte{byte(ruleHashType), 8}, h)) {
			t.Fatalf("hash %x read from user data %x that does not hold it", h, ud)
		}
		if !ok && h != foreignRuleHash {
			t.Fatalf("unreadable user data %x gave hash %x", ud, h)
		}
		// The same bytes inside a whole rule message.
		msg := ruleMessage("svcproxy", "services", ud)
		tbl, chain, h2, _, err := decodeRule(msg)
		if err != nil || tbl != "svcproxy" || chain != "services" || h2 != h {
			t.Fatalf("decodeRule = %q %q %x %v, want svcproxy services %x", tbl, chain, h2, err, h)
		}
		decodeRule(ud) // and as a message of its own
	})
}

func FuzzDecodeRule(f *testing.F) {
	f.Add(ruleMessage("svcproxy", "services", ruleUserData(Rule{})))
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, _, h, d, err := decodeRule(msg)
		if err != nil && (h != 0 || d != foreignExprsDigest) {
			t.Fatalf("error %v with hash %x, digest %x", err, h, d)
		}
	})
}

func ruleMessage(table, chain string, ud []byte) []byte {
	b, _ := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")},
		{Type: unix.NFTA_RULE_USERDATA, Data: ud},
	})
	return append([]byte{unix.NFPROTO_IPV4, 0, 0, 0}, b...)
}

func FuzzDecodeSet(f *testing.F) {
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, s, _, err := decodeSet(msg)
		switch {
		case errors.Is(err, errForeign):
			if s == nil || len(s.Key) != 0 {
				t.Fatalf("a foreign set must come back without key type: %+v", s)
			}
		case err == nil:
			if len(s.Key) == 0 || valueLen(s.Key) == 0 {
				t.Fatalf("decoded set %+v has no key", s)
			}
			if _, err := netlinkSet(nil, s); err != nil {
				t.Fatalf("decoded set %+v cannot be written back: %v", s, err)
			}
		}
	})
}

func FuzzDecodeElements(f *testing.F) {
	f.Fuzz(func(t *testing.T, setMsg, elemMsg []byte) {
		_, s, _, err := decodeSet(setMsg)
		if err != nil {
			// Any definition must do: decode against one of ours too.
			s = &Set{Name: "dispatch", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Verdict: true}
		}
		_, _, elems, err := decodeElements(s, elemMsg)
		if err != nil {
			return
		}
		v := NewView()
		v.Sets[s.Name] = s
		for _, e := range elems {
			if e.Set != s.Name || len(e.Key) != len(s.Key) {
				t.Fatalf("element %+v does not fit set %+v", e, s)
			}
			if s.Verdict != (e.Verdict != nil) || len(s.Data) != len(e.Data) {
				t.Fatalf("element value %+v does not fit set %+v", e, s)
			}
			// The view must be able to name it to delete it.
			back, ok := v.element(e.ID())
			if !ok || back.ID() != e.ID() {
				t.Fatalf("element %+v cannot be rebuilt from its ID", e)
			}
		}
	})
}

func FuzzDecodeChain(f *testing.F) {
	desired := sampleRuleset()
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, name, cv, err := decodeChain(msg)
		if err != nil {
			return
		}
		if want, ok := desired.Chains[name]; ok && cv.equal(want, FamilyIPv4) && len(want.Rules) > 0 {
			t.Fatalf("a chain read without rules equals %s, which has rules", name)
		}
	})
}
