package nft

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// libraryElementMessages is what google/nftables encodes for elems, sent the
// way sendElements sent them before appendElementMessages: grouped by set in
// order of first appearance, elementsPerMessage per message.
func libraryElementMessages(t testing.TB, family Family, table string, elems []Element, add bool) []netlink.Message {
	t.Helper()
	c, captured := captureConn()
	tb := &nftables.Table{Family: nftables.TableFamily(family), Name: table}
	var order []string
	bySet := map[string][]nftables.SetElement{}
	for _, e := range elems {
		if _, ok := bySet[e.Set]; !ok {
			order = append(order, e.Set)
		}
		bySet[e.Set] = append(bySet[e.Set], netlinkElement(e))
	}
	for _, name := range order {
		s := &nftables.Set{Table: tb, Name: name, HasTimeout: true}
		all := bySet[name]
		for len(all) > 0 {
			n := min(len(all), elementsPerMessage)
			var err error
			if add {
				err = c.SetAddElements(s, all[:n])
			} else {
				err = c.SetDeleteElements(s, all[:n])
			}
			if err != nil {
				t.Fatal(err)
			}
			all = all[n:]
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(*captured) < 2 {
		return nil
	}
	return (*captured)[1 : len(*captured)-1] // without BATCH_BEGIN and BATCH_END
}

func netlinkElement(e Element) nftables.SetElement {
	el := nftables.SetElement{Key: concatBytes(e.Key), Timeout: e.Timeout, Comment: limitComment(e.Comment)}
	switch {
	case e.Verdict != nil:
		el.VerdictData = e.Verdict.expr()
	case len(e.Data) > 0:
		el.Val = concatBytes(e.Data)
	}
	return el
}

// TestFramedAsTheLibrary: the batch's first and last messages are the
// library's.
func TestFramedAsTheLibrary(t *testing.T) {
	c, captured := captureConn()
	c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "t"})
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	lib := *captured
	got := framed(lib[1 : len(lib)-1])
	if len(got) != len(lib) {
		t.Fatalf("%d messages, the library's %d", len(got), len(lib))
	}
	for _, i := range []int{0, len(lib) - 1} {
		g, w := got[i], lib[i]
		if g.Header.Type != w.Header.Type || g.Header.Flags != w.Header.Flags || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("message %d: %+v % x, the library's %+v % x", i, g.Header, g.Data, w.Header, w.Data)
		}
	}
}

func compareElementMessages(t testing.TB, family Family, table string, elems []Element, add bool) {
	t.Helper()
	want := libraryElementMessages(t, family, table, elems, add)
	got := appendElementMessages(nil, family, table, elems, add)
	if len(got) != len(want) {
		t.Fatalf("%d messages, the library's %d", len(got), len(want))
	}
	for i := range got {
		// Length, sequence and port are the sender's (nlkit.AppendMessages sets them).
		if g, w := got[i].Header, want[i].Header; g.Type != w.Type || g.Flags != w.Flags {
			t.Errorf("message %d: type %v flags %v, the library's %v %v", i, g.Type, g.Flags, w.Type, w.Flags)
		}
		if !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("message %d: body differs from the library's\n got % x\nwant % x", i, got[i].Data, want[i].Data)
		}
	}
}

func TestElementMessagesAsTheLibrarys(t *testing.T) {
	a4, a6 := netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::a:1")
	many := make([]Element, 0, 2*elementsPerMessage+3)
	for i := range cap(many) {
		set := "endpoints-01"
		if i%3 == 0 {
			set = "hairpin-00" // interleaved: grouped by set, order kept
		}
		many = append(many, Element{Set: set, Key: []Datum{Int(uint32(i))}, Data: []Datum{IP(a4), Port(uint16(i))}})
	}
	cases := []struct {
		name  string
		elems []Element
	}{
		{"none", nil},
		{"set element", []Element{{Set: "s", Key: []Datum{IP(a4)}}}},
		{"concatenated key, padded", []Element{{Set: "svc", Key: []Datum{IP(a4), Proto(6), Port(80)}}}},
		{"ipv6 key", []Element{{Set: "svc6", Key: []Datum{IP(a6), Proto(17), Port(53)}}}},
		{"data map", []Element{{Set: "eps", Key: []Datum{Int(7)}, Data: []Datum{IP(a4), Port(8080)}}}},
		{"verdicts", []Element{
			{Set: "v", Key: []Datum{IP(a4)}, Verdict: &Verdict{Kind: Jump, Chain: "svc-abc"}},
			{Set: "v", Key: []Datum{Mark(1)}, Verdict: &Verdict{Kind: Goto, Chain: "x"}},
			{Set: "v", Key: []Datum{Mark(2)}, Verdict: &Verdict{Kind: Drop}},
			{Set: "v", Key: []Datum{Mark(3)}, Verdict: &Verdict{Kind: Accept}},
			{Set: "v", Key: []Datum{Mark(4)}, Verdict: &Verdict{Kind: Return}},
		}},
		{"timeouts", []Element{
			{Set: "aff", Key: []Datum{IP(a4), IP(a4)}, Timeout: 10800 * time.Second},
			{Set: "aff", Key: []Datum{IP(a4), IP(a6)}, Timeout: 1500 * time.Microsecond},
			{Set: "aff", Key: []Datum{IP(a6), IP(a6)}, Timeout: 300 * time.Microsecond}, // 0 ms, as the library
		}},
		{"comments", []Element{
			{Set: "c", Key: []Datum{Port(1)}, Comment: "ns/svc:http"},
			{Set: "c", Key: []Datum{Port(2)}, Comment: strings.Repeat("ü", 100)}, // cut to MaxCommentLen
			{Set: "c", Key: []Datum{Port(3)}, Comment: "abc", Data: []Datum{Int(1)}},
			{Set: "c", Key: []Datum{Port(4)}, Comment: "a", Verdict: &Verdict{Kind: Jump, Chain: "y"}, Timeout: time.Minute},
		}},
		{"split and grouped", many},
	}
	for _, tc := range cases {
		for _, add := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/add=%v", tc.name, add), func(t *testing.T) {
				compareElementMessages(t, FamilyIPv4, "svcproxy", tc.elems, add)
				compareElementMessages(t, FamilyIPv6, "t", tc.elems, add)
			})
		}
	}
}

// FuzzElementMessages builds elements from the input and compares the bytes
// with the library's.
func FuzzElementMessages(f *testing.F) {
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a"))
	f.Add([]byte("svcproxy endpoints hairpin sticky 10.96.0.1:80/tcp"))
	f.Add(bytes.Repeat([]byte{0xff, 0x00, 0x7f, 0x80}, 64))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := byteReader{b: in}
		var elems []Element
		for n := 0; !r.done() && n < 1200; n++ {
			e := Element{Set: fmt.Sprintf("set-%d", r.next()%4)}
			for range 1 + int(r.next()%3) {
				e.Key = append(e.Key, r.datum())
			}
			switch r.next() % 4 {
			case 1:
				e.Data = []Datum{r.datum(), r.datum()}
			case 2:
				e.Verdict = &Verdict{Kind: VerdictKind(r.next() % 5), Chain: strings.Repeat("c", int(r.next()%40))}
			}
			if r.next()%2 == 0 {
				e.Timeout = time.Duration(r.next()) * 37 * time.Millisecond / 10
			}
			if k := int(r.next() % 160); k%3 == 0 {
				e.Comment = strings.Repeat(string(rune('a'+k%26)), k)
			}
			elems = append(elems, e)
		}
		compareElementMessages(t, FamilyIPv4, "svcproxy", elems, r.next()%2 == 0)
	})
}

type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) done() bool { return r.i >= len(r.b) }

func (r *byteReader) next() uint8 {
	if r.done() {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *byteReader) datum() Datum {
	switch r.next() % 5 {
	case 0:
		return IP(netip.AddrFrom4([4]byte{10, r.next(), r.next(), r.next()}))
	case 1:
		var a [16]byte
		a[0], a[15] = 0xfd, r.next()
		return IP(netip.AddrFrom16(a))
	case 2:
		return Port(uint16(r.next())<<8 | uint16(r.next()))
	case 3:
		return Proto(r.next())
	}
	return Mark(uint32(r.next()))
}

// TestEncodeBatchAsTheNetlinkPackage: the bytes sent are what the netlink
// package's marshalling gives for the same headers.
func TestEncodeBatchAsTheNetlinkPackage(t *testing.T) {
	a := netip.MustParseAddr("10.96.0.1")
	var elems []Element
	for i := range 700 {
		elems = append(elems, Element{Set: fmt.Sprintf("s%d", i%3), Key: []Datum{IP(a), Port(uint16(i))}, Comment: strings.Repeat("x", i%7)})
	}
	msgs := framed(appendElementMessages(nil, FamilyIPv4, "t", elems, true))
	msgs = append(msgs[:1:1], append([]netlink.Message{{Header: netlink.Header{Type: 3, Flags: 1}, Data: []byte{1, 2, 3}}}, msgs[1:]...)...) // one unpadded
	seq := uint32(41)
	got := nlkit.AppendMessages([]byte("prefix"), msgs, &seq)
	want := []byte("prefix")
	for i, m := range msgs {
		if m.Header.Sequence != uint32(42+i) || m.Header.Length == 0 {
			t.Fatalf("message %d: header %+v, want sequence %d and a length", i, m.Header, 42+i)
		}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded batch (%d bytes) differs from the netlink package's (%d bytes)", len(got), len(want))
	}
}
