package nft

import (
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Field is a packet or metadata field that a rule can load into a register.
type Field int

const (
	FieldIPSaddr Field = iota + 1
	FieldIPDaddr
	FieldIP6Saddr
	FieldIP6Daddr
	FieldL4Proto
	FieldThDport
	FieldMark
	// Conntrack fields. The original direction is the tuple the client sent (the
	// ClusterIP and service port even after DNAT); the reply tuple's source is where
	// the connection was translated to.
	FieldCtProtocol      // ct protocol
	FieldCtOrigDaddr     // ct original ip daddr
	FieldCtOrigDaddr6    // ct original ip6 daddr
	FieldCtOrigProtoDst  // ct original proto-dst
	FieldCtReplyProtoSrc // ct reply proto-src
)

func (f Field) String() string {
	switch f {
	case FieldIPSaddr:
		return "ip saddr"
	case FieldIPDaddr:
		return "ip daddr"
	case FieldIP6Saddr:
		return "ip6 saddr"
	case FieldIP6Daddr:
		return "ip6 daddr"
	case FieldL4Proto:
		return "meta l4proto"
	case FieldThDport:
		return "th dport"
	case FieldMark:
		return "meta mark"
	case FieldCtProtocol:
		return "ct protocol"
	case FieldCtOrigDaddr:
		return "ct original ip daddr"
	case FieldCtOrigDaddr6:
		return "ct original ip6 daddr"
	case FieldCtOrigProtoDst:
		return "ct original proto-dst"
	case FieldCtReplyProtoSrc:
		return "ct reply proto-src"
	}
	return "invalid-field"
}

// Type is the data type of the field's value.
func (f Field) Type() DataType {
	switch f {
	case FieldIPSaddr, FieldIPDaddr, FieldCtOrigDaddr:
		return TypeIPv4Addr
	case FieldIP6Saddr, FieldIP6Daddr, FieldCtOrigDaddr6:
		return TypeIPv6Addr
	case FieldL4Proto, FieldCtProtocol:
		return TypeInetProto
	case FieldThDport, FieldCtOrigProtoDst, FieldCtReplyProtoSrc:
		return TypeInetService
	case FieldMark:
		return TypeMark
	}
	return 0
}

// load returns the expression that puts the field into register reg.
func (f Field) load(reg uint32) expr.Any {
	switch f {
	case FieldIPSaddr:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
	case FieldIPDaddr:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
	case FieldIP6Saddr:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 16}
	case FieldIP6Daddr:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16}
	case FieldL4Proto:
		return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg}
	case FieldThDport:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
	case FieldMark:
		return &expr.Meta{Key: expr.MetaKeyMARK, Register: reg}
	case FieldCtProtocol:
		return &expr.Ct{Key: expr.CtKeyPROTOCOL, Register: reg}
	case FieldCtOrigDaddr, FieldCtOrigDaddr6:
		// NFT_CT_DST: nft prints it "ct original ip daddr" in an ip table and
		// "ct original ip6 daddr" in an ip6 table (it parses those texts into
		// NFT_CT_DST_IP and NFT_CT_DST_IP6, which google/nftables cannot encode:
		// it sends no direction for those keys). withCtIPKeys patches the key.
		return &expr.Ct{Key: expr.CtKeyDST, Register: reg, Direction: ctDirOriginal}
	case FieldCtOrigProtoDst:
		return &expr.Ct{Key: expr.CtKeyPROTODST, Register: reg, Direction: ctDirOriginal}
	case FieldCtReplyProtoSrc:
		return &expr.Ct{Key: expr.CtKeyPROTOSRC, Register: reg, Direction: ctDirReply}
	}
	return nil
}

// Conntrack tuple directions (IP_CT_DIR_ORIGINAL, IP_CT_DIR_REPLY) as expr.Ct must
// hold them: the kernel reads NFTA_CT_DIRECTION as a u8 (its first byte), and
// google/nftables writes the field as a big-endian u32, so the value goes in the
// top byte.
const (
	ctDirOriginal = 0
	ctDirReply    = 1 << 24
)

// Operand is a field or a constant in a concatenated key.
type Operand struct {
	Field Field
	// Mask, when set, is ANDed with the field: "ip daddr & 0.0.0.15".
	Mask  *Datum
	Const *Datum
	// Random, when non-zero, is a fresh random number modulo Random (a mark-typed
	// value): "numgen random mod N".
	Random uint32
	// Offset is added to the random number: "numgen random mod N offset K" draws from
	// K..K+N-1, so that two ranges of slots can share one map.
	Offset uint32
}

// F, C and Random make operands.
func F(f Field) Operand         { return Operand{Field: f} }
func C(d Datum) Operand         { return Operand{Const: &d} }
func Random(mod uint32) Operand { return Operand{Random: mod} }

// FMasked is field f ANDed with mask (a datum of f's type).
func FMasked(f Field, mask Datum) Operand { return Operand{Field: f, Mask: &mask} }

// Fs makes a key of fields.
func Fs(fs ...Field) []Operand { return fieldOperands(fs) }

// RandomFrom is Random(mod) plus offset.
func RandomFrom(mod, offset uint32) Operand { return Operand{Random: mod, Offset: offset} }

func (o Operand) String() string {
	switch {
	case o.Const != nil:
		return o.Const.untypedString()
	case o.Random != 0 && o.Offset != 0:
		return fmt.Sprintf("numgen random mod %d offset %d", o.Random, o.Offset)
	case o.Random != 0:
		return fmt.Sprintf("numgen random mod %d", o.Random)
	case o.Mask != nil:
		return fmt.Sprintf("%s & %s", o.Field, o.Mask)
	}
	return o.Field.String()
}

func (o Operand) len() int {
	switch {
	case o.Const != nil:
		return int(o.Const.n)
	case o.Random != 0:
		return 4
	}
	return o.Field.Type().Len()
}

func (o Operand) load(reg uint32) []expr.Any {
	switch {
	case o.Const != nil:
		return []expr.Any{&expr.Immediate{Register: reg, Data: o.Const.Bytes()}}
	case o.Random != 0:
		return []expr.Any{&expr.Numgen{Register: reg, Modulus: o.Random, Type: unix.NFT_NG_RANDOM, Offset: o.Offset}}
	case o.Mask != nil:
		n := o.Field.Type().Len()
		return []expr.Any{o.Field.load(reg),
			&expr.Bitwise{SourceRegister: reg, DestRegister: reg, Len: uint32(n), Mask: o.Mask.Bytes(), Xor: make([]byte, n)}}
	}
	return []expr.Any{o.Field.load(reg)}
}

// loadConcat loads operands into consecutive registers the way nft does (first into
// NFT_REG_1, the rest into the following 32-bit registers) and returns the source
// register of the whole key.
func loadConcat(ops []Operand) ([]expr.Any, uint32) { return loadConcatAt(ops, 0) }

// loadConcatAt is loadConcat starting at the 32-bit register slot (0 is
// NFT_REG32_00, the first byte of NFT_REG_1). A slot on a 16-byte boundary is
// named as the 16-byte register, as nft names it: nft puts a dynset's data in
// NFT_REG_2 (slot 4) after a key of up to 16 bytes.
func loadConcatAt(ops []Operand, slot uint32) ([]expr.Any, uint32) {
	first := uint32(unix.NFT_REG32_00) + slot
	if slot%4 == 0 {
		first = unix.NFT_REG_1 + slot/4
	}
	var out []expr.Any
	for i, o := range ops {
		reg := uint32(unix.NFT_REG32_00) + slot
		if i == 0 {
			reg = first
		}
		out = append(out, o.load(reg)...)
		slot += uint32((o.len() + 3) / 4)
	}
	return out, first
}

// concatSlots is the number of 32-bit registers a concatenation of ops fills.
func concatSlots(ops []Operand) uint32 {
	n := uint32(0)
	for _, o := range ops {
		n += uint32((o.len() + 3) / 4)
	}
	return n
}

func joinOperands(ops []Operand) string {
	s := ""
	for i, o := range ops {
		if i > 0 {
			s += " . "
		}
		s += o.String()
	}
	return s
}

func fieldOperands(fs []Field) []Operand {
	out := make([]Operand, len(fs))
	for i, f := range fs {
		out[i] = F(f)
	}
	return out
}
