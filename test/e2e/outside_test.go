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

	"github.com/svcproxy/svcproxy/internal/netns"
)

// The outside: a host on the nodes' bridge that is not a node, like the
// laptop that reaches kind's nodes over the docker network. It has two
// addresses so that loadBalancerSourceRanges can let one in and keep the
// other out, and no default route: it reaches node addresses on the bridge
// and the external addresses a scenario routes through a node (as a router
// or a BGP-announced load balancer IP would), nothing else.
const (
	outsideIP      = "172.18.0.100" // the client's address
	outsideOtherIP = "172.18.0.101" // a second client, outside any allowed source range
)

func (c *cluster) outsideNetns() string { return c.prefix + "out" }

func (c *cluster) setupOutside(context.Context) error {
	out, br := c.outsideNetns(), c.bridgeNetns
	for _, a := range [][]string{
		{"netns", "add", out},
		{"-n", out, "link", "set", "lo", "up"},
		{"-n", br, "link", "add", "vout", "type", "veth", "peer", "name", "eth0", "netns", out},
		{"-n", br, "link", "set", "vout", "master", "br0"},
		{"-n", br, "link", "set", "vout", "up"},
		{"-n", out, "addr", "add", outsideIP + bridgeBits, "dev", "eth0"},
		{"-n", out, "addr", "add", outsideOtherIP + bridgeBits, "dev", "eth0"},
		{"-n", out, "link", "set", "eth0", "up"},
	} {
		if err := netns.IP(a...); err != nil {
			return err
		}
	}
	// No ICMP redirects: a node that forwards a connection's first SYN
	// back onto the bridge (it arrived before the proxy's rules did)
	// redirects the client to the gateway, and the client would then send
	// that address there for minutes, not through the node the scenario
	// routes it to. rp_filter off as on the nodes.
	_, err := netns.Exec(out, "sysctl", "-q", "-w",
		"net.ipv4.conf.all.accept_redirects=0",
		"net.ipv4.conf.eth0.accept_redirects=0",
		"net.ipv4.conf.all.rp_filter=0",
		"net.ipv4.conf.eth0.rp_filter=0",
	)
	return err
}

// routeVia makes the outside send packets for ip to node n, as a router in
// front of the cluster (or a BGP announcement) would.
func (c *cluster) routeVia(ip string, n *node) error {
	return netns.IP("-n", c.outsideNetns(), "route", "replace", ip+"/32", "via", n.ip)
}

// caller makes requests from one network namespace and source address: the
// outside client, a node, a pod.
type caller struct {
	name  string
	netns string
	src   string // source address; "" lets the kernel choose
}

func (c *cluster) outside() caller {
	return caller{name: "outside " + outsideIP, netns: c.outsideNetns(), src: outsideIP}
}

func (c *cluster) outsideOther() caller {
	return caller{name: "outside " + outsideOtherIP, netns: c.outsideNetns(), src: outsideOtherIP}
}

func nodeCaller(n *node) caller { return caller{name: "node " + n.short, netns: n.netns} }

func podCaller(p *podClient) caller { return caller{name: "pod " + p.name, netns: p.netns} }

func (cl caller) dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	if cl.src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(cl.src)}
	}
	return netns.Dialer(cl.netns, d)
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
	if cl.src != "" {
		d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(cl.src)}
	}
	return netns.Dialer(cl.netns, d)(context.Background(), "udp4", addr)
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
