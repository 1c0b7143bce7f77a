package endpoints

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestServicePorts(t *testing.T) {
	spn := func(port, proto string) ServicePortName {
		return ServicePortName{Namespace: "ns", Name: "svc", Port: port, Protocol: proto}
	}
	ip := addr("10.96.0.10")
	withAffinity := func(timeout *int32) svcOpt {
		return func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			if timeout != nil {
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: timeout}}
			}
		}
	}

	tests := []struct {
		name    string
		svc     *v1.Service
		fam     Family
		want    []ServicePort
		wantErr []string // substrings, one per expected report, in order
	}{
		{
			name: "two ports sorted by name",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("https", 443), tcpPort("http", 80)}),
			want: []ServicePort{
				{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80},
				{Name: spn("https", "TCP"), ClusterIP: ip, Port: 443},
			},
		},
		{
			name: "same name different protocol are distinct ports",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{udpPort("dns", 53), tcpPort("dns", 53)}),
			want: []ServicePort{
				{Name: spn("dns", "TCP"), ClusterIP: ip, Port: 53},
				{Name: spn("dns", "UDP"), ClusterIP: ip, Port: 53},
			},
		},
		{
			name: "empty protocol defaults to TCP, unnamed port",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{{Port: 8080}}),
			want: []ServicePort{{Name: spn("", "TCP"), ClusterIP: ip, Port: 8080}},
		},
		{
			name: "SCTP",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{{Name: "s", Port: 9, Protocol: v1.ProtocolSCTP}}),
			want: []ServicePort{{Name: spn("s", "SCTP"), ClusterIP: ip, Port: 9}},
		},
		{
			name: "headless skipped silently",
			svc:  makeService("ns", "svc", v1.ClusterIPNone, []v1.ServicePort{tcpPort("http", 80)}),
		},
		{
			name: "empty clusterIP skipped silently",
			svc:  makeService("ns", "svc", "", []v1.ServicePort{tcpPort("http", 80)}),
		},
		{
			name: "ExternalName skipped even with a clusterIP",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeExternalName
				s.Spec.ExternalName = "example.com"
			}),
		},
		{
			name: "service-proxy-name label with any value skipped",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Labels = map[string]string{LabelServiceProxyName: ""}
			}),
		},
		{
			name: "NodePort and LoadBalancer keep their cluster IP",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
			}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
		},
		{
			name:    "unparsable clusterIP reported and skipped",
			svc:     makeService("ns", "svc", "10.96.0.300", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`spec.clusterIPs[0]: parse IP "10.96.0.300"`},
		},
		{
			name: "only clusterIP set (no clusterIPs) still works",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.ClusterIPs = nil
			}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
		},
		{
			name: "legacy leading-zero clusterIP accepted",
			svc:  makeService("ns", "svc", "010.096.000.010", []v1.ServicePort{tcpPort("http", 80)}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
		},
		{
			name: "dual-stack IPv6-primary picks the IPv4 entry",
			svc: makeService("ns", "svc", "fd00::10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"fd00::10", "10.96.0.10"}
			}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
		},
		{
			name: "dual-stack for the IPv6 family picks the IPv6 entry",
			fam:  IPv6,
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00::10"}
			}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: addr("fd00::10"), Port: 80}},
		},
		{
			name: "single-stack IPv6 skipped silently for IPv4",
			svc:  makeService("ns", "svc", "fd00::10", []v1.ServicePort{tcpPort("http", 80)}),
		},
		{
			name: "bad secondary clusterIP reported but primary used",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"garbage", "10.96.0.10"}
			}),
			want:    []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
			wantErr: []string{`spec.clusterIPs[0]: parse IP "garbage"`},
		},
		{
			name: "bad ports dropped individually",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{
				tcpPort("zero", 0), tcpPort("big", 70000), tcpPort("neg", -1),
				{Name: "icmp", Port: 1, Protocol: "ICMP"}, tcpPort("ok", 65535),
			}),
			want: []ServicePort{{Name: spn("ok", "TCP"), ClusterIP: ip, Port: 65535}},
			wantErr: []string{
				`spec.ports[0] ("zero"): port 0 out of range`,
				`spec.ports[1] ("big"): port 70000 out of range`,
				`spec.ports[2] ("neg"): port -1 out of range`,
				`spec.ports[3] ("icmp"): unknown protocol "ICMP"`,
			},
		},
		{
			name:    "all ports bad means absent",
			svc:     makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("zero", 0)}),
			wantErr: []string{"port 0 out of range"},
		},
		{
			name:    "no ports means absent",
			svc:     makeService("ns", "svc", "10.96.0.10", nil),
			wantErr: nil,
		},
		{
			name: "duplicate name+protocol keeps the first",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80), tcpPort("http", 8080)}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
			wantErr: []string{
				`spec.ports[1]: duplicate port name "http" for TCP`,
			},
		},
		{
			name: "one port number under two names: the first in spec order wins",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("web", 80), tcpPort("http", 80), udpPort("http-udp", 80)}),
			want: []ServicePort{
				{Name: spn("http-udp", "UDP"), ClusterIP: ip, Port: 80},
				{Name: spn("web", "TCP"), ClusterIP: ip, Port: 80},
			},
			wantErr: []string{`spec.ports[1] ("http"): port 80/TCP is already spec.ports[0] ("web"), which is used instead`},
		},
		{
			name:    "loopback clusterIP refused: it would capture the node's own localhost",
			svc:     makeService("ns", "svc", "127.0.0.1", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`spec.clusterIPs[0]: 127.0.0.1 is loopback`},
		},
		{
			name:    "link-local clusterIP refused",
			svc:     makeService("ns", "svc", "169.254.169.254", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`169.254.169.254 is link-local`},
		},
		{
			name:    "multicast clusterIP refused",
			svc:     makeService("ns", "svc", "239.1.1.1", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`239.1.1.1 is multicast`},
		},
		{
			name:    "broadcast clusterIP refused",
			svc:     makeService("ns", "svc", "255.255.255.255", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`is the broadcast address`},
		},
		{
			name:    "0.0.0.0/8 clusterIP refused",
			svc:     makeService("ns", "svc", "0.0.0.1", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`0.0.0.1 is in 0.0.0.0/8`},
		},
		{
			name:    "IPv6 loopback clusterIP refused",
			fam:     IPv6,
			svc:     makeService("ns", "svc", "::1", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`::1 is loopback`},
		},
		{
			name:    "IPv6 link-local clusterIP refused",
			fam:     IPv6,
			svc:     makeService("ns", "svc", "fe80::10", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`fe80::10 is link-local`},
		},
		{
			name:    "IPv6 multicast clusterIP refused",
			fam:     IPv6,
			svc:     makeService("ns", "svc", "ff05::2", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`ff05::2 is multicast`},
		},
		{
			name:    "IPv6 unspecified clusterIP refused",
			fam:     IPv6,
			svc:     makeService("ns", "svc", "::", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`unspecified`},
		},
		{
			// Kubernetes rejects these; read as IPv4 they would program another address.
			name:    "IPv4-mapped IPv6 clusterIP refused for IPv6",
			fam:     IPv6,
			svc:     makeService("ns", "svc", "::ffff:10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`::ffff:10.96.0.10 is IPv4-mapped`},
		},
		{
			name:    "IPv4-mapped IPv6 clusterIP refused for IPv4",
			svc:     makeService("ns", "svc", "::ffff:10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}),
			wantErr: []string{`::ffff:10.96.0.10 is IPv4-mapped`},
		},
		{
			name: "dual-stack with a loopback IPv6 entry still serves IPv4",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.10", "::1"}
			}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
		},
		{
			name: "dual-stack with a loopback IPv6 entry refused for IPv6",
			fam:  IPv6,
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.10", "::1"}
			}),
			wantErr: []string{`spec.clusterIPs[1]: ::1 is loopback`},
		},
		{
			name: "ClientIP affinity default timeout",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, withAffinity(nil)),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80, SessionAffinity: true, AffinityTimeout: 10800 * time.Second}},
		},
		{
			name: "ClientIP affinity explicit timeout",
			svc:  makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, withAffinity(ptr[int32](60))),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80, SessionAffinity: true, AffinityTimeout: time.Minute}},
		},
		{
			name:    "ClientIP affinity out-of-range timeout falls back to default",
			svc:     makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, withAffinity(ptr[int32](86401))),
			want:    []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80, SessionAffinity: true, AffinityTimeout: 10800 * time.Second}},
			wantErr: []string{"timeoutSeconds 86401 out of range"},
		},
		{
			name: "affinity None ignores a leftover config",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityNone
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr[int32](5)}}
			}),
			want: []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
		},
		{
			name: "unknown affinity reported and treated as None",
			svc: makeService("ns", "svc", "10.96.0.10", []v1.ServicePort{tcpPort("http", 80)}, func(s *v1.Service) {
				s.Spec.SessionAffinity = "Sticky"
			}),
			want:    []ServicePort{{Name: spn("http", "TCP"), ClusterIP: ip, Port: 80}},
			wantErr: []string{`spec.sessionAffinity "Sticky" unknown`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs errCollector
			got := servicePorts(tt.svc, tt.fam, errs.report)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
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

func TestServicePortsInternalTrafficPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy *v1.ServiceInternalTrafficPolicy
		want   bool
	}{
		{nil, false},
		{ptr(v1.ServiceInternalTrafficPolicyCluster), false},
		{ptr(v1.ServiceInternalTrafficPolicyLocal), true},
	} {
		svc := makeService("ns", "web", "10.96.0.1", []v1.ServicePort{tcpPort("http", 80)})
		svc.Spec.InternalTrafficPolicy = tc.policy
		ports := servicePorts(svc, IPv4, func(error) {})
		if len(ports) != 1 || ports[0].InternalLocal != tc.want {
			t.Fatalf("internalTrafficPolicy %v: ports %+v, want InternalLocal=%v", tc.policy, ports, tc.want)
		}
	}
}
