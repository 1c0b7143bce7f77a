package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/spf13/pflag"

	"github.com/svcproxy/svcproxy/pkg/agent"
	"github.com/svcproxy/svcproxy/pkg/config"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
	"github.com/svcproxy/svcproxy/pkg/offline"
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
		if t.Family != endpoints.IPv4 && t.Services == 0 {
			continue
		}
		if i > 0 {
			fmt.Println()
		}
		fmt.Print(t.Ruleset.Text())
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
	pkt, err := offline.ParsePacket(pos.pos)
	if err != nil {
		fmt.Fprintf(os.Stderr, "trace: %v\nusage: svcproxy trace [-f DIR] [--cluster-cidr CIDR] [--node-ip IP,...] [--hostname-override NODE] SRC DST:PORT[/tcp|udp|sctp] [local]   (IPv6: [DST]:PORT)\n", err)
		return 2
	}
	var r *nft.Ruleset
	for _, t := range tables {
		if t.Family == endpoints.FamilyOf(pkt.Dst) {
			r = t.Ruleset
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

// offlineRulesets parses the flags shared by render and trace and renders the
// manifests, once per IP family this build renders (IPv4 first); on failure it
// returns nil and the exit code.
func offlineRulesets(name string, args []string) ([]offline.Table, offlineArgs, int) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	dir := fs.StringP("filename", "f", "", "Directory of Service and EndpointSlice YAML files (default: the embedded seed example).")
	cidr := fs.String("cluster-cidr", "", "Pod CIDR, or one per family (IPv4,IPv6); service traffic from outside it is masqueraded.")
	masqAll := fs.Bool("masquerade-all", false, "Masquerade all service traffic.")
	var self offline.Node
	self.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, offlineArgs{}, 2
	}
	local, sel, err := self.Resolve()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, offlineArgs{}, 2
	}
	objs, problems, err := offline.LoadManifests(*dir)
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
	settings := agent.ProxySettings{ClusterCIDR: *cidr, MasqueradeAll: *masqAll, NodeName: strings.ToLower(strings.TrimSpace(self.Name)),
		LocalhostNodePorts: self.Localhost}
	tables := offline.Render(objs, settings.Options, sel, os.Stderr)
	return tables, offlineArgs{pos: fs.Args(), nodeAddrs: local, nodeIPGiven: len(self.IPs) > 0}, 0
}

// offlineArgs is what trace needs besides the ruleset.
type offlineArgs struct {
	pos         []string     // SRC DST:PORT[/PROTO] [local]
	nodeAddrs   []netip.Addr // the node's addresses, for "fib daddr type local"
	nodeIPGiven bool
}
