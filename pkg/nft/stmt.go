package nft

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Stmt is one statement of a rule. Each statement knows how nft prints it and how it
// is encoded as netlink expressions; the two are tested against each other in the
// kernel tests (render -> netlink -> `nft list table` == our text).
type Stmt interface {
	String() string
	exprs(c *encCtx) []expr.Any
}

// encCtx carries what encoding needs beyond the statement itself.
type encCtx struct {
	family Family
	// setID returns the batch ID of a set created in the same transaction, or 0.
	setID func(name string) uint32
}

// Match compares a field with a constant: "meta l4proto tcp", "ip saddr != 10.0.0.1".
type Match struct {
	Field  Field
	Negate bool
	Value  Datum
}

func (m Match) String() string {
	if m.Negate {
		return fmt.Sprintf("%s != %s", m.Field, m.Value)
	}
	return fmt.Sprintf("%s %s", m.Field, m.Value)
}

func (m Match) exprs(*encCtx) []expr.Any {
	return []expr.Any{m.Field.load(unix.NFT_REG_1), &expr.Cmp{Op: cmpOp(m.Negate), Register: unix.NFT_REG_1, Data: m.Value.Bytes()}}
}

// MatchPrefix matches an address field against a prefix: "ip saddr != 10.244.0.0/16".
type MatchPrefix struct {
	Field  Field
	Negate bool
	Prefix netip.Prefix
}

func (m MatchPrefix) String() string {
	if m.Negate {
		return fmt.Sprintf("%s != %s", m.Field, m.Prefix.Masked())
	}
	return fmt.Sprintf("%s %s", m.Field, m.Prefix.Masked())
}

func (m MatchPrefix) exprs(*encCtx) []expr.Any {
	p := m.Prefix.Masked()
	addr := IP(p.Addr()).Bytes()
	mask := make([]byte, len(addr))
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		m.Field.load(unix.NFT_REG_1),
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: uint32(len(addr)), Mask: mask, Xor: make([]byte, len(addr))},
		&expr.Cmp{Op: cmpOp(m.Negate), Register: unix.NFT_REG_1, Data: addr},
	}
}

func cmpOp(negate bool) expr.CmpOp {
	if negate {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

// Lookup tests membership of a (possibly concatenated) key in a named set:
// "ip daddr @cluster-ips".
type Lookup struct {
	Key    []Operand
	Set    string
	Negate bool
}

func (l Lookup) String() string {
	if l.Negate {
		return fmt.Sprintf("%s != @%s", joinOperands(l.Key), l.Set)
	}
	return fmt.Sprintf("%s @%s", joinOperands(l.Key), l.Set)
}

func (l Lookup) exprs(c *encCtx) []expr.Any {
	out, reg := loadConcat(l.Key)
	return append(out, &expr.Lookup{SourceRegister: reg, SetName: l.Set, SetID: c.setID(l.Set), Invert: l.Negate})
}

// VMap dispatches on a key through a named verdict map:
// "ip daddr . meta l4proto . th dport vmap @service-ips".
type VMap struct {
	Key []Operand
	Map string
}

func (v VMap) String() string {
	return fmt.Sprintf("%s vmap @%s", joinOperands(v.Key), v.Map)
}

func (v VMap) exprs(c *encCtx) []expr.Any {
	out, reg := loadConcat(v.Key)
	return append(out, &expr.Lookup{SourceRegister: reg, DestRegister: 0, IsDestRegSet: true, SetName: v.Map, SetID: c.setID(v.Map)})
}

// Numgen matches when a fresh random number modulo Mod equals Value:
// "numgen random mod 3 0". Each evaluation draws a new number.
type Numgen struct {
	Mod, Value uint32
}

func (n Numgen) String() string { return fmt.Sprintf("numgen random mod %d %d", n.Mod, n.Value) }

func (n Numgen) exprs(*encCtx) []expr.Any {
	return []expr.Any{
		&expr.Numgen{Register: unix.NFT_REG_1, Modulus: n.Mod, Type: unix.NFT_NG_RANDOM},
		&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: binary.NativeEndian.AppendUint32(nil, n.Value)},
	}
}

// Update adds the key to a dynamic set or map, or refreshes its timeout if present
// (an existing element keeps its data): "update @affinity { ip saddr . ip daddr
// timeout 3h }", or with Data "update @m { ip saddr timeout 3h : ip daddr . ct reply
// proto-src }".
type Update struct {
	Set     string
	Key     []Operand
	Data    []Operand
	Timeout time.Duration
}

func (u Update) String() string {
	t := ""
	if u.Timeout > 0 {
		t = " timeout " + formatDuration(u.Timeout)
	}
	data := ""
	if len(u.Data) > 0 {
		data = " : " + joinOperands(u.Data)
	}
	// Unlike in a lookup, nft types the constants of a dynset key from the set.
	parts := make([]string, len(u.Key))
	for i, o := range u.Key {
		parts[i] = o.String()
		if o.Const != nil {
			parts[i] = o.Const.String()
		}
	}
	return fmt.Sprintf("update @%s { %s%s%s }", u.Set, strings.Join(parts, " . "), t, data)
}

func (u Update) exprs(c *encCtx) []expr.Any {
	out, reg := loadConcat(u.Key)
	d := &expr.Dynset{SrcRegKey: reg, SetName: u.Set, SetID: c.setID(u.Set), Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: u.Timeout}
	if len(u.Data) > 0 {
		// As nft: a key of up to 16 bytes fills NFT_REG_1, the data starts in
		// NFT_REG_2. A longer key (an IPv6 client . ClusterIP . proto . port, 40
		// bytes) is followed directly by the data in the next 32-bit register: nft
		// 1.0.6 would round the key up to three 16-byte registers and have no room
		// left for the 20 bytes of an IPv6 endpoint . port (it aborts on such a
		// rule); the kernel only asks that key and data fit in its 64 bytes.
		start := uint32(4)
		if k := concatSlots(u.Key); k > 4 {
			start = k
		}
		data, dreg := loadConcatAt(u.Data, start)
		out = append(out, data...)
		d.SrcRegData = dreg
	}
	return append(out, d)
}

// DNAT rewrites the destination: "dnat to 10.244.1.2:80", "dnat to [fd00::2]:80"
// (in an ip6 table nft needs no family here: the table gives it).
type DNAT struct {
	Addr netip.Addr
	Port uint16
}

func (d DNAT) String() string {
	return fmt.Sprintf("dnat to %s", netip.AddrPortFrom(d.Addr, d.Port))
}

func (d DNAT) exprs(c *encCtx) []expr.Any {
	fam := uint32(unix.NFPROTO_IPV4)
	if d.Addr.Is6() {
		fam = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Immediate{Register: unix.NFT_REG_1, Data: IP(d.Addr).Bytes()},
		&expr.Immediate{Register: unix.NFT_REG_2, Data: Port(d.Port).Bytes()},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: fam, RegAddrMin: unix.NFT_REG_1, RegProtoMin: unix.NFT_REG_2, Specified: true},
	}
}

// DNATMap rewrites the destination to the address . port that a map returns for the
// key: "dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 3 map @endpoints",
// "dnat ip6 to ..." with Family FamilyIPv6.
type DNATMap struct {
	Key []Operand
	Map string
	// Family is the family of the address the map returns; the zero value is IPv4.
	Family Family
}

func (d DNATMap) String() string {
	return fmt.Sprintf("dnat %s to %s map @%s", d.family(), joinOperands(d.Key), d.Map)
}

func (d DNATMap) family() Family {
	if d.Family == FamilyIPv6 {
		return FamilyIPv6
	}
	return FamilyIPv4
}

func (d DNATMap) exprs(c *encCtx) []expr.Any {
	out, reg := loadConcat(d.Key)
	// The data (address, then port in the next register) overwrites the key. The
	// port follows a 4-byte address in NFT_REG32_01, a 16-byte one in NFT_REG_2,
	// where nft puts them.
	fam, port := uint32(unix.NFPROTO_IPV4), uint32(unix.NFT_REG32_01)
	if d.family() == FamilyIPv6 {
		fam, port = unix.NFPROTO_IPV6, unix.NFT_REG_2
	}
	return append(out,
		&expr.Lookup{SourceRegister: reg, DestRegister: unix.NFT_REG_1, IsDestRegSet: true, SetName: d.Map, SetID: c.setID(d.Map)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: fam, RegAddrMin: unix.NFT_REG_1, RegProtoMin: port, Specified: true},
	)
}

// Masquerade rewrites the source to the outgoing interface's address.
type Masquerade struct{ FullyRandom bool }

func (m Masquerade) String() string {
	if m.FullyRandom {
		return "masquerade fully-random"
	}
	return "masquerade"
}

func (m Masquerade) exprs(*encCtx) []expr.Any {
	return []expr.Any{&expr.Masq{FullyRandom: m.FullyRandom}}
}

// MarkOr sets bits in the packet mark: "meta mark set meta mark | 0x00004000".
// MarkXor flips them: "meta mark set meta mark ^ 0x00004000".
type MarkOr struct{ Bits uint32 }
type MarkXor struct{ Bits uint32 }

func (m MarkOr) String() string  { return fmt.Sprintf("meta mark set meta mark | 0x%08x", m.Bits) }
func (m MarkXor) String() string { return fmt.Sprintf("meta mark set meta mark ^ 0x%08x", m.Bits) }

func (m MarkOr) exprs(*encCtx) []expr.Any  { return markSet(^m.Bits, m.Bits) }
func (m MarkXor) exprs(*encCtx) []expr.Any { return markSet(0xffffffff, m.Bits) }

func markSet(mask, xor uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: unix.NFT_REG_1},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, mask), Xor: binary.NativeEndian.AppendUint32(nil, xor)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: unix.NFT_REG_1},
	}
}

// MarkMatch matches masked mark bits: "meta mark & 0x00004000 == 0x00004000".
type MarkMatch struct{ Mask, Value uint32 }

func (m MarkMatch) String() string {
	return fmt.Sprintf("meta mark & 0x%08x == 0x%08x", m.Mask, m.Value)
}

func (m MarkMatch) exprs(*encCtx) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: unix.NFT_REG_1},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, m.Mask), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: unix.NFT_REG_1, Data: binary.NativeEndian.AppendUint32(nil, m.Value)},
	}
}

// CtStatusDNAT matches connections whose destination was translated: "ct status dnat".
type CtStatusDNAT struct{}

func (CtStatusDNAT) String() string { return "ct status dnat" }

func (CtStatusDNAT) exprs(*encCtx) []expr.Any {
	bit := binary.NativeEndian.AppendUint32(nil, 1<<5) // IPS_DST_NAT
	return []expr.Any{
		&expr.Ct{Register: unix.NFT_REG_1, Key: expr.CtKeySTATUS},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4, Mask: bit, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: unix.NFT_REG_1, Data: make([]byte, 4)},
	}
}

// CtStateNew matches the first packet of a connection: "ct state new".
type CtStateNew struct{}

func (CtStateNew) String() string { return "ct state new" }

func (CtStateNew) exprs(*encCtx) []expr.Any {
	bit := binary.NativeEndian.AppendUint32(nil, 1<<3) // NF_CT_STATE_BIT(IP_CT_NEW)
	return []expr.Any{
		&expr.Ct{Register: unix.NFT_REG_1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4, Mask: bit, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: unix.NFT_REG_1, Data: make([]byte, 4)},
	}
}

// Reject refuses the packet: an ICMP port unreachable, or a TCP reset. A TCP reset
// applies to TCP only: it is encoded after a "meta l4proto tcp" match, as nft
// encodes "reject with tcp reset" (and omits that match again when listing), so that
// other packets go on to the next rule.
type Reject struct{ TCPReset bool }

func (r Reject) String() string {
	if r.TCPReset {
		return "reject with tcp reset"
	}
	return "reject"
}

func (r Reject) exprs(c *encCtx) []expr.Any {
	if r.TCPReset {
		tcp := Match{Field: FieldL4Proto, Value: Proto(ProtoTCP)}
		return append(tcp.exprs(c), &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})
	}
	// ICMP(v6) port unreachable; x/sys/unix has no ICMP_PORT_UNREACH constant.
	code := uint8(3)
	if c.family == FamilyIPv6 {
		code = 4 // ICMPV6_PORT_UNREACH
	}
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}}
}

// String prints the verdict as nft does.
func (v Verdict) String() string {
	switch v.Kind {
	case Accept:
		return "accept"
	case Drop:
		return "drop"
	case Return:
		return "return"
	case Jump:
		return "jump " + v.Chain
	case Goto:
		return "goto " + v.Chain
	}
	return "invalid-verdict"
}

func (v Verdict) exprs(*encCtx) []expr.Any {
	return []expr.Any{v.expr()}
}

func (v Verdict) expr() *expr.Verdict {
	switch v.Kind {
	case Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}
	case Return:
		return &expr.Verdict{Kind: expr.VerdictReturn}
	case Jump:
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: v.Chain}
	case Goto:
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: v.Chain}
	}
	return &expr.Verdict{Kind: expr.VerdictAccept}
}

// formatDuration prints a duration as nft does ("3h", "1m30s", "10s").
func formatDuration(d time.Duration) string {
	ms := d.Milliseconds()
	if ms == 0 {
		return "0s"
	}
	s := ""
	for _, u := range []struct {
		n    int64
		name string
	}{{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}} {
		if ms >= u.n {
			s += fmt.Sprintf("%d%s", ms/u.n, u.name)
			ms %= u.n
		}
	}
	return s
}
