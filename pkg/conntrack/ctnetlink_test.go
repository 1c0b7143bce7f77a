package conntrack

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// dumpMessage encodes an entry as the kernel sends it in a dump (the attributes the
// decoder reads, plus ones it must skip).
func dumpMessage(t testing.TB, proto uint8, origSrc, origDst, replySrc, replyDst netip.AddrPort, id uint32, zone uint16) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	tuple := func(typ uint16, src, dst netip.AddrPort) {
		ae.Nested(typ, func(tu *netlink.AttributeEncoder) error {
			tu.Nested(ctaTupleIP, func(ip *netlink.AttributeEncoder) error {
				s, d := uint16(ctaIPv4Src), uint16(ctaIPv4Dst)
				if src.Addr().Is6() {
					s, d = ctaIPv6Src, ctaIPv6Dst
				}
				ip.Bytes(s, src.Addr().AsSlice())
				ip.Bytes(d, dst.Addr().AsSlice())
				return nil
			})
			tu.Nested(ctaTupleProto, func(p *netlink.AttributeEncoder) error {
				p.Uint8(ctaProtoNum, proto)
				p.Uint16(ctaProtoSrcPort, src.Port())
				p.Uint16(ctaProtoDstPort, dst.Port())
				return nil
			})
			return nil
		})
	}
	tuple(ctaTupleOrig, origSrc, origDst)
	tuple(ctaTupleReply, replySrc, replyDst)
	ae.Uint32(3, 0x188)                                    // CTA_STATUS
	ae.Uint32(7, 30)                                       // CTA_TIMEOUT
	ae.Nested(4, func(p *netlink.AttributeEncoder) error { // CTA_PROTOINFO
		p.Nested(3, func(s *netlink.AttributeEncoder) error { s.Uint8(1, 3); return nil }) // SCTP state
		return nil
	})
	ae.Uint32(ctaID, id)
	if zone != 0 {
		ae.Uint16(ctaZone, zone)
	}
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	family := uint8(unix.AF_INET)
	if origSrc.Addr().Is6() {
		family = unix.AF_INET6
	}
	return append(nlkit.NfGenMsg(family), b...)
}

func TestDecodeEntry(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		name           string
		proto          uint8
		os, od, rs, rd netip.AddrPort
		zone           uint16
	}{
		{"udp, translated", unix.IPPROTO_UDP, ap("10.244.2.9:40000"), ap("10.96.0.10:53"), ap("10.244.1.2:5353"), ap("10.244.2.9:40000"), 0},
		{"sctp keeps its ports", unix.IPPROTO_SCTP, ap("10.244.2.9:40000"), ap("10.96.0.11:9"), ap("10.244.1.2:9"), ap("10.244.2.9:40000"), 0},
		{"ipv6 in a zone", unix.IPPROTO_UDP, ap("[fd00:244::9]:40000"), ap("[fd00::10]:53"), ap("[fd00:244::2]:53"), ap("[fd00:244::9]:40000"), 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := decodeEntry(dumpMessage(t, tt.proto, tt.os, tt.od, tt.rs, tt.rd, 0xdeadbeef, tt.zone))
			if err != nil {
				t.Fatal(err)
			}
			fam := uint8(unix.AF_INET)
			if tt.os.Addr().Is6() {
				fam = unix.AF_INET6
			}
			want := Entry{Family: fam, Proto: tt.proto, OrigSrc: tt.os, OrigDst: tt.od, ReplySrc: tt.rs, Zone: tt.zone, Status: 0x188, ID: 0xdeadbeef, HasID: true}
			if e != want {
				t.Fatalf("decoded\n%+v\nwant\n%+v", e, want)
			}
			// The delete names the same original tuple, zone and id.
			m, err := appendDelete([]byte{0xaa}, e) // appends: what is there stays
			if err != nil {
				t.Fatal(err)
			}
			if m[0] != 0xaa {
				t.Fatal("appendDelete overwrote what was in the buffer")
			}
			msgs, err := syscall.ParseNetlinkMessage(m[1:])
			if err != nil || len(msgs) != 1 {
				t.Fatalf("the delete does not parse as one netlink message: %v, %d", err, len(msgs))
			}
			h := msgs[0].Header
			if h.Type != uint16(ctMsgType(ctMsgDelete)) || h.Flags != uint16(netlink.Request) || int(h.Len) != len(m)-1 {
				t.Fatalf("delete header %+v (%d bytes)", h, len(m)-1)
			}
			if msgs[0].Data[0] != fam {
				t.Fatalf("delete family %d, want %d", msgs[0].Data[0], fam)
			}
			if got := decodeDelete(t, msgs[0].Data); got != (Entry{Family: fam, Proto: tt.proto, OrigSrc: tt.os, OrigDst: tt.od, Zone: tt.zone, ID: 0xdeadbeef, HasID: true}) {
				t.Fatalf("delete names %+v", got)
			}
		})
	}
}

func TestAppendDeleteRefusesIncompleteTuples(t *testing.T) {
	ap := netip.MustParseAddrPort
	for name, e := range map[string]Entry{
		"no source":    {Proto: unix.IPPROTO_UDP, OrigDst: ap("10.96.0.10:53")},
		"mixed family": {Proto: unix.IPPROTO_UDP, OrigSrc: ap("[fd00::1]:1"), OrigDst: ap("10.96.0.10:53")},
		"no ports":     {Proto: unix.IPPROTO_ICMP, OrigSrc: ap("10.0.0.1:0"), OrigDst: ap("10.96.0.10:0")},
	} {
		if _, err := appendDelete(nil, e); err == nil {
			t.Errorf("%s: appendDelete accepted %+v (a delete without a tuple flushes the table)", name, e)
		}
	}
}

func TestDecodeEntryRejectsGarbage(t *testing.T) {
	good := dumpMessage(t, unix.IPPROTO_UDP, netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.96.0.10:53"),
		netip.MustParseAddrPort("10.244.1.2:53"), netip.MustParseAddrPort("10.0.0.1:1"), 1, 0)
	for i := 0; i < len(good); i++ {
		// Every truncation either decodes or errors; none panics.
		_, _ = decodeEntry(good[:i])
	}
	if _, err := decodeEntry(good[:3]); err == nil {
		t.Fatal("3 bytes decoded")
	}
	if _, err := decodeEntry(nlkit.NfGenMsg(unix.AF_INET)); err == nil {
		t.Fatal("an entry without tuples decoded")
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(dumpMessage(f, unix.IPPROTO_UDP, netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.96.0.10:53"),
		netip.MustParseAddrPort("10.244.1.2:53"), netip.MustParseAddrPort("10.0.0.1:1"), 1, 0))
	f.Add(dumpMessage(f, unix.IPPROTO_SCTP, netip.MustParseAddrPort("[fd00::1]:1"), netip.MustParseAddrPort("[fd00::10]:9"),
		netip.MustParseAddrPort("[fd00::2]:9"), netip.MustParseAddrPort("[fd00::1]:1"), 2, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry(b)
		if err != nil {
			return
		}
		// Whatever decodes can be turned into a delete without flushing the table.
		if m, err := appendDelete(nil, e); err == nil && len(m) <= 20 {
			t.Fatalf("delete without a tuple from %x", b)
		}
	})
}

// decodeDelete reads back what a delete request names.
func decodeDelete(t *testing.T, b []byte) Entry {
	t.Helper()
	e := Entry{Family: b[0]}
	a := attrsOf(b[4:])
	for a.Next() {
		switch a.Type {
		case ctaTupleOrig:
			var err error
			if e.OrigSrc, e.OrigDst, e.Proto, err = decodeTuple(a.Val); err != nil {
				t.Fatal(err)
			}
		case ctaID:
			e.ID, e.HasID = binary.BigEndian.Uint32(a.Val), true
		case ctaZone:
			e.Zone = binary.BigEndian.Uint16(a.Val)
		default:
			t.Fatalf("delete carries attribute %d", a.Type)
		}
	}
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	return e
}

func BenchmarkAppendDelete(b *testing.B) {
	e := Entry{Family: unix.AF_INET, Proto: unix.IPPROTO_UDP, OrigSrc: netip.MustParseAddrPort("10.0.0.1:1"),
		OrigDst: netip.MustParseAddrPort("10.96.0.10:53"), ID: 1, HasID: true}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := appendDelete(buf[:0], e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEntry(b *testing.B) {
	m := dumpMessage(b, unix.IPPROTO_UDP, netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.96.0.10:53"),
		netip.MustParseAddrPort("10.244.1.2:53"), netip.MustParseAddrPort("10.0.0.1:1"), 1, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeEntry(m); err != nil {
			b.Fatal(err)
		}
	}
}
