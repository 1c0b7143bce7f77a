package nft

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
)

// DataType is an nftables data type as used in set keys and values.
type DataType int

const (
	TypeIPv4Addr DataType = iota + 1
	TypeIPv6Addr
	TypeInetProto
	TypeInetService
	TypeMark
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
	}
	return fmt.Sprintf("type(%d)", int(t))
}

// Len is the number of bytes a value of this type occupies (before register padding).
func (t DataType) Len() int {
	switch t {
	case TypeIPv4Addr, TypeMark:
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
// addresses, protocols and ports; host order for marks, as nft does).
type Datum struct {
	Type  DataType
	Bytes []byte
}

// IP makes an address datum of the address's family.
func IP(a netip.Addr) Datum {
	if a.Is4() {
		b := a.As4()
		return Datum{TypeIPv4Addr, b[:]}
	}
	b := a.As16()
	return Datum{TypeIPv6Addr, b[:]}
}

// Proto makes an inet_proto datum (6 tcp, 17 udp, 132 sctp).
func Proto(p uint8) Datum { return Datum{TypeInetProto, []byte{p}} }

// Port makes an inet_service datum.
func Port(p uint16) Datum { return Datum{TypeInetService, binary.BigEndian.AppendUint16(nil, p)} }

// Mark makes a mark datum.
func Mark(m uint32) Datum { return Datum{TypeMark, binary.NativeEndian.AppendUint32(nil, m)} }

// Protocol numbers used by svcproxy.
const (
	ProtoICMP uint8 = 1
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
	ProtoSCTP uint8 = 132
)

var protoNames = map[uint8]string{ProtoICMP: "icmp", ProtoTCP: "tcp", ProtoUDP: "udp", ProtoSCTP: "sctp", 58: "ipv6-icmp"}

// String prints the datum as nft prints a value of its type.
func (d Datum) String() string {
	switch d.Type {
	case TypeIPv4Addr, TypeIPv6Addr:
		a, ok := netip.AddrFromSlice(d.Bytes)
		if !ok {
			return "invalid-addr"
		}
		return a.String()
	case TypeInetProto:
		if n, ok := protoNames[d.Bytes[0]]; ok {
			return n
		}
		return strconv.Itoa(int(d.Bytes[0]))
	case TypeInetService:
		return strconv.Itoa(int(binary.BigEndian.Uint16(d.Bytes)))
	case TypeMark:
		return fmt.Sprintf("0x%08x", binary.NativeEndian.Uint32(d.Bytes))
	}
	return fmt.Sprintf("%x", d.Bytes)
}

// untypedString prints a constant the way nft prints a value whose type it cannot
// infer (a constant inside a concatenated lookup key): the bytes read as a big-endian
// integer, then "[invalid type]".
func (d Datum) untypedString() string {
	var v uint64
	for _, b := range d.Bytes {
		v = v<<8 | uint64(b)
	}
	return fmt.Sprintf("0x%x [invalid type]", v)
}

// padded returns the datum as it sits in a concatenation: padded to 4-byte registers.
func (d Datum) padded() []byte {
	n := (len(d.Bytes) + 3) &^ 3
	out := make([]byte, n)
	copy(out, d.Bytes)
	return out
}

func concatBytes(ds []Datum) []byte {
	if len(ds) == 1 {
		return ds[0].Bytes
	}
	var out []byte
	for _, d := range ds {
		out = append(out, d.padded()...)
	}
	return out
}

// splitBytes is the inverse of concatBytes for the given types.
func splitBytes(types []DataType, b []byte) ([]Datum, error) {
	if len(types) == 1 {
		if len(b) < types[0].Len() {
			return nil, fmt.Errorf("value of %d bytes is short for %s", len(b), types[0])
		}
		return []Datum{{types[0], append([]byte(nil), b[:types[0].Len()]...)}}, nil
	}
	var out []Datum
	for _, t := range types {
		n := t.Len()
		if len(b) < n {
			return nil, fmt.Errorf("concatenation of %d bytes is short for %v", len(b), types)
		}
		out = append(out, Datum{t, append([]byte(nil), b[:n]...)})
		pad := (n + 3) &^ 3
		if pad > len(b) {
			pad = len(b)
		}
		b = b[pad:]
	}
	return out, nil
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
