package nft

import (
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"

	"github.com/svcproxy/svcproxy/internal/nlkit"
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
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETRULE, uint8(family), []netlink.Attribute{
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
