package nodeaddr

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// PrimaryIPs are the node's primary IPs the way kube-proxy finds them: the first
// InternalIP of the Node's status (else its first ExternalIP) and the first
// address of the other family after it; a --bind-address that is not 0.0.0.0 or
// :: replaces the one of its family. At most one address per family, primary
// family first.
func PrimaryIPs(status []corev1.NodeAddress, bindAddress string) []netip.Addr {
	var ordered []netip.Addr
	for _, want := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, na := range status {
			if na.Type != want {
				continue
			}
			if a, err := netip.ParseAddr(na.Address); err == nil {
				ordered = append(ordered, a.Unmap())
			}
		}
	}
	var out []netip.Addr
	for _, a := range ordered {
		if len(out) == 0 || len(out) == 1 && out[0].Is4() != a.Is4() {
			out = append(out, a)
		}
	}
	bind, err := netip.ParseAddr(bindAddress)
	if err != nil || bind.IsUnspecified() {
		return out
	}
	bind = bind.Unmap()
	for i, a := range out {
		if a.Is4() == bind.Is4() {
			out[i] = bind
			return out
		}
	}
	// kube-proxy makes the bind address's family the primary one.
	return append([]netip.Addr{bind}, out...)
}
