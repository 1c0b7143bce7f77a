package nodeaddr

import (
	"net/netip"
	"slices"
)

var (
	ipv4Loopback = netip.MustParsePrefix("127.0.0.0/8")
	ipv6Loopback = netip.MustParsePrefix("::1/128")
)

// Selection is which local addresses serve NodePorts.
type Selection struct {
	// AllIPv4 and AllIPv6: every local address of the family serves NodePorts
	// (the list held 0.0.0.0/0 or ::/0, `all`, or nothing of that family), as
	// kube-proxy's iptables mode matches `--dst-type LOCAL`; addresses added
	// later serve at once, whatever Addrs says.
	AllIPv4, AllIPv6 bool
	// Addrs are the local addresses selected now, sorted, loopback included
	// when the list covers it (whether localhost NodePorts are served is the
	// separate localhostNodePorts setting).
	Addrs []netip.Addr
}

// IPv4 returns the IPv4 part, what the `ip svcproxy` proxy serves NodePorts on:
// the selected IPv4 addresses and whether every local IPv4 address is selected.
func (s Selection) IPv4() (addrs []netip.Addr, all bool) { return s.family(true), s.AllIPv4 }

// IPv6 returns the IPv6 part, what the `ip6 svcproxy` proxy serves NodePorts on:
// the selected IPv6 addresses and whether every local IPv6 address is selected.
func (s Selection) IPv6() (addrs []netip.Addr, all bool) { return s.family(false), s.AllIPv6 }

func (s Selection) family(is4 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range s.Addrs {
		if a.Is4() == is4 {
			out = append(out, a)
		}
	}
	return out
}

// Families keeps only the families a node serves: a single-stack node's health
// check ports listen on its own family's addresses only, as kube-proxy's one
// proxier's do.
func (s Selection) Families(ipv4, ipv6 bool) Selection {
	out := Selection{AllIPv4: s.AllIPv4 && ipv4, AllIPv6: s.AllIPv6 && ipv6}
	for _, a := range s.Addrs {
		if a.Is4() && ipv4 || a.Is6() && ipv6 {
			out.Addrs = append(out.Addrs, a)
		}
	}
	return out
}

// Equal reports whether two selections are the same.
func (s Selection) Equal(o Selection) bool {
	return s.AllIPv4 == o.AllIPv4 && s.AllIPv6 == o.AllIPv6 && slices.Equal(s.Addrs, o.Addrs)
}

// Prefixes expands the spec into the CIDRs of one family, given the node's primary
// IPs: `primary` becomes the primary IP of that family as a host prefix (a
// loopback or unknown primary IP adds nothing, as in kube-proxy), `localhost`
// the family's loopback range, `all` the family's zero prefix.
func (s Spec) prefixes(is4 bool, primary []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.Prefixes {
		if p.Addr().Is4() == is4 {
			out = append(out, p)
		}
	}
	if s.Primary {
		for _, a := range primary {
			a = a.Unmap()
			if a.Is4() == is4 && a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
				break // one primary IP per family
			}
		}
	}
	if s.Localhost {
		out = append(out, map[bool]netip.Prefix{true: ipv4Loopback, false: ipv6Loopback}[is4])
	}
	if s.All {
		out = append(out, netip.PrefixFrom(zero(is4), 0))
	}
	return out
}

func zero(is4 bool) netip.Addr {
	if is4 {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// Select picks, for each IP family, the local addresses covered by the spec.
// A family the list says nothing about (after expanding the keywords) is served
// on every local address, as kube-proxy does: `--nodeport-addresses 10.0.0.0/8`
// restricts IPv4 only.
func Select(s Spec, primary, local []netip.Addr) Selection {
	var sel Selection
	v4, v6 := s.prefixes(true, primary), s.prefixes(false, primary)
	sel.AllIPv4, sel.AllIPv6 = matchesAll(v4), matchesAll(v6)
	seen := map[netip.Addr]bool{}
	for _, a := range local {
		a = a.Unmap()
		if !a.IsValid() || seen[a] {
			continue
		}
		all, prefixes := sel.AllIPv4, v4
		if a.Is6() {
			all, prefixes = sel.AllIPv6, v6
		}
		if all || covered(prefixes, a) {
			seen[a] = true
			sel.Addrs = append(sel.Addrs, a)
		}
	}
	slices.SortFunc(sel.Addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return sel
}

func matchesAll(prefixes []netip.Prefix) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if p.Bits() == 0 {
			return true
		}
	}
	return false
}

func covered(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
