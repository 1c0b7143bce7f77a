// Package benchshape is make bench's "shared" shape (BENCH_SHAPE=shared, issue 22):
// Services shaped like a real cluster's, beside the default shape's disjoint
// endpoints. The in-process bench (hack/bench) and the side by side through the
// apiserver (test/e2e) both build their objects from it, so both run the same
// shape. Everything is a pure function of the Service's number: no randomness,
// O(1) per endpoint (100k Services cost nothing to generate), and a size's
// objects are the first Services of any larger size's (the side by side adds
// Services between its sizes and never rewrites the ones it wrote).
//
// The distribution, per block of 1000 consecutive Services (c = i mod 1000):
//
//   - sizes: 700 Services (c mod 10 < 7) with 1, 2 or 3 endpoints (1 + (c/10) mod 3:
//     238 with 1, 231 with 2, 231 with 3), 200 (c mod 10 = 7, 8) with 10, 99
//     (c mod 10 = 9) with 50, and one (c = 999) with 1650: 9993 endpoints, 9.993 a
//     Service on average, beside the default shape's 10. Endpoints are split into
//     slices of at most 100, as the EndpointSlice controller does (the big Service
//     has 17).
//   - shared pods: the block's 9993 endpoints, numbered in Service order, go to its
//     3331 pods round and round (endpoint k is pod k mod 3331): every pod backs
//     exactly 3 Services (a ClusterIP and a headless Service per StatefulSet, app
//     and metrics Services), three Services far apart in the block, no Service
//     twice (the largest, 1650, is under 3331). Blocks share no pods, and a
//     size that is not a multiple of 1000 has a last block whose pods back fewer.
//   - nodes: slice s of Service i names no node when (i + s) mod 3 = 0 (a third of
//     the slices, as slices written by other controllers often do); the others name
//     every pod's node, node (pod mod nodes), as the EndpointSlice controller does.
//   - named ports: port "http" 80 targets the pods' port named "http"; every fourth
//     Service (i mod 4 = 2) also has "metrics" 9090 to the port named "metrics".
//     The slices' ports carry the Service ports' names, both numbered
//     benchworld.Port (the pods namespace listens there alone): what a proxy must
//     get right is matching them by name.
//   - types: one Service in 32 is a LoadBalancer (i mod 32 = 5) and one a NodePort
//     (i mod 32 = 21), 6.25% with a NodePort, numbered 30000 + i/16 within the
//     default --service-node-port-range (2768 ports): from Service 44,288 on they
//     stay ClusterIP, as a cluster that size with the default range would have them.
package benchshape

import (
	"net/netip"
	"strconv"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcproxy/svcproxy/internal/benchworld"
)

const (
	// Block is how many consecutive Services the distribution repeats over.
	Block = 1000
	// BigSize is the endpoints of the one big Service per block.
	BigSize = 1650
	// MaxPerSlice is the EndpointSlice controller's --max-endpoints-per-slice default.
	MaxPerSlice = 100
	// ServicesPerPod is how many Services each pod backs.
	ServicesPerPod = 3
	// NodePortBase and NodePorts are the default --service-node-port-range.
	NodePortBase = 30000
	NodePorts    = 2768
	// ServicePort and MetricsPort are the Services' ports.
	ServicePort = 80
	MetricsPort = 9090
	// PortName and MetricsPortName name the Service ports, their slices' ports and
	// the pods' ports the Services target.
	PortName        = "http"
	MetricsPortName = "metrics"
)

var (
	// blockStart[c] is the number, within its block, of Service c's first endpoint;
	// blockStart[Block] the block's endpoints.
	blockStart [Block + 1]int
	// podsPerBlock is the pods of a block: its endpoints / ServicesPerPod.
	podsPerBlock int
	endpointBase = netip.MustParsePrefix(benchworld.EndpointPf).Addr()
)

func init() {
	for c := range Block {
		blockStart[c+1] = blockStart[c] + Size(c)
	}
	podsPerBlock = (blockStart[Block] + ServicesPerPod - 1) / ServicesPerPod
}

// Size is Service i's number of endpoints.
func Size(i int) int {
	c := i % Block
	switch {
	case c == Block-1:
		return BigSize
	case c%10 < 7:
		return 1 + (c/10)%3
	case c%10 < 9:
		return 10
	default:
		return 50
	}
}

// Slices is how many EndpointSlices Service i has.
func Slices(i int) int { return (Size(i) + MaxPerSlice - 1) / MaxPerSlice }

// PodsPerBlock is how many pods each block of Services has.
func PodsPerBlock() int { return podsPerBlock }

// Pod is the pod behind endpoint j of Service i (before any change).
func Pod(i, j int) int {
	b, c := i/Block, i%Block
	return b*podsPerBlock + (blockStart[c]+j)%podsPerBlock
}

// Replacement is the pod that takes endpoint 0's place at change gen > 0: a pod of
// the same block that backs three other Services (the case issue 22 found slow:
// the elements it renders are shared) and none of Service i's, another one for
// each gen.
func Replacement(i, gen int) int {
	b, c, size := i/Block, i%Block, Size(i)
	return b*podsPerBlock + (blockStart[c]+size+gen%(podsPerBlock-size))%podsPerBlock
}

// EndpointPod is the pod behind endpoint j of Service i at gen: gen > 0 replaces
// endpoint 0 by Replacement(i, gen).
func EndpointPod(i, j, gen int) int {
	if j == 0 && gen > 0 {
		return Replacement(i, gen)
	}
	return Pod(i, j)
}

// Addr is pod p's address, in benchworld.EndpointPf (which the pods namespace
// answers: 2^22 addresses, the pods of 1259 blocks).
func Addr(p int) netip.Addr {
	b := endpointBase.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(p)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// podOf is the pod whose address a is, -1 for none.
func podOf(a netip.Addr) int {
	if !a.Is4() || !netip.MustParsePrefix(benchworld.EndpointPf).Contains(a) {
		return -1
	}
	x, b := a.As4(), endpointBase.As4()
	return int(uint32(x[1]-b[1])<<16 | uint32(x[2])<<8 | uint32(x[3]))
}

// Serves says whether an answer from a can only come once Service i's gen is
// programmed: at gen 0 from any of its pods, at gen > 0 from the replacement.
func Serves(i, gen int) func(netip.Addr) bool {
	if gen > 0 {
		want := Addr(Replacement(i, gen))
		return func(a netip.Addr) bool { return a == want }
	}
	b, c, size := i/Block, i%Block, Size(i)
	return func(a netip.Addr) bool {
		p := podOf(a) - b*podsPerBlock
		if p < 0 || p >= podsPerBlock {
			return false
		}
		return (p-blockStart[c]%podsPerBlock+podsPerBlock)%podsPerBlock < size
	}
}

// NodeNamed says whether slice s of Service i names its endpoints' nodes.
func NodeNamed(i, s int) bool { return (i+s)%3 != 0 }

// NodeOf is the node pod p runs on among nodes.
func NodeOf(p, nodes int) int { return p % nodes }

// Endpoints are slice s's endpoints of Service i at gen, each named node(its
// node) when the slice names nodes and nodes > 0.
func Endpoints(i, s, gen, nodes int, node func(int) string) []discoveryv1.Endpoint {
	from, to := s*MaxPerSlice, min((s+1)*MaxPerSlice, Size(i))
	named := nodes > 0 && NodeNamed(i, s)
	out := make([]discoveryv1.Endpoint, 0, max(0, to-from))
	for j := from; j < to; j++ {
		p := EndpointPod(i, j, gen)
		e := discoveryv1.Endpoint{Addresses: []string{Addr(p).String()}}
		if named {
			n := node(NodeOf(p, nodes))
			e.NodeName = &n
		}
		out = append(out, e)
	}
	return out
}

// hasMetrics says whether Service i has the metrics port.
func hasMetrics(i int) bool { return i%4 == 2 }

// Ports are Service i's ports, targeting the pods' ports by name.
func Ports(i int) []v1.ServicePort {
	ps := []v1.ServicePort{{Name: PortName, Port: ServicePort, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString(PortName)}}
	if hasMetrics(i) {
		ps = append(ps, v1.ServicePort{Name: MetricsPortName, Port: MetricsPort, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString(MetricsPortName)})
	}
	return ps
}

// SlicePorts are the ports of Service i's slices: named as its ports, numbered as
// the pods' named ports resolve.
func SlicePorts(i int) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, p := range Ports(i) {
		name, proto, port := p.Name, v1.ProtocolTCP, int32(benchworld.Port)
		out = append(out, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	}
	return out
}

// Type is Service i's type and its NodePort (0: none).
func Type(i int) (v1.ServiceType, int32) {
	if i/16 >= NodePorts {
		return v1.ServiceTypeClusterIP, 0
	}
	switch i % 32 {
	case 5:
		return v1.ServiceTypeLoadBalancer, int32(NodePortBase + i/16)
	case 21:
		return v1.ServiceTypeNodePort, int32(NodePortBase + i/16)
	}
	return v1.ServiceTypeClusterIP, 0
}

// Expose gives s, Service i, its ports, type, NodePort and (a LoadBalancer) its
// ingress IP, outside the cluster's ranges.
func Expose(s *v1.Service, i int) {
	s.Spec.Ports = Ports(i)
	t, np := Type(i)
	s.Spec.Type = t
	if np == 0 {
		return
	}
	s.Spec.Ports[0].NodePort = np
	if t == v1.ServiceTypeLoadBalancer {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "172.31." + strconv.Itoa((i>>8)&0xff) + "." + strconv.Itoa(i&0xff)}}
	}
}
