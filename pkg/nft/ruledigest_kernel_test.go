package nft

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/nlattr"
)

// TestKernelRuleDigestsMatch: every rule of the sample tables (every statement
// svcproxy writes, both families), as the kernel dumps it, has the digest of the
// Rule svcproxy rendered for it. Were one to differ, every read of the table would
// rewrite that rule's chain; the drift check relies on the two agreeing exactly
// when the rules do the same.
func TestKernelRuleDigestsMatch(t *testing.T) {
	ns := netnstest.New(t, "digest")
	k := &Netlink{NetNSFd: ns.Fd}
	for _, r := range []*Ruleset{sampleRuleset(), sampleRuleset6()} {
		if err := k.Apply(t.Context(), PlanFull(r, NewView())); err != nil {
			t.Fatalf("apply %s: %v", r.Family, err)
		}
		conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.Fd})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, name := range sortedKeys(r.Chains) {
			c := r.Chains[name]
			msgs := dumpRules(t, conn, r.Family, r.Table, name)
			if len(msgs) != len(c.Rules) {
				t.Fatalf("%s %s: kernel holds %d rules, want %d", r.Family, name, len(msgs), len(c.Rules))
			}
			for i, m := range msgs {
				_, _, _, got, err := decodeRule(m)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ruleDigest(r.Family, c.Rules[i])
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s %s rule %d %q: kernel digest %x, ours %x\nkernel: %s\nours:   %s", r.Family, name, i, c.Rules[i],
						got, want, canonText(t, exprsOf(m)), canonText(t, ourExprs(t, r.Family, c.Rules[i])))
				}
			}
		}
		v, err := k.Read(t.Context(), r.Family, r.Table)
		if err != nil {
			t.Fatal(err)
		}
		if tx := PlanFull(r, v); !tx.Empty() {
			t.Fatalf("%s: plan after read-back is not empty: %d chains", r.Family, len(tx.Chains))
		}
	}
}

func dumpRules(t *testing.T, conn *netlink.Conn, family Family, table, chain string) [][]byte {
	t.Helper()
	msgs, err := dumpOn(conn, unix.NFT_MSG_GETRULE, family, []netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, m := range msgs {
		out = append(out, m.Data)
	}
	return out
}

// exprsOf returns the NFTA_RULE_EXPRESSIONS payload of a rule message.
func exprsOf(msg []byte) []byte {
	ad, err := nlattr.Msg(msg)
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

// ourExprs encodes r's expressions as an NFTA_RULE_EXPRESSIONS payload.
func ourExprs(t *testing.T, family Family, r Rule) []byte {
	t.Helper()
	var attrs []netlink.Attribute
	for _, e := range ruleExprs(&encCtx{family: family, setID: func(string) uint32 { return 0 }}, r) {
		b, err := expr.Marshal(byte(family), e)
		if err != nil {
			t.Fatal(err)
		}
		patchCtKey(b, ctIPKey(family))
		attrs = append(attrs, netlink.Attribute{Type: unix.NLA_F_NESTED | unix.NFTA_LIST_ELEM, Data: b})
	}
	b, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonText prints the canonical form of each expression of a list, for failures.
func canonText(t *testing.T, list []byte) string {
	var parts []string
	_ = walkAttrs(list, func(_ uint16, _ int, elem []byte) {
		c, err := canonExpr(nil, elem)
		if err != nil {
			parts = append(parts, err.Error())
			return
		}
		parts = append(parts, hex.EncodeToString(c))
	})
	return strings.Join(parts, " | ")
}
