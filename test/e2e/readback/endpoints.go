// Package readback reads what a proxy left in the kernel and in its metrics
// from their text forms (nft listings, Prometheus exposition): pure functions
// the e2e suite uses and that are tested without a cluster.
package readback

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Endpoints per Service as the kernel balances them: SvcproxyEndpoints keys by
// ClusterIP, KubeProxyEndpoints by Service name; addresses sorted.
var (
	// svcproxy's endpoint map element: ClusterIP . proto . port . slot : endpoint . port
	spEndpoint = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+) \. tcp \. (\d+) \. (\S+) : (\d+\.\d+\.\d+\.\d+) \. \d+`)
	// svcproxy's dispatch element: ClusterIP . proto . port [comment] : goto lb-N-SS
	spDispatch = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+) \. tcp \. (\d+)(?: comment "[^"]*")? : goto lb-(\d+)-`)
	// kube-proxy nftables: a service chain's rules name its endpoint chains.
	kpServiceChain  = regexp.MustCompile(`^\s*chain service-\w+-([^/]+)/([^/]+)/tcp/\S* \{`)
	kpEndpointChain = regexp.MustCompile(`goto endpoint-\w+-[^/]+/[^/]+/tcp/\S*__(\d+\.\d+\.\d+\.\d+)/\d+`)
)

// SvcproxyEndpoints parses `nft list table ip svcproxy`: a port dispatched
// to lb-N uses the endpoint slots 0..N-1 (slots above N are never picked).
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

// KubeProxyEndpoints parses `nft list table ip kube-proxy`: the endpoint
// chains each service chain jumps to (stale endpoint chains kube-proxy has
// not deleted yet are not referenced, so they do not count).
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
			out[cur] = append(out[cur], m[1])
		}
	}
	for k := range out {
		slices.Sort(out[k])
		out[k] = slices.Compact(out[k])
	}
	return out
}
