package nft

import (
	"bytes"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// The typeof user data we write is byte for byte what nft itself writes for the same
// declaration, so nft reads our sets as its own.
func TestKernelTypeofUserDataMatchesNft(t *testing.T) {
	ns := netnstest.New(t, "typeof")
	k := &Netlink{NetNSFd: ns.Fd}
	tests := []struct {
		decl string
		set  *Set
	}{
		{"map m { typeof ip daddr . meta l4proto . th dport . numgen random mod 65536 : ip daddr . th dport ; }",
			&Set{Name: "m", Key: []DataType{TypeIPv4Addr, TypeInetProto, TypeInetService, TypeInteger}, Data: []DataType{TypeIPv4Addr, TypeInetService},
				KeyExpr:  []Operand{F(FieldIPDaddr), F(FieldL4Proto), F(FieldThDport), Random(65536)},
				DataExpr: []Operand{F(FieldIPDaddr), F(FieldThDport)}}},
		{"set s { typeof ip saddr . ip daddr . th dport . ip daddr ; }",
			&Set{Name: "s", Key: []DataType{TypeIPv4Addr, TypeIPv4Addr, TypeInetService, TypeIPv4Addr},
				KeyExpr: []Operand{F(FieldIPSaddr), F(FieldIPDaddr), F(FieldThDport), F(FieldIPDaddr)}}},
		{"set d { typeof ip daddr ; }",
			&Set{Name: "d", Key: []DataType{TypeIPv4Addr}, KeyExpr: []Operand{F(FieldIPDaddr)}}},
	}
	ns.MustRun(t, "nft", "add", "table", "ip", "u")
	for _, tc := range tests {
		ns.MustRun(t, "nft", "add "+tc.decl[:3]+" ip u "+tc.decl[4:])
	}
	got := map[string][]byte{}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: k.NetNSFd})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETSET, uint8(FamilyIPv4), []netlink.Attribute{{Type: unix.NFTA_SET_TABLE, Data: []byte("u\x00")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		var name string
		var ud []byte
		_ = nlkit.WalkAttrs(m.Data[4:], func(typ uint16, _ int, v []byte) {
			switch typ {
			case unix.NFTA_SET_NAME:
				name = nlkit.CString(v)
			case unix.NFTA_SET_USERDATA:
				ud = v
			}
		})
		got[name] = ud
	}
	for _, tc := range tests {
		want, err := setUserData(tc.set)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[tc.set.Name], want) {
			t.Errorf("%s:\nnft writes %x\nwe write   %x", tc.decl, got[tc.set.Name], want)
		}
	}
}
