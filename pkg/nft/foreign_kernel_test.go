package nft

import (
	"context"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

// addRawRule appends a rule with the given user data to a chain of the namespace's
// table, as another program (or a damaged write) could: nft cannot write raw user data.
func addRawRule(t *testing.T, ns *netnstest.NS, table, chain string, ud []byte) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd))
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: table}
	c.AddRule(&nftables.Rule{Table: tb, Chain: &nftables.Chain{Table: tb, Name: chain},
		Exprs: []expr.Any{&expr.Counter{}}, UserData: ud})
	if err := c.Flush(); err != nil {
		t.Fatalf("add rule with user data %x: %v", ud, err)
	}
}

func TestKernelMalformedRuleUserDataIsDriftNotAPanic(t *testing.T) {
	tests := []struct {
		name string
		ud   []byte
	}{
		{"TLV length runs past the end", []byte{byte(ruleHashType), 0xff, 1, 2}},
		{"comment TLV overruns before the hash", []byte{0, 200, 'x'}},
		{"hash of 3 bytes", []byte{byte(ruleHashType), 3, 1, 2, 3}},
		{"lone type byte", []byte{byte(ruleHashType)}},
		{"no user data", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := netnstest.New(t, "badud")
			k := &Netlink{NetNSFd: ns.Fd}
			r := sampleRuleset()
			if err := k.Apply(context.Background(), PlanFull(r, NewView())); err != nil {
				t.Fatal(err)
			}
			addRawRule(t, ns, "sample", "services", tc.ud)
			v, err := k.Read(context.Background(), FamilyIPv4, "sample")
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if !Compatible(r, v) {
				t.Fatal("a foreign rule must be repaired in place, not by recreating the table")
			}
			tx := PlanFull(r, v)
			if len(tx.Chains) != 1 || tx.Chains[0].Name != "services" || len(tx.DelElements) != 0 {
				t.Fatalf("plan should rewrite only chain services: chains=%v delElements=%d", chainNames(tx.Chains), len(tx.DelElements))
			}
			if err := k.Apply(context.Background(), tx); err != nil {
				t.Fatalf("apply repair: %v", err)
			}
			assertConverged(t, ns, k, r)
			// --cleanup deletes a table it could not even read.
			addRawRule(t, ns, "sample", "services", tc.ud)
			if err := k.DeleteTable(context.Background(), FamilyIPv4, "sample"); err != nil {
				t.Fatalf("delete table: %v", err)
			}
			if out := ns.MustRun(t, "nft", "list", "tables"); strings.Contains(out, "sample") {
				t.Fatalf("table still there after DeleteTable: %s", out)
			}
			if err := k.DeleteTable(context.Background(), FamilyIPv4, "sample"); err != nil {
				t.Fatalf("deleting a missing table: %v", err)
			}
		})
	}
}

// TestKernelForeignObjectsAreRemoved adds, with the nft binary, what another program
// could leave in our table, and checks that one read, plan and apply removes it: in
// place (no recreate, none of our elements deleted) when deleting suffices, by an
// atomic recreate when our own objects were redefined.
func TestKernelForeignObjectsAreRemoved(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		forge    func(*testing.T, *netnstest.NS) // instead of script, what nft cannot write
		recreate bool
		ours     bool // the change replaced one of our elements, which the plan deletes
	}{
		{name: "set of a type svcproxy never uses", script: "add set ip sample foreign { type ether_addr; }\nadd element ip sample foreign { 00:11:22:33:44:55 }"},
		{name: "map with a data type svcproxy never uses", script: "add map ip sample fmap { type ipv4_addr : ether_addr; elements = { 1.2.3.4 : 00:11:22:33:44:55 } }"},
		{name: "interval set", script: "add set ip sample fnets { type ipv4_addr; flags interval; elements = { 10.0.0.0/8 } }"},
		{name: "set of our types", script: "add set ip sample fips { type ipv4_addr; elements = { 10.1.1.1 } }"},
		{name: "chain with a rule", script: "add chain ip sample foreign\nadd rule ip sample foreign counter"},
		{name: "base chain with policy drop", script: "add chain ip sample fbase { type filter hook input priority 0; policy drop; }"},
		{name: "chains jumping to each other", script: "add chain ip sample a-foreign\nadd chain ip sample z-foreign\nadd rule ip sample z-foreign jump a-foreign"},
		{name: "verdict map of another key type jumping to a foreign chain", script: "add chain ip sample fchain\nadd map ip sample fvmap { type ether_addr : verdict; elements = { 00:11:22:33:44:55 : jump fchain } }"},
		{name: "foreign rule with an anonymous set in our chain", script: "add rule ip sample services ip saddr { 1.1.1.1, 2.2.2.2 } drop"},
		{name: "element in our set", script: "add element ip sample ips { 10.9.9.9 }"},
		{name: "element of ours changed", script: "delete element ip sample dispatch { 10.96.0.13 . tcp . 80 }\nadd element ip sample dispatch { 10.96.0.13 . tcp . 80 : accept }", ours: true},
		{name: "element of ours changed, its comment kept", script: "delete element ip sample dispatch { 10.96.0.12 . tcp . 80 }\nadd element ip sample dispatch { 10.96.0.12 . tcp . 80 comment \"ns/web:http\" : drop }", ours: true},
		{name: "rule of ours replaced, its user data kept", forge: func(t *testing.T, ns *netnstest.NS) {
			replaceRuleKeepingUserData(t, ns, "svc-b", 0, []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}})
		}},
		{name: "base chain's rule replaced, its user data kept", forge: func(t *testing.T, ns *netnstest.NS) {
			replaceRuleKeepingUserData(t, ns, "nat-prerouting", 0, []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})
		}},
		{name: "base chain recreated at another priority", script: "delete chain ip sample nat-prerouting\nadd chain ip sample nat-prerouting { type nat hook prerouting priority 100; }\nadd rule ip sample nat-prerouting jump services", recreate: true},
		{name: "dynamic set recreated with a default timeout", script: "flush chain ip sample svc-a\ndelete set ip sample sticky\nadd set ip sample sticky { type ipv4_addr . ipv4_addr . inet_service . ipv4_addr . inet_service; flags dynamic,timeout; size 65536; timeout 1s; }", recreate: true},
		{name: "rule in a chain jumping to a foreign chain", script: "add chain ip sample fjump\nadd rule ip sample svc-b jump fjump"},
		{name: "our base chain's policy set to drop", script: "add chain ip sample nat-prerouting { type nat hook prerouting priority -100; policy drop; }"},
		{name: "catch-all element in our verdict map", script: "add element ip sample dispatch { * : drop }", recreate: true},
		{name: "table made dormant", script: "add table ip sample { flags dormant; }", recreate: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := netnstest.New(t, "foreign")
			k := &Netlink{NetNSFd: ns.Fd}
			r := sampleRuleset()
			if err := k.Apply(context.Background(), PlanFull(r, NewView())); err != nil {
				t.Fatal(err)
			}
			if tc.forge != nil {
				tc.forge(t, ns)
			} else {
				ns.MustRun(t, "sh", "-c", "printf '%s\\n' \"$0\" | nft -f -", tc.script)
			}
			v, err := k.Read(context.Background(), FamilyIPv4, "sample")
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			tx := PlanFull(r, v)
			if recreate := !Compatible(r, v); recreate != tc.recreate {
				t.Fatalf("recreate = %v, want %v", recreate, tc.recreate)
			}
			if tc.recreate {
				tx = PlanFull(r, NewView())
				tx.Recreate = true
			}
			for _, e := range tx.DelElements {
				if _, ours := r.Element(e.ID()); ours && !tc.recreate && !tc.ours {
					t.Fatalf("plan deletes our element %v", e)
				}
			}
			if err := k.Apply(context.Background(), tx); err != nil {
				t.Fatalf("apply: %v\n%s", err, ns.MustRun(t, "nft", "list", "table", "ip", "sample"))
			}
			assertConverged(t, ns, k, r)
		})
	}
}

// replaceRuleKeepingUserData replaces rule index of chain in table sample with a
// rule of other expressions that carries the original's user data (its Rule.Hash).
func replaceRuleKeepingUserData(t *testing.T, ns *netnstest.NS, chain string, index int, exprs []expr.Any) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd))
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "sample"}
	ch := &nftables.Chain{Table: tb, Name: chain}
	rules, err := c.GetRules(tb, ch)
	if err != nil || len(rules) <= index {
		t.Fatalf("rules of %s: %d, %v", chain, len(rules), err)
	}
	c.ReplaceRule(&nftables.Rule{Table: tb, Chain: ch, Handle: rules[index].Handle, Exprs: exprs, UserData: rules[index].UserData})
	if err := c.Flush(); err != nil {
		t.Fatalf("replace rule %d of %s: %v", index, chain, err)
	}
}

// assertConverged checks that the kernel holds exactly r and that a read-back plans
// nothing.
func assertConverged(t *testing.T, ns *netnstest.NS, k *Netlink, r *Ruleset) {
	t.Helper()
	if got := NormalizeListing(ns.MustRun(t, "nft", "list", "table", "ip", "sample")); got != r.Text() {
		t.Fatalf("kernel differs from desired\n--- kernel\n%s\n--- want\n%s", got, r.Text())
	}
	v, err := k.Read(context.Background(), FamilyIPv4, "sample")
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if tx := PlanFull(r, v); !tx.Empty() || !Compatible(r, v) {
		t.Fatalf("plan after repair is not empty: %+v", tx)
	}
}

func chainNames(cs []*Chain) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
