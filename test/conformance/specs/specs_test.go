package specs

import (
	"regexp"
	"testing"
)

func TestSelection(t *testing.T) {
	focus := regexp.MustCompile(Focus)
	skip := regexp.MustCompile(SkipPattern())
	dualFocus := regexp.MustCompile(DualStackFocus)
	singleSkip := regexp.MustCompile(SingleStackSkipPattern())
	for _, tc := range []struct {
		spec     string
		run      bool   // in the first run (IPv4 cluster)
		dual     bool   // in the second (dual-stack cluster)
		whySkips string // a word of the reason, when skipped
	}{
		{"[sig-network] Services should serve a basic endpoint from pods [Conformance]", true, false, ""},
		{"[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service", true, false, ""},
		{"[sig-network] Networking Granular Checks: Services should function for pod-Service: http", true, false, ""},
		{"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]", false, false, ""},
		{"[sig-network] Services should work after restarting apiserver [Disruptive]", false, false, "API server"},
		{"[sig-network] Services should allow creating a basic SCTP service with pod and endpoints [LinuxOnly] [Serial]", true, false, ""},
		{"[sig-network] Networking Granular Checks: Services should function for pod-Service: sctp [Feature:SCTPConnectivity]", false, false, "SCTP"},
		{"[sig-network] [Feature:IPv6DualStack] should create service with ipv4,v6 cluster ip", false, true, ""},
		{"[sig-network] [Feature:IPv6DualStack] Granular Checks: Services Secondary IP Family [LinuxOnly] should function for pod-Service: sctp [Feature:SCTPConnectivity]", false, false, "SCTP"},
		{"[sig-network] Networking should function for pod-Service: http [Feature:Networking-IPv6]", false, false, "IPv6"},
		{"[sig-network] Services should be able to up and down services", true, false, ""},
		{"[sig-network] Networking should check kube-proxy urls", true, false, ""},
		{"[sig-network] Service CIDRs should create Services and serve on different Service CIDRs", true, false, ""},
		{"[sig-network] Proxy version v1 should proxy through a service and a pod [Conformance]", false, false, ""},
	} {
		run := focus.MatchString(tc.spec) && !skip.MatchString(tc.spec)
		if run != tc.run {
			t.Errorf("%s: run %v, want %v", tc.spec, run, tc.run)
		}
		// Each spec runs in at most one of the two runs.
		dual := dualFocus.MatchString(tc.spec) && !skip.MatchString(tc.spec)
		if dual != tc.dual {
			t.Errorf("%s: dual-stack run %v, want %v", tc.spec, dual, tc.dual)
		}
		if run && singleSkip.MatchString(tc.spec) {
			run = false
		}
		if run && dual {
			t.Errorf("%s: selected by both runs", tc.spec)
		}
		if why := SkipReason(tc.spec); tc.whySkips != "" && !regexp.MustCompile(tc.whySkips).MatchString(why) {
			t.Errorf("%s: reason %q, want one naming %q", tc.spec, why, tc.whySkips)
		}
	}
}
