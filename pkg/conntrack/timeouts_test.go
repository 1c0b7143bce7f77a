package conntrack

import (
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/netnstest"
)

func TestSetTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Timeouts
		want map[string]string
	}{
		{name: "kube-proxy's defaults", t: Timeouts{TCPEstablished: 24 * time.Hour, TCPCloseWait: time.Hour}, want: map[string]string{
			"nf_conntrack_tcp_timeout_established": "86400", "nf_conntrack_tcp_timeout_close_wait": "3600"}},
		{name: "kind's zeros leave the kernel's values", t: Timeouts{}, want: map[string]string{}},
		{name: "every setting", t: Timeouts{TCPEstablished: time.Minute, TCPCloseWait: 90 * time.Second, UDP: 30 * time.Second, UDPStream: 2 * time.Minute, TCPBeLiberal: true},
			want: map[string]string{"nf_conntrack_tcp_timeout_established": "60", "nf_conntrack_tcp_timeout_close_wait": "90",
				"nf_conntrack_udp_timeout": "30", "nf_conntrack_udp_timeout_stream": "120", "nf_conntrack_tcp_be_liberal": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			err := SetTimeouts(func(path, value string) error {
				got[strings.TrimPrefix(path, "/proc/sys/net/netfilter/")] = value
				return nil
			}, tc.t)
			if err != nil || !maps.Equal(got, tc.want) {
				t.Errorf("wrote %v (%v), want %v", got, err, tc.want)
			}
		})
	}
	// One refused write does not stop the others, and its error names the sysctl.
	var tried []string
	err := SetTimeouts(func(path, value string) error {
		tried = append(tried, path)
		if strings.HasSuffix(path, "established") {
			return os.ErrPermission
		}
		return nil
	}, Timeouts{TCPEstablished: time.Hour, TCPCloseWait: time.Hour})
	if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "nf_conntrack_tcp_timeout_established=3600") || len(tried) != 2 {
		t.Errorf("err %v after %v, want the established error and both tried", err, tried)
	}
}

// TestKernelSetTimeoutsPerNamespace: the timeouts land in the namespace svcproxy
// runs in, and the machine's stay as they were.
func TestKernelSetTimeoutsPerNamespace(t *testing.T) {
	w := netnstest.NewWorld(t) // skips unless root
	read := func(name string) string {
		b, err := os.ReadFile("/proc/sys/net/netfilter/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	rootBefore := read("nf_conntrack_tcp_timeout_close_wait")
	write := func(path, value string) error { return os.WriteFile(path, []byte(value), 0o644) }
	var got []string
	err := netns.Do(w.Node.Path(), func() error {
		if err := SetTimeouts(write, Timeouts{TCPEstablished: 24 * time.Hour, TCPCloseWait: time.Hour}); err != nil {
			return err
		}
		got = []string{read("nf_conntrack_tcp_timeout_established"), read("nf_conntrack_tcp_timeout_close_wait")}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"86400", "3600"}) {
		t.Errorf("in the node's namespace: established, close_wait = %v, want 86400, 3600", got)
	}
	if after := read("nf_conntrack_tcp_timeout_close_wait"); after != rootBefore {
		t.Errorf("the machine's close_wait timeout changed: %s -> %s", rootBefore, after)
	}
}
