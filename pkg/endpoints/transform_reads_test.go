package endpoints

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/randfill"
)

// TestTrimKeepsWhatTheProxyReads: whatever else a Service and its EndpointSlices
// hold, the tracker makes the same ports and endpoints from the trimmed copies the
// informers cache as from the objects the API server sent. transform.go copies a
// whitelist of fields: a field that a renderer starts to read (through the tracker's
// ServicePort and Endpoint) without being added there makes this test fail, instead
// of silently reading as empty in a cluster. Every other field is filled at random,
// 400 times; the fields the tracker validates are made valid, so that most Services
// are proxied and the comparison is not between two empty snapshots.
func TestTrimKeepsWhatTheProxyReads(t *testing.T) {
	proxied := 0
	for seed := range 400 {
		f := randfill.New().NilChance(0.2).NumElements(1, 3).RandSource(rand.NewSource(int64(seed)))
		r := rand.New(rand.NewSource(int64(seed)))
		svc := &v1.Service{}
		f.Fill(svc)
		makeValidService(svc, r)
		var slices []*discoveryv1.EndpointSlice
		for j := range 2 {
			s := &discoveryv1.EndpointSlice{}
			f.Fill(s)
			makeValidSlice(s, svc, j, r)
			slices = append(slices, s)
		}
		full := trackedState(svc, slices)
		var trimmedSlices []*discoveryv1.EndpointSlice
		for _, s := range slices {
			trimmedSlices = append(trimmedSlices, TrimEndpointSlice(s))
		}
		trimmed := trackedState(TrimService(svc), trimmedSlices)
		if diff := cmp.Diff(full, trimmed, cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
			t.Fatalf("seed %d: the tracker reads something transform.go drops (-sent +trimmed):\n%s", seed, diff)
		}
		if len(full.ports) > 0 && len(full.endpoints) > 0 {
			proxied++
		}
	}
	if proxied < 200 {
		t.Fatalf("only %d of 400 random Services were proxied with endpoints: the comparison proves little", proxied)
	}
}

// tracked is what a renderer gets from the tracker for one Service.
type tracked struct {
	ports     []ServicePort
	endpoints map[ServicePortName][]Endpoint
}

func trackedState(svc *v1.Service, slices []*discoveryv1.EndpointSlice) tracked {
	tr := NewTracker(TrackerOptions{})
	tr.OnServiceAdd(svc)
	for _, s := range slices {
		tr.OnEndpointSliceAdd(s)
	}
	snap, _, _ := tr.Take()
	out := tracked{endpoints: endpointsByName(snap)}
	for _, ports := range snap.Services() {
		out.ports = append(out.ports, ports...)
	}
	return out
}

// makeValidService sets what the tracker validates (identity, addresses, ports,
// enums) to valid values chosen by r; every other field keeps its random value.
func makeValidService(svc *v1.Service, r *rand.Rand) {
	svc.Namespace, svc.Name = "ns", "svc"
	delete(svc.Labels, LabelServiceProxyName)
	delete(svc.Labels, v1.IsHeadlessService)
	types := []v1.ServiceType{v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer}
	svc.Spec.Type = types[r.Intn(len(types))]
	svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", r.Intn(256), 1+r.Intn(254))
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
	svc.Spec.ExternalIPs = []string{fmt.Sprintf("192.0.2.%d", 1+r.Intn(254))}
	svc.Spec.ExternalName = ""
	protos := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		p.Name = fmt.Sprintf("p%d", i)
		p.Protocol = protos[r.Intn(len(protos))]
		p.Port = int32(1 + r.Intn(65535))
		p.NodePort = 0
		if svc.Spec.Type != v1.ServiceTypeClusterIP {
			p.NodePort = int32(30000 + i)
		}
	}
	svc.Spec.SessionAffinity = []v1.ServiceAffinity{v1.ServiceAffinityNone, v1.ServiceAffinityClientIP}[r.Intn(2)]
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		timeout := int32(1 + r.Intn(86400))
		c.ClientIP.TimeoutSeconds = &timeout
	}
	svc.Spec.ExternalTrafficPolicy = []v1.ServiceExternalTrafficPolicy{v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal}[r.Intn(2)]
	itp := []v1.ServiceInternalTrafficPolicy{v1.ServiceInternalTrafficPolicyCluster, v1.ServiceInternalTrafficPolicyLocal}[r.Intn(2)]
	svc.Spec.InternalTrafficPolicy = &itp
	svc.Spec.HealthCheckNodePort = 0
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
		svc.Spec.HealthCheckNodePort = 32000
	}
	if td := []string{"", v1.ServiceTrafficDistributionPreferClose, "PreferSameZone", "PreferSameNode"}[r.Intn(4)]; td != "" {
		svc.Spec.TrafficDistribution = &td
	} else {
		svc.Spec.TrafficDistribution = nil
	}
	svc.Spec.LoadBalancerSourceRanges = []string{fmt.Sprintf("203.0.113.%d/32", r.Intn(256))}
	for i := range svc.Status.LoadBalancer.Ingress {
		svc.Status.LoadBalancer.Ingress[i].IP = fmt.Sprintf("198.51.100.%d", 1+i)
		svc.Status.LoadBalancer.Ingress[i].IPMode = nil
	}
}

// makeValidSlice makes s the j-th IPv4 slice of svc, with valid addresses and the
// Service's port names and protocols; conditions, nodes, zones, hints and the rest
// keep their random values.
func makeValidSlice(s *discoveryv1.EndpointSlice, svc *v1.Service, j int, r *rand.Rand) {
	s.Namespace, s.Name = svc.Namespace, fmt.Sprintf("%s-%d", svc.Name, j)
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[discoveryv1.LabelServiceName] = svc.Name
	s.AddressType = discoveryv1.AddressTypeIPv4
	s.Ports = nil
	for _, p := range svc.Spec.Ports {
		name, proto, port := p.Name, p.Protocol, int32(1+r.Intn(65535))
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &port})
	}
	for i := range s.Endpoints {
		s.Endpoints[i].Addresses = []string{fmt.Sprintf("10.244.%d.%d", j, 1+i+r.Intn(200))}
	}
}
