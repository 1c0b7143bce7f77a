package proxy

import (
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// A Service with the longest namespace and name Kubernetes allows, with ClientIP
// affinity so that it gets a chain of its own: the kernel takes every object (chain
// name, element comments) and traffic flows.
func TestKernelMaximalNames(t *testing.T) {
	e := newKenv(t)
	ns, name := strings.Repeat("n", 63), strings.Repeat("s", 253)
	svc := testService(name, "10.96.0.20", true, httpPort, dnsPort)
	svc.Namespace = ns
	slice := testSlice(name, readyEP("pod1"), readyEP("pod2"))
	slice.Namespace = ns
	e.tr.OnServiceAdd(svc)
	e.tr.OnEndpointSliceAdd(slice)
	e.sync(t)
	got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName))
	if want := e.p.Desired().Text(); got != want {
		t.Fatalf("kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", got, want)
	}
	if got := e.who(t, "10.96.0.20:80", 5); len(got) != 1 {
		t.Fatalf("sticky Service with maximal names answered from %v", got)
	}
}
