package offline

import (
	"fmt"
	"strings"
	"testing"
)

func TestNodeResolve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    Node
		want    string // selection as "all4 all6 addrs"
		wantErr string
	}{
		{name: "no flags: every address, loopback too", node: Node{},
			want: "true true [127.0.0.1 ::1]"},
		{name: "node IPs, all", node: Node{IPs: []string{"172.18.0.3", "fd00::3"}},
			want: "true true [127.0.0.1 172.18.0.3 ::1 fd00::3]"},
		{name: "primary is the first node IP of each family", node: Node{IPs: []string{"172.18.0.3", "10.0.0.5", "fd00::3"}, NodePorts: []string{"primary"}},
			want: "false false [172.18.0.3 fd00::3]"},
		{name: "CIDR", node: Node{IPs: []string{"172.18.0.3", "10.0.0.5"}, NodePorts: []string{"10.0.0.0/8"}},
			want: "false true [10.0.0.5 ::1]"},
		{name: "bad node IP", node: Node{IPs: []string{"172.18.0"}}, wantErr: "--node-ip"},
		{name: "bad nodeport address", node: Node{NodePorts: []string{"nope"}}, wantErr: "--nodeport-addresses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sel, err := tc.node.Resolve()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve() error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(sel.AllIPv4, sel.AllIPv6, sel.Addrs); got != tc.want {
				t.Errorf("selection = %s, want %s", got, tc.want)
			}
		})
	}
}
