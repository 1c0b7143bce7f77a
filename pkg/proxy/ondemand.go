package proxy

import (
	"net/netip"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// Chains that exist only while the table needs them. Every rule in a hook chain
// costs every packet (or every new connection) that passes it, Service traffic or
// not, so what serves no Service is not there: on the 10k-Service benchmark the
// sixteen hairpin lookups of the first layout were the whole difference between a
// new connection through a ClusterIP and one straight to its pod (~3 µs).

// hairpinOwner and stickyOwner own the on-demand chains.
const (
	hairpinOwner = "hairpin"
	stickyOwner  = "sticky"
)

// refreshOnDemand brings the on-demand chains in line with the rendered Services.
// Call it after rendering; it changes the table only when a hairpin shard appears or
// empties, or the first sticky port comes or the last goes.
func refreshOnDemand(r *nft.Ruleset) {
	x := ip4Fields
	if r.Family == nft.FamilyIPv6 {
		x = ip6Fields
	}
	refreshHairpin(r, x)
	refreshSticky(r, x)
}

// shardMask is the address mask that leaves the bits shardOf reads: an address
// ANDed with it is its shard's key in hairpin-shards.
func (x ipFields) shardMask() nft.Datum { return x.shardKey(shards - 1) }

// shardKey is shard k's key in hairpin-shards: the address whose last byte is k.
func (x ipFields) shardKey(k int) nft.Datum {
	if x.table == nft.FamilyIPv4 {
		return nft.IP(netip.AddrFrom4([4]byte{3: byte(k)}))
	}
	return nft.IP(netip.AddrFrom16([16]byte{15: byte(k)}))
}

// shards must be a power of two no larger than a byte for the mask to pick the
// shard: shardOf is the last byte modulo shards.
var _ = [1]struct{}{}[shards&(shards-1)] // compile error unless shards is a power of two

// refreshHairpin gives each hairpin set that holds elements a chain with its lookup
// and an element in hairpin-shards that sends the endpoint addresses of its shard
// there, so that a set and the chain and element naming it come and go together.
// A new connection pays one dispatch and one lookup, whatever the number of shards.
//
// Every sync that changed something calls it, and a shard empties or fills
// rarely: when the shards with chains are the shards with elements it sets
// nothing (building and comparing the sixteen chains each time was a fifth of
// what a sync of one endpoint allocated).
func refreshHairpin(r *nft.Ruleset, x ipFields) {
	if hairpinChainsMatch(r) {
		return
	}
	var f nft.Fragment
	for k := 0; k < shards; k++ {
		set := shardNames.hairpin[k]
		if r.Count(set) == 0 {
			continue
		}
		chain := shardNames.hairpinChain[k]
		f.Chains = append(f.Chains, &nft.Chain{Name: chain, Rules: []nft.Rule{{Stmts: []nft.Stmt{
			nft.Lookup{Key: []nft.Operand{nft.F(x.saddr), nft.F(x.daddr)}, Set: set},
			nft.Masquerade{FullyRandom: true}}}}})
		f.Elements = append(f.Elements, nft.Element{Set: mapHairpinShards, Key: []nft.Datum{x.shardKey(k)},
			Verdict: &nft.Verdict{Kind: nft.Goto, Chain: chain}})
	}
	r.SetFragment(hairpinOwner, f)
}

// hairpinChainsMatch reports whether each hairpin shard has its chain exactly
// when its set holds elements: the chains, and the elements sending to them, are
// the hairpin owner's alone and only refreshHairpin sets them, so they are then
// what it would set.
func hairpinChainsMatch(r *nft.Ruleset) bool {
	for k := 0; k < shards; k++ {
		if _, has := r.Chains[shardNames.hairpinChain[k]]; has != (r.Count(shardNames.hairpin[k]) > 0) {
			return false
		}
	}
	return true
}

// refreshSticky gives the table the chains that record ClientIP affinity while any
// Service port has it: filter chains one priority after the nat chains, where the
// connection's original tuple still names the ClusterIP (or NodePort) and the
// packet its endpoint. Each hook sees every packet, so a table without sticky
// ports has neither.
func refreshSticky(r *nft.Ruleset, x ipFields) {
	var record []nft.Rule
	if r.Count(mapStickyPorts) > 0 {
		// One rule per protocol: nft types "ct original proto-dst" only after a
		// "ct protocol" match, and the listing must load back with nft -f.
		for _, proto := range []uint8{nft.ProtoTCP, nft.ProtoUDP, nft.ProtoSCTP} {
			record = append(record, nft.Rule{Stmts: []nft.Stmt{nft.CtStateNew{}, nft.CtStatusDNAT{},
				nft.Match{Field: nft.FieldCtProtocol, Value: nft.Proto(proto)},
				nft.VMap{Key: nft.Fs(x.ctOrigDaddr, nft.FieldL4Proto, nft.FieldCtOrigProtoDst), Map: mapStickyPorts}}})
		}
	}
	if r.Count(mapStickyNodePorts) > 0 {
		record = append(record, recordNodePortAffinity()...)
	}
	var f nft.Fragment
	if len(record) > 0 {
		f.Chains = []*nft.Chain{
			{Name: chainStickyPrerouting, Hook: &nft.ChainHook{Type: "filter", Hook: "prerouting", Priority: stickyPriority}, Rules: record},
			{Name: chainStickyOutput, Hook: &nft.ChainHook{Type: "filter", Hook: "output", Priority: stickyPriority}, Rules: record},
		}
	}
	r.SetFragment(stickyOwner, f)
}
