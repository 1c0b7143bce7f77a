//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// The outside: a host on the nodes' bridge that is not a node, like the
// laptop that reaches kind's nodes over the docker network. It has two
// addresses so that loadBalancerSourceRanges can let one in and keep the
// other out, and no default route: it reaches node addresses on the bridge
// and the external addresses a scenario routes through a node (as a router
// or a BGP-announced load balancer IP would), nothing else. Its addresses
// (outsideIP, outsideOtherIP) are in family_test.go: in a dual-stack
// cluster it has one more of each, IPv6.

func (c *cluster) outsideNetns() string { return c.prefix + "out" }

func (c *cluster) setupOutside(context.Context) error {
	out, br := c.outsideNetns(), c.bridgeNetns
	cmds := [][]string{
		{"netns", "add", out},
		{"-n", out, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", "vout", "type", "veth", "peer", "name", "eth0", "netns", out},
		{"-n", br, "link", "set", "vout", "master", "br0"},
		{"-n", br, "link", "set", "vout", "up"},
	}
	cmds = append(cmds, c.family.addrCmds(out, "eth0", outsideIPv4, outsideIP6)...)
	cmds = append(cmds, c.family.addrCmds(out, "eth0", outsideOtherIPv4, outsideOtherIP6)...)
	cmds = append(cmds, []string{"-n", out, "link", "set", "eth0", "up"})
	for _, a := range cmds {
		if err := netns.IP(a...); err != nil {
			return err
		}
	}
	// No ICMP redirects: a node that forwards a connection's first SYN
	// back onto the bridge (it arrived before the proxy's rules did)
	// redirects the client to the gateway, and the client would then send
	// that address there for minutes, not through the node the scenario
	// routes it to. rp_filter off as on the nodes.
	_, err := netns.Exec(out, append([]string{"sysctl", "-q", "-w",
		"net.ipv4.conf.all.accept_redirects=0",
		"net.ipv4.conf.eth0.accept_redirects=0",
		"net.ipv4.conf.all.rp_filter=0",
		"net.ipv4.conf.eth0.rp_filter=0",
	}, c.family.outsideSysctls()...)...)
	return err
}

// routeVia makes the outside send packets for ip to node n (its address of
// ip's family), as a router in front of the cluster (or a BGP
// announcement) would.
func (c *cluster) routeVia(ip string, n *node) error {
	return netns.IP("-n", c.outsideNetns(), "route", "replace", hostCIDR(ip), "via", nodeIP(n, familyOf(ip)))
}

// caller makes requests from one network namespace and source address: the
// outside client, a node, a pod.
type caller struct {
	name  string
	netns string
	src   string // source address; "" lets the kernel choose
	src6  string // source address towards IPv6 destinations in a dual-stack cluster
}

func (c *cluster) outside() caller {
	cl := caller{name: "outside " + outsideIP, netns: c.outsideNetns(), src: outsideIP}
	if c.family == familyDual {
		cl.src6 = outsideIP6
	}
	return cl
}

func (c *cluster) outsideOther() caller {
	cl := caller{name: "outside " + outsideOtherIP, netns: c.outsideNetns(), src: outsideOtherIP}
	if c.family == familyDual {
		cl.src6 = outsideOtherIP6
	}
	return cl
}

// srcFor is the source address towards addr (host:port): src, or src6 for
// an IPv6 destination when the caller has one.
func (cl caller) srcFor(addr string) string {
	if cl.src6 != "" && isIPv6(addr) {
		return cl.src6
	}
	return cl.src
}

// srcOf is the caller's own address of family f ("" when the kernel
// chooses).
func (cl caller) srcOf(f corev1.IPFamily) string {
	if f == corev1.IPv6Protocol && cl.src6 != "" {
		return cl.src6
	}
	return cl.src
}

func nodeCaller(n *node) caller { return caller{name: "node " + n.short, netns: n.netns} }

func podCaller(p *podClient) caller { return caller{name: "pod " + p.name, netns: p.netns} }

func (cl caller) dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout}
		if src := cl.srcFor(addr); src != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
		}
		return netns.Dialer(cl.netns, d)(ctx, network, addr)
	}
}

// get makes one HTTP GET on a new connection and returns the trimmed body.
func (cl caller) get(url string, timeout time.Duration) (string, error) {
	hc := &http.Client{
		Transport: &http.Transport{DialContext: cl.dialer(timeout), DisableKeepAlives: true},
		Timeout:   timeout,
	}
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// who asks addr (host:port) over HTTP who answers.
func (cl caller) who(addr string, timeout time.Duration) (string, error) {
	return cl.get("http://"+addr+"/", timeout)
}

// peer asks the endpoint behind addr which source address it sees.
func (cl caller) peer(addr string, timeout time.Duration) (string, error) {
	return cl.get("http://"+addr+"/clientip", timeout)
}

// udpConn opens a connected UDP socket from cl's namespace and source.
func (cl caller) udpConn(addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	if src := cl.srcFor(addr); src != "" {
		d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(src)}
	}
	return netns.Dialer(cl.netns, d)(context.Background(), "udp", addr)
}

// Outcomes of one attempt, as the scenarios and the matrix name them.
const (
	answered = "answered"
	refused  = "refused" // TCP reset or ICMP port unreachable
	dropped  = "dropped" // no answer at all within the timeout
)

// outcomeOf names what an attempt's error means.
func outcomeOf(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return answered
	case errors.Is(err, syscall.ECONNREFUSED):
		return refused
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return dropped
	default:
		return "error: " + err.Error()
	}
}
