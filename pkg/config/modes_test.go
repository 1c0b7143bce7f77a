package config

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/svcproxy/svcproxy/pkg/conntrack"
	"github.com/svcproxy/svcproxy/pkg/nodeaddr"
)

// TestNodePorts: kube-proxy's per-mode defaults for NodePort addresses and
// localhost NodePorts.
func TestNodePorts(t *testing.T) {
	for _, tc := range []struct {
		name          string
		mode          kubeproxyconfig.ProxyMode
		addrs         []string
		localhostFlag *bool
		want          nodeaddr.Spec
		wantLocalhost bool
	}{
		{name: "blank mode: every address, localhost too", want: nodeaddr.Spec{All: true}, wantLocalhost: true},
		{name: "iptables mode, localhost off", mode: ModeIPTables, localhostFlag: ptr.To(false), want: nodeaddr.Spec{All: true}},
		{name: "nftables mode: primary, never localhost", mode: ModeNFTables, localhostFlag: ptr.To(true), want: nodeaddr.Spec{Primary: true}},
		{name: "nftables mode, addresses given", mode: ModeNFTables, addrs: []string{"localhost"}, want: nodeaddr.Spec{Localhost: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Mode, c.NodePortAddresses = tc.mode, tc.addrs
			if tc.localhostFlag != nil {
				c.IPTables.LocalhostNodePorts = tc.localhostFlag
			}
			spec, localhost, err := NodePorts(c)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(spec, tc.want) || localhost != tc.wantLocalhost {
				t.Errorf("NodePorts = %+v, localhost %v; want %+v, %v", spec, localhost, tc.want, tc.wantLocalhost)
			}
		})
	}
}

// TestConntrackTimeouts: the conntrack settings svcproxy writes, kube-proxy's
// defaults included, and zero (leave the kernel's) when unset.
func TestConntrackTimeouts(t *testing.T) {
	c := Default()
	c.Conntrack.TCPBeLiberal = true
	c.Conntrack.UDPTimeout = metav1.Duration{Duration: 30 * time.Second}
	want := conntrack.Timeouts{TCPEstablished: 24 * time.Hour, TCPCloseWait: time.Hour, TCPBeLiberal: true, UDP: 30 * time.Second}
	if got := ConntrackTimeouts(c); got != want {
		t.Errorf("ConntrackTimeouts = %+v, want %+v", got, want)
	}
	c.Conntrack.TCPEstablishedTimeout, c.Conntrack.TCPCloseWaitTimeout = nil, nil
	if got := ConntrackTimeouts(c); got.TCPEstablished != 0 || got.TCPCloseWait != 0 {
		t.Errorf("unset TCP timeouts = %+v, want 0 (the kernel's)", got)
	}
}

// TestWriteReadsBack: --write-config-to writes what Load reads back unchanged.
func TestWriteReadsBack(t *testing.T) {
	c := Default()
	c.Mode, c.ClusterCIDR = ModeNFTables, "10.244.0.0/16"
	path := filepath.Join(t.TempDir(), "out.yaml")
	if err := Write(c, path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil || len(back.Warnings) > 0 {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(back.Config, c) {
		t.Errorf("read back\n%+v\nwant\n%+v", back.Config, c)
	}
}
