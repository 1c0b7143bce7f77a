package proxy

import (
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// Traffic to an address of the cluster's service CIDRs that no Service holds is
// dropped, as kube-proxy's nftables mode drops it (pkg/proxy/nftables/proxier.go:
// the "cluster-ips-check" chain, jumped to with "ct state new" from its filter
// forward and output chains, ends with "ip daddr { service CIDRs } drop",
// "Drop traffic to unallocated ClusterIPs"). Without it such a packet follows the
// node's default route out of the cluster, where the address may even answer.
//
// The chains are filter chains at priority 0, after the nat chains (-100): by then
// a packet to a ClusterIP port was translated to an endpoint (its destination is
// no longer in the CIDR), and one to a ClusterIP without endpoints or to a port it
// lacks was rejected. So what reaches the drop is an unallocated address, and an
// address that gets a Service later is served by that Service's elements alone: no
// rule here names a Service. Prerouting and input are left alone, as kube-proxy
// leaves them: a NodePort on a node address inside a service CIDR still works.
//
// The CIDRs are a handful (a ServiceCIDR names one per family), so each is a
// prefix match in a chain of their own: a change re-writes that chain's few
// rules in the sync's one transaction, and no Service element.
const (
	serviceCIDRsOwner       = "service-cidrs"
	chainServiceCIDRs       = "service-cidrs"         // one "daddr CIDR drop" per CIDR
	chainServiceCIDRsFwd    = "service-cidrs-forward" // filter forward: ct state new jump service-cidrs
	chainServiceCIDRsOutput = "service-cidrs-output"  // filter output: the node's own connections
	serviceCIDRsPriority    = 0                       // filter, as kube-proxy's filter-forward/filter-output
)

// RenderServiceCIDRs is the table's part for the service CIDRs of the table's
// family (cidrs of the other family are left out): nothing without any, so that
// a cluster whose API server serves no ServiceCIDRs pays no hook. It is a pure
// function of its arguments.
func RenderServiceCIDRs(o Options, cidrs []netip.Prefix) nft.Fragment {
	x := fieldsOf(o.Family)
	var drops []nft.Rule
	for _, c := range cidrs {
		if !c.IsValid() || !x.ofFamily(c.Addr()) {
			continue
		}
		drops = append(drops, nft.Rule{Stmts: []nft.Stmt{
			nft.MatchPrefix{Field: x.daddr, Prefix: c.Masked()}, nft.Verdict{Kind: nft.Drop}},
			Comment: "unallocated ClusterIP"})
	}
	if len(drops) == 0 {
		return nft.Fragment{}
	}
	jump := []nft.Rule{{Stmts: []nft.Stmt{nft.CtStateNew{}, nft.Verdict{Kind: nft.Jump, Chain: chainServiceCIDRs}}}}
	return nft.Fragment{Chains: []*nft.Chain{
		{Name: chainServiceCIDRs, Rules: drops},
		{Name: chainServiceCIDRsFwd, Hook: &nft.ChainHook{Type: "filter", Hook: "forward", Priority: serviceCIDRsPriority}, Rules: jump},
		{Name: chainServiceCIDRsOutput, Hook: &nft.ChainHook{Type: "filter", Hook: "output", Priority: serviceCIDRsPriority}, Rules: jump},
	}}
}

// SetServiceCIDRs tells the Proxy the cluster's service CIDRs (both families may
// be given; only its own are used). A change queues a sync, which programs it in
// that sync's transaction; the same CIDRs again do nothing. Safe for concurrent
// use.
func (p *Proxy) SetServiceCIDRs(cidrs []netip.Prefix) {
	fam := fieldsOf(p.cfg.Options.Family)
	var own []netip.Prefix
	for _, c := range cidrs {
		if c.IsValid() && fam.ofFamily(c.Addr()) {
			own = append(own, c.Masked())
		}
	}
	own = endpoints.DisjointPrefixes(own)
	p.mu.Lock()
	same := slices.Equal(p.serviceCIDRs, own)
	p.serviceCIDRs = own
	p.mu.Unlock()
	if !same {
		p.Trigger()
	}
}

// applyServiceCIDRs renders the CIDRs last set, when they changed since the last
// sync (in the loop's goroutine, as applyNodeAddresses).
func (p *Proxy) applyServiceCIDRs() {
	p.mu.Lock()
	cidrs := p.serviceCIDRs
	p.mu.Unlock()
	if slices.Equal(p.renderedServiceCIDRs, cidrs) {
		return
	}
	klog.InfoS("Service CIDRs changed: new connections to their addresses that no Service holds are dropped", "ipFamily", p.cfg.Options.Family, "cidrs", cidrs)
	p.desired.SetFragment(serviceCIDRsOwner, RenderServiceCIDRs(p.cfg.Options, cidrs))
	p.renderedServiceCIDRs = cidrs
}
