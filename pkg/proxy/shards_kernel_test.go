package proxy

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelShardsComeAndGo: in the kernel, a shard's set and its hairpin rule
// appear with its first endpoint and go with its last (the set is deleted in the
// transaction that rewrites the rule naming it), the listing stays equal to render,
// and hairpin traffic through a new shard is masqueraded.
func TestKernelShardsComeAndGo(t *testing.T) {
	e := newKenv(t)
	listing := func(what string) string {
		t.Helper()
		got := nft.NormalizeListing(e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName))
		if want := e.p.Desired().Text(); got != want {
			t.Fatalf("%s: kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", what, got, want)
		}
		return got
	}
	e.sync(t)
	shard := regexp.MustCompile(`(endpoints|hairpin|affinity)-[0-9][0-9]`)
	if got := listing("no Services"); shard.MatchString(got) {
		t.Fatalf("shards without Services:\n%s", got)
	}

	e.tr.OnServiceAdd(testService("web", "10.96.0.10", false, httpPort))
	e.tr.OnEndpointSliceAdd(testSlice("web", readyEP("pod1"), readyEP("pod2")))
	e.sync(t)
	listing("pod1 and pod2")

	e.tr.OnEndpointSliceUpdate(nil, testSlice("web", readyEP("pod3"))) // shards 2 and 3 empty, 4 appears
	e.sync(t)
	if got := listing("pod3 alone"); strings.Contains(got, "hairpin-02") || strings.Contains(got, "hairpin-03") || !strings.Contains(got, "hairpin-04") {
		t.Fatalf("hairpin shards after moving to pod3:\n%s", got)
	}
	if body, err := e.w.Pods["pod3"].Get("10.96.0.10:80", 2*time.Second); err != nil || body != "pod3" {
		t.Fatalf("pod3 -> its own Service: %q, %v", body, err)
	}

	e.tr.OnServiceDelete(testService("web", "10.96.0.10", false, httpPort))
	e.sync(t)
	if got := listing("Service deleted"); shard.MatchString(got) {
		t.Fatalf("shards after the last Service went:\n%s", got)
	}
}
