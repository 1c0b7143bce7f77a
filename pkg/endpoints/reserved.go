package endpoints

import "net/netip"

var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// ReservedReason says why a node must never use addr as a Service address or send
// Service traffic to it as an endpoint, or returns "" when addr is fine. Capturing
// 127.0.0.1:80 as a ClusterIP would take every connection to the node's own
// localhost port, svcproxy's health port included, and keep doing so after svcproxy
// exits; the API server rejects such endpoint addresses for the same reason
// (ValidateEndpointIP: unspecified, loopback, link-local; here all multicast and
// broadcast too, which no connection can be DNATed to).
func ReservedReason(addr netip.Addr) string {
	a := addr.Unmap()
	switch {
	case a.IsUnspecified():
		return "is unspecified (0.0.0.0, ::)"
	case a.Is4() && a.As4()[0] == 0:
		return "is in 0.0.0.0/8 (this host on this network)"
	case a.IsLoopback():
		return "is loopback (127.0.0.0/8, ::1)"
	case a.IsLinkLocalUnicast():
		return "is link-local (169.254.0.0/16, fe80::/10)"
	case a.IsMulticast():
		return "is multicast (224.0.0.0/4, ff00::/8)"
	case a == broadcast:
		return "is the broadcast address 255.255.255.255"
	}
	return ""
}
