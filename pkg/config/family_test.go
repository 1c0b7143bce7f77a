package config

import (
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

func TestCheckFamilies(t *testing.T) {
	v4, v6 := endpoints.IPv4, endpoints.IPv6
	for _, tc := range []struct {
		name        string
		primary     endpoints.Family
		dual        bool
		clusterCIDR string
		nodePorts   []string
		healthz     string
		want        []string // substrings of the warnings, in order
		fatal       string
	}{
		{name: "nothing to say", primary: v4, dual: true, clusterCIDR: "10.244.0.0/16,fd00:244::/56", nodePorts: []string{"primary"}},
		{name: "unset nodePortAddresses", primary: v4, nodePorts: nil, want: []string{"nodePortAddresses is unset"}},
		{name: "dual-stack, nodePortAddresses of the primary family only", primary: v4, dual: true,
			clusterCIDR: "10.244.0.0/16,fd00:244::/56", nodePorts: []string{"10.0.0.0/8"},
			want: []string{"cluster appears to be dual-stack but nodePortAddresses contains only IPv4 addresses; NodePort connections will be accepted on all local IPv6 IPs"}},
		{name: "nodePortAddresses of the other family only", primary: v6, nodePorts: []string{"10.0.0.0/8"},
			want: []string{"cluster appears to be IPv6-primary but nodePortAddresses contains only IPv4 addresses; NodePort connections will be accepted on all local IPv6 IPs"}},
		{name: "both families' CIDRs", primary: v6, dual: true, nodePorts: []string{"10.0.0.0/8", "fd00::/64"}},
		{name: "clusterCIDR of the wrong family on a single-stack node is fatal", primary: v4, nodePorts: []string{"primary"},
			clusterCIDR: "fd00:244::/56", fatal: "cluster is IPv4-only but clusterCIDRs contains only IPv6 addresses"},
		{name: "... and a warning on a dual-stack one", primary: v4, dual: true, nodePorts: []string{"primary"},
			clusterCIDR: "fd00:244::/56", want: []string{"cluster is IPv4-primary but clusterCIDRs contains only IPv6 addresses"}},
		{name: "healthz address of the missing family", primary: v6, nodePorts: []string{"primary"}, healthz: "0.0.0.0:10256",
			want: []string{"cluster is IPv6-only but healthzBindAddress is IPv4"}},
		{name: "healthz address of the other family on a dual-stack node is fine", primary: v6, dual: true, nodePorts: []string{"primary"}, healthz: "0.0.0.0:10256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings, fatal := CheckFamilies(tc.primary, tc.dual, tc.clusterCIDR, tc.nodePorts, tc.healthz, "")
			if (fatal != nil) != (tc.fatal != "") || fatal != nil && !strings.Contains(fatal.Error(), tc.fatal) {
				t.Fatalf("fatal = %v, want %q", fatal, tc.fatal)
			}
			if len(warnings) != len(tc.want) {
				t.Fatalf("warnings = %q, want %d matching %q", warnings, len(tc.want), tc.want)
			}
			for i, w := range warnings {
				if !strings.Contains(w, tc.want[i]) {
					t.Errorf("warning %d = %q, want %q", i, w, tc.want[i])
				}
			}
		})
	}
}

// TestClusterCIDRPerFamily: each family's proxy masquerades from outside its
// own family's entry of --cluster-cidr, none when the list lacks its family.
func TestClusterCIDRPerFamily(t *testing.T) {
	for _, tc := range []struct{ flag, v4, v6 string }{
		{"", "invalid Prefix", "invalid Prefix"},
		{"10.244.0.0/16", "10.244.0.0/16", "invalid Prefix"},
		{"fd00:244::/56", "invalid Prefix", "fd00:244::/56"},
		{"10.244.0.0/16,fd00:244::/56", "10.244.0.0/16", "fd00:244::/56"},
		{"fd00:244::/56, 10.244.0.0/16", "10.244.0.0/16", "fd00:244::/56"},
	} {
		if got := ClusterCIDRFor(tc.flag, endpoints.IPv4).String(); got != tc.v4 {
			t.Errorf("%q: IPv4 %s, want %s", tc.flag, got, tc.v4)
		}
		if got := ClusterCIDRFor(tc.flag, endpoints.IPv6).String(); got != tc.v6 {
			t.Errorf("%q: IPv6 %s, want %s", tc.flag, got, tc.v6)
		}
	}
}
