package conntrack

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Timeouts are the conntrack settings of a KubeProxyConfiguration that kube-proxy
// writes into its network namespace at start: each non-zero timeout, and
// tcp_be_liberal when asked. They are per network namespace (unlike
// nf_conntrack_max, which svcproxy leaves alone), so a node's proxy sets its
// node's. Zero leaves the kernel's value, as kube-proxy does (kind's clusters
// and svcproxy's own test/e2e set them to 0).
type Timeouts struct {
	TCPEstablished time.Duration // nf_conntrack_tcp_timeout_established; kube-proxy's default 24h
	TCPCloseWait   time.Duration // nf_conntrack_tcp_timeout_close_wait; kube-proxy's default 1h
	UDP            time.Duration // nf_conntrack_udp_timeout
	UDPStream      time.Duration // nf_conntrack_udp_timeout_stream
	TCPBeLiberal   bool          // nf_conntrack_tcp_be_liberal=1
}

const netfilterSysctls = "/proc/sys/net/netfilter/"

// SetTimeouts writes t with set (path, value: a /proc/sys path and its new
// value), every setting tried even if one fails; the errors are joined.
func SetTimeouts(set func(path, value string) error, t Timeouts) error {
	var errs []error
	write := func(name, value string) {
		if err := set(netfilterSysctls+name, value); err != nil {
			errs = append(errs, fmt.Errorf("set %s=%s: %w", name, value, err))
		}
	}
	for _, s := range []struct {
		name string
		d    time.Duration
	}{
		{"nf_conntrack_tcp_timeout_established", t.TCPEstablished},
		{"nf_conntrack_tcp_timeout_close_wait", t.TCPCloseWait},
		{"nf_conntrack_udp_timeout", t.UDP},
		{"nf_conntrack_udp_timeout_stream", t.UDPStream},
	} {
		if s.d > 0 {
			write(s.name, strconv.Itoa(int(s.d/time.Second)))
		}
	}
	if t.TCPBeLiberal {
		write("nf_conntrack_tcp_be_liberal", "1")
	}
	return errors.Join(errs...)
}
