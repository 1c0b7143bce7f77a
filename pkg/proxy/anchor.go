package proxy

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// AnchorTableName is svcproxy's second table in each family it serves. It holds no
// rule that any packet meets; it exists so that established Service connections keep
// working while svcproxy's main table is gone.
//
// Why: the kernel runs conntrack and NAT in a network namespace only while
// something there uses them. nf_conntrack's hooks are registered per namespace
// and family while some rule needs conntrack (a ct, nat or masquerade expression),
// and nf_nat's while some nat base chain exists. On a node where svcproxy's table
// is the only user (a kube-proxy replacement's usual case), deleting that table, or
// another program swapping it for an empty one it owns (NFT_TABLE_F_OWNER), takes
// both away: the established connections' conntrack entries stay, but packets no
// longer meet them, so requests go out to the ClusterIP untranslated and replies
// are not translated back. Every keep-alive connection to a Service stalls while
// the table is missing (docs/soak.md, the held-table fault;
// TestKernelEstablishedSurvivesHeldTable). The anchor keeps both registered:
//
//   - one empty nat base chain at each hook where the main table has one (policy
//     accept, no rules: a nat chain is consulted only for a connection's first packet,
//     and an empty one decides nothing), so the NAT hooks stay for every path a
//     translated connection takes, whether the kernel registers them per hook or,
//     as Linux does, all of a family's at once;
//   - one rule with a ct expression in a chain that no rule jumps to, so that it
//     is never evaluated and costs nothing, but holds conntrack on.
//
// A table of its own, not objects in the main table, because the main table is
// what goes away; one per family, as the main tables, since both conntrack and NAT
// are registered per family. It is written, compared and repaired with the main
// table's machinery (a plan against what the kernel holds, applied only when it
// differs), on the first sync, on resyncs after another program committed
// anything, and at once when the kernel's notifications show another program
// changing it (see ensureAnchor); --cleanup deletes it after the main table.
const AnchorTableName = "svcproxy-anchor"

// anchorChainConntrack holds the ct rule; the nat chains take the main table's
// names, hooks and priorities. anchorOwner owns all of the anchor's ruleset.
const (
	anchorChainConntrack = "conntrack"
	anchorOwner          = "anchor"
)

// AnchorRuleset renders the anchor table of a family (see AnchorTableName).
func AnchorRuleset(family nft.Family) *nft.Ruleset {
	r := nft.NewRuleset(family, AnchorTableName)
	r.SetFragment(anchorOwner, nft.Fragment{Chains: []*nft.Chain{
		{Name: anchorChainConntrack, Rules: []nft.Rule{{Stmts: []nft.Stmt{nft.CtStateNew{}},
			Comment: "never jumped to: its ct expression keeps conntrack on"}}},
		{Name: chainPrerouting, Hook: &nft.ChainHook{Type: "nat", Hook: "prerouting", Priority: -100}},
		{Name: chainOutput, Hook: &nft.ChainHook{Type: "nat", Hook: "output", Priority: -100}},
		{Name: chainPostrouting, Hook: &nft.ChainHook{Type: "nat", Hook: "postrouting", Priority: 100}},
	}})
	return r
}

// noteAnchor asks the next sync to check the anchor table (another program changed
// it, or a check failed).
func (p *Proxy) noteAnchor() {
	p.mu.Lock()
	p.anchorDue = true
	p.mu.Unlock()
}

// ensureAnchor brings the anchor table to what AnchorRuleset renders, when a check
// is due: on a full sync that reads (the first, and the periodic resyncs after
// another program committed anything, which also catch a lost notification), after
// noteAnchor, and until a check succeeded. It reads the table (a few objects) and
// writes only what differs; a table it cannot change in place (another program
// redefined a chain, or holds the table) is recreated in one transaction. A
// failure is logged and retried at every sync until a check succeeds, and fails
// nothing else: the anchor only matters while the main table is gone, and the main
// table's sync must not wait for it. It runs within the sync's ledger window, so
// its commit counts as ours.
func (p *Proxy) ensureAnchor(ctx context.Context, full bool) {
	p.mu.Lock()
	due := full || p.anchorDue || !p.anchorOK
	p.anchorDue = false
	p.mu.Unlock()
	if !due {
		return
	}
	p.anchorOK = false
	table := p.anchor.Family.String() + " " + AnchorTableName
	wrote, err := p.writeAnchor(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		// Once per distinct error: a table another program holds would
		// otherwise log at every sync.
		if msg := err.Error(); msg != p.anchorErr {
			p.anchorErr = msg
			klog.ErrorS(err, "Cannot write svcproxy's anchor table: established Service connections would stall while svcproxy's table is missing; retrying at every sync", "table", table)
		} else {
			klog.V(2).InfoS("Anchor table still not written", "table", table, "err", err)
		}
		return
	}
	p.anchorOK = true
	if p.anchorErr != "" {
		klog.InfoS("Wrote svcproxy's anchor table after failures", "table", table)
		p.anchorErr = ""
	} else if wrote {
		klog.V(2).InfoS("Wrote svcproxy's anchor table", "table", table)
	}
}

// writeAnchor reads the anchor table and applies what differs; wrote reports a
// commit.
func (p *Proxy) writeAnchor(ctx context.Context) (wrote bool, err error) {
	v, err := p.cfg.Kernel.Read(ctx, p.anchor.Family, AnchorTableName)
	if err != nil {
		return false, fmt.Errorf("read table %s: %w", AnchorTableName, err)
	}
	tx := anchorTx(p.anchor, v)
	if tx.Empty() {
		return false, nil
	}
	if err := p.cfg.Kernel.Apply(ctx, tx); err != nil {
		return false, fmt.Errorf("write table %s: %w", AnchorTableName, err)
	}
	p.commits++
	return true, nil
}

// anchorTx is the transaction that turns v, the kernel's anchor table, into r.
func anchorTx(r *nft.Ruleset, v *nft.View) *nft.Tx {
	if v.TableExists && !nft.Compatible(r, v) {
		tx := nft.PlanFull(r, nft.NewView())
		tx.Recreate = true
		return tx
	}
	return nft.PlanFull(r, v)
}
