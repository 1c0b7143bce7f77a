package proxy

import (
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// RenderAll returns the whole desired table for a snapshot. The sync loop renders
// only changed Services into a long-lived ruleset; this is for `svcproxy render`,
// tests and benchmarks.
func RenderAll(snap endpoints.Snapshot, o Options) *nft.Ruleset {
	r := NewRuleset(o)
	lb := sharedChains{}
	for k, ports := range snap.Services() {
		r.SetFragment(ServiceOwner(k), lb.intern(RenderServiceWith(ports, snap.Service(k), o)))
	}
	refreshOnDemand(r)
	logConflicts(r)
	return r
}

// logConflicts logs the conflicts that outlive the batch of changes just rendered
// into r, among the elements the batch changed (Ruleset.TakeConflicts). The tracker
// keeps Services from colliding, so such a conflict (a hand-over within the batch
// renders both sides, and is gone by its end) is a bug worth an error line.
func logConflicts(r *nft.Ruleset) {
	for _, c := range r.TakeConflicts() {
		klog.ErrorS(nil, "Two owners render the same nftables element; the first by owner is used", "conflict", c.String())
	}
}

// logElementConflict logs two owners rendering one nftables key with different
// values; the table keeps the lowest owner's value. The tracker keeps Services from
// colliding (cluster IPs, port numbers), so what shows here while the sync loop
// renders a batch is a hand-over between Services, usually gone by the batch's end
// (logConflicts tells).
func logElementConflict(c nft.ElementConflict) {
	klog.V(2).InfoS("Two owners render the same nftables element; the first by owner is used", "conflict", c.String())
}
