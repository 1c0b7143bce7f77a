package endpoints

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestServicePortsExternal(t *testing.T) {
	spn := ServicePortName{Namespace: "ns", Name: "svc", Port: "http", Protocol: "TCP"}
	ip := addr("10.96.0.10")
	withType := func(typ v1.ServiceType, nodePort int32) svcOpt {
		return func(s *v1.Service) {
			s.Spec.Type = typ
			s.Spec.Ports[0].NodePort = nodePort
		}
	}
	ingress := func(ips ...string) svcOpt {
		return func(s *v1.Service) {
			for _, a := range ips {
				ing := v1.LoadBalancerIngress{IP: a}
				if ip, mode, ok := strings.Cut(a, "!"); ok { // "IP!Mode": that ipMode
					ing.IP, ing.IPMode = ip, ptr(v1.LoadBalancerIPMode(mode))
				}
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, ing)
			}
		}
	}
	local := func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }
	tests := []struct {
		name    string
		opts    []svcOpt
		want    ServicePort
		wantErr []string
	}{
		{name: "ClusterIP has no NodePort even if one is set",
			opts:    []svcOpt{withType(v1.ServiceTypeClusterIP, 30080)},
			want:    ServicePort{},
			wantErr: []string{`nodePort 30080 ignored: type is "ClusterIP"`}},
		{name: "NodePort", opts: []svcOpt{withType(v1.ServiceTypeNodePort, 30080)}, want: ServicePort{NodePort: 30080}},
		{name: "nodePort out of range dropped, port kept",
			opts:    []svcOpt{withType(v1.ServiceTypeNodePort, 70000)},
			wantErr: []string{"nodePort: port 70000 out of range"}},
		{name: "LoadBalancer without node ports (allocateLoadBalancerNodePorts: false)",
			opts: []svcOpt{withType(v1.ServiceTypeLoadBalancer, 0), ingress("192.0.2.10")},
			want: ServicePort{LoadBalancerIPs: "192.0.2.10"}},
		{name: "LoadBalancer ingress: ipMode Proxy and other family skipped, sorted",
			opts: []svcOpt{withType(v1.ServiceTypeLoadBalancer, 30080), ingress("192.0.2.20", "2001:db8::1", "192.0.2.11!Proxy", "192.0.2.10", "")},
			want: ServicePort{NodePort: 30080, LoadBalancerIPs: "192.0.2.10,192.0.2.20"}},
		// As kube-proxy's IsVIPMode: only VIP and unset are VIPs to capture.
		{name: "ipMode VIP and unset captured",
			opts: []svcOpt{withType(v1.ServiceTypeLoadBalancer, 0), ingress("192.0.2.10!VIP", "192.0.2.20")},
			want: ServicePort{LoadBalancerIPs: "192.0.2.10,192.0.2.20"}},
		{name: "an unknown ipMode is not captured, and reported",
			opts:    []svcOpt{withType(v1.ServiceTypeLoadBalancer, 0), ingress("192.0.2.10!Bogus", "192.0.2.20", "192.0.2.30!vip")},
			want:    ServicePort{LoadBalancerIPs: "192.0.2.20"},
			wantErr: []string{`status.loadBalancer.ingress[0] (192.0.2.10): ipMode "Bogus" is neither VIP nor Proxy`, `status.loadBalancer.ingress[2] (192.0.2.30): ipMode "vip"`}},
		{name: "ingress of a non-LoadBalancer ignored",
			opts: []svcOpt{withType(v1.ServiceTypeNodePort, 30080), ingress("192.0.2.10")},
			want: ServicePort{NodePort: 30080}},
		{name: "externalIPs: bad and reserved reported, other family skipped",
			opts: []svcOpt{func(s *v1.Service) {
				s.Spec.ExternalIPs = []string{"203.0.113.7", "nonsense", "127.0.0.1", "2001:db8::7", "203.0.113.7"}
			}},
			want:    ServicePort{ExternalIPs: "203.0.113.7"},
			wantErr: []string{`spec.externalIPs[1]: parse IP "nonsense"`, "spec.externalIPs[2]: 127.0.0.1 is loopback"}},
		{name: "source ranges: trimmed, masked, other family ignored",
			opts: []svcOpt{withType(v1.ServiceTypeLoadBalancer, 0), ingress("192.0.2.10"), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{" 198.51.100.7/24", "2001:db8::/32", "10.0.0.0/8", "bad"}
			}},
			want:    ServicePort{LoadBalancerIPs: "192.0.2.10", SourceRanges: "10.0.0.0/8,198.51.100.0/24"},
			wantErr: []string{"spec.loadBalancerSourceRanges[3]"}},
		{name: "source range 0.0.0.0/0 allows all",
			opts: []svcOpt{withType(v1.ServiceTypeLoadBalancer, 0), ingress("192.0.2.10"), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "0.0.0.0/0"}
			}},
			want: ServicePort{LoadBalancerIPs: "192.0.2.10"}},
		{name: "source ranges without load balancer IPs guard nothing",
			opts: []svcOpt{withType(v1.ServiceTypeLoadBalancer, 30080), func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
			}},
			want: ServicePort{NodePort: 30080}},
		{name: "Local policy with health check node port",
			opts: []svcOpt{withType(v1.ServiceTypeLoadBalancer, 30080), local, func(s *v1.Service) { s.Spec.HealthCheckNodePort = 32000 }},
			want: ServicePort{NodePort: 30080, ExternalLocal: true, HealthCheckNodePort: 32000}},
		{name: "health check node port on the Service's own nodePort: no health check",
			opts:    []svcOpt{withType(v1.ServiceTypeLoadBalancer, 30080), local, func(s *v1.Service) { s.Spec.HealthCheckNodePort = 30080 }},
			want:    ServicePort{NodePort: 30080, ExternalLocal: true},
			wantErr: []string{`spec.healthCheckNodePort 30080 is also spec.ports[0] ("http")'s nodePort, which keeps it: no health check`}},
		{name: "Local policy on a LoadBalancer without health check node port",
			opts:    []svcOpt{withType(v1.ServiceTypeLoadBalancer, 30080), local},
			want:    ServicePort{NodePort: 30080, ExternalLocal: true},
			wantErr: []string{"spec.healthCheckNodePort 0 out of range"}},
		{name: "Local policy means nothing on a ClusterIP Service",
			opts: []svcOpt{local}},
		{name: "Local policy applies to external IPs of a ClusterIP Service",
			opts: []svcOpt{local, func(s *v1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.7"} }},
			want: ServicePort{ExternalIPs: "203.0.113.7", ExternalLocal: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs errCollector
			svc := makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, tt.opts...)
			got := servicePorts(svc, IPv4, errs.report)
			want := tt.want
			want.Name, want.ClusterIP, want.Port = spn, ip, 80
			if diff := cmp.Diff([]ServicePort{want}, got, cmpOpts...); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if len(errs) != len(tt.wantErr) {
				t.Fatalf("reports = %v, want %d matching %q", errs, len(tt.wantErr), tt.wantErr)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.wantErr[i]) {
					t.Errorf("report[%d] = %q, want it to contain %q", i, e, tt.wantErr[i])
				}
			}
		})
	}
}

func TestServicePortsDuplicateNodePort(t *testing.T) {
	var errs errCollector
	svc := makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("a", 80), tcpPort("b", 81), udpPort("c", 80)}, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 30080
		}
	})
	got := servicePorts(svc, IPv4, errs.report)
	var nps []uint16
	for _, p := range got {
		nps = append(nps, p.NodePort)
	}
	// a keeps TCP 30080, b loses it, c has UDP 30080 (another protocol).
	if want := []uint16{30080, 0, 30080}; !cmp.Equal(nps, want) || len(errs) != 1 {
		t.Fatalf("node ports %v (reports %v), want %v and one report", nps, errs, want)
	}
}

func TestAddrListRoundTrip(t *testing.T) {
	l := NewAddrList([]netip.Addr{addr("10.0.0.2"), addr("10.0.0.1"), addr("10.0.0.2")})
	if l != "10.0.0.1,10.0.0.2" || len(l.Addrs()) != 2 || l.Addrs()[0] != addr("10.0.0.1") {
		t.Fatalf("list %q, addrs %v", l, l.Addrs())
	}
	if AddrList("").Addrs() != nil || PrefixList("").Prefixes() != nil {
		t.Fatal("empty lists must give nil")
	}
}
