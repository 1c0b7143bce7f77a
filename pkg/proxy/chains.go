package proxy

import "github.com/svcproxy/svcproxy/pkg/nft"

// sharedChains holds one value per shared chain (lb-N-SS): thousands of Services
// share a few dozen such chains, and keeping one value for all of them instead of one
// per Service was a measured memory win (docs/bench.md). A shared chain's name
// determines its content (render builds lb-N-SS from N and the shard alone, and the
// Ruleset requires owners of a shared chain to agree on it), so the name is the key.
// It belongs to one Proxy (or one RenderAll): render itself stays pure.
type sharedChains map[string]*nft.Chain

// intern replaces f's shared chains by the values already held for their names.
func (s sharedChains) intern(f nft.Fragment) nft.Fragment {
	for i, c := range f.Shared {
		if held, ok := s[c.Name]; ok {
			f.Shared[i] = held
		} else {
			s[c.Name] = c
		}
	}
	return f
}
