package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// ctnetlink message types and attributes (linux/netfilter/nfnetlink_conntrack.h).
const (
	nfnlSubsysCtnetlink = 1
	ctMsgGet            = 1
	ctMsgDelete         = 2

	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaID         = 12
	ctaZone       = 18
	ctaFilter     = 25

	ctaFilterOrigFlags = 1
	// ctaFilterProtoNum is CTA_FILTER_F_CTA_PROTO_NUM (net/netfilter/nf_internals.h):
	// the dump keeps entries whose original tuple has the given protocol.
	ctaFilterProtoNum = 1 << 3

	ctaTupleIP    = 1
	ctaTupleProto = 2

	ctaIPv4Src = 1
	ctaIPv4Dst = 2
	ctaIPv6Src = 3
	ctaIPv6Dst = 4

	ctaProtoNum     = 1
	ctaProtoSrcPort = 2
	ctaProtoDstPort = 3
)

func ctMsgType(op uint16) netlink.HeaderType {
	return netlink.HeaderType(nfnlSubsysCtnetlink<<8 | op)
}

// nfgenmsg is the netfilter header that starts every ctnetlink message: family,
// version 0, resource id 0.
func nfgenmsg(family uint8) []byte { return []byte{family, 0, 0, 0} }

// dumpRequest asks for the entries of one address family and protocol. The
// kernel filters (CTA_FILTER, Linux 5.8+), so a node's many TCP entries never
// cross netlink; older kernels ignore the filter and send everything, which the
// caller filters again.
func dumpRequest(family, proto uint8) (netlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(ctaTupleOrig, func(t *netlink.AttributeEncoder) error {
		t.Nested(ctaTupleProto, func(p *netlink.AttributeEncoder) error {
			p.Uint8(ctaProtoNum, proto)
			return nil
		})
		return nil
	})
	ae.Nested(ctaFilter, func(f *netlink.AttributeEncoder) error {
		f.Uint32(ctaFilterOrigFlags, ctaFilterProtoNum) // host byte order
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, fmt.Errorf("encode conntrack dump: %w", err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: ctMsgType(ctMsgGet), Flags: netlink.Request | netlink.Dump},
		Data:   append(nfgenmsg(family), attrs...),
	}, nil
}

// decodeEntry decodes one entry of a dump (the message's data: nfgenmsg and
// attributes). It never panics, whatever the bytes.
func decodeEntry(b []byte) (Entry, error) {
	if len(b) < 4 {
		return Entry{}, fmt.Errorf("conntrack entry: %d bytes, shorter than its header", len(b))
	}
	e := Entry{Family: b[0]}
	ad, err := netlink.NewAttributeDecoder(b[4:])
	if err != nil {
		return Entry{}, fmt.Errorf("conntrack entry: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	var orig, reply bool
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleOrig:
			orig = true
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				src, dst, proto, err := decodeTuple(nad)
				e.OrigSrc, e.OrigDst, e.Proto = src, dst, proto
				return err
			})
		case ctaTupleReply:
			reply = true
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				src, _, _, err := decodeTuple(nad)
				e.ReplySrc = src
				return err
			})
		case ctaID:
			e.ID, e.HasID = ad.Uint32(), true
		case ctaZone:
			e.Zone = ad.Uint16()
		}
	}
	if err := ad.Err(); err != nil {
		return Entry{}, fmt.Errorf("conntrack entry: %w", err)
	}
	if !orig || !reply {
		return Entry{}, errors.New("conntrack entry without both tuples")
	}
	if !e.OrigSrc.Addr().IsValid() || !e.OrigDst.Addr().IsValid() || !e.ReplySrc.Addr().IsValid() {
		return Entry{}, errors.New("conntrack entry: tuple without addresses")
	}
	return e, nil
}

// decodeTuple reads CTA_TUPLE_IP and CTA_TUPLE_PROTO: source, destination and
// protocol. Ports are read for every protocol that has them (the kernel sends
// CTA_PROTO_SRC_PORT/DST_PORT for UDP, TCP, SCTP, ...).
func decodeTuple(ad *netlink.AttributeDecoder) (src, dst netip.AddrPort, proto uint8, err error) {
	var srcIP, dstIP netip.Addr
	var sport, dport uint16
	for ad.Next() {
		switch ad.Type() {
		case ctaTupleIP:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					switch nad.Type() {
					case ctaIPv4Src, ctaIPv6Src:
						srcIP, err = addrOf(nad.Bytes(), nad.Type() == ctaIPv6Src)
					case ctaIPv4Dst, ctaIPv6Dst:
						dstIP, err = addrOf(nad.Bytes(), nad.Type() == ctaIPv6Dst)
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
		case ctaTupleProto:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					switch nad.Type() {
					case ctaProtoNum:
						proto = nad.Uint8()
					case ctaProtoSrcPort:
						sport = nad.Uint16()
					case ctaProtoDstPort:
						dport = nad.Uint16()
					}
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return src, dst, proto, err
	}
	return netip.AddrPortFrom(srcIP, sport), netip.AddrPortFrom(dstIP, dport), proto, nil
}

func addrOf(b []byte, v6 bool) (netip.Addr, error) {
	if (v6 && len(b) != 16) || (!v6 && len(b) != 4) {
		return netip.Addr{}, fmt.Errorf("address of %d bytes", len(b))
	}
	a, _ := netip.AddrFromSlice(b)
	return a, nil
}

// deleteRequest deletes exactly the entry e: its original tuple, its zone, and its
// id when known, so that a newer entry with the same tuple survives. It refuses an
// entry without a complete tuple: a ctnetlink delete without a tuple flushes the
// whole table.
func deleteRequest(e Entry) (netlink.Message, error) {
	src, dst := e.OrigSrc.Addr(), e.OrigDst.Addr()
	if !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return netlink.Message{}, fmt.Errorf("delete conntrack entry %v -> %v: incomplete tuple", e.OrigSrc, e.OrigDst)
	}
	switch e.Proto {
	case unix.IPPROTO_UDP, unix.IPPROTO_SCTP, unix.IPPROTO_TCP:
	default:
		return netlink.Message{}, fmt.Errorf("delete conntrack entry %v -> %v: protocol %d has no ports", e.OrigSrc, e.OrigDst, e.Proto)
	}
	family, srcT, dstT := uint8(unix.AF_INET), uint16(ctaIPv4Src), uint16(ctaIPv4Dst)
	if src.Is6() {
		family, srcT, dstT = unix.AF_INET6, ctaIPv6Src, ctaIPv6Dst
	}
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Nested(ctaTupleOrig, func(t *netlink.AttributeEncoder) error {
		t.Nested(ctaTupleIP, func(ip *netlink.AttributeEncoder) error {
			ip.Bytes(srcT, src.AsSlice())
			ip.Bytes(dstT, dst.AsSlice())
			return nil
		})
		t.Nested(ctaTupleProto, func(p *netlink.AttributeEncoder) error {
			p.Uint8(ctaProtoNum, e.Proto)
			p.Uint16(ctaProtoSrcPort, e.OrigSrc.Port())
			p.Uint16(ctaProtoDstPort, e.OrigDst.Port())
			return nil
		})
		return nil
	})
	if e.Zone != 0 {
		ae.Uint16(ctaZone, e.Zone)
	}
	if e.HasID {
		ae.Uint32(ctaID, e.ID)
	}
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, fmt.Errorf("encode conntrack delete: %w", err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: ctMsgType(ctMsgDelete), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(nfgenmsg(family), attrs...),
	}, nil
}
