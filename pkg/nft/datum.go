package nft

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// DataType is an nftables data type as used in set keys and values.
type DataType uint8

const (
	TypeIPv4Addr DataType = iota + 1
	TypeIPv6Addr
	TypeInetProto
	TypeInetService
	TypeMark
	// TypeInteger is a 32-bit integer in host byte order, the type of a number
	// "numgen" makes.
	TypeInteger
)

func (t DataType) String() string {
	switch t {
	case TypeIPv4Addr:
		return "ipv4_addr"
	case TypeIPv6Addr:
		return "ipv6_addr"
	case TypeInetProto:
		return "inet_proto"
	case TypeInetService:
		return "inet_service"
	case TypeMark:
		return "mark"
	case TypeInteger:
		return "integer"
	}
	return fmt.Sprintf("type(%d)", int(t))
}

// Len is the number of bytes a value of this type occupies (before register padding).
func (t DataType) Len() int {
	switch t {
	case TypeIPv4Addr, TypeMark, TypeInteger:
		return 4
	case TypeIPv6Addr:
		return 16
	case TypeInetProto:
		return 1
	case TypeInetService:
		return 2
	}
	return 0
}

// Datum is one typed value, kept as the bytes the kernel sees (network byte order for
// addresses, protocols and ports; host order for marks, as nft does). It holds its
// bytes inline: a table has hundreds of thousands of element keys, and a value
// without pointers costs neither an allocation nor garbage-collector scanning.
type Datum struct {
	Type DataType
	n    uint8
	b    [16]byte
}

func newDatum(t DataType, b []byte) Datum {
	d := Datum{Type: t}
	d.n = uint8(copy(d.b[:], b))
	return d
}

// Bytes returns a copy of the value's bytes.
func (d Datum) Bytes() []byte { return append([]byte(nil), d.b[:d.n]...) }

// IP makes an address datum of the address's family.
func IP(a netip.Addr) Datum {
	if a.Is4() {
		b := a.As4()
		return newDatum(TypeIPv4Addr, b[:])
	}
	b := a.As16()
	return newDatum(TypeIPv6Addr, b[:])
}

// Proto makes an inet_proto datum (6 tcp, 17 udp, 132 sctp).
func Proto(p uint8) Datum { return newDatum(TypeInetProto, []byte{p}) }

// Port makes an inet_service datum.
func Port(p uint16) Datum { return newDatum(TypeInetService, binary.BigEndian.AppendUint16(nil, p)) }

// Mark makes a mark datum.
func Mark(m uint32) Datum { return newDatum(TypeMark, binary.NativeEndian.AppendUint32(nil, m)) }

// Int makes an integer datum (host byte order, as numgen produces it).
func Int(v uint32) Datum { return newDatum(TypeInteger, binary.NativeEndian.AppendUint32(nil, v)) }

// Protocol numbers used by svcproxy.
const (
	ProtoICMP uint8 = 1
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
	ProtoSCTP uint8 = 132
	// ProtoICMPv6 is ICMP's IPv6 counterpart (nft prints it "ipv6-icmp").
	ProtoICMPv6 uint8 = 58
)

var protoNames = map[uint8]string{ProtoICMP: "icmp", ProtoTCP: "tcp", ProtoUDP: "udp", ProtoSCTP: "sctp", ProtoICMPv6: "ipv6-icmp"}

// String prints the datum as nft prints a value of its type.
func (d Datum) String() string {
	switch d.Type {
	case TypeIPv4Addr, TypeIPv6Addr:
		a, ok := netip.AddrFromSlice(d.b[:d.n])
		if !ok {
			return "invalid-addr"
		}
		return a.String()
	case TypeInetProto:
		if n, ok := protoNames[d.b[0]]; ok {
			return n
		}
		return strconv.Itoa(int(d.b[0]))
	case TypeInetService:
		return strconv.Itoa(int(binary.BigEndian.Uint16(d.b[:2])))
	case TypeMark:
		return fmt.Sprintf("0x%08x", binary.NativeEndian.Uint32(d.b[:4]))
	case TypeInteger:
		return strconv.FormatUint(uint64(binary.NativeEndian.Uint32(d.b[:4])), 10)
	}
	return fmt.Sprintf("%x", d.b[:d.n])
}

// untypedString prints a constant the way nft prints a value whose type it cannot
// infer (a constant inside a concatenated lookup key): the bytes read as a big-endian
// integer, then "[invalid type]".
func (d Datum) untypedString() string {
	var v uint64
	for _, b := range d.b[:d.n] {
		v = v<<8 | uint64(b)
	}
	return fmt.Sprintf("0x%x [invalid type]", v)
}

// concatBytes is the bytes of a key or value as the kernel is given them: a single
// datum as it is, a concatenation padded to 4-byte registers. One allocation: it
// runs for every element rendered, hundreds of thousands on a cold start.
func concatBytes(ds []Datum) []byte {
	return appendConcat(make([]byte, 0, concatLen(ds)), ds)
}

// concatString is string(concatBytes(ds)), in one allocation.
func concatString(ds []Datum) string {
	if len(ds) == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(concatLen(ds))
	writeConcat(&b, ds)
	return b.String()
}

// writeConcat writes concatBytes(ds) to b.
func writeConcat(b *strings.Builder, ds []Datum) {
	if len(ds) == 1 {
		b.Write(ds[0].b[:ds[0].n])
		return
	}
	for i := range ds {
		writePadded(b, &ds[i])
	}
}

// writePadded writes d's bytes and pads them to four: one Datum of a concatenation
// of several.
func writePadded(b *strings.Builder, d *Datum) {
	b.Write(d.b[:d.n])
	for pad := (4 - int(d.n)%4) % 4; pad > 0; pad-- {
		b.WriteByte(0)
	}
}

// concatLen is len(concatBytes(ds)).
func concatLen(ds []Datum) int {
	if len(ds) == 1 {
		return int(ds[0].n)
	}
	n := 0
	for _, d := range ds {
		n += (int(d.n) + 3) &^ 3
	}
	return n
}

// appendConcat appends concatBytes(ds) to b.
func appendConcat(b []byte, ds []Datum) []byte {
	if len(ds) == 1 {
		return append(b, ds[0].b[:ds[0].n]...)
	}
	for _, d := range ds {
		b = append(b, d.b[:d.n]...)
		for pad := (4 - int(d.n)%4) % 4; pad > 0; pad-- {
			b = append(b, 0)
		}
	}
	return b
}

// splitBytes is the inverse of concatBytes for the given types.
func splitBytes(types []DataType, b []byte) ([]Datum, error) {
	out, ok := appendSplit(nil, types, b, len(types) > 1)
	if !ok {
		return nil, fmt.Errorf("%d bytes are short for %v", len(b), types)
	}
	return out, nil
}

// appendSplit appends to dst the Datums of types that b concatenates, each padded
// to four bytes when padded (a concatenation of several: writeConcat), and reports
// whether b held them. It takes a string too, which the ruleset's encodings are,
// so that reading one back (Ruleset.LastData) copies nothing but the Datums.
func appendSplit[B ~string | ~[]byte](dst []Datum, types []DataType, b B, padded bool) ([]Datum, bool) {
	for _, t := range types {
		n := t.Len()
		if len(b) < n {
			return dst, false
		}
		d := Datum{Type: t, n: uint8(n)}
		copy(d.b[:], b[:n])
		dst = append(dst, d)
		if padded {
			n = min((n+3)&^3, len(b))
		}
		b = b[n:]
	}
	return dst, true
}

func joinData(ds []Datum) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += " . "
		}
		s += d.String()
	}
	return s
}
