// Package benchworld is the small network the benchmarks send traffic through: a
// node namespace (where a proxy programs the kernel), a client namespace behind it
// (probes enter the node as a pod's traffic would, through prerouting) and a pods
// namespace that owns a whole endpoint prefix (an AnyIP local route), so that every
// endpoint of every Service answers without one address per pod. Each answer names
// the address it was reached on: traffic itself says which endpoint served it.
package benchworld

import (
	"fmt"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// Addresses of the world. The client is inside 10.244.0.0/16 and 10.0.0.0/8, the
// cluster CIDRs the benchmarks give the proxies, so its traffic is not masqueraded:
// it is a pod's.
const (
	ClientIP   = "10.244.250.2"
	clientGW   = "10.244.250.1"
	podsIP     = "10.244.251.2"
	podsGW     = "10.244.251.1"
	EndpointPf = "10.128.0.0/10" // every address in it answers from the pods namespace
	// ServicePf holds the ClusterIPs. What no proxy translated goes on to the pods
	// namespace, which refuses it at once (nothing listens on a Service's port):
	// routed nowhere it would get an ICMP error from the node only about once a
	// second (the kernel's per-source limit on them), and a probe of a Service not
	// programmed yet would wait for its timeout.
	ServicePf = "10.96.0.0/12"
	// Port is where every endpoint listens.
	Port = 8080
)

// World is a node, client and pods namespace set; Close removes them.
type World struct {
	Node, Client, Pods string
	server             *addrServer
	server6            *addrServer // NewDual's
}

// New creates the namespaces prefix+"node", prefix+"client", prefix+"pods" and
// starts the endpoint server. A ClusterIP that no rule translates is refused at
// once (see ServicePf), so probes of Services not programmed yet fail fast.
func New(prefix string) (w *World, err error) {
	w = &World{Node: prefix + "node", Client: prefix + "client", Pods: prefix + "pods"}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	cmds := [][]string{}
	for _, n := range []string{w.Node, w.Client, w.Pods} {
		cmds = append(cmds, []string{"netns", "add", n}, []string{"-n", n, "link", "set", "lo", "up"})
	}
	cmds = append(cmds,
		[]string{"-n", w.Node, "link", "add", "client0", "type", "veth", "peer", "name", "eth0", "netns", w.Client},
		[]string{"-n", w.Node, "link", "add", "pods0", "type", "veth", "peer", "name", "eth0", "netns", w.Pods},
		[]string{"-n", w.Node, "addr", "add", clientGW + "/24", "dev", "client0"},
		[]string{"-n", w.Node, "addr", "add", podsGW + "/24", "dev", "pods0"},
		[]string{"-n", w.Node, "link", "set", "client0", "up"},
		[]string{"-n", w.Node, "link", "set", "pods0", "up"},
		[]string{"-n", w.Node, "route", "add", EndpointPf, "via", podsIP},
		[]string{"-n", w.Node, "route", "add", ServicePf, "via", podsIP},
		[]string{"-n", w.Client, "addr", "add", ClientIP + "/24", "dev", "eth0"},
		[]string{"-n", w.Client, "link", "set", "eth0", "up"},
		[]string{"-n", w.Client, "route", "add", "default", "via", clientGW},
		[]string{"-n", w.Pods, "addr", "add", podsIP + "/24", "dev", "eth0"},
		[]string{"-n", w.Pods, "link", "set", "eth0", "up"},
		[]string{"-n", w.Pods, "route", "add", "default", "via", podsGW},
		// AnyIP: the pods namespace is every endpoint address at once.
		[]string{"-n", w.Pods, "route", "add", "local", EndpointPf, "dev", "lo"},
		[]string{"-n", w.Pods, "route", "add", "local", ServicePf, "dev", "lo"},
	)
	for _, a := range cmds {
		if err := netns.IP(a...); err != nil {
			return w, err
		}
	}
	sysctls := map[string][]string{
		w.Node:   {"net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"},
		w.Pods:   {"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"},
		w.Client: {"net.ipv4.conf.all.rp_filter=0"},
	}
	for n, kv := range sysctls {
		if _, err := netns.Exec(n, append([]string{"sysctl", "-q", "-w"}, kv...)...); err != nil {
			return w, err
		}
	}
	if w.server, err = serveAddrs(w.Pods, "tcp4", fmt.Sprintf("0.0.0.0:%d", Port)); err != nil {
		return w, fmt.Errorf("endpoint server: %w", err)
	}
	return w, nil
}

// Close stops the server and removes the namespaces (killing what runs in them).
func (w *World) Close() {
	for _, s := range []*addrServer{w.server, w.server6} {
		if s != nil {
			s.close()
		}
	}
	for _, n := range []string{w.Client, w.Pods, w.Node} {
		_ = netns.Delete(n)
	}
}
