// Package readback reads what a proxy left in the kernel and in its metrics
// from their text forms (nft listings, Prometheus exposition): pure functions
// the e2e suite uses and that are tested without a cluster.
package readback

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// addr is an IPv4 or IPv6 address as nft prints it (IPv6 compressed, as
// netip prints it too). It must start after a blank, '{' or ',' so that it
// is not the hex tail of a longer word.
const addr = `(?:^|[\s{,])([0-9a-fA-F:.]+)`

// Endpoints per Service as the kernel balances them: SvcproxyEndpoints keys by
// ClusterIP, KubeProxyEndpoints by Service name; addresses sorted.
var (
	// svcproxy's endpoint map element: ClusterIP . proto . port . slot : endpoint . port
	spEndpoint = regexp.MustCompile(addr + ` \. tcp \. (\d+) \. (\S+) : ([0-9a-fA-F:.]+) \. \d+`)
	// svcproxy's dispatch element: ClusterIP . proto . port [comment] : goto lb-N-SS
	spDispatch = regexp.MustCompile(addr + ` \. tcp \. (\d+)(?: comment "[^"]*")? : goto lb-(\d+)-`)
	// kube-proxy nftables: a service chain's rules name its endpoint chains.
	// An IPv6 endpoint's colons are dots in the chain name.
	kpServiceChain  = regexp.MustCompile(`^\s*chain service-\w+-([^/]+)/([^/]+)/tcp/\S* \{`)
	kpEndpointChain = regexp.MustCompile(`goto endpoint-\w+-[^/]+/[^/]+/tcp/\S*__([0-9a-fA-F.]+)/\d+`)
	// ... or, as v1.37 does when no endpoint needs a chain of its own, the
	// service chain translates itself: to its one endpoint (dnat to
	// 10.200.0.3:80, dnat to [fd00::3]:80) or to one picked from an
	// anonymous map (dnat ip6 to numgen random mod 2 map { 0 : fd00::3 .
	// 80, 1 : fd00::4 . 80 }).
	kpDirectDNAT = regexp.MustCompile(`\bdnat to (?:\[([0-9a-fA-F:.]+)\]|(\d+\.\d+\.\d+\.\d+)):\d+`)
	kpNumgenMap  = regexp.MustCompile(`\bdnat (?:ip6? )?to numgen random mod \d+ map \{([^}]*)\}`)
	kpMapElement = regexp.MustCompile(`\d+ : ([0-9a-fA-F:.]+) \. \d+`)
)

// SvcproxyEndpoints parses `nft list table ip svcproxy` or `ip6 svcproxy`
// (or both, concatenated): a port dispatched to lb-N uses the endpoint slots
// 0..N-1 (slots above N are never picked).
func SvcproxyEndpoints(listing string) map[string][]string {
	n := map[string]int{}
	for _, m := range spDispatch.FindAllStringSubmatch(listing, -1) {
		n[m[1]+":"+m[2]], _ = strconv.Atoi(m[3])
	}
	out := map[string][]string{}
	for _, m := range spEndpoint.FindAllStringSubmatch(listing, -1) {
		key := m[1] + ":" + m[2]
		slot, err := strconv.ParseInt(m[3], 0, 64)
		if err != nil || int(slot) >= n[key] {
			continue
		}
		out[m[1]] = append(out[m[1]], m[4])
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// KubeProxyEndpoints parses `nft list table ip kube-proxy` or `ip6
// kube-proxy` (or both, concatenated): the endpoint chains each service chain
// jumps to, or the endpoints it translates to itself (stale endpoint chains
// kube-proxy has not deleted yet are not referenced, so they do not count).
func KubeProxyEndpoints(listing string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(listing, "\n") {
		if m := kpServiceChain.FindStringSubmatch(l); m != nil {
			cur = m[2]
			continue
		}
		if cur == "" {
			continue
		}
		if l == "\t}" || l == "}" {
			cur = ""
			continue
		}
		for _, m := range kpEndpointChain.FindAllStringSubmatch(l, -1) {
			out[cur] = append(out[cur], chainNameIP(m[1]))
		}
		if m := kpDirectDNAT.FindStringSubmatch(l); m != nil {
			out[cur] = append(out[cur], m[1]+m[2])
		}
		if m := kpNumgenMap.FindStringSubmatch(l); m != nil {
			for _, e := range kpMapElement.FindAllStringSubmatch(m[1], -1) {
				out[cur] = append(out[cur], e[1])
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
		out[k] = slices.Compact(out[k])
	}
	return out
}

// chainNameIP undoes kube-proxy's spelling of an endpoint IP in a chain name,
// where an IPv6 address has its colons replaced by dots ("fd00.200..c8.1"):
// an IPv4 address is kept, anything else is read as IPv6 and printed in its
// compressed form, as the listings and the e2e write addresses.
func chainNameIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return s
	}
	if a, err := netip.ParseAddr(strings.ReplaceAll(s, ".", ":")); err == nil {
		return a.String()
	}
	return s
}
