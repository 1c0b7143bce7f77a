package endpoints

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// parseIP parses an IP the way Kubernetes stores it. The API server accepted
// IPv4 octets with leading zeros (read as decimal) before 1.30 and such
// objects still exist, so like kube-proxy's ParseIPSloppy we accept them
// instead of dropping a working Service. Zones are rejected: they are never
// valid in cluster or pod IPs and would not survive rendering.
func parseIP(s string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		legacy, ok := parseLegacyIPv4(s)
		if !ok {
			return netip.Addr{}, fmt.Errorf("parse IP %q: %w", s, err)
		}
		addr = legacy
	}
	if addr.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("parse IP %q: zones are not allowed", s)
	}
	if addr.IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("parse IP %q: unspecified address", s)
	}
	return addr, nil
}

// parseLegacyIPv4 accepts dotted-quad IPv4 whose octets may carry leading
// zeros, reading them as decimal (never octal), as Kubernetes historically did.
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, p := range parts {
		if p == "" || len(p) > 3 || strings.TrimLeft(p, "0123456789") != "" {
			return netip.Addr{}, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || n > 255 {
			return netip.Addr{}, false
		}
		b[i] = byte(n)
	}
	return netip.AddrFrom4(b), true
}

// parseIPOfFamily parses s and insists it belongs to fam.
func parseIPOfFamily(s string, fam Family) (netip.Addr, error) {
	addr, err := parseIP(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if addr.Is4In6() {
		return netip.Addr{}, fmt.Errorf("IP %q %s", s, mappedReason)
	}
	if !fam.matches(addr) {
		return netip.Addr{}, fmt.Errorf("IP %q is not %s", s, fam)
	}
	return addr, nil
}

// mappedReason is why an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is never used:
// the API server rejects them in cluster and pod IPs, and reading one as IPv4
// would program another address than the object names.
const mappedReason = "is IPv4-mapped IPv6 (::ffff:0:0/96), which Kubernetes rejects"
