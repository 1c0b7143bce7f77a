package proxy

import (
	"fmt"
	"strings"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// ClientIP affinity on external paths. kube-proxy applies a Service's affinity to
// every way into it: its external chains lead to the same policy chains as the
// ClusterIP (iptables mode's KUBE-SVC-*/KUBE-SVL-*, nftables mode's service-*/local-*),
// and those check the endpoints' affinity lists first, under externalTrafficPolicy
// Cluster and Local alike. svcproxy keeps its one-lookup layout: the path's chain
// asks an affinity map before picking, and filter chains after NAT record where new
// connections went, so that an endpoint change stays element-only.
//
// External and load balancer IPs use the ClusterIPs' maps (affinity-SS, recorded
// through sticky-ports). A NodePort's address is not known when rendering (any local
// address serves it), so NodePorts have their own: nodeport-affinity-N, sharded by
// port like nodeport-endpoints-N, keyed client . node address . proto . port as the
// packet carries it, and recorded through sticky-nodeports (proto . port). The
// recording rule cannot tell a NodePort connection from one to a ClusterIP or
// external IP whose port has the same number (it sees only the original tuple): such
// a connection, when not sticky itself, leaves an entry under its own address, which
// no NodePort lookup reads (a NodePort lookup's address is the node's) and the
// sweeper deletes.

// nodePortAffinityShard names the k-th NodePort affinity map.
func nodePortAffinityShard(k int) string { return nodePortAffinityNames[k] }

var nodePortAffinityNames = func() (n [nodePortShards]string) {
	for k := range n {
		n[k] = fmt.Sprintf("%s-%d", mapNodePortAffinity, k)
	}
	return n
}()

func nodePortAffinityMap(port uint16) string {
	return nodePortAffinityShard(int(port) % nodePortShards)
}

// recordNodePortAffinity are the sticky-prerouting/sticky-output rules that record
// new connections to sticky NodePorts, one per protocol (nft types "ct original
// proto-dst" only after "ct protocol"). They follow the sticky-ports rules, whose
// goto ends the chain for a sticky ClusterIP or external address.
func recordNodePortAffinity() []nft.Rule {
	var rules []nft.Rule
	for _, proto := range []uint8{nft.ProtoTCP, nft.ProtoUDP, nft.ProtoSCTP} {
		rules = append(rules, nft.Rule{Stmts: []nft.Stmt{nft.CtStateNew{}, nft.CtStatusDNAT{},
			nft.Match{Field: nft.FieldCtProtocol, Value: nft.Proto(proto)},
			nft.VMap{Key: nft.Fs(nft.FieldL4Proto, nft.FieldCtOrigProtoDst), Map: mapStickyNodePorts}}})
	}
	return rules
}

// nodePortAffinityChain is affinityChain for the NodePort affinity map of port's
// shard: nodeport-affinity-T-proto-N.
func (x ipFields) nodePortAffinityChain(timeout time.Duration, proto uint8, port uint16) *nft.Chain {
	if timeout <= 0 {
		timeout = DefaultAffinityTimeout
	}
	shard := int(port) % nodePortShards
	name := fmt.Sprintf("%s-%d-%s-%d", mapNodePortAffinity, int64(timeout/time.Second), strings.ToLower(nft.Proto(proto).String()), shard)
	return x.recordChain(name, nodePortAffinityShard(shard), timeout, proto)
}

// recordAffinity adds the element (and the shared chain it names) through which
// the filter chains after NAT record this path's new connections.
func (x externalPath) recordAffinity(f *nft.Fragment, sp endpoints.ServicePort, proto uint8) {
	if x.addr.IsValid() {
		record := affinityChain(sp.AffinityTimeout, proto, x.addr)
		f.Shared = append(f.Shared, record)
		f.Elements = append(f.Elements, nft.Element{Set: mapStickyPorts, Key: f.Datums(nft.IP(x.addr), nft.Proto(proto), nft.Port(sp.Port)),
			Verdict: &nft.Verdict{Kind: nft.Goto, Chain: record.Name}, Comment: sp.Name.String()})
		return
	}
	record := x.fam.nodePortAffinityChain(sp.AffinityTimeout, proto, sp.NodePort)
	f.Shared = append(f.Shared, record)
	f.Elements = append(f.Elements, nft.Element{Set: mapStickyNodePorts, Key: f.Datums(nft.Proto(proto), nft.Port(sp.NodePort)),
		Verdict: &nft.Verdict{Kind: nft.Goto, Chain: record.Name}, Comment: sp.Name.String()})
}

// stickyChain is the path's policy chain (clusterChain or localChain) with, before
// every rule that picks an endpoint, a twin that first sends a client the affinity
// map knows for this address . proto . port back to its endpoint: the same sources
// are told apart (pods, the node, outside clients), so an outside client of a Local
// port is only ever recorded, and found, with a local endpoint. A lookup that misses
// ends its rule and the pick that follows spreads the client as the policy says; a
// Local port without local endpoints still drops outside clients. Like the policy
// chains, it holds no constant of any Service and is shared.
//
// The sweeper deletes entries whose endpoint stopped serving the port. It does not
// know policies: an entry made under Cluster for an endpoint on another node is kept
// if the Service switches to Local while that endpoint still serves, and sends that
// outside client there, source kept, until the entry expires or the endpoint goes.
func (x externalPath) stickyChain(sp endpoints.ServicePort, s externalSets, o Options) *nft.Chain {
	base := x.clusterChain(len(s.cluster))
	name := fmt.Sprintf("%s-sticky-%d-%s", x.name, len(s.cluster), x.shard)
	if sp.ExternalLocal {
		base = x.localChain(len(s.local), len(s.cluster), o)
		name = fmt.Sprintf("%s-local-sticky-%d-%d-%s", x.name, len(s.local), len(s.cluster), x.shard)
	}
	stick := x.fam.dnatMap(x.fam.affinityKey(), x.affinityMap())
	c := &nft.Chain{Name: name}
	for _, r := range base.Rules {
		if last := len(r.Stmts) - 1; last >= 0 {
			if _, picks := r.Stmts[last].(nft.DNATMap); picks {
				twin := append(append([]nft.Stmt{}, r.Stmts[:last]...), stick)
				c.Rules = append(c.Rules, nft.Rule{Stmts: twin})
			}
		}
		c.Rules = append(c.Rules, r)
	}
	return c
}

// affinityMap is the affinity map this path's entries live in.
func (x externalPath) affinityMap() string {
	if x.addr.IsValid() {
		return affinityMap(x.addr)
	}
	return nodePortAffinityMap(x.port)
}
