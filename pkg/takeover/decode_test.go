package takeover

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func attrsOf(t testing.TB, as ...netlink.Attribute) []byte {
	t.Helper()
	b, err := netlink.MarshalAttributes(as)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// immediateExpr is an immediate expression loading a verdict (code, chain) into dreg.
func immediateExpr(t testing.TB, dreg uint32, code int32, chain string) []byte {
	verdict := []netlink.Attribute{{Type: unix.NFTA_VERDICT_CODE, Data: u32(uint32(code))}}
	if chain != "" {
		verdict = append(verdict, netlink.Attribute{Type: unix.NFTA_VERDICT_CHAIN, Data: []byte(chain + "\x00")})
	}
	data := attrsOf(t, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_DATA_VERDICT, Data: attrsOf(t, verdict...)})
	return attrsOf(t,
		netlink.Attribute{Type: unix.NFTA_EXPR_NAME, Data: []byte("immediate\x00")},
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: attrsOf(t,
			netlink.Attribute{Type: unix.NFTA_IMMEDIATE_DREG, Data: u32(dreg)},
			netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_IMMEDIATE_DATA, Data: data},
		)})
}

// xtMatchExpr is an xtables compat match (iptables-nft's `-m comment ...`), whose
// data the decoder must skip.
func xtMatchExpr(t testing.TB) []byte {
	return attrsOf(t,
		netlink.Attribute{Type: unix.NFTA_EXPR_NAME, Data: []byte("match\x00")},
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_EXPR_DATA, Data: attrsOf(t,
			netlink.Attribute{Type: 1, Data: []byte("comment\x00")},
			netlink.Attribute{Type: 3, Data: make([]byte, 256)},
		)})
}

func ruleMsg(t testing.TB, table, chain string, handle uint64, exprs ...[]byte) []byte {
	var list []netlink.Attribute
	for _, e := range exprs {
		list = append(list, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: e})
	}
	b := attrsOf(t,
		netlink.Attribute{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")},
		netlink.Attribute{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")},
		netlink.Attribute{Type: unix.NFTA_RULE_HANDLE, Data: binary.BigEndian.AppendUint64(nil, handle)},
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_RULE_EXPRESSIONS, Data: attrsOf(t, list...)},
	)
	return append([]byte{unix.NFPROTO_IPV4, 0, 0, 0}, b...)
}

func TestDecodeRuleMsg(t *testing.T) {
	tests := []struct {
		name  string
		exprs [][]byte
		want  []string
	}{
		{"iptables-nft -m comment -j KUBE-SERVICES", [][]byte{xtMatchExpr(t), immediateExpr(t, unix.NFT_REG_VERDICT, unix.NFT_JUMP, "KUBE-SERVICES")}, []string{"KUBE-SERVICES"}},
		{"-g", [][]byte{immediateExpr(t, unix.NFT_REG_VERDICT, unix.NFT_GOTO, "KUBE-SVC-X")}, []string{"KUBE-SVC-X"}},
		{"-j ACCEPT has no target", [][]byte{immediateExpr(t, unix.NFT_REG_VERDICT, 1, "")}, nil},
		{"a verdict not in the verdict register is data", [][]byte{immediateExpr(t, 1, unix.NFT_JUMP, "KUBE-SERVICES")}, nil},
		{"no expressions", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table, chain, r, err := decodeRuleMsg(ruleMsg(t, "nat", "PREROUTING", 42, tc.exprs...))
			if err != nil {
				t.Fatal(err)
			}
			if table != "nat" || chain != "PREROUTING" || r.Handle != 42 {
				t.Errorf("got %s %s handle %d, want nat PREROUTING 42", table, chain, r.Handle)
			}
			if diff := cmp.Diff(tc.want, r.Targets); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzDecodeRuleMsg(f *testing.F) {
	f.Add(ruleMsg(f, "nat", "PREROUTING", 7, xtMatchExpr(f), immediateExpr(f, unix.NFT_REG_VERDICT, unix.NFT_JUMP, "KUBE-SERVICES")))
	f.Add(ruleMsg(f, "filter", "FORWARD", 1, immediateExpr(f, unix.NFT_REG_VERDICT, unix.NFT_GOTO, "")))
	f.Add([]byte{2, 0, 0, 0, 4, 0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		_, _, r, err := decodeRuleMsg(msg)
		if err != nil && (r.Handle != 0 || r.Targets != nil) {
			t.Fatalf("error %v with a rule %+v", err, r)
		}
	})
}

func FuzzDecodeChainMsg(f *testing.F) {
	f.Add(append([]byte{2, 0, 0, 0}, attrsOf(f,
		netlink.Attribute{Type: unix.NFTA_CHAIN_TABLE, Data: []byte("nat\x00")},
		netlink.Attribute{Type: unix.NFTA_CHAIN_NAME, Data: []byte("PREROUTING\x00")},
		netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_CHAIN_HOOK, Data: attrsOf(f,
			netlink.Attribute{Type: unix.NFTA_HOOK_HOOKNUM, Data: u32(0)},
			netlink.Attribute{Type: unix.NFTA_HOOK_PRIORITY, Data: u32(uint32(0xffffff9c))},
		)},
	)...))
	f.Fuzz(func(t *testing.T, msg []byte) {
		table, name, base, err := decodeChainMsg(msg)
		if err != nil && (table != "" || name != "" || base) {
			t.Fatalf("error %v with chain %q %q base %v", err, table, name, base)
		}
	})
}
