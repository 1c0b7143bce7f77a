package nft

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// What the kernel does to an expression between the batch and its dump, undone
// here so that the rule svcproxy sends and the rule the kernel holds compare
// equal exactly when they do the same thing (see ruledigest.go). Each entry is a
// kernel behaviour (net/netfilter/nft_*.c, Linux 5.10 to 6.x):
//
//   - batchOnly: attributes that name an object created in the same batch; the
//     kernel resolves them and never dumps them.
//   - zeroDefault: attributes the kernel dumps even when they are zero (flags,
//     offsets, timeouts), whose absence means zero.
//   - registers: every register is parsed to a 4-byte slot and dumped under the
//     kernel's own name for that slot (NFT_REG_n on a 16-byte boundary,
//     NFT_REG32_nn elsewhere), whichever of the two names was sent.
//   - nat: an absent max register is the min one, and the kernel adds the flags
//     the registers imply.
//   - reject: the ICMP code means nothing to a TCP reset and is not dumped.
//   - ct: the direction is a u8 (nla_get_u8 reads the first byte); google/nftables
//     sends a native-endian u32.
var (
	batchOnly = map[string][]uint16{
		"lookup": {unix.NFTA_LOOKUP_SET_ID},
		"dynset": {unix.NFTA_DYNSET_SET_ID},
	}
	zeroDefault = map[string][]uint16{
		"lookup":  {unix.NFTA_LOOKUP_FLAGS},
		"dynset":  {unix.NFTA_DYNSET_FLAGS, unix.NFTA_DYNSET_TIMEOUT},
		"numgen":  {unix.NFTA_NG_OFFSET},
		"bitwise": {nftaBitwiseOp},
		"nat":     {unix.NFTA_NAT_FLAGS},
		"masq":    {unix.NFTA_MASQ_FLAGS},
		"fib":     {unix.NFTA_FIB_FLAGS},
	}
	registers = map[string][]uint16{
		"payload":   {unix.NFTA_PAYLOAD_DREG, unix.NFTA_PAYLOAD_SREG},
		"meta":      {unix.NFTA_META_DREG, unix.NFTA_META_SREG},
		"ct":        {unix.NFTA_CT_DREG, unix.NFTA_CT_SREG},
		"cmp":       {unix.NFTA_CMP_SREG},
		"bitwise":   {unix.NFTA_BITWISE_SREG, unix.NFTA_BITWISE_DREG},
		"lookup":    {unix.NFTA_LOOKUP_SREG, unix.NFTA_LOOKUP_DREG},
		"dynset":    {unix.NFTA_DYNSET_SREG_KEY, unix.NFTA_DYNSET_SREG_DATA},
		"immediate": {unix.NFTA_IMMEDIATE_DREG},
		"numgen":    {unix.NFTA_NG_DREG},
		"fib":       {unix.NFTA_FIB_DREG},
		"range":     {unix.NFTA_RANGE_SREG},
		"nat":       {unix.NFTA_NAT_REG_ADDR_MIN, unix.NFTA_NAT_REG_ADDR_MAX, unix.NFTA_NAT_REG_PROTO_MIN, unix.NFTA_NAT_REG_PROTO_MAX},
		"masq":      {unix.NFTA_MASQ_REG_PROTO_MIN, unix.NFTA_MASQ_REG_PROTO_MAX},
	}
)

// Attributes of bitwise newer than golang.org/x/sys's list (Linux 5.13):
// NFTA_BITWISE_OP (NFT_BITWISE_BOOL, 0, unless a shift) and NFTA_BITWISE_DATA
// (a shift's amount, an nft_data).
const (
	nftaBitwiseOp   = 6
	nftaBitwiseData = 7
)

// nf_nat range flags the kernel derives from a nat expression's registers.
const (
	natRangeMapIPs         = 1 << 0 // NF_NAT_RANGE_MAP_IPS
	natRangeProtoSpecified = 1 << 1 // NF_NAT_RANGE_PROTO_SPECIFIED
)

// normalizeExpr rewrites the attributes of one expression named name to the form
// the kernel dumps; attrs may be modified in place.
func normalizeExpr(name string, attrs []attr) []attr {
	out := attrs[:0]
	for _, a := range attrs {
		switch {
		case contains(batchOnly[name], a.typ):
			continue
		case contains(zeroDefault[name], a.typ) && allZero(a.val):
			continue
		case contains(registers[name], a.typ) && len(a.val) == 4:
			a.val = binary.BigEndian.AppendUint32(nil, dumpedRegister(binary.BigEndian.Uint32(a.val)))
		case name == "ct" && a.typ == unix.NFTA_CT_DIRECTION && len(a.val) > 1:
			a.val = a.val[:1]
		}
		out = append(out, a)
	}
	switch name {
	case "nat":
		out = normalizeNAT(out)
	case "reject":
		out = normalizeReject(out)
	}
	return out
}

// dumpedRegister is the name the kernel dumps register r under (nft_parse_register,
// then nft_dump_register): NFT_REG_1..4 and NFT_REG32_00..15 name the same slots.
func dumpedRegister(r uint32) uint32 {
	const per = 4 // NFT_REG_SIZE / NFT_REG32_SIZE
	var slot uint32
	switch {
	case r <= unix.NFT_REG_4:
		slot = r * per
	case r >= unix.NFT_REG32_00 && r <= unix.NFT_REG32_15:
		slot = r - unix.NFT_REG32_00 + per
	default:
		return r // refused by the kernel: left as it is
	}
	if slot%per == 0 {
		return slot / per
	}
	return slot - per + unix.NFT_REG32_00
}

// normalizeNAT applies nft_nat_init's defaults: max registers equal to the min
// ones are dropped (their absence means that), and the flags get the bits the
// registers imply.
func normalizeNAT(attrs []attr) []attr {
	get := func(typ uint16) ([]byte, bool) {
		for _, a := range attrs {
			if a.typ == typ {
				return a.val, true
			}
		}
		return nil, false
	}
	addrMin, hasAddr := get(unix.NFTA_NAT_REG_ADDR_MIN)
	protoMin, hasProto := get(unix.NFTA_NAT_REG_PROTO_MIN)
	var flags uint32
	if f, ok := get(unix.NFTA_NAT_FLAGS); ok && len(f) == 4 {
		flags = binary.BigEndian.Uint32(f)
	} else if ok {
		return attrs // malformed: compared as it is
	}
	if hasAddr {
		flags |= natRangeMapIPs
	}
	if hasProto {
		flags |= natRangeProtoSpecified
	}
	out := attrs[:0]
	for _, a := range attrs {
		switch {
		case a.typ == unix.NFTA_NAT_FLAGS:
			continue
		case a.typ == unix.NFTA_NAT_REG_ADDR_MAX && hasAddr && string(a.val) == string(addrMin):
			continue
		case a.typ == unix.NFTA_NAT_REG_PROTO_MAX && hasProto && string(a.val) == string(protoMin):
			continue
		}
		out = append(out, a)
	}
	if flags != 0 {
		out = append(out, attr{unix.NFTA_NAT_FLAGS, binary.BigEndian.AppendUint32(nil, flags)})
	}
	return out
}

// normalizeReject drops the ICMP code of a TCP reset, which nft_reject_init
// ignores and nft_reject_dump omits.
func normalizeReject(attrs []attr) []attr {
	tcp := false
	for _, a := range attrs {
		if a.typ == unix.NFTA_REJECT_TYPE && len(a.val) == 4 && binary.BigEndian.Uint32(a.val) == unix.NFT_REJECT_TCP_RST {
			tcp = true
		}
	}
	if !tcp {
		return attrs
	}
	out := attrs[:0]
	for _, a := range attrs {
		if a.typ != unix.NFTA_REJECT_ICMP_CODE {
			out = append(out, a)
		}
	}
	return out
}

func contains(ts []uint16, t uint16) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
