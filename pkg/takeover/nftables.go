package takeover

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// families are the nf_tables families kube-proxy writes in: iptables-nft's `ip` and
// `ip6` tables, and nftables mode's `ip`/`ip6 kube-proxy`.
var families = []struct {
	name string
	nf   nftables.TableFamily
}{{"ip", nftables.TableFamilyIPv4}, {"ip6", nftables.TableFamilyIPv6}}

// attempts bounds the commits of one family (see removeFamilyWithRetries).
const attempts = 3

// removeNFTables removes, family by family and in one transaction each, the jump
// rules into kube-proxy's chains, those chains, and the kube-proxy table.
func removeNFTables(ctx context.Context, o Options, r *Report) error {
	var errs []error
	for _, f := range families {
		if err := removeFamilyWithRetries(ctx, o, f.name, f.nf, r); err != nil {
			errs = append(errs, fmt.Errorf("family %s: %w", f.name, err))
		}
	}
	return errors.Join(errs...)
}

// removeFamilyWithRetries reads, plans and commits until a read finds nothing left
// to remove. A failed commit is an unknown outcome, not a failure: the kernel may
// have committed the batch and failed only the acknowledgements (ENOBUFS on a big
// one), or another program changed a table between the read and the commit; the
// next read tells. What is reported removed is the first plan, once a later read
// finds it gone.
func removeFamilyWithRetries(ctx context.Context, o Options, family string, nf nftables.TableFamily, r *Report) error {
	var first *familyPlan
	var lastErr error
	for i := 0; i <= attempts; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		tables, kubeProxy, err := readFamily(o.NetNSFd, byte(nf))
		if err != nil {
			lastErr = err
			continue
		}
		p := planFamily(family, tables, kubeProxy)
		if first == nil {
			first = &p
		}
		if p.empty() {
			r.Kept = append(r.Kept, p.kept...)
			first.report(r)
			return nil
		}
		if i == attempts {
			break // the last round only reads
		}
		if lastErr = commitFamily(o.NetNSFd, nf, p); lastErr == nil {
			r.Kept = append(r.Kept, p.kept...)
			// After a failed round, this plan is what that round left (all of the
			// first plan, or nothing of it if the kernel had committed it).
			first.rules, first.chains = max(first.rules, p.rules), max(first.chains, p.chains)
			first.table = first.table || p.table
			first.report(r)
			return nil
		}
		klog.V(2).InfoS("Removing kube-proxy's rules: commit failed, reading again", "family", family, "err", lastErr)
	}
	return fmt.Errorf("remove kube-proxy's rules: %w", lastErr)
}

// familyPlan is what to remove from one family.
type familyPlan struct {
	family        string
	tables        []tablePlan
	table         bool // the kube-proxy table
	rules, chains int
	kept          []string
}

func planFamily(family string, tables []tableInfo, kubeProxy bool) familyPlan {
	fp := familyPlan{family: family, table: kubeProxy}
	for _, t := range tables {
		p := planTable(t)
		for _, k := range p.Kept {
			fp.kept = append(fp.kept, family+" "+k)
		}
		if !p.empty() {
			fp.tables = append(fp.tables, p)
			fp.rules += len(p.DeleteRules)
			fp.chains += len(p.DeleteChains)
		}
	}
	return fp
}

func (p familyPlan) empty() bool { return len(p.tables) == 0 && !p.table }

// report counts and logs what the plan removed.
func (p familyPlan) report(r *Report) {
	if p.chains > 0 || p.rules > 0 {
		r.add(KindChain, p.chains)
		r.add(KindJumpRule, p.rules)
		klog.InfoS("Removed kube-proxy's iptables-nft chains and the rules jumping to them", "family", p.family, "chains", p.chains, "jumpRules", p.rules)
	}
	if p.table {
		r.add(KindTable, 1)
		klog.InfoS("Removed kube-proxy's nftables table", "table", p.family+" "+kubeProxyTable)
	}
}

// commitFamily carries out a family's plan in one transaction: the kernel applies all
// of it or nothing, so traffic never meets a half-removed kube-proxy (a jump into a
// chain already emptied).
func commitFamily(nsFd int, nf nftables.TableFamily, fp familyPlan) error {
	opts := []nftables.ConnOption{nftables.WithSockOptions(func(c *netlink.Conn) error { return nlkit.RaiseBuffers(c, socketBuffer) })}
	if nsFd != 0 {
		opts = append(opts, nftables.WithNetNSFd(nsFd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	for _, p := range fp.tables {
		tbl := &nftables.Table{Family: nf, Name: p.Table}
		for _, rr := range p.DeleteRules {
			if err := c.DelRule(&nftables.Rule{Table: tbl, Chain: &nftables.Chain{Table: tbl, Name: rr.Chain}, Handle: rr.Handle}); err != nil {
				return fmt.Errorf("delete rule %s %s handle %d: %w", p.Table, rr.Chain, rr.Handle, err)
			}
		}
		// Flush every chain before deleting any: a removed chain may still be
		// jumped to from another removed chain until that one is flushed.
		for _, ch := range p.DeleteChains {
			c.FlushChain(&nftables.Chain{Table: tbl, Name: ch})
		}
		for _, ch := range p.DeleteChains {
			c.DelChain(&nftables.Chain{Table: tbl, Name: ch})
		}
	}
	if fp.table {
		c.DelTable(&nftables.Table{Family: nf, Name: kubeProxyTable})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// socketBuffer fits the batch and the acknowledgements of a big kube-proxy ruleset
// (tens of thousands of chains); root may exceed the system limits.
const socketBuffer = 64 << 20

// readFamily reads the iptables-nft tables kube-proxy writes in (those that exist) and
// whether the kube-proxy table exists.
func readFamily(nsFd int, family byte) (tables []tableInfo, kubeProxy bool, err error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsFd})
	if err != nil {
		return nil, false, fmt.Errorf("dial netlink: %w", err)
	}
	defer conn.Close()
	_ = conn.SetReadBuffer(8 << 20) // a big iptables ruleset comes back in many messages

	names, err := tableNames(conn, family)
	if err != nil {
		return nil, false, err
	}
	byName := map[string]*tableInfo{}
	for _, n := range iptablesTables {
		if names[n] {
			tables = append(tables, tableInfo{Name: n})
		}
	}
	for i := range tables {
		byName[tables[i].Name] = &tables[i]
	}
	if len(tables) == 0 {
		return nil, names[kubeProxyTable], nil
	}
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETCHAIN, family, nil)
	if err != nil {
		return nil, false, fmt.Errorf("list chains: %w", err)
	}
	for _, m := range msgs {
		table, name, base, err := decodeChainMsg(m.Data)
		if err != nil {
			return nil, false, err
		}
		if t := byName[table]; t != nil && name != "" {
			t.Chains = append(t.Chains, chainInfo{Name: name, Base: base})
		}
	}
	for i := range tables {
		if err := readRules(conn, family, &tables[i]); err != nil {
			return nil, false, err
		}
	}
	return tables, names[kubeProxyTable], nil
}

// readRules reads the rules of the table's chains that are not kube-proxy's, then of
// the kube-proxy chains the plan keeps, until the plan needs no more. It reads chain
// by chain: a table-wide rule dump is resumed every 32 KiB by walking the table from
// its start again, which took 22 s at 1,000 kube-proxy Services.
func readRules(conn *netlink.Conn, family byte, t *tableInfo) error {
	need := func(c chainInfo) bool { return !isKubeProxyChain(c.Name) }
	for {
		read := 0
		for j := range t.Chains {
			c := &t.Chains[j]
			if c.RulesRead || !need(*c) {
				continue
			}
			rules, err := chainRules(conn, family, t.Name, c.Name)
			if err != nil {
				return err
			}
			c.Rules, c.RulesRead = rules, true
			read++
		}
		if read == 0 {
			return nil
		}
		kept := map[string]bool{}
		for _, k := range planTable(*t).KeptChains {
			kept[k] = true
		}
		need = func(c chainInfo) bool { return kept[c.Name] }
	}
}

func chainRules(conn *netlink.Conn, family byte, table, chain string) ([]ruleInfo, error) {
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETRULE, family, []netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")},
	})
	if err != nil {
		return nil, fmt.Errorf("list rules of %s %s: %w", table, chain, err)
	}
	var out []ruleInfo
	for _, m := range msgs {
		tbl, ch, rule, err := decodeRuleMsg(m.Data)
		if err != nil {
			return nil, err
		}
		if tbl == table && ch == chain {
			out = append(out, rule)
		}
	}
	return out, nil
}

// tableNames lists the family's tables.
func tableNames(conn *netlink.Conn, family byte) (map[string]bool, error) {
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETTABLE, family, nil)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	names := map[string]bool{}
	for _, m := range msgs {
		ad, err := nlkit.Msg(m.Data)
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			if ad.Type() == unix.NFTA_TABLE_NAME {
				names[nlkit.CString(ad.Bytes())] = true
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("decode table: %w", err)
		}
	}
	return names, nil
}
