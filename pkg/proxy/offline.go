package proxy

import "github.com/svcproxy/svcproxy/pkg/nft"

// ServeNodePortsOn re-renders r's skeleton so that NodePorts answer on na, as
// SetNodeAddresses makes the sync loop do; for `svcproxy render --node-ip` and
// trace, which render once with RenderAll.
func ServeNodePortsOn(r *nft.Ruleset, o Options, na NodeAddresses) {
	r.SetFragment(skeletonOwner, SkeletonFor(o, na))
}
