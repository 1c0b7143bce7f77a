package nft

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func TestRuleHashOf(t *testing.T) {
	good := ruleUserData(Rule{Comment: "wrong port"})
	want := Rule{Comment: "wrong port"}.Hash()
	tests := []struct {
		name string
		ud   []byte
		hash uint64
		ok   bool
	}{
		{"as written, after a comment", good, want, true},
		{"hash only", userdata.Append(nil, ruleHashType, []byte{1, 2, 3, 4, 5, 6, 7, 8}), 0x0102030405060708, true},
		{"empty", nil, foreignRuleHash, false},
		{"comment only", userdata.AppendString(nil, userdata.TypeComment, "x"), foreignRuleHash, false},
		{"hash TLV longer than the data", []byte{byte(ruleHashType), 0xff, 1, 2}, foreignRuleHash, false},
		{"comment TLV longer than the data, hash after", append([]byte{0, 50, 'x'}, good...), foreignRuleHash, false},
		{"hash of 3 bytes", []byte{byte(ruleHashType), 3, 1, 2, 3}, foreignRuleHash, false},
		{"lone type byte", []byte{byte(ruleHashType)}, foreignRuleHash, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := ruleHashOf(tc.ud)
			if h != tc.hash || ok != tc.ok {
				t.Fatalf("ruleHashOf(%x) = %x, %v; want %x, %v", tc.ud, h, ok, tc.hash, tc.ok)
			}
		})
	}
}

func setMessage(flags, keyType, keyLen uint32, data ...uint32) []byte {
	u32 := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	as := []netlink.Attribute{
		{Type: unix.NFTA_SET_TABLE, Data: []byte("svcproxy\x00")},
		{Type: unix.NFTA_SET_NAME, Data: []byte("s\x00")},
		{Type: unix.NFTA_SET_FLAGS, Data: u32(flags)},
		{Type: unix.NFTA_SET_KEY_TYPE, Data: u32(keyType)},
		{Type: unix.NFTA_SET_KEY_LEN, Data: u32(keyLen)},
	}
	if len(data) == 2 {
		as = append(as, netlink.Attribute{Type: unix.NFTA_SET_DATA_TYPE, Data: u32(data[0])}, netlink.Attribute{Type: unix.NFTA_SET_DATA_LEN, Data: u32(data[1])})
	}
	b, _ := netlink.MarshalAttributes(as)
	return append([]byte{unix.NFPROTO_IPV4, 0, 0, 0}, b...)
}

// withAttrs appends attributes to an nfnetlink message.
func withAttrs(msg []byte, as ...netlink.Attribute) []byte {
	b, _ := netlink.MarshalAttributes(as)
	return append(msg, b...)
}

func TestDecodeSet(t *testing.T) {
	const ipv4, etherAddr, service = 7, 9, 13
	tests := []struct {
		name    string
		msg     []byte
		want    string // typesText of the key, "" for foreign
		foreign bool
		anon    bool
	}{
		{"ipv4_addr set", setMessage(0, ipv4, 4), "ipv4_addr", false, false},
		{"ether_addr set", setMessage(0, etherAddr, 6), "", true, false},
		{"interval flag", setMessage(unix.NFT_SET_INTERVAL, ipv4, 4), "", true, false},
		{"key length does not fit the type", setMessage(0, ipv4, 16), "", true, false},
		{"concatenation", setMessage(setFlagConcat, ipv4<<6|service, 8), "ipv4_addr . inet_service", false, false},
		{"map to ether_addr", setMessage(unix.NFT_SET_MAP, ipv4, 4, etherAddr, 6), "", true, false},
		{"data type on a plain set", setMessage(0, ipv4, 4, ipv4, 4), "", true, false},
		{"anonymous", setMessage(unix.NFT_SET_ANONYMOUS|unix.NFT_SET_CONSTANT, ipv4, 4), "", true, true},
		{"no key type", setMessage(0, 0, 0), "", true, false},
		{"default timeout", withAttrs(setMessage(unix.NFT_SET_TIMEOUT|unix.NFT_SET_EVAL, ipv4, 4), netlink.Attribute{Type: unix.NFTA_SET_TIMEOUT, Data: []byte{0, 0, 0, 0, 0, 0, 3, 0xe8}}), "", true, false},
		{"default timeout of zero", withAttrs(setMessage(unix.NFT_SET_TIMEOUT|unix.NFT_SET_EVAL, ipv4, 4), netlink.Attribute{Type: unix.NFTA_SET_TIMEOUT, Data: make([]byte, 8)}), "ipv4_addr", false, false},
		{"an expression", withAttrs(setMessage(unix.NFT_SET_EVAL, ipv4, 4), netlink.Attribute{Type: nftaSetExprAttr | unix.NLA_F_NESTED}), "", true, false},
		{"expressions", withAttrs(setMessage(unix.NFT_SET_EVAL, ipv4, 4), netlink.Attribute{Type: nftaSetExpressions | unix.NLA_F_NESTED}), "", true, false},
		{"object type", withAttrs(setMessage(0, ipv4, 4), netlink.Attribute{Type: unix.NFTA_SET_OBJ_TYPE, Data: []byte{0, 0, 0, 1}}), "", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl, s, anon, err := decodeSet(tc.msg)
			if errors.Is(err, errForeign) != tc.foreign || (err != nil && !tc.foreign) {
				t.Fatalf("err = %v, want foreign %v", err, tc.foreign)
			}
			if tbl != "svcproxy" || s.Name != "s" || typesText(s.Key) != tc.want || anon != tc.anon {
				t.Fatalf("got %q %+v anonymous=%v, want key %q anonymous=%v", tbl, s, anon, tc.want, tc.anon)
			}
		})
	}
	for _, short := range [][]byte{nil, {2}, {2, 0, 0}, {2, 0, 0, 0, 0xff}} {
		if _, _, _, err := decodeSet(short); err == nil {
			t.Errorf("decodeSet(%x) accepted a truncated message", short)
		}
	}
}

// TestDecodeElementAttributesSvcproxyNeverWrites: an element of ours that does more
// than map its key (expressions of its own, a stateful object, an interval end)
// makes its set foreign, so the table is rebuilt rather than trusted.
func TestDecodeElementAttributesSvcproxyNeverWrites(t *testing.T) {
	s := &Set{Name: "ips", Key: []DataType{TypeIPv4Addr}}
	key, _ := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_DATA_VALUE, Data: []byte{10, 96, 0, 10}}})
	elem := func(extra ...netlink.Attribute) []byte {
		b, _ := netlink.MarshalAttributes(append([]netlink.Attribute{{Type: unix.NFTA_SET_ELEM_KEY | unix.NLA_F_NESTED, Data: key}}, extra...))
		return b
	}
	tests := []struct {
		name    string
		b       []byte
		foreign bool
	}{
		{"key only", elem(), false},
		{"an expression", elem(netlink.Attribute{Type: unix.NFTA_SET_ELEM_EXPR | unix.NLA_F_NESTED}), true},
		{"expressions", elem(netlink.Attribute{Type: nftaSetElemExpressions | unix.NLA_F_NESTED}), true},
		{"an object reference", elem(netlink.Attribute{Type: unix.NFTA_SET_ELEM_OBJREF, Data: []byte("q\x00")}), true},
		{"an interval end", elem(netlink.Attribute{Type: nftaSetElemKeyEnd | unix.NLA_F_NESTED, Data: key}), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := decodeElement(s, tc.b)
			if errors.Is(err, errForeign) != tc.foreign || (err != nil && !tc.foreign) {
				t.Fatalf("err = %v, want foreign %v", err, tc.foreign)
			}
			if !tc.foreign && e.ID() != (Element{Set: "ips", Key: []Datum{IP(netip.MustParseAddr("10.96.0.10"))}}).ID() {
				t.Fatalf("decoded %+v", e)
			}
		})
	}
}
