package endpoints

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestServiceCIDRPrefixes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cidrs   []string
		want    []netip.Prefix
		invalid int
	}{
		{name: "dual-stack default", cidrs: []string{"10.96.0.0/16", "fd00:10:96::/112"}, want: prefixes("10.96.0.0/16", "fd00:10:96::/112")},
		{name: "host bits masked", cidrs: []string{"10.96.0.7/16"}, want: prefixes("10.96.0.0/16")},
		{name: "not a CIDR", cidrs: []string{"10.96.0.0", "nonsense", "10.97.0.0/24"}, want: prefixes("10.97.0.0/24"), invalid: 2},
		{name: "IPv4-mapped", cidrs: []string{"::ffff:10.96.0.0/112"}, invalid: 1},
		{name: "zone", cidrs: []string{"fe80::%eth0/64"}, invalid: 1},
		{name: "empty", cidrs: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reasons []string
			got := ServiceCIDRPrefixes(serviceCIDR("x", tc.cidrs...), func(err error) { reasons = append(reasons, err.Error()) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("prefixes = %v, want %v", got, tc.want)
			}
			if len(reasons) != tc.invalid {
				t.Errorf("reported %q, want %d reports", reasons, tc.invalid)
			}
		})
	}
}

// FuzzServiceCIDRPrefixes: whatever spec.cidrs holds (it comes from the API
// server), the decoder neither panics nor returns a prefix that is not a masked
// plain IPv4 or IPv6 network; every input string is returned or reported.
func FuzzServiceCIDRPrefixes(f *testing.F) {
	for _, s := range []string{"10.96.0.0/16", "fd00:10:96::/112", "::ffff:1.2.3.4/128", "1.2.3.4/33", "", "fe80::1%lo/64", "0.0.0.0/0"} {
		f.Add(s, "10.0.0.0/8")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		reports := 0
		got := ServiceCIDRPrefixes(serviceCIDR("f", a, b), func(error) { reports++ })
		if len(got)+reports != 2 {
			t.Fatalf("%q %q: %d prefixes and %d reports, want 2 in all", a, b, len(got), reports)
		}
		for _, p := range got {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("%q %q: returned %v", a, b, p)
			}
		}
	})
}

func TestDisjointPrefixes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{name: "one", in: []string{"10.96.0.0/16"}, want: []string{"10.96.0.0/16"}},
		{name: "duplicate", in: []string{"10.96.0.0/16", "10.96.0.0/16"}, want: []string{"10.96.0.0/16"}},
		{name: "contained either order", in: []string{"10.96.5.0/24", "10.96.0.0/16", "10.96.0.0/24"}, want: []string{"10.96.0.0/16"}},
		{name: "disjoint sorted", in: []string{"10.97.0.0/16", "10.96.0.0/16"}, want: []string{"10.96.0.0/16", "10.97.0.0/16"}},
		{name: "after a container", in: []string{"10.0.0.0/8", "10.200.0.0/16", "11.0.0.0/24"}, want: []string{"10.0.0.0/8", "11.0.0.0/24"}},
		{name: "families apart", in: []string{"fd00::/64", "10.96.0.0/16", "fd00::/112"}, want: []string{"10.96.0.0/16", "fd00::/64"}},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DisjointPrefixes(prefixes(tc.in...))
			if want := prefixes(tc.want...); !slices.Equal(got, want) {
				t.Errorf("DisjointPrefixes(%v) = %v, want %v", tc.in, got, want)
			}
		})
	}
}

// TestServiceCIDRTracker: the union by family, OnChange only when the union
// changes, and a CIDR two objects name outlives the deletion of one of them.
func TestServiceCIDRTracker(t *testing.T) {
	changes := 0
	var invalid []string
	tr := NewServiceCIDRTracker(ServiceCIDRTrackerOptions{
		OnChange:  func() { changes++ },
		OnInvalid: func(kind, _, name, reason string) { invalid = append(invalid, kind+" "+name+": "+reason) },
	})
	type step struct {
		name        string
		do          func()
		v4, v6      []string
		changed     bool
		invalidSeen int
	}
	for _, s := range []step{
		{name: "default dual-stack", do: func() { tr.OnAdd(serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:10:96::/112")) },
			v4: []string{"10.96.0.0/16"}, v6: []string{"fd00:10:96::/112"}, changed: true},
		{name: "same again (resync)", do: func() { tr.OnAdd(serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:10:96::/112")) },
			v4: []string{"10.96.0.0/16"}, v6: []string{"fd00:10:96::/112"}},
		{name: "contained range adds nothing", do: func() { tr.OnAdd(serviceCIDR("inner", "10.96.1.0/24")) },
			v4: []string{"10.96.0.0/16"}, v6: []string{"fd00:10:96::/112"}},
		{name: "second range", do: func() { tr.OnAdd(serviceCIDR("extra", "10.97.0.0/24")) },
			v4: []string{"10.96.0.0/16", "10.97.0.0/24"}, v6: []string{"fd00:10:96::/112"}, changed: true},
		{name: "same CIDR twice", do: func() { tr.OnAdd(serviceCIDR("extra-copy", "10.97.0.0/24")) },
			v4: []string{"10.96.0.0/16", "10.97.0.0/24"}, v6: []string{"fd00:10:96::/112"}},
		{name: "one copy deleted: still named", do: func() { tr.OnDeleteObj(serviceCIDR("extra", "10.97.0.0/24")) },
			v4: []string{"10.96.0.0/16", "10.97.0.0/24"}, v6: []string{"fd00:10:96::/112"}},
		{name: "last copy deleted by tombstone", do: func() { tr.OnDeleteObj(cache.DeletedFinalStateUnknown{Key: "extra-copy"}) },
			v4: []string{"10.96.0.0/16"}, v6: []string{"fd00:10:96::/112"}, changed: true},
		{name: "invalid CIDR reported", do: func() { tr.OnAdd(serviceCIDR("bad", "10.98.0.0/33")) },
			v4: []string{"10.96.0.0/16"}, v6: []string{"fd00:10:96::/112"}, invalidSeen: 1},
		{name: "unexpected delete object", do: func() { tr.OnDeleteObj(42) },
			v4: []string{"10.96.0.0/16"}, v6: []string{"fd00:10:96::/112"}, invalidSeen: 1},
		{name: "default gone: the range inside it shows", do: func() { tr.OnDeleteObj(serviceCIDR("kubernetes")) },
			v4: []string{"10.96.1.0/24"}, changed: true},
	} {
		before, invalidBefore := changes, len(invalid)
		s.do()
		if got, want := tr.CIDRs(IPv4), prefixes(s.v4...); !slices.Equal(got, want) {
			t.Errorf("%s: IPv4 CIDRs %v, want %v", s.name, got, want)
		}
		if got, want := tr.CIDRs(IPv6), prefixes(s.v6...); !slices.Equal(got, want) {
			t.Errorf("%s: IPv6 CIDRs %v, want %v", s.name, got, want)
		}
		if (changes > before) != s.changed {
			t.Errorf("%s: OnChange called %d times, want change %v", s.name, changes-before, s.changed)
		}
		if got := len(invalid) - invalidBefore; got != s.invalidSeen {
			t.Errorf("%s: %d invalid reports (%s), want %d", s.name, got, strings.Join(invalid[invalidBefore:], "; "), s.invalidSeen)
		}
	}
}
