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

// nfgenmsg is the netfilter header that starts every ctnetlink message: family,
// version 0, resource id 0.
func nfgenmsg(family uint8) []byte { return []byte{family, 0, 0, 0} }

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
		Data:   append(nfgenmsg(family), attrs...),
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
	a := attrs{b: b[4:]}
	for a.next() {
		var err error
		switch a.typ {
		case ctaTupleOrig:
			orig = true
			e.OrigSrc, e.OrigDst, e.Proto, err = decodeTuple(a.val)
		case ctaTupleReply:
			reply = true
			e.ReplySrc, _, _, err = decodeTuple(a.val)
		case ctaID:
			if len(a.val) != 4 {
				return Entry{}, errBadAttr
			}
			e.ID, e.HasID = binary.BigEndian.Uint32(a.val), true
		case ctaStatus:
			if len(a.val) != 4 {
				return Entry{}, errBadAttr
			}
			e.Status = binary.BigEndian.Uint32(a.val)
		case ctaZone:
			if len(a.val) != 2 {
				return Entry{}, errBadAttr
			}
			e.Zone = binary.BigEndian.Uint16(a.val)
		}
		if err != nil {
			return Entry{}, err
		}
	}
	if a.err != nil {
		return Entry{}, a.err
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
	a := attrs{b: b}
	for a.next() {
		switch a.typ {
		case ctaTupleIP:
			ip := attrs{b: a.val}
			for ip.next() {
				switch ip.typ {
				case ctaIPv4Src, ctaIPv6Src:
					srcIP, err = addrOf(ip.val, ip.typ == ctaIPv6Src)
				case ctaIPv4Dst, ctaIPv6Dst:
					dstIP, err = addrOf(ip.val, ip.typ == ctaIPv6Dst)
				}
				if err != nil {
					return src, dst, 0, err
				}
			}
			if ip.err != nil {
				return src, dst, 0, ip.err
			}
		case ctaTupleProto:
			p := attrs{b: a.val}
			for p.next() {
				switch {
				case p.typ == ctaProtoNum && len(p.val) == 1:
					proto = p.val[0]
				case p.typ == ctaProtoSrcPort && len(p.val) == 2:
					sport = binary.BigEndian.Uint16(p.val)
				case p.typ == ctaProtoDstPort && len(p.val) == 2:
					dport = binary.BigEndian.Uint16(p.val)
				case p.typ == ctaProtoNum, p.typ == ctaProtoSrcPort, p.typ == ctaProtoDstPort:
					return src, dst, 0, errBadAttr
				}
			}
			if p.err != nil {
				return src, dst, 0, p.err
			}
		}
	}
	if a.err != nil {
		return src, dst, 0, a.err
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

// attrs walks netlink attributes (header in host byte order, payload padded to 4
// bytes) without allocating; it stops at the first one that runs past the end.
type attrs struct {
	b   []byte
	typ uint16
	val []byte
	err error
}

func (a *attrs) next() bool {
	if len(a.b) < 4 {
		if len(a.b) != 0 {
			a.err = errTruncated
		}
		return false
	}
	n := int(binary.NativeEndian.Uint16(a.b[0:2]))
	if n < 4 || n > len(a.b) {
		a.err = errTruncated
		return false
	}
	a.typ = binary.NativeEndian.Uint16(a.b[2:4]) &^ (netlink.Nested | netlink.NetByteOrder)
	a.val = a.b[4:n]
	a.b = a.b[min((n+3)&^3, len(a.b)):]
	return true
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
	ne := binary.NativeEndian
	msg := len(b)
	b = ne.AppendUint32(b, 0) // nlmsg_len, set at the end
	b = ne.AppendUint16(b, uint16(ctMsgType(ctMsgDelete)))
	b = ne.AppendUint16(b, uint16(netlink.Request))
	b = ne.AppendUint32(b, 0) // seq
	b = ne.AppendUint32(b, 0) // pid: the kernel
	family := uint8(unix.AF_INET)
	if src.Is6() {
		family = unix.AF_INET6
	}
	b = append(b, nfgenmsg(family)...)

	orig := len(b)
	b = attrStart(b, ctaTupleOrig|netlink.Nested)
	ip := len(b)
	b = attrStart(b, ctaTupleIP|netlink.Nested)
	if family == unix.AF_INET {
		s4, d4 := src.As4(), dst.As4()
		b = appendAttr(b, ctaIPv4Src, s4[:])
		b = appendAttr(b, ctaIPv4Dst, d4[:])
	} else {
		s16, d16 := src.As16(), dst.As16()
		b = appendAttr(b, ctaIPv6Src, s16[:])
		b = appendAttr(b, ctaIPv6Dst, d16[:])
	}
	attrEnd(b, ip)
	proto := len(b)
	b = attrStart(b, ctaTupleProto|netlink.Nested)
	b = appendAttr(b, ctaProtoNum, []byte{e.Proto})
	b = appendAttr(b, ctaProtoSrcPort, binary.BigEndian.AppendUint16(nil, e.OrigSrc.Port()))
	b = appendAttr(b, ctaProtoDstPort, binary.BigEndian.AppendUint16(nil, e.OrigDst.Port()))
	attrEnd(b, proto)
	attrEnd(b, orig)

	if e.Zone != 0 {
		b = appendAttr(b, ctaZone, binary.BigEndian.AppendUint16(nil, e.Zone))
	}
	if e.HasID {
		b = appendAttr(b, ctaID, binary.BigEndian.AppendUint32(nil, e.ID))
	}
	ne.PutUint32(b[msg:], uint32(len(b)-msg))
	return b, nil
}

// attrStart opens a nested attribute; attrEnd writes its length once its children
// (each padded to 4 bytes) are in.
func attrStart(b []byte, typ uint16) []byte {
	return binary.NativeEndian.AppendUint16(binary.NativeEndian.AppendUint16(b, 0), typ)
}

func attrEnd(b []byte, start int) {
	binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
}

// appendAttr appends one attribute, padded to 4 bytes.
func appendAttr(b []byte, typ uint16, v []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	for pad := (4 - len(v)%4) % 4; pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}
