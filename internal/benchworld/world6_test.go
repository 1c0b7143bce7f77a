package benchworld

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// With IPv6 added, every address of the IPv6 endpoint prefix answers with itself,
// an IPv6 ClusterIP nothing translates fails at once, and IPv4 works as before.
func TestWorldIPv6AnswersAndRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	w, err := NewDual(fmt.Sprintf("spbw6%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	p := w.NewProber(2 * time.Second)
	defer p.Close()
	checkProbes(t, p, []probeCase{
		{"fd00:128::1", Port, true},
		{"fd00:128::12:3456", Port, true},
		{"fd00:128::ffff:ffff", Port, true},
		{"10.128.0.1", Port, true}, // IPv4 still answers
		{"fd00:96::4", 80, false},  // an IPv6 ClusterIP no proxy translates
		{"fd00:128::1", 81, false}, // nothing listens: refused
	})
}

func TestAddr6(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		i      int
		want   string
	}{
		{EndpointPf6, 0, "fd00:128::"},
		{EndpointPf6, 1<<20 + 3, "fd00:128::10:3"},
		{ServicePf6, 70000, "fd00:96::1:1170"},
	} {
		if got := Addr6(tc.prefix, tc.i).String(); got != tc.want {
			t.Errorf("Addr6(%s, %d) = %s, want %s", tc.prefix, tc.i, got, tc.want)
		}
	}
}
