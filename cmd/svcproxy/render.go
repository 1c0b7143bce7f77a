package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcproxy/svcproxy/deploy"
	"github.com/svcproxy/svcproxy/pkg/config"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/node"
	"github.com/svcproxy/svcproxy/pkg/proxy"
)

// renderCmd prints the nft ruleset for a directory of manifests: no cluster, no
// root. The IPv4 table always; the IPv6 one too when some Service has an IPv6
// cluster IP, as a dual-stack node would program it.
func renderCmd(args []string) int {
	tables, _, code := offlineRulesets("render", args)
	if tables == nil {
		return code
	}
	for i, t := range tables {
		if t.family != endpoints.IPv4 && t.services == 0 {
			continue
		}
		if i > 0 {
			fmt.Println()
		}
		fmt.Print(t.ruleset.Text())
	}
	return 0
}

// traceCmd answers "where does a new connection from SRC to DST:PORT/PROTO go" from
// the ruleset the manifests render to (that of the destination's IP family), by
// walking it like the kernel would.
func traceCmd(args []string) int {
	tables, pos, code := offlineRulesets("trace", args)
	if tables == nil {
		return code
	}
	pkt, err := parsePacket(pos.pos)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trace: %v\nusage: svcproxy trace [-f DIR] [--cluster-cidr CIDR] [--node-ip IP,...] [--hostname-override NODE] SRC DST:PORT[/tcp|udp|sctp] [local]   (IPv6: [DST]:PORT)\n", err)
		return 2
	}
	var r *nft.Ruleset
	for _, t := range tables {
		if t.family == endpoints.FamilyOf(pkt.Dst) {
			r = t.ruleset
		}
	}
	if r == nil {
		fmt.Fprintf(os.Stderr, "trace: this build of svcproxy renders no %s table\n", endpoints.FamilyOf(pkt.Dst))
		return 1
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

// offlineTable is one family's rendered table.
type offlineTable struct {
	family   endpoints.Family
	ruleset  *nft.Ruleset
	services int // service ports of this family in the manifests
}

// offlineRulesets parses the flags shared by render and trace and renders the
// manifests, once per IP family this build renders (IPv4 first); on failure it
// returns nil and the exit code.
func offlineRulesets(name string, args []string) ([]offlineTable, offlineArgs, int) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	dir := fs.StringP("filename", "f", "", "Directory of Service and EndpointSlice YAML files (default: the embedded seed example).")
	cidr := fs.String("cluster-cidr", "", "Pod CIDR, or one per family (IPv4,IPv6); service traffic from outside it is masqueraded.")
	masqAll := fs.Bool("masquerade-all", false, "Masquerade all service traffic.")
	var self offlineNode
	addOfflineNodeFlags(fs, &self)
	if err := fs.Parse(args); err != nil {
		return nil, offlineArgs{}, 2
	}
	local, sel, err := self.resolve()
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
	if errs := config.ValidateClusterCIDRs(*cidr, field.NewPath("--cluster-cidr")); *cidr != "" && len(errs) > 0 {
		fmt.Fprintln(os.Stderr, errs.ToAggregate())
		return nil, offlineArgs{}, 2
	}
	settings := proxySettings{clusterCIDR: *cidr, masqueradeAll: *masqAll, nodeName: strings.ToLower(strings.TrimSpace(self.name)),
		localhostNodePorts: self.localhost}
	var tables []offlineTable
	for _, f := range []endpoints.Family{endpoints.IPv4, endpoints.IPv6} {
		opts := settings.options(f)
		tr := endpoints.NewTracker(endpoints.TrackerOptions{Family: f, OnInvalid: func(kind, ns, name, reason string) {
			fmt.Fprintf(os.Stderr, "skipping part of %s %s/%s (%s): %s\n", kind, ns, name, f, reason)
		}})
		manifests.Feed(tr, objs, nil)
		snap, _, _ := tr.Take()
		if f != endpoints.IPv4 && !node.Renders(f) {
			if snap.PortCount() > 0 {
				fmt.Fprintf(os.Stderr, "not rendering %d %s service ports: this build of svcproxy renders no %s table\n", snap.PortCount(), f, proxy.TableFamily(f))
			}
			continue
		}
		r := proxy.RenderAll(snap, opts)
		na := proxy.NodeAddresses{}
		if f == endpoints.IPv6 {
			na.Addrs, na.All = sel.IPv6()
		} else {
			na.Addrs, na.All = sel.IPv4()
		}
		proxy.ServeNodePortsOn(r, opts, na)
		tables = append(tables, offlineTable{family: f, ruleset: r, services: snap.PortCount()})
	}
	return tables, offlineArgs{pos: fs.Args(), nodeAddrs: local, nodeIPGiven: len(self.ips) > 0}, 0
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

// splitHostPort reads ADDR:PORT, or [ADDR]:PORT for IPv6.
func splitHostPort(s string) (netip.Addr, uint16, error) {
	if strings.HasPrefix(s, "[") {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, 0, fmt.Errorf("destination: %w", err)
		}
		return ap.Addr(), ap.Port(), nil
	}
	if strings.Count(s, ":") > 1 {
		return netip.Addr{}, 0, fmt.Errorf("destination %q: write an IPv6 address in brackets, [ADDR]:PORT", s)
	}
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
	return manifests.ReadDir(dir)
}

// trackerSet feeds every family's tracker the same objects.
type trackerSet []*endpoints.Tracker

func (ts trackerSet) OnServiceAdd(s *corev1.Service) {
	for _, t := range ts {
		t.OnServiceAdd(s)
	}
}

func (ts trackerSet) OnServiceDelete(s *corev1.Service) {
	for _, t := range ts {
		t.OnServiceDelete(s)
	}
}

func (ts trackerSet) OnEndpointSliceAdd(s *discoveryv1.EndpointSlice) {
	for _, t := range ts {
		t.OnEndpointSliceAdd(s)
	}
}

func (ts trackerSet) OnEndpointSliceDelete(s *discoveryv1.EndpointSlice) {
	for _, t := range ts {
		t.OnEndpointSliceDelete(s)
	}
}
