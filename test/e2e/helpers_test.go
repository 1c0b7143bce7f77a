//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// expectAnswers polls the ClusterIP from cl until every name in want has
// answered at least once.
func expectAnswers(t *testing.T, cl *podClient, ip string, port int32, want []string) {
	t.Helper()
	seen := map[string]int{}
	errs := 0
	var lastErr error
	poll.Eventually(t, 45*time.Second, fmt.Sprintf("%s answered by %v from %s", ip, want, cl.name), func() (bool, string) {
		got, err := cl.hit(ip, port)
		if err != nil {
			errs++
			lastErr = err
		} else {
			seen[got]++
		}
		for _, w := range want {
			if seen[w] == 0 {
				return false, fmt.Sprintf("seen %v, %d errors (last %v)", seen, errs, lastErr)
			}
		}
		return true, ""
	})
	t.Logf("%s:%d from %s: answers %v, %d errors while converging", ip, port, cl.name, seen, errs)
}

// tally makes n requests and counts who answered ("" counts errors).
func tally(cl *podClient, ip string, port int32, n int) (map[string]int, error) {
	out := map[string]int{}
	var firstErr error
	for range n {
		got, err := cl.hit(ip, port)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out[got]++
	}
	return out, firstErr
}

// readyEndpoints returns the ready endpoint addresses of a Service.
func readyEndpoints(ctx context.Context, svc string) ([]string, error) {
	l, err := theCluster.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc,
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// waitEndpoints waits until the Service has exactly the given pods' ready
// addresses, one per family of the Service (a dual-stack Service has a
// slice per family).
func waitEndpoints(t *testing.T, svc string, ps []corev1.Pod) {
	t.Helper()
	var fams []corev1.IPFamily
	if s, err := theCluster.client.CoreV1().Services(ns).Get(ctxFor(t, 30*time.Second), svc, metav1.GetOptions{}); err == nil {
		fams = s.Spec.IPFamilies
	}
	var want []string
	for _, p := range ps {
		if len(fams) == 0 {
			want = append(want, p.Status.PodIP)
		}
		for _, f := range fams {
			ips := podIPStrings(p)
			if len(ips) == 0 {
				ips = []string{p.Status.PodIP}
			}
			if ip := ofFamily(ips, f); ip != "" {
				want = append(want, ip)
			}
		}
	}
	sort.Strings(want)
	poll.Eventually(t, 60*time.Second, "endpoints of "+svc, func() (bool, string) {
		got, err := readyEndpoints(context.Background(), svc)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, want), fmt.Sprintf("have %v want %v", got, want)
	})
}

// percentile is the value at quantile p of ds (0.5: the median, the upper of the two
// middle ones).
func percentile[T cmp.Ordered](ds []T, p float64) T {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		var zero T
		return zero
	}
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }

func msList(ds []time.Duration) string {
	var out []string
	for _, d := range ds {
		out = append(out, ms(d))
	}
	return strings.Join(out, ",")
}

func ref[T any](v T) *T { return &v }
