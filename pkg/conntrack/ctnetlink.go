package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// ctnetlink message types and attributes (linux/netfilter/nfnetlink_conntrack.h).
const (
	nfnlSubsysCtnetlink = 1
	ctMsgGet            = 1
	ctMsgDelete         = 2

	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaStatus     = 3
	ctaID         = 12
	ctaZone       = 18
	ctaFilter     = 25
	// ctaStatusMask with ctaStatus in a dump request keeps the entries whose
	// status, masked, equals the given one (Linux 6.1+; older kernels ignore it
	// and the caller filters again).
	ctaStatusMask = 26

	// ipsSeenReply is IPS_SEEN_REPLY: the entry saw a packet in the reply
	// direction. A TCP entry without it is a SYN nobody answered.
	ipsSeenReply = 1 << 1

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

// dumpRequest asks for the entries of one address family and protocol, only those
// that never saw a reply when unanswered is set. The kernel filters (CTA_FILTER,
// Linux 5.8+; status, 6.1+), so a node's many TCP entries never cross netlink;
// older kernels ignore the filter and send everything, which the caller filters
// again.
func dumpRequest(family, proto uint8, unanswered bool) (netlink.Message, error) {
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
	if unanswered {
		ae.Bytes(ctaStatus, binary.BigEndian.AppendUint32(nil, 0))
		ae.Bytes(ctaStatusMask, binary.BigEndian.AppendUint32(nil, ipsSeenReply))
	}
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, fmt.Errorf("encode conntrack dump: %w", err)
	}
	return netlink.Message{
		Header: netlink.Header{Type: ctMsgType(ctMsgGet), Flags: netlink.Request | netlink.Dump},
		Data:   append(nlkit.NfGenMsg(family), attrs...),
	}, nil
}

// decodeEntry decodes one entry of a dump (the message's data: nfgenmsg and
// attributes). It never panics, whatever the bytes, and allocates nothing: a dump
// can hold hundreds of thousands of entries.
func decodeEntry(b []byte) (Entry, error) {
	if len(b) < 4 {
		return Entry{}, errShortEntry
	}
	e := Entry{Family: b[0]}
	var orig, reply bool
	a := attrsOf(b[4:])
	for a.Next() {
		var err error
		switch a.Type {
		case ctaTupleOrig:
			orig = true
			e.OrigSrc, e.OrigDst, e.Proto, err = decodeTuple(a.Val)
		case ctaTupleReply:
			reply = true
			e.ReplySrc, _, _, err = decodeTuple(a.Val)
		case ctaID:
			if len(a.Val) != 4 {
				return Entry{}, errBadAttr
			}
			e.ID, e.HasID = binary.BigEndian.Uint32(a.Val), true
		case ctaStatus:
			if len(a.Val) != 4 {
				return Entry{}, errBadAttr
			}
			e.Status = binary.BigEndian.Uint32(a.Val)
		case ctaZone:
			if len(a.Val) != 2 {
				return Entry{}, errBadAttr
			}
			e.Zone = binary.BigEndian.Uint16(a.Val)
		}
		if err != nil {
			return Entry{}, err
		}
	}
	if err := check(&a); err != nil {
		return Entry{}, err
	}
	if !orig || !reply {
		return Entry{}, errNoTuple
	}
	return e, nil
}

var (
	errShortEntry = errors.New("conntrack entry shorter than its header")
	errBadAttr    = errors.New("conntrack entry: attribute of the wrong size")
	errTruncated  = errors.New("conntrack entry: truncated attribute")
	errNoTuple    = errors.New("conntrack entry without both tuples")
	errNoAddr     = errors.New("conntrack entry: tuple without addresses")
)

// decodeTuple reads CTA_TUPLE_IP and CTA_TUPLE_PROTO: source, destination and
// protocol. Ports are read for every protocol that has them (the kernel sends
// CTA_PROTO_SRC_PORT/DST_PORT for UDP, TCP, SCTP, ...).
func decodeTuple(b []byte) (src, dst netip.AddrPort, proto uint8, err error) {
	var srcIP, dstIP netip.Addr
	var sport, dport uint16
	a := attrsOf(b)
	for a.Next() {
		switch a.Type {
		case ctaTupleIP:
			ip := attrsOf(a.Val)
			for ip.Next() {
				switch ip.Type {
				case ctaIPv4Src, ctaIPv6Src:
					srcIP, err = addrOf(ip.Val, ip.Type == ctaIPv6Src)
				case ctaIPv4Dst, ctaIPv6Dst:
					dstIP, err = addrOf(ip.Val, ip.Type == ctaIPv6Dst)
				}
				if err != nil {
					return src, dst, 0, err
				}
			}
			if err := check(&ip); err != nil {
				return src, dst, 0, err
			}
		case ctaTupleProto:
			p := attrsOf(a.Val)
			for p.Next() {
				switch {
				case p.Type == ctaProtoNum && len(p.Val) == 1:
					proto = p.Val[0]
				case p.Type == ctaProtoSrcPort && len(p.Val) == 2:
					sport = binary.BigEndian.Uint16(p.Val)
				case p.Type == ctaProtoDstPort && len(p.Val) == 2:
					dport = binary.BigEndian.Uint16(p.Val)
				case p.Type == ctaProtoNum, p.Type == ctaProtoSrcPort, p.Type == ctaProtoDstPort:
					return src, dst, 0, errBadAttr
				}
			}
			if err := check(&p); err != nil {
				return src, dst, 0, err
			}
		}
	}
	if err := check(&a); err != nil {
		return src, dst, 0, err
	}
	if !srcIP.IsValid() || !dstIP.IsValid() {
		return src, dst, 0, errNoAddr
	}
	return netip.AddrPortFrom(srcIP, sport), netip.AddrPortFrom(dstIP, dport), proto, nil
}

func addrOf(b []byte, v6 bool) (netip.Addr, error) {
	switch {
	case v6 && len(b) == 16:
		return netip.AddrFrom16([16]byte(b)), nil
	case !v6 && len(b) == 4:
		return netip.AddrFrom4([4]byte(b)), nil
	}
	return netip.Addr{}, errBadAttr
}

// attrsOf walks netlink attributes without allocating (nlkit.Attrs); check
// reports its error as this package's.
func attrsOf(b []byte) nlkit.Attrs { return nlkit.Attrs{B: b} }

func check(a *nlkit.Attrs) error {
	if a.Err != nil {
		return errTruncated
	}
	return nil
}

// appendDelete appends to b one netlink message that deletes exactly the entry e:
// its original tuple, its zone, and its id when known, so that a newer entry with
// the same tuple survives. It asks for no ack: only a failure is answered. It
// refuses an entry without a complete tuple: a ctnetlink delete without a tuple
// flushes the whole table. Encoding by hand allocates nothing per entry.
func appendDelete(b []byte, e Entry) ([]byte, error) {
	src, dst := e.OrigSrc.Addr(), e.OrigDst.Addr()
	if !src.IsValid() || !dst.IsValid() || src.Is4() != dst.Is4() {
		return b, fmt.Errorf("delete conntrack entry %v -> %v: incomplete tuple", e.OrigSrc, e.OrigDst)
	}
	switch e.Proto {
	case unix.IPPROTO_UDP, unix.IPPROTO_SCTP, unix.IPPROTO_TCP:
	default:
		return b, fmt.Errorf("delete conntrack entry %v -> %v: protocol %d has no ports", e.OrigSrc, e.OrigDst, e.Proto)
	}
	b, msg := nlkit.AppendHeader(b, ctMsgType(ctMsgDelete), netlink.Request, 0, 0) // seq 0, pid 0: the kernel
	family := uint8(unix.AF_INET)
	if src.Is6() {
		family = unix.AF_INET6
	}
	b = append(b, nlkit.NfGenMsg(family)...)

	b, orig := nlkit.BeginNested(b, ctaTupleOrig|netlink.Nested)
	b, ip := nlkit.BeginNested(b, ctaTupleIP|netlink.Nested)
	if family == unix.AF_INET {
		s4, d4 := src.As4(), dst.As4()
		b = nlkit.AppendAttr(b, ctaIPv4Src, s4[:])
		b = nlkit.AppendAttr(b, ctaIPv4Dst, d4[:])
	} else {
		s16, d16 := src.As16(), dst.As16()
		b = nlkit.AppendAttr(b, ctaIPv6Src, s16[:])
		b = nlkit.AppendAttr(b, ctaIPv6Dst, d16[:])
	}
	nlkit.EndNested(b, ip)
	b, proto := nlkit.BeginNested(b, ctaTupleProto|netlink.Nested)
	b = nlkit.AppendAttr(b, ctaProtoNum, []byte{e.Proto})
	b = nlkit.AppendAttr(b, ctaProtoSrcPort, binary.BigEndian.AppendUint16(nil, e.OrigSrc.Port()))
	b = nlkit.AppendAttr(b, ctaProtoDstPort, binary.BigEndian.AppendUint16(nil, e.OrigDst.Port()))
	nlkit.EndNested(b, proto)
	nlkit.EndNested(b, orig)

	if e.Zone != 0 {
		b = nlkit.AppendAttr(b, ctaZone, binary.BigEndian.AppendUint16(nil, e.Zone))
	}
	if e.HasID {
		b = nlkit.AppendAttr(b, ctaID, binary.BigEndian.AppendUint32(nil, e.ID))
	}
	nlkit.SetLength(b, msg)
	return b, nil
}
