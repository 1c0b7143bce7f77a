package main

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/svcproxy/svcproxy/internal/benchshape"
)

// answersPerService is how many connections answers makes to each Service.
const answersPerService = 5

// answers checks, right after the cold sync, that the data plane's Services (the
// first, the last and six between: in the shared shape the last of each thousand
// is the one with 1650 endpoints in 17 slices) answer through their ClusterIP
// from their own endpoints alone: the shape's objects reached the kernel as the
// shape means them, before any change moves an endpoint.
func (b *bench) answers() error {
	pr := b.world.NewProber(time.Second)
	defer pr.Close()
	for _, i := range spreadServices(b.n) {
		serves := b.o.serves(i)
		for range answersPerService {
			// Answer, not Probe: a connect a signal interrupted says nothing
			// about the path (a 100k run met one).
			got, _, err := pr.Answer(netip.MustParseAddr(addr(96, i)), 80)
			if err != nil {
				return fmt.Errorf("service %d: %w", i, err)
			}
			if !serves(got) {
				return fmt.Errorf("service %d answered from %v, not one of its endpoints", i, got)
			}
		}
	}
	return nil
}

// spreadServices are eight Services spread over n, the first and the last among them.
func spreadServices(n int) []int {
	var out []int
	for k := range 8 {
		out = append(out, k*(n-1)/7)
	}
	return out
}

// serves says whether an answer from a is one of Service i's endpoints before
// any change.
func (o objects) serves(i int) func(netip.Addr) bool {
	if o.shared() {
		return benchshape.Serves(i, 0)
	}
	first, last := netip.MustParseAddr(o.endpointAddr(i, 0)), netip.MustParseAddr(o.endpointAddr(i, o.endpoints-1))
	return func(a netip.Addr) bool { return a.Compare(first) >= 0 && a.Compare(last) <= 0 }
}
