package specs

import (
	"regexp"
	"testing"
)

func TestSelection(t *testing.T) {
	focus := regexp.MustCompile(Focus)
	skip := regexp.MustCompile(SkipPattern())
	for _, tc := range []struct {
		spec     string
		run      bool
		whySkips string // a word of the reason, when skipped
	}{
		{"[sig-network] Services should serve a basic endpoint from pods [Conformance]", true, ""},
		{"[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service", true, ""},
		{"[sig-network] Networking Granular Checks: Services should function for pod-Service: http", true, ""},
		{"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]", false, ""},
		{"[sig-network] Services should work after restarting apiserver [Disruptive]", false, "API server"},
		{"[sig-network] Services should allow creating a basic SCTP service with pod and endpoints [LinuxOnly] [Serial]", true, ""},
		{"[sig-network] Networking Granular Checks: Services should function for pod-Service: sctp [Feature:SCTPConnectivity]", false, "SCTP"},
		{"[sig-network] [Feature:IPv6DualStack] should create service with ipv4,v6 cluster ip", false, ""},
		{"[sig-network] Services should be able to up and down services", true, ""},
		{"[sig-network] Networking should check kube-proxy urls", true, ""},
		{"[sig-network] Service CIDRs should create Services and serve on different Service CIDRs", true, ""},
		{"[sig-network] Proxy version v1 should proxy through a service and a pod [Conformance]", false, ""},
	} {
		run := focus.MatchString(tc.spec) && !skip.MatchString(tc.spec)
		if run != tc.run {
			t.Errorf("%s: run %v, want %v", tc.spec, run, tc.run)
		}
		if why := SkipReason(tc.spec); tc.whySkips != "" && !regexp.MustCompile(tc.whySkips).MatchString(why) {
			t.Errorf("%s: reason %q, want one naming %q", tc.spec, why, tc.whySkips)
		}
	}
}
