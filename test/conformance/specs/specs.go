// Package specs is which of upstream's [sig-network] e2e specs make
// conformance runs against each proxy, and why it skips the others: the
// selection hack/conformance.sh hands e2e.test and docs/conformance.md prints.
package specs

import (
	"regexp"
	"strings"
)

// Focus selects every spec a node proxy affects: the Services specs, conntrack
// cleanup, EndpointSlices, the latency of endpoint changes, the granular
// Services checks of the Networking suite, kube-proxy's own (its URLs, its
// conntrack timeouts, localhost NodePorts), Services from a second ServiceCIDR
// and the blue-green rollout behind a Service.
const Focus = `\[sig-network\] (Services|Conntrack|EndpointSlice|EndpointSliceMirroring|Service endpoints latency|` +
	`Networking Granular Checks: Services|Networking should check kube-proxy urls|KubeProxy|LocalhostNodePorts|` +
	`Service CIDRs|Connectivity Pod Lifecycle)( |$)`

// A Skip is a spec (or a group, by pattern) the harness cannot host, and why.
type Skip struct {
	Pattern string // a regular expression over the spec's full text
	Reason  string
}

// Skips are the specs Focus selects that make conformance does not run.
var Skips = []Skip{
	{`\[Flaky\]`, "upstream marks it flaky: its result says nothing about a proxy"},
	{`\[Feature:LoadBalancer\]|\[Feature:.*LoadBalancer.*\]`, "needs a cloud provider's load balancer; --provider=skeleton has none"},
	{`\[Feature:Networking-IPv6\]`, "needs an IPv6 single-stack cluster; make conformance builds IPv4 and dual-stack ones (svcproxy's own e2e runs IPv6-only)"},
	{`\[Feature:SCTPConnectivity\]`, "needs SCTP sockets: this machine's kernel has no SCTP (socket() says EPROTONOSUPPORT)"},
	{`should work after restarting apiserver`, "the API server is a process of the harness, not a pod in kube-system: the spec skips itself"},
	{`should let a node pull an image from a registry exposed via localhost NodePort`, "agnhost's fake registry serves images upstream's image build pulls from the internet (crane); none can be fetched here, so the image this spec pulls does not exist"},
	{`should be rejected for evicted pods`, "needs kubelet to evict a pod over its ephemeral-storage limit; the harness's four kubelets share this machine's filesystem and run with localStorageCapacityIsolation off"},
}

// DualStackFocus selects the specs that need a dual-stack cluster: make
// conformance runs them in a second run, on the e2e-node cluster built
// dual-stack (E2ENODE_FAMILY=dual), and skips them in the first.
const DualStackFocus = `\[sig-network\] .*\[Feature:IPv6DualStack\]`

// SingleStackSkipPattern is what the first run, on the IPv4 cluster, skips:
// Skips and the dual-stack specs.
func SingleStackSkipPattern() string {
	return SkipPattern() + "|(?:" + DualStackFocus + ")"
}

// SkipPattern is Skips as one --ginkgo.skip expression.
func SkipPattern() string {
	var parts []string
	for _, s := range Skips {
		parts = append(parts, "(?:"+s.Pattern+")")
	}
	return strings.Join(parts, "|")
}

// SkipReason is why the spec named text is skipped, or "" if it is not.
func SkipReason(text string) string {
	for _, s := range Skips {
		if regexp.MustCompile(s.Pattern).MatchString(text) {
			return s.Reason
		}
	}
	return ""
}
