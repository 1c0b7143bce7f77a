package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spf13/pflag"

	"github.com/svcproxy/svcproxy/deploy"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// renderCmd prints the nft ruleset for a directory of manifests: no cluster, no root.
func renderCmd(args []string) int {
	r, _, code := offlineRuleset("render", args)
	if r == nil {
		return code
	}
	fmt.Print(r.Text())
	return 0
}

// traceCmd answers "where does a new connection from SRC to DST:PORT/PROTO go" from
// the ruleset the manifests render to, by walking it like the kernel would.
func traceCmd(args []string) int {
	r, pos, code := offlineRuleset("trace", args)
	if r == nil {
		return code
	}
	pkt, err := parsePacket(pos.pos)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trace: %v\nusage: svcproxy trace [-f DIR] [--cluster-cidr CIDR] [--node-ip IP,...] [--hostname-override NODE] SRC DST:PORT[/tcp|udp|sctp] [local]\n", err)
		return 2
	}
	pkt.NodeAddrs = pos.nodeAddrs
	outcomes, err := nft.Trace(r, pkt, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, o := range outcomes {
		fmt.Println(o)
	}
	if !pos.nodeIPGiven && len(outcomes) == 1 && outcomes[0] == (nft.Outcome{}) {
		fmt.Fprintln(os.Stderr, "trace: the destination is not a Service address here; for a NodePort, give the node's addresses with --node-ip")
	}
	return 0
}

// offlineRuleset parses the flags shared by render and trace and renders the
// manifests; on failure it returns a nil ruleset and the exit code.
func offlineRuleset(name string, args []string) (*nft.Ruleset, offlineArgs, int) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	dir := fs.StringP("filename", "f", "", "Directory of Service and EndpointSlice YAML files (default: the embedded seed example).")
	cidr := fs.String("cluster-cidr", "", "Pod CIDR; service traffic from outside it is masqueraded.")
	masqAll := fs.Bool("masquerade-all", false, "Masquerade all service traffic.")
	var node offlineNode
	addOfflineNodeFlags(fs, &node)
	if err := fs.Parse(args); err != nil {
		return nil, offlineArgs{}, 2
	}
	local, sel, err := node.resolve()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, offlineArgs{}, 2
	}
	objs, problems, err := loadManifests(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, offlineArgs{}, 1
	}
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "skipping %s\n", p)
	}
	o := &options{clusterCIDR: *cidr}
	if errs := validateClusterCIDRs(*cidr, field.NewPath("--cluster-cidr")); *cidr != "" && len(errs) > 0 {
		fmt.Fprintln(os.Stderr, errs.ToAggregate())
		return nil, offlineArgs{}, 2
	}
	opts := proxy.Options{MasqueradeAll: *masqAll, ClusterCIDR: o.ipv4ClusterCIDR(),
		NodeName: strings.ToLower(strings.TrimSpace(node.name)), LocalhostNodePorts: node.localhost}
	tr := endpoints.NewTracker(endpoints.TrackerOptions{OnInvalid: func(kind, ns, name, reason string) {
		fmt.Fprintf(os.Stderr, "skipping part of %s %s/%s: %s\n", kind, ns, name, reason)
	}})
	feed(tr, objs, nil)
	snap, _, _ := tr.Take()
	r := proxy.RenderAll(snap, opts)
	addrs, all := sel.IPv4()
	proxy.ServeNodePortsOn(r, opts, proxy.NodeAddresses{All: all, Addrs: addrs})
	return r, offlineArgs{pos: fs.Args(), nodeAddrs: local, nodeIPGiven: len(node.ips) > 0}, 0
}

// offlineArgs is what trace needs besides the ruleset.
type offlineArgs struct {
	pos         []string     // SRC DST:PORT[/PROTO] [local]
	nodeAddrs   []netip.Addr // the node's addresses, for "fib daddr type local"
	nodeIPGiven bool
}

var protoByName = map[string]uint8{"tcp": nft.ProtoTCP, "udp": nft.ProtoUDP, "sctp": nft.ProtoSCTP, "icmp": nft.ProtoICMP}

// parsePacket reads "SRC DST:PORT[/PROTO] [local]".
func parsePacket(pos []string) (nft.Packet, error) {
	if len(pos) < 2 || len(pos) > 3 || (len(pos) == 3 && pos[2] != "local") {
		return nft.Packet{}, fmt.Errorf("want SRC DST:PORT[/PROTO] [local], got %q", pos)
	}
	src, err := netip.ParseAddr(pos[0])
	if err != nil {
		return nft.Packet{}, fmt.Errorf("source: %w", err)
	}
	dst, protoName, _ := strings.Cut(pos[1], "/")
	if protoName == "" {
		protoName = "tcp"
	}
	proto, ok := protoByName[strings.ToLower(protoName)]
	if !ok {
		return nft.Packet{}, fmt.Errorf("unknown protocol %q", protoName)
	}
	host, port, err := splitHostPort(dst)
	if err != nil {
		return nft.Packet{}, err
	}
	return nft.Packet{Src: src, Dst: host, Proto: proto, DPort: port, Local: len(pos) == 3}, nil
}

func splitHostPort(s string) (netip.Addr, uint16, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return netip.Addr{}, 0, fmt.Errorf("destination %q has no port", s)
	}
	a, err := netip.ParseAddr(s[:i])
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("destination: %w", err)
	}
	p, err := strconv.ParseUint(s[i+1:], 10, 16)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("destination port: %w", err)
	}
	return a, uint16(p), nil
}

// loadManifests reads dir (default: the embedded seed example): the usable objects,
// and the documents that are not.
func loadManifests(dir string) (*manifests.Objects, []manifests.Problem, error) {
	if dir == "" {
		return manifests.Read(deploy.Examples, "examples")
	}
	return manifests.Read(os.DirFS(dir), ".")
}

// feed applies the difference between prev and cur manifests to the tracker.
func feed(tr *endpoints.Tracker, cur, prev *manifests.Objects) {
	keep := map[string]bool{}
	for _, s := range cur.Services {
		keep["svc/"+s.Namespace+"/"+s.Name] = true
		tr.OnServiceAdd(s)
	}
	for _, s := range cur.EndpointSlices {
		keep["eps/"+s.Namespace+"/"+s.Name] = true
		tr.OnEndpointSliceAdd(s)
	}
	if prev == nil {
		return
	}
	for _, s := range prev.Services {
		if !keep["svc/"+s.Namespace+"/"+s.Name] {
			tr.OnServiceDelete(s)
		}
	}
	for _, s := range prev.EndpointSlices {
		if !keep["eps/"+s.Namespace+"/"+s.Name] {
			tr.OnEndpointSliceDelete(s)
		}
	}
}
