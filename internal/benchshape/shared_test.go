package benchshape

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/internal/benchworld"
)

// census is what n Services of the shape hold.
type census struct {
	services, endpoints, slices, nodeless int
	bySize                                map[string]int // size class -> Services
	backs                                 map[int]int    // pod -> endpoints it is behind
	nodePort, loadBalancer, metrics       int
	biggestSlice                          int
}

func sizeClass(n int) string {
	switch {
	case n <= 3:
		return "1-3"
	case n <= 10:
		return "10"
	case n < 1000:
		return "50"
	default:
		return "1000+"
	}
}

func take(t *testing.T, n int) census {
	t.Helper()
	c := census{services: n, bySize: map[string]int{}, backs: map[int]int{}}
	for i := range n {
		c.bySize[sizeClass(Size(i))]++
		seen := map[int]bool{}
		got := 0
		for s := range Slices(i) {
			eps := Endpoints(i, s, 0, 100, func(k int) string { return "node" })
			c.slices++
			c.biggestSlice = max(c.biggestSlice, len(eps))
			if eps[0].NodeName == nil {
				c.nodeless++
			}
			for _, e := range eps {
				p := podOf(netip.MustParseAddr(e.Addresses[0]))
				if seen[p] {
					t.Fatalf("Service %d lists pod %d twice", i, p)
				}
				seen[p] = true
				c.backs[p]++
				got++
			}
		}
		if got != Size(i) {
			t.Fatalf("Service %d: %d endpoints in its slices, Size says %d", i, got, Size(i))
		}
		c.endpoints += got
		switch typ, _ := Type(i); typ {
		case v1.ServiceTypeNodePort:
			c.nodePort++
		case v1.ServiceTypeLoadBalancer:
			c.loadBalancer++
		}
		if len(Ports(i)) == 2 {
			c.metrics++
		}
	}
	return c
}

// TestDistribution: the shape's documented distribution, at sizes the bench runs.
func TestDistribution(t *testing.T) {
	within := func(t *testing.T, what string, got, lo, hi float64) {
		t.Helper()
		if got < lo || got > hi {
			t.Errorf("%s = %.4f, want %.4f..%.4f", what, got, lo, hi)
		}
	}
	for _, tc := range []struct {
		n        int
		bigShare float64 // Services with 1000+ endpoints
		npShare  float64 // NodePort and LoadBalancer ones, each
	}{
		{1000, 0.001, 1.0 / 32},
		{10000, 0.001, 1.0 / 32},
		// Past 44,288 Services the default NodePort range is used up.
		{100000, 0.001, float64(NodePorts) / 2 / 100000},
	} {
		c := take(t, tc.n)
		share := func(k int) float64 { return float64(k) / float64(c.services) }
		within(t, "share with 1-3 endpoints", share(c.bySize["1-3"]), 0.70, 0.70)
		within(t, "share with 10", share(c.bySize["10"]), 0.20, 0.20)
		within(t, "share with 50", share(c.bySize["50"]), 0.099, 0.099)
		within(t, "share with 1000+", share(c.bySize["1000+"]), tc.bigShare, tc.bigShare)
		within(t, "endpoints per Service", float64(c.endpoints)/float64(c.services), 9.9, 10.1)
		within(t, "share of slices without nodeName", float64(c.nodeless)/float64(c.slices), 0.32, 0.35)
		within(t, "NodePort share", share(c.nodePort), tc.npShare*0.97, tc.npShare*1.03)
		within(t, "LoadBalancer share", share(c.loadBalancer), tc.npShare*0.97, tc.npShare*1.03)
		within(t, "share with a metrics port", share(c.metrics), 0.25, 0.25)
		if c.biggestSlice != MaxPerSlice {
			t.Errorf("n=%d: the biggest slice has %d endpoints, want %d", tc.n, c.biggestSlice, MaxPerSlice)
		}
		// Every pod backs three Services (the pods are the endpoints / 3, and
		// no Service lists one twice): none more, none fewer.
		hist := map[int]int{}
		for _, k := range c.backs {
			hist[k]++
		}
		if len(hist) != 1 || hist[ServicesPerPod] != len(c.backs) {
			t.Errorf("n=%d: pods by the number of Services they back: %v, want all %d", tc.n, hist, ServicesPerPod)
		}
		within(t, "Services per pod", float64(c.endpoints)/float64(len(c.backs)), 2.99, 3.01)
	}
}

// TestReplacement: a change replaces endpoint 0 by a pod other Services share,
// one the changed Service does not list, another one each generation; Serves
// tells the new answer from the old ones.
func TestReplacement(t *testing.T) {
	c := take(t, 2000)
	for _, i := range []int{0, 7, 999, 1001, 1999} {
		prev := -1
		for gen := 1; gen <= 3; gen++ {
			r := Replacement(i, gen)
			if c.backs[r] < 2 {
				t.Errorf("Service %d gen %d: replacement pod %d backs %d Services, want it shared", i, gen, r, c.backs[r])
			}
			if r/podsPerBlock != i/Block {
				t.Errorf("Service %d gen %d: replacement pod %d is from another block", i, gen, r)
			}
			for j := range Size(i) {
				if Pod(i, j) == r {
					t.Errorf("Service %d gen %d: replacement pod %d is already its endpoint %d", i, gen, r, j)
				}
			}
			if r == prev {
				t.Errorf("Service %d: gen %d replaces with the pod of gen %d", i, gen, gen-1)
			}
			prev = r
			if got := EndpointPod(i, 0, gen); got != r {
				t.Errorf("EndpointPod(%d, 0, %d) = %d, want the replacement %d", i, gen, got, r)
			}
			serves := Serves(i, gen)
			if !serves(Addr(r)) || serves(Addr(Pod(i, 0))) || (Size(i) > 1 && serves(Addr(Pod(i, 1)))) {
				t.Errorf("Serves(%d, %d) does not tell the replacement alone", i, gen)
			}
		}
	}
}

// TestServes: gen 0 answers from exactly Service i's pods, the big Service's
// range wrapping around the block's pods included.
func TestServes(t *testing.T) {
	for _, i := range []int{0, 9, 999, 1998, 1999} {
		serves := Serves(i, 0)
		mine := map[int]bool{}
		for j := range Size(i) {
			mine[Pod(i, j)] = true
		}
		for p := range 2 * podsPerBlock {
			if got := serves(Addr(p)); got != mine[p] {
				t.Fatalf("Serves(%d, 0)(pod %d) = %v, want %v", i, p, got, mine[p])
			}
		}
		if serves(netip.MustParseAddr("10.96.0.1")) {
			t.Errorf("Serves(%d, 0) takes an address outside the endpoint prefix", i)
		}
	}
}

// TestAddrInsideTheWorld: every pod of 100k Services has an address the bench
// world's pods namespace answers, and the address maps back to the pod.
func TestAddrInsideTheWorld(t *testing.T) {
	pf := netip.MustParsePrefix(benchworld.EndpointPf)
	last := Pod(100000-1, Size(100000-1)-1)
	for _, p := range []int{0, 1, 255, 256, 65535, 65536, last, (100000/Block)*podsPerBlock - 1} {
		a := Addr(p)
		if !pf.Contains(a) {
			t.Errorf("pod %d: %v outside %v", p, a, pf)
		}
		if got := podOf(a); got != p {
			t.Errorf("podOf(Addr(%d) = %v) = %d", p, a, got)
		}
	}
	if got := Addr(65536 + 2).String(); got != "10.129.0.2" {
		t.Errorf("Addr(65538) = %s, want 10.129.0.2", got)
	}
}

// TestNodePortsUnique: every NodePort is in the default range and used once.
func TestNodePortsUnique(t *testing.T) {
	seen := map[int32]int{}
	for i := range 100000 {
		_, np := Type(i)
		if np == 0 {
			continue
		}
		if np < NodePortBase || np >= NodePortBase+NodePorts {
			t.Fatalf("Service %d: NodePort %d outside the default range", i, np)
		}
		if j, dup := seen[np]; dup {
			t.Fatalf("NodePort %d of Services %d and %d", np, j, i)
		}
		seen[np] = i
	}
	s := &v1.Service{}
	Expose(s, 5)
	if s.Spec.Type != v1.ServiceTypeLoadBalancer || s.Spec.Ports[0].NodePort == 0 || len(s.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("Service 5 exposed as %+v, want a LoadBalancer with a NodePort and an ingress IP", s)
	}
}
