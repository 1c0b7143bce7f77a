// Package proxy turns Services and their endpoints into svcproxy's nftables table and
// keeps the kernel in step with the cluster: policy (how a Service becomes rules) and
// the sync loop. pkg/endpoints knows Kubernetes; pkg/nft knows nftables; this joins
// them.
package proxy

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// Names of the objects in svcproxy's table. The table is svcproxy's alone: nothing
// outside it is ever touched.
const (
	TableName = "svcproxy"

	setClusterIPs  = "cluster-ips"  // every ClusterIP: wrong-port reject, masquerade checks
	mapServiceIPs  = "service-ips"  // ClusterIP . proto . port : goto svc-chain
	setHairpin     = "hairpin"      // hairpin-NN, endpoint . endpoint: a pod reaching itself via its Service
	mapAffinity    = "affinity"     // affinity-NN, client . ClusterIP . proto . port : endpoint . endpoint port (ClientIP affinity)
	mapStickyPorts = "sticky-ports" // ClusterIP . proto . port : goto affinity-T-proto, for ClientIP-affinity ports
	mapEndpoints   = "endpoints"    // endpoints-NN, ClusterIP . proto . port . slot : endpoint . endpoint port

	// External paths. External and load balancer IPs are keyed like ClusterIPs and
	// their endpoints share the endpoints-NN maps (under their own address); NodePorts
	// are keyed by proto . port, whatever local address the packet is for.
	mapExternalIPs      = "external-ips"       // external or LB IP . proto . port : goto ext-... chain
	mapFirewallIPs      = "firewall-ips"       // LB IP . proto . port : jump firewall-HASH (loadBalancerSourceRanges)
	mapServiceNodePorts = "service-nodeports"  // proto . nodePort : goto nodeport-... chain
	setNodePortIPs      = "nodeport-ips"       // the addresses NodePorts are served on, with --nodeport-addresses
	mapNodePortEPs      = "nodeport-endpoints" // nodeport-endpoints-N, proto . nodePort . slot : endpoint . endpoint port
	mapStickyNodePorts  = "sticky-nodeports"   // proto . nodePort : goto nodeport-affinity-T-proto-N, for ClientIP-affinity NodePorts
	mapNodePortAffinity = "nodeport-affinity"  // nodeport-affinity-N, client . node address . proto . nodePort : endpoint . endpoint port

	chainNodePorts     = "nodeports"      // matches the node's addresses, then service-nodeports
	chainFilterForward = "filter-forward" // ct state invalid drop
	chainFilterInput   = "filter-input"   // the localnet guard, with localhost NodePorts

	chainNoEndpoints    = "no-endpoints"     // ICMP port unreachable (UDP, SCTP)
	chainNoEndpointsTCP = "no-endpoints-tcp" // TCP reset

	chainPrerouting  = "nat-prerouting"
	chainOutput      = "nat-output"
	chainPostrouting = "nat-postrouting"
	chainHairpin     = "masquerade-hairpin" // masquerade-hairpin-NN: the lookup in hairpin-NN
	mapHairpinShards = "hairpin-shards"     // endpoint address & shardMask : goto masquerade-hairpin-NN
	chainServices    = "services"

	// The affinity map is written after NAT, from filter chains one priority after
	// the nat chains, where the connection's original tuple still names the
	// ClusterIP and port and the packet its endpoint.
	chainStickyPrerouting = "sticky-prerouting"
	chainStickyOutput     = "sticky-output"
	stickyPriority        = -99 // dstnat + 1

	// masqueradeBit is kube-proxy's masquerade mark bit (--iptables-masquerade-bit 14).
	masqueradeBit uint32 = 1 << 14

	// affinitySetSize bounds the kernel memory of ClientIP affinity entries, all
	// shards together
	// (kube-proxy's per-endpoint sets hold 65535 each).
	affinitySetSize = 1 << 20
)

// Options are the policy knobs that shape the whole table.
type Options struct {
	// Family is the IP family this proxy serves, each in its own table: "ip svcproxy"
	// for IPv4 (the zero value), "ip6 svcproxy" for IPv6. A dual-stack node runs one
	// Proxy per family, as kube-proxy runs one proxier per family.
	Family endpoints.Family
	// ClusterCIDR, when valid, masquerades service traffic from outside it
	// (kube-proxy --cluster-cidr).
	ClusterCIDR netip.Prefix
	// MasqueradeAll masquerades all service traffic (kube-proxy --masquerade-all).
	MasqueradeAll bool
	// NodeName is this node (kube-proxy --hostname-override), for
	// internalTrafficPolicy and externalTrafficPolicy: Local.
	NodeName string
	// Zone is this node's topology.kubernetes.io/zone label, for EndpointSlice zone
	// hints (trafficDistribution); "" ignores zone hints. SetZone changes it live.
	Zone string
	// LocalhostNodePorts lets the node itself reach NodePorts on 127.0.0.0/8 (kube-proxy
	// --iptables-localhost-nodeports, true by default on kube-proxy's command line;
	// the zero value here is off, so callers must set it). Such connections are
	// masqueraded; the Proxy sets net.ipv4.conf.all.route_localnet=1 in its network
	// namespace (the kernel drops 127/8 sources leaving the host otherwise) and drops
	// packets to 127.0.0.0/8 that arrive from outside the node, the hole route_localnet
	// opens (kube-proxy's "block incoming localnet connections" rule).
	LocalhostNodePorts bool
	// ConntrackTCPLiberal tells that net.netfilter.nf_conntrack_tcp_be_liberal is set:
	// then, as kube-proxy, no "ct state invalid drop" in the forward hook (that rule
	// keeps an out-of-window packet from reaching a pod untranslated and being answered
	// with a reset that kills a long-lived connection; a liberal conntrack marks such
	// packets valid instead). ReadConntrackTCPLiberal reads the sysctl.
	ConntrackTCPLiberal bool
}

// DefaultAffinityTimeout is Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds.
const DefaultAffinityTimeout = 10800 * time.Second

// shards splits the sets that grow with endpoints (one element per endpoint) or
// clients (affinity entries) into this many, by the last byte of an address. The kernel resumes a set dump every
// 32 KiB by walking the set from its start, so reading back one set of 300k elements
// (30k Services x 10) took ~50 s; sixteen sets of ~19k take a fraction of that.
const shards = 16

func shardOf(a netip.Addr) int { return int(a.As16()[15]) % shards } // As16 of an IPv4 address ends with its last byte

// nodePortShards splits the NodePort endpoint maps by port. NodePorts are fewer than
// Services (the default range holds 2768), so fewer shards keep the table's set count
// (which every by-name lookup in a transaction walks) low.
const nodePortShards = 4

func nodePortMap(port uint16) string {
	return fmt.Sprintf("%s-%d", mapNodePortEPs, int(port)%nodePortShards)
}

// localSlots is where the endpoints on this node of an externalTrafficPolicy: Local
// port start in its endpoint map: slots 0..n-1 hold the cluster-wide endpoints, which
// pods and the node itself still reach, localSlots.. the local ones outside clients
// reach ("numgen random mod n offset 65536").
const localSlots = 1 << 16

// hairpinSet, endpointsMap and affinityMap name the shard an address belongs to.
// The affinity sweeper dumps only the shards of ClusterIPs that lost an endpoint.
// The names are made once: render names a shard for every element it makes.
func hairpinSet(endpoint netip.Addr) string    { return shardNames.hairpin[shardOf(endpoint)] }
func endpointsMap(clusterIP netip.Addr) string { return shardNames.endpoints[shardOf(clusterIP)] }
func affinityMap(clusterIP netip.Addr) string  { return affinityShard(shardOf(clusterIP)) }
func affinityShard(k int) string               { return shardNames.affinity[k] }

// hairpinElement is the element that lets endpoint reach itself through a
// Service (its address as source and destination), in endpoint's shard.
func hairpinElement(f *nft.Fragment, endpoint netip.Addr) nft.Element {
	return nft.Element{Set: hairpinSet(endpoint), Key: f.Datums(nft.IP(endpoint), nft.IP(endpoint))}
}

var shardNames = func() (n struct{ hairpin, hairpinChain, endpoints, affinity [shards]string }) {
	for k := 0; k < shards; k++ {
		n.hairpin[k] = fmt.Sprintf("%s-%02d", setHairpin, k)
		n.hairpinChain[k] = fmt.Sprintf("%s-%02d", chainHairpin, k)
		n.endpoints[k] = fmt.Sprintf("%s-%02d", mapEndpoints, k)
		n.affinity[k] = fmt.Sprintf("%s-%02d", mapAffinity, k)
	}
	return n
}()

// Sets returns the sets and maps of the table of family f: the fixed ones and every
// shard.
func Sets(f endpoints.Family) []*nft.Set {
	x := fieldsOf(f)
	return append(fixedSets(x), shardSets(x)...)
}

// fixedSets are in the table whatever it serves.
func fixedSets(x ipFields) []*nft.Set {
	return []*nft.Set{
		{Name: setClusterIPs, Key: []nft.DataType{x.addr}},
		{Name: mapServiceIPs, Key: []nft.DataType{x.addr, nft.TypeInetProto, nft.TypeInetService}, Verdict: true},
		{Name: mapStickyPorts, Key: []nft.DataType{x.addr, nft.TypeInetProto, nft.TypeInetService}, Verdict: true},
		{Name: mapExternalIPs, Key: []nft.DataType{x.addr, nft.TypeInetProto, nft.TypeInetService}, Verdict: true},
		{Name: mapFirewallIPs, Key: []nft.DataType{x.addr, nft.TypeInetProto, nft.TypeInetService}, Verdict: true},
		{Name: mapServiceNodePorts, Key: []nft.DataType{nft.TypeInetProto, nft.TypeInetService}, Verdict: true},
		{Name: mapStickyNodePorts, Key: []nft.DataType{nft.TypeInetProto, nft.TypeInetService}, Verdict: true},
		{Name: setNodePortIPs, Key: []nft.DataType{x.addr}},
		{Name: mapHairpinShards, Key: []nft.DataType{x.addr}, Verdict: true},
	}
}

// shardSets are the shards of what grows with endpoints and clients. Each is in the
// table only while it holds elements or a chain refers to it (nft.DeclareOnDemand):
// a cluster of a few Services shows the shards it uses, not sixteen of each.
func shardSets(x ipFields) []*nft.Set {
	var sets []*nft.Set
	for k := 0; k < nodePortShards; k++ {
		sets = append(sets, &nft.Set{Name: fmt.Sprintf("%s-%d", mapNodePortEPs, k),
			Key:  []nft.DataType{nft.TypeInetProto, nft.TypeInetService, nft.TypeInteger},
			Data: []nft.DataType{x.addr, nft.TypeInetService},
			// typeof, as for the endpoints maps.
			KeyExpr:  []nft.Operand{nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport), nft.Random(slotTypeofMod)},
			DataExpr: []nft.Operand{nft.F(x.daddr), nft.F(nft.FieldThDport)}})
		sets = append(sets, x.affinitySet(nodePortAffinityShard(k)))
	}
	for k := 0; k < shards; k++ {
		sets = append(sets,
			x.affinitySet(affinityShard(k)),
			&nft.Set{Name: fmt.Sprintf("%s-%02d", setHairpin, k), Key: []nft.DataType{x.addr, x.addr}},
			&nft.Set{Name: fmt.Sprintf("%s-%02d", mapEndpoints, k), Key: []nft.DataType{x.addr, nft.TypeInetProto, nft.TypeInetService, nft.TypeInteger},
				Data: []nft.DataType{x.addr, nft.TypeInetService},
				// Declared as nft declares it, so that `nft list` output loads back:
				// nft cannot type "numgen random mod n" against a mark.
				KeyExpr:  []nft.Operand{nft.F(x.daddr), nft.F(nft.FieldL4Proto), nft.F(nft.FieldThDport), nft.Random(slotTypeofMod)},
				DataExpr: []nft.Operand{nft.F(x.daddr), nft.F(nft.FieldThDport)}})
	}
	return sets
}

// affinitySet is one shard of ClientIP affinity entries: client . address . proto .
// port : endpoint . endpoint port. Every shard, ClusterIP or NodePort, holds as many.
func (x ipFields) affinitySet(name string) *nft.Set {
	return &nft.Set{Name: name, Key: x.affinityKeyTypes(), Data: []nft.DataType{x.addr, nft.TypeInetService},
		Dynamic: true, Timeout: true, Size: affinitySetSize / shards,
		// typeof, so that nft can type the lookups and updates that name it.
		KeyExpr:  x.affinityKey(),
		DataExpr: []nft.Operand{nft.F(x.daddr), nft.F(nft.FieldThDport)}}
}

// slotTypeofMod is the modulus the endpoints maps' typeof declaration names; only
// the type (a 32-bit integer) matters, each lb-N chain uses its own modulus.
const slotTypeofMod = 1 << 16

// affinityKeyTypes: client, ClusterIP, protocol, service port; the data is the
// endpoint and its port.
func (x ipFields) affinityKeyTypes() []nft.DataType {
	return []nft.DataType{x.addr, x.addr, nft.TypeInetProto, nft.TypeInetService}
}

// NewRuleset returns the desired table with its fixed skeleton and no Services.
func NewRuleset(o Options) *nft.Ruleset {
	x := fieldsOf(o.Family)
	r := nft.NewRuleset(x.table, TableName, fixedSets(x)...)
	r.DeclareOnDemand(shardSets(x)...)
	r.OnConflict = logElementConflict
	r.SetFragment(skeletonOwner, Skeleton(o))
	refreshOnDemand(r)
	return r
}

// skeletonOwner owns the Skeleton fragment.
const skeletonOwner = "skeleton"

// Skeleton is the part of the table that does not depend on Services: base chains
// hooking NAT, the dispatch chain, masquerading, NodePorts on all local addresses.
func Skeleton(o Options) nft.Fragment { return SkeletonFor(o, NodeAddresses{All: true}) }

// SkeletonFor is Skeleton with NodePorts served on na (see nodePortsChain).
func SkeletonFor(o Options, na NodeAddresses) nft.Fragment {
	x := fieldsOf(o.Family)
	jumpServices := []nft.Rule{{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Jump, Chain: chainServices}}}}
	clusterIP := nft.Lookup{Key: []nft.Operand{nft.F(x.daddr)}, Set: setClusterIPs}
	var services []nft.Rule
	switch {
	case o.MasqueradeAll:
		services = append(services, nft.Rule{Stmts: []nft.Stmt{clusterIP, nft.MarkOr{Bits: masqueradeBit}}})
	case o.ClusterCIDR.IsValid() && x.ofFamily(o.ClusterCIDR.Addr()):
		services = append(services, nft.Rule{Stmts: []nft.Stmt{
			nft.MatchPrefix{Field: x.saddr, Negate: true, Prefix: o.ClusterCIDR}, clusterIP, nft.MarkOr{Bits: masqueradeBit}}})
	}
	addrKey := nft.Fs(x.daddr, nft.FieldL4Proto, nft.FieldThDport)
	services = append(services,
		nft.Rule{Stmts: []nft.Stmt{nft.VMap{Key: addrKey, Map: mapServiceIPs}}},
		// loadBalancerSourceRanges: a firewall chain drops other sources, or returns.
		nft.Rule{Stmts: []nft.Stmt{nft.VMap{Key: addrKey, Map: mapFirewallIPs}}},
		nft.Rule{Stmts: []nft.Stmt{nft.VMap{Key: addrKey, Map: mapExternalIPs}}},
		// Only ports the Service has are proxied; ping gets no answer, other ports a reject.
		nft.Rule{Stmts: []nft.Stmt{clusterIP, nft.Match{Field: nft.FieldL4Proto, Value: nft.Proto(x.icmp)}, nft.Verdict{Kind: nft.Drop}}},
	)
	if o.Family == endpoints.IPv6 {
		// A client on this node whose SYN is answered with an ICMPv6 error while
		// connect() still holds its socket (over a veth the error comes back
		// within the send) takes it as a soft error and retransmits after 1 s;
		// a reset is handled when the socket is released. Measured here: wrong-port
		// connects took 1.02 s with ICMPv6, well under 1 ms with a reset. IPv4's
		// ICMP arrives after the lock is released and refuses at once.
		services = append(services, nft.Rule{Stmts: []nft.Stmt{clusterIP, nft.Reject{TCPReset: true}}, Comment: "no such service port"})
	}
	services = append(services,
		nft.Rule{Stmts: []nft.Stmt{clusterIP, nft.Reject{}}, Comment: "no such service port"},
		// Last, as in kube-proxy: a NodePort never shadows a ClusterIP or external IP.
		nft.Rule{Stmts: []nft.Stmt{nft.Verdict{Kind: nft.Goto, Chain: chainNodePorts}}},
	)
	postrouting := []nft.Rule{
		{Stmts: []nft.Stmt{nft.MarkMatch{Mask: masqueradeBit, Value: masqueradeBit}, nft.MarkXor{Bits: masqueradeBit}, nft.Masquerade{FullyRandom: true}}},
		// A pod reaching itself through its Service: one lookup in the hairpin
		// shard of the endpoint's address (refreshHairpin), not one per shard.
		{Stmts: []nft.Stmt{nft.CtStatusDNAT{}, nft.VMap{Key: []nft.Operand{nft.FMasked(x.daddr, x.shardMask())}, Map: mapHairpinShards}}},
	}
	chains := []*nft.Chain{
		{Name: chainPrerouting, Hook: &nft.ChainHook{Type: "nat", Hook: "prerouting", Priority: -100}, Rules: jumpServices},
		{Name: chainOutput, Hook: &nft.ChainHook{Type: "nat", Hook: "output", Priority: -100}, Rules: jumpServices},
		{Name: chainPostrouting, Hook: &nft.ChainHook{Type: "nat", Hook: "postrouting", Priority: 100}, Rules: postrouting},
		{Name: chainServices, Rules: services},
		{Name: chainNoEndpoints, Rules: []nft.Rule{{Stmts: []nft.Stmt{nft.Reject{}}}}},
		{Name: chainNoEndpointsTCP, Rules: []nft.Rule{{Stmts: []nft.Stmt{nft.Reject{TCPReset: true}}}}},
	}
	np, npIPs := nodePortsChain(o, na)
	chains = append(append(chains, np), filterChains(o)...)
	return nft.Fragment{Chains: chains, Elements: npIPs}
}
