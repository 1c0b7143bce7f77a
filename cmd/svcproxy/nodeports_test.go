package main

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// TestNodePortOptions: --nodeport-addresses / nodePortAddresses and
// --iptables-localhost-nodeports / iptables.localhostNodePorts reach the options
// with kube-proxy's defaults for the configured mode: every address and
// localhost NodePorts in iptables (and blank) mode, whose behaviour svcproxy
// follows, the primary IPs and no localhost NodePorts in nftables mode.
func TestNodePortOptions(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		name      string
		args      []string
		file      string
		spec      nodeaddr.Spec
		localhost bool
	}{
		{name: "defaults: all addresses, localhost too", spec: nodeaddr.Spec{All: true}, localhost: true},
		{name: "flags", args: []string{"--nodeport-addresses=10.0.0.0/8,primary", "--nodeport-addresses=localhost", "--iptables-localhost-nodeports=false"},
			spec: nodeaddr.Spec{Primary: true, Localhost: true, Prefixes: []netip.Prefix{p("10.0.0.0/8")}}},
		{name: "nftables mode defaults to primary, no localhost NodePorts", args: []string{"--proxy-mode=nftables"},
			spec: nodeaddr.Spec{Primary: true}},
		{name: "nftables mode keeps a given list", args: []string{"--proxy-mode=nftables", "--nodeport-addresses=all"},
			spec: nodeaddr.Spec{All: true}},
		{name: "file", file: "nodePortAddresses: [192.168.0.0/16, fd00::/64]\niptables: {localhostNodePorts: false}\n",
			spec: nodeaddr.Spec{Prefixes: []netip.Prefix{p("192.168.0.0/16"), p("fd00::/64")}}},
		{name: "file wins over the flags", file: "mode: iptables\n", args: []string{"--nodeport-addresses=10.0.0.0/8", "--iptables-localhost-nodeports=false"},
			spec: nodeaddr.Spec{All: true}, localhost: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silenceStderr(t)
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeConfigFile(t, tc.file)}, args...)
			}
			o, err := parseFlags(args)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.NodePorts, tc.spec) {
				t.Errorf("nodePorts = %v, want %v", o.NodePorts, tc.spec)
			}
			want(t, "localhostNodePorts", o.LocalhostNodePorts, tc.localhost)
		})
	}
}
