package proxy

import (
	"fmt"
	"hash/fnv"
	"net/netip"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// externalPath is one way into a Service port from outside the cluster: its
// external and load balancer IPs (keyed like ClusterIPs, endpoints in endpoints-NN
// under the external address) or its NodePort (keyed proto . port, endpoints in
// nodeport-endpoints-N). Every Service port reached the same way with the same
// endpoint counts shares one chain, as lb-N-SS is shared: the chain holds no constant
// of any Service, only the map and the counts.
type externalPath struct {
	name  string        // chain name prefix: "ext" or "nodeport"
	shard string        // "SS" of the chain and map
	emap  string        // the endpoint map
	key   []nft.Operand // the endpoint map's key without the slot
	addr  netip.Addr    // the external address; invalid for a NodePort
	port  uint16        // the NodePort; 0 for an external address
	fam   ipFields      // the table's
}

func addrPath(a netip.Addr) externalPath {
	x := fieldsFor(a)
	return externalPath{name: "ext", shard: fmt.Sprintf("%02d", shardOf(a)), emap: endpointsMap(a), addr: a, fam: x,
		key: []nft.Operand{nft.F(x.daddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport)}}
}

func nodePortPath(port uint16, x ipFields) externalPath {
	return externalPath{name: "nodeport", shard: fmt.Sprint(int(port) % nodePortShards), emap: nodePortMap(port), port: port, fam: x,
		key: []nft.Operand{nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport)}}
}

// pick DNATs to one of n endpoints starting at slot offset.
func (x externalPath) pick(n, offset int) nft.DNATMap {
	return x.fam.dnatMap(append(append([]nft.Operand{}, x.key...), nft.RandomFrom(uint32(n), uint32(offset))), x.emap)
}

var masqueradeMark = nft.MarkOr{Bits: masqueradeBit}

// clusterChain serves externalTrafficPolicy: Cluster: every connection is
// masqueraded (the reply must come back through this node, which undoes the DNAT)
// and goes to one of the n cluster-wide endpoints.
func (x externalPath) clusterChain(n int) *nft.Chain {
	return &nft.Chain{Name: fmt.Sprintf("%s-%d-%s", x.name, n, x.shard),
		Rules: []nft.Rule{{Stmts: []nft.Stmt{masqueradeMark, x.pick(n, 0)}}}}
}

// localChain serves externalTrafficPolicy: Local with local endpoints here out of
// cluster endpoints. Traffic from pods (the cluster CIDR) and from the node itself
// goes to the cluster-wide endpoints, the node's masqueraded (its source address
// would not route back from another node's pod), pods' not: they are inside the
// cluster, and kube-proxy's nftables mode black-holing them (#131765) is a bug we do
// not copy. Everyone else keeps their source address and goes to a local endpoint,
// or is dropped when there is none here.
func (x externalPath) localChain(local, cluster int, o Options) *nft.Chain {
	var rules []nft.Rule
	if o.ClusterCIDR.IsValid() && x.fam.ofFamily(o.ClusterCIDR.Addr()) {
		rules = append(rules, nft.Rule{Stmts: []nft.Stmt{nft.MatchPrefix{Field: x.fam.saddr, Prefix: o.ClusterCIDR}, x.pick(cluster, 0)}})
	}
	rules = append(rules, nft.Rule{Stmts: []nft.Stmt{nft.FibLocal{Saddr: true}, masqueradeMark, x.pick(cluster, 0)}})
	if local == 0 {
		rules = append(rules, nft.Rule{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Drop}}})
	} else {
		rules = append(rules, nft.Rule{Stmts: []nft.Stmt{x.pick(local, localSlots)}})
	}
	return &nft.Chain{Name: fmt.Sprintf("%s-local-%d-%d-%s", x.name, local, cluster, x.shard), Rules: rules}
}

// firewallChain lets the given sources through (back to the services chain) and
// drops the others, before any DNAT, as kube-proxy's firewall chains do. It is named
// by its ranges, so Services with the same loadBalancerSourceRanges share it.
func firewallChain(ranges endpoints.PrefixList) *nft.Chain {
	h := fnv.New64a()
	h.Write([]byte(ranges))
	c := &nft.Chain{Name: fmt.Sprintf("firewall-%016x", h.Sum64())}
	for _, p := range ranges.Prefixes() {
		c.Rules = append(c.Rules, nft.Rule{Stmts: []nft.Stmt{nft.MatchPrefix{Field: fieldsFor(p.Addr()).saddr, Prefix: p}, nft.Verdict{Kind: nft.Return}}})
	}
	c.Rules = append(c.Rules, nft.Rule{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Drop}}, Comment: "loadBalancerSourceRanges"})
	return c
}

// externalSets are the endpoints a port's external paths use: cluster for
// externalTrafficPolicy Cluster and for pods and the node under Local; local for the
// rest under Local. Each falls back to serving terminating endpoints on its own, as
// upstream's CategorizeEndpoints does.
type externalSets struct {
	cluster, local []endpoints.Endpoint
}

func externalSetsOf(sp endpoints.ServicePort, eps []endpoints.Endpoint, at endpoints.Place) externalSets {
	eps = programmable(eps, sp.ClusterIP)
	x := externalSets{cluster: clusterEndpoints(sp, eps, at)}
	if sp.ExternalLocal {
		var here []endpoints.Endpoint
		for _, e := range eps {
			if e.NodeName() == at.Node {
				here = append(here, e)
			}
		}
		x.local = endpoints.UsableEndpoints(here)
	}
	return x
}

// renderExternal adds sp's external paths to f: a dispatch element per external or
// load balancer IP (plus a firewall element when source ranges guard it) and per
// NodePort, and their endpoint elements. Changing endpoints changes map elements,
// and a changed count one dispatch element, as for ClusterIPs.
func renderExternal(f *nft.Fragment, sp endpoints.ServicePort, proto uint8, eps []endpoints.Endpoint, o Options, last lastRendering) {
	if !sp.External() {
		return
	}
	x := externalSetsOf(sp, eps, o.place())
	lbIPs := sp.LoadBalancerIPs.Addrs()
	isLB := make(map[netip.Addr]bool, len(lbIPs))
	for _, a := range lbIPs {
		isLB[a] = true
	}
	for _, a := range append(sp.ExternalIPs.Addrs(), lbIPs...) {
		key := f.Datums(nft.IP(a), nft.Proto(proto), nft.Port(sp.Port))
		path := addrPath(a)
		f.Elements = append(f.Elements, nft.Element{Set: mapExternalIPs, Key: key, Verdict: path.verdict(f, sp, proto, x, o),
			Comment: sp.Name.String()})
		path.endpointElements(f, key, x, last)
		if isLB[a] && sp.SourceRanges != "" {
			fw := firewallChain(sp.SourceRanges)
			f.Shared = append(f.Shared, fw)
			f.Elements = append(f.Elements, nft.Element{Set: mapFirewallIPs, Key: key, Verdict: &nft.Verdict{Kind: nft.Jump, Chain: fw.Name},
				Comment: sp.Name.String()})
		}
	}
	if sp.NodePort != 0 {
		key := f.Datums(nft.Proto(proto), nft.Port(sp.NodePort))
		path := nodePortPath(sp.NodePort, fieldsOf(o.Family))
		f.Elements = append(f.Elements, nft.Element{Set: mapServiceNodePorts, Key: key, Verdict: path.verdict(f, sp, proto, x, o),
			Comment: sp.Name.String()})
		path.endpointElements(f, key, x, last)
	}
	for _, e := range x.local {
		// A local endpoint may be one the cluster set lacks (a terminating one while
		// another node has a ready one): it can reach itself through its Service too.
		f.Elements = append(f.Elements, hairpinElement(f, e.Addr()))
	}
}

// verdict is where the dispatch element of this path sends new connections, adding
// the shared chain it names to f.
func (x externalPath) verdict(f *nft.Fragment, sp endpoints.ServicePort, proto uint8, s externalSets, o Options) *nft.Verdict {
	if len(s.cluster) == 0 {
		return noEndpointsVerdict(proto)
	}
	c := x.clusterChain(len(s.cluster))
	switch {
	case sp.SessionAffinity:
		c = x.stickyChain(sp, s, o)
		x.recordAffinity(f, sp, proto)
	case sp.ExternalLocal:
		c = x.localChain(len(s.local), len(s.cluster), o)
	}
	f.Shared = append(f.Shared, c)
	return &nft.Verdict{Kind: nft.Goto, Chain: c.Name}
}

// endpointElements adds the endpoint map elements of one key (the dispatch
// element's): the cluster set from slot 0, the local set from localSlots.
func (x externalPath) endpointElements(f *nft.Fragment, key []nft.Datum, s externalSets, last lastRendering) {
	slotElements(f, x.emap, key, 0, s.cluster, last)
	if len(s.cluster) == 0 {
		return // nothing to pick from: the dispatch rejects
	}
	slotElements(f, x.emap, key, localSlots, s.local, last)
}

// noEndpointsVerdict rejects: TCP with a reset, others with ICMP port unreachable.
func noEndpointsVerdict(proto uint8) *nft.Verdict {
	if proto == nft.ProtoTCP {
		return &nft.Verdict{Kind: nft.Goto, Chain: chainNoEndpointsTCP}
	}
	return &nft.Verdict{Kind: nft.Goto, Chain: chainNoEndpoints}
}
