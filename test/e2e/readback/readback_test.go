package readback

import (
	"math"
	"os"
	"reflect"
	"testing"
)

func TestSvcproxyEndpoints(t *testing.T) {
	golden, err := os.ReadFile("../../../pkg/proxy/testdata/my-nginx.nft")
	if err != nil {
		t.Fatal(err)
	}
	// `nft list table ip6 svcproxy` in a scratch namespace after `nft -f` of
	// `svcproxy render` for churn-like Services: the kernel's order, not the
	// render's (fd00:10:96::b before fd00:10:96::3a2).
	ip6, err := os.ReadFile("testdata/churn-ip6.nft")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, listing string
		want          map[string][]string
	}{
		{"render golden", string(golden), map[string][]string{"10.96.0.10": {"10.244.1.2", "10.244.1.3"}}},
		{"slots above lb-N are never picked", `
		elements = { 10.96.0.11 . tcp . 80 . 0x00000000 : 10.200.0.9 . 80,
			     10.96.0.11 . tcp . 80 . 0x00000001 : 10.201.0.9 . 80,
			     10.96.0.11 . tcp . 80 . 0x00000002 : 10.202.0.9 . 80 }
		elements = { 10.96.0.11 . tcp . 80 comment "default/churn-0009/TCP" : goto lb-2-11 }`,
			map[string][]string{"10.96.0.11": {"10.200.0.9", "10.201.0.9"}}},
		{"decimal slots, no comment", `
		elements = { 10.96.0.12 . tcp . 80 . 0 : 10.9.0.1 . 8080 }
		elements = { 10.96.0.12 . tcp . 80 : goto lb-1-12 }`,
			map[string][]string{"10.96.0.12": {"10.9.0.1"}}},
		{"no dispatch, no endpoints", `elements = { 10.96.0.13 . tcp . 80 . 0x00000000 : 10.9.0.1 . 80 }`,
			map[string][]string{}},
		{"ip6 kernel listing", string(ip6), map[string][]string{
			"fd00:10:96::3a2": {"fd00:200::c9:1", "fd00:200::ca:1", "fd00:200::cb:1"},
			"fd00:10:96::b":   {"fd00:200::c8:3"},
		}},
		{"IPv6 slots above lb-N are never picked", `
		elements = { fd00:10:96::11 . tcp . 80 . 0x00000000 : fd00:200::c8:9 . 80,
			     fd00:10:96::11 . tcp . 80 . 0x00000001 : fd00:200::c9:9 . 80,
			     fd00:10:96::11 . tcp . 80 . 0x00000002 : fd00:200::ca:9 . 80 }
		elements = { fd00:10:96::11 . tcp . 80 comment "default/churn-0009/TCP" : goto lb-2-11 }`,
			map[string][]string{"fd00:10:96::11": {"fd00:200::c8:9", "fd00:200::c9:9"}}},
		{"ip and ip6 tables concatenated", string(golden) + string(ip6), map[string][]string{
			"10.96.0.10":      {"10.244.1.2", "10.244.1.3"},
			"fd00:10:96::3a2": {"fd00:200::c9:1", "fd00:200::ca:1", "fd00:200::cb:1"},
			"fd00:10:96::b":   {"fd00:200::c8:3"},
		}},
		{"hairpin pairs and NodePort maps are not endpoints", `
		elements = { fd00:200::c8:3 . fd00:200::c8:3 }
		elements = { tcp . 30080 . 0 : fd00:10:244:1::7 . 80 }`,
			map[string][]string{}},
	}
	for _, tc := range tests {
		if got := SvcproxyEndpoints(tc.listing); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKubeProxyEndpoints(t *testing.T) {
	v4 := `table ip kube-proxy {
	chain service-ULMVA6XW-default/churn-0001/tcp/ {
		ip daddr 10.96.0.5 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
		numgen random mod 2 vmap { 0 : goto endpoint-5OJB2KTY-default/churn-0001/tcp/__10.201.0.1/80,
					   1 : goto endpoint-UHEGFW77-default/churn-0001/tcp/__10.200.0.1/80 }
	}

	chain endpoint-STALE000-default/churn-0001/tcp/__10.199.0.1/80 {
		ip saddr 10.199.0.1 jump mark-for-masquerade
		meta l4proto tcp dnat to 10.199.0.1:80
	}

	chain service-AAAAAAAA-default/churn-0002/tcp/http {
		numgen random mod 1 vmap { 0 : goto endpoint-BBBBBBBB-default/churn-0002/tcp/http__10.202.0.2/80 }
	}
}
`
	// kube-proxy writes an IPv6 endpoint's colons as dots in the chain name
	// (servicePortEndpointChainNameBase): fd00:200::c9:1 is fd00.200..c9.1.
	chains6 := `table ip6 kube-proxy {
	chain service-CCCCCCCC-default/churn-0003/tcp/ {
		ip6 daddr fd00:10:96::3a2 tcp dport 80 ip6 saddr != fd00:10:244::/56 jump mark-for-masquerade
		numgen random mod 2 vmap { 0 : goto endpoint-DDDDDDDD-default/churn-0003/tcp/__fd00.200..c9.1/80,
					   1 : goto endpoint-EEEEEEEE-default/churn-0003/tcp/__fd00.200..ca.1/80 }
	}

	chain service-FFFFFFFF-default/churn-0005/tcp/ {
		numgen random mod 1 vmap { 0 : goto endpoint-GGGGGGGG-default/churn-0005/tcp/__fd00.200.0.0.0.0.cb.5/80 }
	}
}
`
	// What kube-proxy v1.37 (nftables mode) left in an IPv6 e2e node during
	// the churn, the churn Services but two left out: service chains that
	// translate themselves, to one endpoint or through an anonymous map.
	direct6, err := os.ReadFile("testdata/kube-proxy-ip6.nft")
	if err != nil {
		t.Fatal(err)
	}
	// The same in IPv4, two chains read in an IPv4 e2e node.
	direct4 := `table ip kube-proxy {
	chain service-6AZKV443-default/churn-0009/tcp/ {
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.201.0.9 . 80, 1 : 10.202.0.9 . 80 }
	}

	chain service-Y4GH6HAL-default/churn-0886/tcp/ {
		meta l4proto tcp dnat to 10.200.3.118:80
	}
}
`
	tests := []struct {
		name, listing string
		want          map[string][]string
	}{
		{"ip", v4, map[string][]string{
			"churn-0001": {"10.200.0.1", "10.201.0.1"},
			"churn-0002": {"10.202.0.2"},
		}},
		{"ip6 endpoint chains, uncompressed name printed compressed", chains6, map[string][]string{
			"churn-0003": {"fd00:200::c9:1", "fd00:200::ca:1"},
			"churn-0005": {"fd00:200::cb:5"},
		}},
		{"ip6 kernel listing, no endpoint chains", string(direct6), map[string][]string{
			"kubernetes": {"fd00:172:18::2"},
			"churn-0101": {"fd00:200::cd:65", "fd00:200::ce:65", "fd00:200::cf:65"},
			"churn-0106": {"fd00:200::ce:6a"},
			"probe":      {"fd00:10:244:2::3"},
		}},
		{"ip, no endpoint chains", direct4, map[string][]string{
			"churn-0009": {"10.201.0.9", "10.202.0.9"},
			"churn-0886": {"10.200.3.118"},
		}},
		{"ip and ip6 concatenated", v4 + chains6, map[string][]string{
			"churn-0001": {"10.200.0.1", "10.201.0.1"},
			"churn-0002": {"10.202.0.2"},
			"churn-0003": {"fd00:200::c9:1", "fd00:200::ca:1"},
			"churn-0005": {"fd00:200::cb:5"},
		}},
	}
	for _, tc := range tests {
		if got := KubeProxyEndpoints(tc.listing); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRulesetLinesAndRemoved(t *testing.T) {
	before := RulesetLines(`table ip svcproxy { # handle 7
	set affinity { # handle 3
		elements = { 10.244.1.5 . 10.96.0.10 . 80 timeout 3h expires 2h59m58s }
	}
	chain lb-1-10 { # handle 9
		counter packets 4 bytes 240 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 1 map @endpoints-10 # handle 12
	}
}`)
	after := RulesetLines(`table ip svcproxy { # handle 7
	set affinity { # handle 3
		elements = { 10.244.1.5 . 10.96.0.10 . 80 timeout 3h expires 2h10m1s }
	}
	chain lb-1-10 { # handle 9
		counter packets 900 bytes 54000 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 1 map @endpoints-10 # handle 12
	}
}`)
	if gone := Removed(before, after); len(gone) != 0 {
		t.Errorf("counters and expiry count as removals: %q", gone)
	}
	readded := RulesetLines(`chain lb-1-10 { # handle 9
		counter packets 0 bytes 0 dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 1 map @endpoints-10 # handle 31
	}`)
	if gone := Removed(before, readded); len(gone) != 4 {
		t.Errorf("a rule deleted and added again (new handle) and a lost table, set and element: got %d removed lines %q, want 4", len(gone), gone)
	}
	if gone := Removed([]string{"a", "a"}, []string{"a"}); len(gone) != 1 {
		t.Errorf("a duplicate line lost once: %q", gone)
	}
}

func TestHistogramQuantile(t *testing.T) {
	const h = "kubeproxy_network_programming_duration_seconds"
	before := ParseMetrics(`# TYPE x histogram
` + h + `_bucket{le="0.25"} 10
` + h + `_bucket{le="0.5"} 10
` + h + `_bucket{le="1"} 10
` + h + `_bucket{le="+Inf"} 10
`)
	after := ParseMetrics(h + `_bucket{le="0.25"} 60
` + h + `_bucket{le="0.5"} 100
` + h + `_bucket{le="1"} 109
` + h + `_bucket{le="+Inf"} 110
`)
	tests := []struct {
		q, want float64
	}{
		{0.5, 0.25},  // 50 of 100 new observations are <= 0.25
		{0.7, 0.375}, // rank 70: half way through (0.25, 0.5]
		{0.99, 1},    // rank 99: the last of (0.5, 1]
		{1, 1},       // the +Inf bucket answers its lower bound
	}
	for _, tc := range tests {
		got, n := HistogramQuantile(before, after, h, tc.q)
		if math.Abs(got-tc.want) > 1e-9 || n != 100 {
			t.Errorf("q%.2f = %v (n %v), want %v (n 100)", tc.q, got, n, tc.want)
		}
	}
	if got, n := HistogramQuantile(after, after, h, 0.5); got != 0 || n != 0 {
		t.Errorf("no new observations: %v, %v", got, n)
	}
}

// Buckets carry other labels too (kube-proxy's ip_family): they are summed by le.
func TestHistogramQuantileWithLabels(t *testing.T) {
	const h = "kubeproxy_network_programming_duration_seconds"
	after := ParseMetrics(h + `_bucket{ip_family="IPv4",le="0.25"} 50
` + h + `_bucket{ip_family="IPv4",le="0.5"} 100
` + h + `_bucket{ip_family="IPv4",le="+Inf"} 100
`)
	if got, n := HistogramQuantile(nil, after, h, 0.75); math.Abs(got-0.375) > 1e-9 || n != 100 {
		t.Errorf("q0.75 = %v (n %v), want 0.375 (n 100)", got, n)
	}
}

func TestNamesAddr(t *testing.T) {
	for _, c := range []struct {
		line, addr string
		want       bool
	}{
		{"elements = { 10.96.0.10 . tcp . 80 . 0 : 10.244.1.2 . 80 }", "10.244.1.2", true},
		{"elements = { 10.96.0.10 . tcp . 80 . 0 : 10.244.1.23 . 80 }", "10.244.1.2", false},
		{"dnat to 10.244.1.2:80", "10.244.1.2", true},
		{"dnat to 110.244.1.2:80", "10.244.1.2", false},
		{"ip daddr 10.96.12.117 tcp dport 80", "10.96.12.117", true},
		{"dnat to [fd00:10:244:1::2]:80", "fd00:10:244:1::2", true},
		{"dnat to [fd00:10:244:1::2a]:80", "fd00:10:244:1::2", false},
		{"10.244.1.2", "10.244.1.2", true},
	} {
		if got := NamesAddr([]string{"table ip svcproxy { # handle 7", c.line}, c.addr); got != c.want {
			t.Errorf("NamesAddr(%q, %q) = %v, want %v", c.line, c.addr, got, c.want)
		}
	}
}
