package takeover

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// families are the nf_tables families kube-proxy writes in: iptables-nft's `ip` and
// `ip6` tables, and nftables mode's `ip`/`ip6 kube-proxy`.
var families = []struct {
	name string
	nf   nftables.TableFamily
}{{"ip", nftables.TableFamilyIPv4}, {"ip6", nftables.TableFamilyIPv6}}

// attempts bounds the read-plan-commit rounds of one family: a commit fails as a
// whole when another program changed a table between the read and the commit (a rule
// gone, a new jump into a chain being deleted), and is then planned again.
const attempts = 3

// removeNFTables removes, family by family and in one transaction each, the jump
// rules into kube-proxy's chains, those chains, and the kube-proxy table.
func removeNFTables(ctx context.Context, o Options, r *Report) error {
	var errs []error
	for _, f := range families {
		var err error
		for i := 0; i < attempts; i++ {
			if err = ctx.Err(); err != nil {
				break
			}
			if err = removeFamily(o, f.name, f.nf, r); err == nil {
				break
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("family %s: %w", f.name, err))
		}
	}
	return errors.Join(errs...)
}

// removeFamily reads one family's tables, plans and commits. The report is only
// updated once the commit succeeded.
func removeFamily(o Options, family string, nf nftables.TableFamily, r *Report) error {
	tables, kubeProxy, err := readFamily(o.NetNSFd, byte(nf))
	if err != nil {
		return err
	}
	var plans []tablePlan
	var kept []string
	rules, chains := 0, 0
	for _, t := range tables {
		p := planTable(t)
		for _, k := range p.Kept {
			kept = append(kept, family+" "+k)
		}
		if !p.empty() {
			plans = append(plans, p)
			rules += len(p.DeleteRules)
			chains += len(p.DeleteChains)
		}
	}
	if len(plans) == 0 && !kubeProxy {
		r.Kept = append(r.Kept, kept...)
		return nil
	}
	opts := []nftables.ConnOption{}
	if o.NetNSFd != 0 {
		opts = append(opts, nftables.WithNetNSFd(o.NetNSFd))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	// One transaction: the kernel applies all of it or nothing, so traffic never
	// meets a half-removed kube-proxy (a jump into a chain already emptied).
	for _, p := range plans {
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
	if kubeProxy {
		c.DelTable(&nftables.Table{Family: nf, Name: kubeProxyTable})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("remove kube-proxy's rules: %w", err)
	}
	r.Kept = append(r.Kept, kept...)
	if chains > 0 || rules > 0 {
		r.add(KindChain, chains)
		r.add(KindJumpRule, rules)
		klog.InfoS("Removed kube-proxy's iptables-nft chains and the rules jumping to them", "family", family, "chains", chains, "jumpRules", rules)
	}
	if kubeProxy {
		r.add(KindTable, 1)
		klog.InfoS("Removed kube-proxy's nftables table", "table", family+" "+kubeProxyTable)
	}
	return nil
}

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
	msgs, err := dump(conn, unix.NFT_MSG_GETCHAIN, family, nil)
	if err != nil {
		return nil, false, fmt.Errorf("list chains: %w", err)
	}
	index := map[[2]string]int{} // table, chain -> index in the table's Chains
	for _, m := range msgs {
		table, name, base, err := decodeChainMsg(m.Data)
		if err != nil {
			return nil, false, err
		}
		if t := byName[table]; t != nil && name != "" {
			index[[2]string{table, name}] = len(t.Chains)
			t.Chains = append(t.Chains, chainInfo{Name: name, Base: base})
		}
	}
	for _, t := range tables {
		msgs, err := dump(conn, unix.NFT_MSG_GETRULE, family, []netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: []byte(t.Name + "\x00")}})
		if err != nil {
			return nil, false, fmt.Errorf("list rules of %s: %w", t.Name, err)
		}
		for _, m := range msgs {
			table, chain, rule, err := decodeRuleMsg(m.Data)
			if err != nil {
				return nil, false, err
			}
			i, ok := index[[2]string{table, chain}]
			if !ok || table != t.Name {
				continue
			}
			byName[table].Chains[i].Rules = append(byName[table].Chains[i].Rules, rule)
		}
	}
	return tables, names[kubeProxyTable], nil
}

// tableNames lists the family's tables.
func tableNames(conn *netlink.Conn, family byte) (map[string]bool, error) {
	msgs, err := dump(conn, unix.NFT_MSG_GETTABLE, family, nil)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	names := map[string]bool{}
	for _, m := range msgs {
		ad, err := msgAttrs(m.Data)
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			if ad.Type() == unix.NFTA_TABLE_NAME {
				names[cString(ad.Bytes())] = true
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("decode table: %w", err)
		}
	}
	return names, nil
}

func dump(conn *netlink.Conn, msgType int, family byte, attrs []netlink.Attribute) ([]netlink.Message, error) {
	var data []byte
	if len(attrs) > 0 {
		var err error
		if data, err = netlink.MarshalAttributes(attrs); err != nil {
			return nil, err
		}
	}
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType),
			Flags: netlink.Request | netlink.Dump,
		},
		Data: append([]byte{family, unix.NFNETLINK_V0, 0, 0}, data...),
	})
	if err != nil {
		return nil, err
	}
	out := msgs[:0]
	for _, m := range msgs {
		if len(m.Data) >= 4 && m.Data[0] == family {
			out = append(out, m)
		}
	}
	return out, nil
}
