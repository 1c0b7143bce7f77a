package proxy

import (
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// RenderAll returns the whole desired table for a snapshot. The sync loop renders
// only changed Services into a long-lived ruleset; this is for `svcproxy render`,
// tests and benchmarks.
func RenderAll(snap endpoints.Snapshot, o Options) *nft.Ruleset {
	r := NewRuleset(o)
	seen := map[endpoints.ServiceKey]bool{}
	lb := sharedChains{}
	for n := range snap.Services {
		k := n.Key()
		if seen[k] {
			continue
		}
		seen[k] = true
		r.SetFragment(ServiceOwner(k), lb.intern(RenderService(snap.ServicePortsOf(k), snap.Endpoints, o.NodeName)))
	}
	return r
}
