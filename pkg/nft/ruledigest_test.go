package nft

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

func TestDumpedRegister(t *testing.T) {
	for _, tc := range []struct{ in, want uint32 }{
		{unix.NFT_REG_VERDICT, unix.NFT_REG_VERDICT},
		{unix.NFT_REG_1, unix.NFT_REG_1},
		{unix.NFT_REG_4, unix.NFT_REG_4},
		{unix.NFT_REG32_00, unix.NFT_REG_1}, // the first 4 bytes of NFT_REG_1
		{unix.NFT_REG32_01, unix.NFT_REG32_01},
		{unix.NFT_REG32_04, unix.NFT_REG_2},
		{unix.NFT_REG32_08, unix.NFT_REG_3},
		{unix.NFT_REG32_15, unix.NFT_REG32_15},
		{5, 5}, {7, 7}, {100, 100}, // no register: the kernel refuses it, kept as it is
	} {
		if got := dumpedRegister(tc.in); got != tc.want {
			t.Errorf("dumpedRegister(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// exprElem encodes one expression as an NFTA_LIST_ELEM's content.
func exprElem(name string, data ...netlink.Attribute) []byte {
	d, _ := netlink.MarshalAttributes(data)
	b, _ := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_EXPR_NAME, Data: []byte(name + "\x00")},
		{Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: d},
	})
	return b
}

func a32(typ uint16, v uint32) netlink.Attribute {
	return netlink.Attribute{Type: typ, Data: binary.BigEndian.AppendUint32(nil, v)}
}

func nest(typ uint16, flag bool, as ...netlink.Attribute) netlink.Attribute {
	b, _ := netlink.MarshalAttributes(as)
	if flag {
		typ |= unix.NLA_F_NESTED
	}
	return netlink.Attribute{Type: typ, Data: b}
}

// verdictGoto is NFT_GOTO (-4) as the kernel sends it, a big-endian u32.
const verdictGoto = 0xfffffffc

func verdictData(flag bool, code uint32, chain string) netlink.Attribute {
	as := []netlink.Attribute{a32(unix.NFTA_VERDICT_CODE, code)}
	if chain != "" {
		as = append(as, netlink.Attribute{Type: unix.NFTA_VERDICT_CHAIN, Data: []byte(chain)})
	}
	return nest(unix.NFTA_IMMEDIATE_DATA, flag, nest(unix.NFTA_DATA_VERDICT, flag, as...))
}

// TestCanonExpr: what the kernel does to an expression between the batch and its
// dump does not make it differ; what changes its effect does.
func TestCanonExpr(t *testing.T) {
	const natDst = 1 // NFT_NAT_DNAT
	nat := func(extra ...netlink.Attribute) []byte {
		return exprElem("nat", append([]netlink.Attribute{a32(unix.NFTA_NAT_TYPE, natDst), a32(unix.NFTA_NAT_FAMILY, unix.NFPROTO_IPV4),
			a32(unix.NFTA_NAT_REG_ADDR_MIN, unix.NFT_REG_1), a32(unix.NFTA_NAT_REG_PROTO_MIN, unix.NFT_REG32_01)}, extra...)...)
	}
	lookup := func(extra ...netlink.Attribute) []byte {
		return exprElem("lookup", append([]netlink.Attribute{{Type: unix.NFTA_LOOKUP_SET, Data: []byte("endpoints-00\x00")},
			a32(unix.NFTA_LOOKUP_SREG, unix.NFT_REG_1)}, extra...)...)
	}
	ct := func(dir []byte) []byte {
		return exprElem("ct", a32(unix.NFTA_CT_DREG, unix.NFT_REG_1), a32(unix.NFTA_CT_KEY, unix.NFT_CT_DST_IP),
			netlink.Attribute{Type: unix.NFTA_CT_DIRECTION, Data: dir})
	}
	reject := func(typ uint32, code ...byte) []byte {
		as := []netlink.Attribute{a32(unix.NFTA_REJECT_TYPE, typ)}
		if len(code) > 0 {
			as = append(as, netlink.Attribute{Type: unix.NFTA_REJECT_ICMP_CODE, Data: code})
		}
		return exprElem("reject", as...)
	}
	payload := func(reg uint32) []byte {
		return exprElem("payload", a32(unix.NFTA_PAYLOAD_DREG, reg), a32(unix.NFTA_PAYLOAD_BASE, 1), a32(unix.NFTA_PAYLOAD_OFFSET, 16), a32(unix.NFTA_PAYLOAD_LEN, 4))
	}
	tests := []struct {
		name  string
		a, b  []byte
		equal bool
	}{
		{"lookup: set ID, unset flags", lookup(a32(unix.NFTA_LOOKUP_SET_ID, 7)), lookup(a32(unix.NFTA_LOOKUP_FLAGS, 0)), true},
		{"lookup: attributes in another order", lookup(a32(unix.NFTA_LOOKUP_DREG, 1)),
			exprElem("lookup", a32(unix.NFTA_LOOKUP_DREG, 1), a32(unix.NFTA_LOOKUP_SREG, unix.NFT_REG_1), netlink.Attribute{Type: unix.NFTA_LOOKUP_SET, Data: []byte("endpoints-00\x00")}), true},
		{"lookup: inverted", lookup(), lookup(a32(unix.NFTA_LOOKUP_FLAGS, unix.NFT_LOOKUP_F_INV)), false},
		{"lookup: another set", lookup(), exprElem("lookup", netlink.Attribute{Type: unix.NFTA_LOOKUP_SET, Data: []byte("endpoints-01\x00")}, a32(unix.NFTA_LOOKUP_SREG, unix.NFT_REG_1)), false},
		{"register named by its 32-bit slot", payload(unix.NFT_REG32_00), payload(unix.NFT_REG_1), true},
		{"another register", payload(unix.NFT_REG_1), payload(unix.NFT_REG_2), false},
		{"nat: max registers and flags the kernel derives", nat(a32(unix.NFTA_NAT_FLAGS, natRangeProtoSpecified)),
			nat(a32(unix.NFTA_NAT_REG_ADDR_MAX, unix.NFT_REG_1), a32(unix.NFTA_NAT_REG_PROTO_MAX, unix.NFT_REG32_01), a32(unix.NFTA_NAT_FLAGS, natRangeMapIPs|natRangeProtoSpecified)), true},
		{"nat: a range of addresses", nat(), nat(a32(unix.NFTA_NAT_REG_ADDR_MAX, unix.NFT_REG_2)), false},
		{"nat: random ports", nat(), nat(a32(unix.NFTA_NAT_FLAGS, 1<<2)), false},
		{"verdict: nesting flags, chain name's NUL", exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(true, verdictGoto, "lb-1-00")),
			exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(false, verdictGoto, "lb-1-00\x00")), true},
		{"verdict: drop for accept", exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(true, nfAccept, "")),
			exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(true, nfDrop, "")), false},
		{"verdict: goto another chain", exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(true, verdictGoto, "lb-1-00")),
			exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(true, verdictGoto, "lb-2-00")), false},
		{"ct direction as u32 and u8", ct([]byte{1, 0, 0, 0}), ct([]byte{1}), true},
		{"ct: the other direction", ct([]byte{0, 0, 0, 0}), ct([]byte{1}), false},
		{"reject: a TCP reset's ICMP code", reject(unix.NFT_REJECT_TCP_RST, 0), reject(unix.NFT_REJECT_TCP_RST), true},
		{"reject: another ICMP code", reject(unix.NFT_REJECT_ICMP_UNREACH, 3), reject(unix.NFT_REJECT_ICMP_UNREACH, 1), false},
		{"numgen: zero offset", exprElem("numgen", a32(unix.NFTA_NG_MODULUS, 2)), exprElem("numgen", a32(unix.NFTA_NG_MODULUS, 2), a32(unix.NFTA_NG_OFFSET, 0)), true},
		{"numgen: an offset", exprElem("numgen", a32(unix.NFTA_NG_MODULUS, 2)), exprElem("numgen", a32(unix.NFTA_NG_MODULUS, 2), a32(unix.NFTA_NG_OFFSET, 1)), false},
		{"another expression, same attributes", exprElem("masq"), exprElem("redir"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ca, err := canonExpr(nil, tc.a)
			if err != nil {
				t.Fatal(err)
			}
			cb, err := canonExpr(nil, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if (string(ca) == string(cb)) != tc.equal {
				t.Fatalf("equal = %v, want %v\n%x\n%x", !tc.equal, tc.equal, ca, cb)
			}
		})
	}
}

func exprList(elems ...[]byte) []byte {
	var as []netlink.Attribute
	for _, e := range elems {
		as = append(as, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: e})
	}
	b, _ := netlink.MarshalAttributes(as)
	return b
}

func TestExprsDigest(t *testing.T) {
	drop := exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(true, nfDrop, ""))
	accept := exprElem("immediate", a32(unix.NFTA_IMMEDIATE_DREG, 0), verdictData(true, nfAccept, ""))
	digest := func(b []byte) uint64 {
		t.Helper()
		d, err := exprsDigest(b)
		if err != nil {
			t.Fatalf("exprsDigest(%x): %v", b, err)
		}
		return d
	}
	if digest(exprList(drop, accept)) == digest(exprList(accept, drop)) {
		t.Error("the order of expressions does not count")
	}
	if digest(exprList(drop)) == digest(exprList(drop, drop)) {
		t.Error("a repeated expression does not count")
	}
	if digest(nil) == foreignExprsDigest {
		t.Error("an empty list digests as foreign")
	}
	for _, bad := range [][]byte{
		{1, 2, 3, 4, 5},                    // an attribute longer than the bytes
		exprList(exprElem("")[8:]),         // an expression without a name
		append(exprList(drop), 4, 0, 2, 0), // an attribute that is not a list element
	} {
		if d, err := exprsDigest(bad); !errors.Is(err, errBadExprs) && err == nil || d != foreignExprsDigest {
			t.Errorf("exprsDigest(%x) = %x, %v; want the foreign digest and an error", bad, d, err)
		}
	}
}

// TestRuleDigestIsItsEncodingsDigest: the digest the plan computes for a desired
// rule is the digest of the expressions Apply sends for it, for every statement of
// both sample tables, and rules that differ have digests that differ.
func TestRuleDigestIsItsEncodingsDigest(t *testing.T) {
	for _, r := range []*Ruleset{sampleRuleset(), sampleRuleset6()} {
		seen := map[uint64]string{}
		for _, name := range sortedKeys(r.Chains) {
			for _, rule := range r.Chains[name].Rules {
				d, err := ruleDigest(r.Family, rule)
				if err != nil {
					t.Fatal(err)
				}
				if sent, err := exprsDigest(ourExprs(t, r.Family, rule)); err != nil || sent != d {
					t.Fatalf("%s %q: ruleDigest %x, digest of its encoding %x (%v)", r.Family, rule, d, sent, err)
				}
				// Comments are user data, not expressions.
				key := (Rule{Stmts: rule.Stmts}).String()
				if other, ok := seen[d]; ok && other != key {
					t.Fatalf("%q and %q have one digest", other, key)
				}
				seen[d] = key
			}
		}
	}
}

// TestChainViewEqualComparesWhatRulesDo: a chain read from the kernel equals the
// desired one only if each rule's expressions do what the desired rule's do,
// whatever its hash says; a chain recorded from our own commit is what we wrote.
func TestChainViewEqualComparesWhatRulesDo(t *testing.T) {
	c := sampleRuleset().Chains["services"]
	written := chainViewOf(c)
	if !written.equal(c, FamilyIPv4) {
		t.Fatal("a chain recorded from our commit differs from itself")
	}
	read := chainViewOf(c)
	for _, r := range c.Rules {
		d, err := ruleDigest(FamilyIPv4, r)
		if err != nil {
			t.Fatal(err)
		}
		read.Exprs = append(read.Exprs, d)
	}
	if !read.equal(c, FamilyIPv4) {
		t.Fatal("a chain read back with the right digests differs")
	}
	if read.equal(c, FamilyIPv6) {
		t.Fatal("the ip chain's digests equal the ip6 encoding's (ct keys differ)")
	}
	forged := read
	forged.Exprs = append([]uint64(nil), read.Exprs...)
	forged.Exprs[0], _ = ruleDigest(FamilyIPv4, Rule{Stmts: []Stmt{Verdict{Kind: Accept}}})
	if forged.equal(c, FamilyIPv4) {
		t.Fatal("a rule replaced by an accept carrying the original's hash is equal")
	}
	short := read
	short.Exprs = read.Exprs[:len(read.Exprs)-1]
	if short.equal(c, FamilyIPv4) {
		t.Fatal("a read with a digest missing is equal")
	}
}

// ourExprs encodes r's expressions as the NFTA_RULE_EXPRESSIONS payload Apply sends.
func ourExprs(t testing.TB, family Family, r Rule) []byte {
	t.Helper()
	var elems [][]byte
	for _, e := range ruleExprs(&encCtx{family: family, setID: func(string) uint32 { return 0 }}, r) {
		b, err := expr.Marshal(byte(family), e)
		if err != nil {
			t.Fatal(err)
		}
		patchCtKey(b, ctIPKey(family))
		elems = append(elems, b)
	}
	return exprList(elems...)
}

// exprsOf returns the NFTA_RULE_EXPRESSIONS payload of a rule message.
func exprsOf(msg []byte) []byte {
	ad, err := nlkit.Msg(msg)
	if err != nil {
		return nil
	}
	var b []byte
	for ad.Next() {
		if ad.Type() == unix.NFTA_RULE_EXPRESSIONS {
			b = ad.Bytes()
		}
	}
	return b
}

// canonText prints the canonical form of each expression of a list, for failures.
func canonText(t *testing.T, list []byte) string {
	var parts []string
	_ = nlkit.WalkAttrs(list, func(_ uint16, _ int, elem []byte) {
		c, err := canonExpr(nil, elem)
		if err != nil {
			parts = append(parts, err.Error())
			return
		}
		parts = append(parts, hex.EncodeToString(c))
	})
	return strings.Join(parts, " | ")
}

// kernelRuleSeeds returns the expressions of the rules the kernel dumped in
// TestGenerateFuzzCorpus (testdata/fuzz/FuzzDecodeRule).
func kernelRuleSeeds(f *testing.F) [][]byte {
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeRule", "kernel*"))
	var out [][]byte
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			continue
		}
		msg, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		if e := exprsOf([]byte(msg)); e != nil {
			out = append(out, e)
		}
	}
	return out
}

// FuzzExprsDigest: the digest of whatever bytes another program's rule holds is
// computed without a panic, the same every time, and is the foreign digest exactly
// when the bytes cannot be decoded. Seeded with the kernel's dumps of every
// statement svcproxy writes and with svcproxy's own encodings.
func FuzzExprsDigest(f *testing.F) {
	for _, seed := range kernelRuleSeeds(f) {
		f.Add(seed)
	}
	for _, r := range []*Ruleset{sampleRuleset(), sampleRuleset6()} {
		for _, c := range r.Chains {
			for _, rule := range c.Rules {
				f.Add(ourExprs(f, r.Family, rule))
			}
		}
	}
	f.Fuzz(func(t *testing.T, list []byte) {
		d, err := exprsDigest(list)
		if (err != nil) != (d == foreignExprsDigest) {
			t.Fatalf("digest %x with error %v", d, err)
		}
		if again, _ := exprsDigest(list); again != d {
			t.Fatalf("digest %x, then %x", d, again)
		}
	})
}

// BenchmarkRuleCompare is the content comparison's cost per rule on a full read:
// the digest of the kernel's expressions (in Read) and of the desired rule's (in
// the plan). A table has few rules (59 at 10k Services: the lb chains are shared),
// so this is microseconds per drift check.
//
//	go test -run '^$' -bench RuleCompare ./pkg/nft/
func BenchmarkRuleCompare(b *testing.B) {
	r := sampleRuleset()
	var rules []Rule
	var dumped [][]byte
	for _, name := range sortedKeys(r.Chains) {
		for _, rule := range r.Chains[name].Rules {
			rules = append(rules, rule)
			dumped = append(dumped, ourExprs(b, r.Family, rule))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i, rule := range rules {
			got, _ := exprsDigest(dumped[i])
			if want, _ := ruleDigest(r.Family, rule); got != want {
				b.Fatal("digests differ")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rules)), "ns/rule")
}
