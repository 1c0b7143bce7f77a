package benchworld

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// The IPv6 half of a dual-stack world (NewDual): the same three namespaces and
// links, with ULA addresses beside the IPv4 ones. The client is inside fd00::/8,
// the IPv6 cluster CIDR the benchmarks give the IPv6 proxy, so its traffic is a
// pod's, not masqueraded.
const (
	ClientIP6 = "fd00:244:250::2"
	clientGW6 = "fd00:244:250::1"
	podsIP6   = "fd00:244:251::2"
	podsGW6   = "fd00:244:251::1"
	// EndpointPf6: every address in it answers from the pods namespace.
	EndpointPf6 = "fd00:128::/64"
	// ServicePf6 holds the IPv6 ClusterIPs; what no proxy translated is refused by
	// the pods namespace at once, as for ServicePf.
	ServicePf6 = "fd00:96::/64"
)

// NewDual is New with IPv6 too: every namespace gets an IPv6 address, the pods
// namespace owns EndpointPf6 and ServicePf6 as it owns their IPv4 twins, and a
// second endpoint server answers IPv6 connections (an IPv6-only socket, so the
// IPv4 one keeps its own).
func NewDual(prefix string) (w *World, err error) {
	w, err = New(prefix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	// nodad: nothing else is on these links; duplicate address detection would
	// leave the addresses tentative (unusable) for a second or two.
	cmds := [][]string{
		{"-n", w.Node, "-6", "addr", "add", clientGW6 + "/64", "dev", "client0", "nodad"},
		{"-n", w.Node, "-6", "addr", "add", podsGW6 + "/64", "dev", "pods0", "nodad"},
		{"-n", w.Node, "-6", "route", "add", EndpointPf6, "via", podsIP6},
		{"-n", w.Node, "-6", "route", "add", ServicePf6, "via", podsIP6},
		{"-n", w.Client, "-6", "addr", "add", ClientIP6 + "/64", "dev", "eth0", "nodad"},
		{"-n", w.Client, "-6", "route", "add", "default", "via", clientGW6},
		{"-n", w.Pods, "-6", "addr", "add", podsIP6 + "/64", "dev", "eth0", "nodad"},
		{"-n", w.Pods, "-6", "route", "add", "default", "via", podsGW6},
		// AnyIP, as for IPv4.
		{"-n", w.Pods, "-6", "route", "add", "local", EndpointPf6, "dev", "lo"},
		{"-n", w.Pods, "-6", "route", "add", "local", ServicePf6, "dev", "lo"},
	}
	for _, a := range cmds {
		if err := netns.IP(a...); err != nil {
			return w, err
		}
	}
	if _, err := netns.Exec(w.Node, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"); err != nil {
		return w, err
	}
	// The links' own link-local addresses went through duplicate address
	// detection when New brought them up; neighbour discovery loses packets until
	// it is over.
	for _, n := range []string{w.Node, w.Client, w.Pods} {
		if err := waitNotTentative(n, 10*time.Second); err != nil {
			return w, err
		}
	}
	if w.server6, err = serveAddrs(w.Pods, "tcp6", fmt.Sprintf("[::]:%d", Port)); err != nil {
		return w, fmt.Errorf("IPv6 endpoint server: %w", err)
	}
	return w, nil
}

func waitNotTentative(ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := netns.Exec(ns, "ip", "-6", "addr", "show", "tentative")
		if err == nil && strings.TrimSpace(out) == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: IPv6 addresses still tentative after %v: %s (%v)", ns, timeout, out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addr6 is the i-th address of prefix (an IPv6 prefix of /96 or shorter): i in
// its last 32 bits.
func Addr6(prefix string, i int) netip.Addr {
	b := netip.MustParsePrefix(prefix).Addr().As16()
	b[12], b[13], b[14], b[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	return netip.AddrFrom16(b)
}
