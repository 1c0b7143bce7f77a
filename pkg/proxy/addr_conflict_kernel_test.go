package proxy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// TestKernelExternalIPCannotTakeAClusterIP: Service attacker lists good's ClusterIP
// 10.96.0.10 (port 80) as an externalIP, its endpoint pod3; good's is pod1. In the
// kernel, from a pod and from the node, every new connection to 10.96.0.10:80
// reaches pod1, and the endpoint map holds nothing else under that address: when
// good comes after the attacker (its traffic restored in that sync) and when the
// attacker comes after good (kept). Between the two, good's deletion gives the
// address to the attacker's externalIP in that sync.
func TestKernelExternalIPCannotTakeAClusterIP(t *testing.T) {
	e := newKenv(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := testService("good", "10.96.0.10", false, httpPort)
	good.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	attacker := testService("attacker", "10.96.0.99", false, httpPort)
	attacker.CreationTimestamp = metav1.NewTime(t0)
	attacker.Spec.ExternalIPs = []string{"10.96.0.10"}
	e.tr.OnEndpointSliceAdd(testSlice("good", readyEP("pod1")))
	e.tr.OnEndpointSliceAdd(testSlice("attacker", readyEP("pod3")))

	onlyGood := func(when string) {
		t.Helper()
		for from, ns := range map[string]interface {
			Get(string, time.Duration) (string, error)
		}{"a pod": e.client, "the node": e.w.Node} {
			got := map[string]int{}
			for range 20 {
				body, err := ns.Get("10.96.0.10:80", 2*time.Second)
				if err != nil {
					body = err.Error()
				}
				got[body]++
			}
			if got["pod1"] != 20 {
				t.Fatalf("%s: 20 connections from %s to good's ClusterIP reached %v, want pod1 only", when, from, got)
			}
		}
		listing := e.w.Node.MustRun(t, "nft", "list", "table", "ip", TableName)
		if elems := elementsOf(listing, "10.96.0.10 . tcp . 80 . "); len(elems) != 1 || !strings.Contains(elems[0], ": 10.244.1.2 . 80") {
			t.Fatalf("%s: endpoint map elements under 10.96.0.10:80: %q, want good's pod1 only", when, elems)
		}
		if got, want := nft.NormalizeListing(listing), e.p.Desired().Text(); got != want {
			t.Fatalf("%s: kernel listing differs from render\n--- kernel\n%s\n--- render\n%s", when, got, want)
		}
	}

	e.tr.OnServiceAdd(attacker)
	e.sync(t)
	if got := e.who(t, "10.96.0.10:80", 5); got["pod3"] != 5 {
		t.Fatalf("the attacker alone: %v, want its externalIP served by pod3", got)
	}
	e.tr.OnServiceAdd(good)
	e.sync(t)
	onlyGood("good added after the attacker")

	e.tr.OnServiceDelete(good)
	e.sync(t)
	if got := e.who(t, "10.96.0.10:80", 5); got["pod3"] != 5 {
		t.Fatalf("good deleted: %v, want the attacker's externalIP served by pod3", got)
	}

	e.tr.OnServiceAdd(good)
	e.tr.OnServiceDelete(attacker)
	e.sync(t)
	e.tr.OnServiceAdd(attacker)
	e.sync(t)
	onlyGood("the attacker added after good")
	if got := e.who(t, "10.96.0.99:80", 5); got["pod3"] != 5 {
		t.Fatalf("the attacker's own ClusterIP: %v, want pod3", got)
	}
}

// elementsOf returns the lines of an nft listing that hold an element whose key
// starts with prefix: one per element, elements split at ", ".
func elementsOf(listing, prefix string) []string {
	var out []string
	for _, line := range strings.Split(listing, "\n") {
		for _, el := range strings.Split(line, ", ") {
			el = strings.Trim(strings.TrimSpace(el), "{}, ")
			el = strings.TrimPrefix(el, "elements = { ")
			if strings.HasPrefix(el, prefix) {
				out = append(out, el)
			}
		}
	}
	return out
}
