package takeover

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPlanTable(t *testing.T) {
	rule := func(h uint64, targets ...string) ruleInfo { return ruleInfo{Handle: h, Targets: targets} }
	tests := []struct {
		name  string
		table tableInfo
		want  tablePlan
	}{
		{
			name: "kube-proxy's chains and the base-chain jumps into them go; kubelet's and others' stay",
			table: tableInfo{Name: "nat", Chains: []chainInfo{
				{Name: "PREROUTING", Base: true, Rules: []ruleInfo{rule(1, "KUBE-SERVICES"), rule(2, "DOCKER"), rule(3)}},
				{Name: "OUTPUT", Base: true, Rules: []ruleInfo{rule(4, "KUBE-SERVICES"), rule(5, "KUBE-FIREWALL")}},
				{Name: "POSTROUTING", Base: true, Rules: []ruleInfo{rule(6, "KUBE-POSTROUTING")}},
				{Name: "DOCKER", Rules: []ruleInfo{rule(7)}},
				{Name: "KUBE-SERVICES", Rules: []ruleInfo{rule(8, "KUBE-SVC-AAAAAAAAAAAAAAAA")}},
				{Name: "KUBE-SVC-AAAAAAAAAAAAAAAA", Rules: []ruleInfo{rule(9, "KUBE-MARK-MASQ"), rule(10, "KUBE-SEP-BBBBBBBBBBBBBBBB")}},
				{Name: "KUBE-SEP-BBBBBBBBBBBBBBBB", Rules: []ruleInfo{rule(11, "KUBE-MARK-DROP")}},
				{Name: "KUBE-MARK-MASQ"}, {Name: "KUBE-POSTROUTING"}, {Name: "KUBE-PROXY-CANARY"},
				{Name: "KUBE-MARK-DROP"}, {Name: "KUBE-KUBELET-CANARY"}, {Name: "KUBE-FIREWALL"},
			}},
			want: tablePlan{Table: "nat",
				DeleteRules: []ruleRef{{"PREROUTING", 1}, {"OUTPUT", 4}, {"POSTROUTING", 6}},
				DeleteChains: []string{"KUBE-MARK-MASQ", "KUBE-POSTROUTING", "KUBE-PROXY-CANARY",
					"KUBE-SEP-BBBBBBBBBBBBBBBB", "KUBE-SERVICES", "KUBE-SVC-AAAAAAAAAAAAAAAA"},
			},
		},
		{
			name: "a chain another program jumps to is kept with what it reaches",
			table: tableInfo{Name: "nat", Chains: []chainInfo{
				{Name: "PREROUTING", Base: true, Rules: []ruleInfo{rule(1, "KUBE-SERVICES"), rule(2, "CNI-DNAT")}},
				{Name: "CNI-DNAT", Rules: []ruleInfo{rule(3, "KUBE-MARK-MASQ"), rule(4, "KUBE-SVC-AAAAAAAAAAAAAAAA")}},
				{Name: "KUBE-SERVICES", Rules: []ruleInfo{rule(5, "KUBE-SVC-AAAAAAAAAAAAAAAA")}},
				{Name: "KUBE-SVC-AAAAAAAAAAAAAAAA", Rules: []ruleInfo{rule(6, "KUBE-SEP-BBBBBBBBBBBBBBBB")}},
				{Name: "KUBE-SEP-BBBBBBBBBBBBBBBB"}, {Name: "KUBE-MARK-MASQ"},
			}},
			want: tablePlan{Table: "nat",
				DeleteRules:  []ruleRef{{"PREROUTING", 1}},
				DeleteChains: []string{"KUBE-SERVICES"},
				Kept: []string{
					"nat KUBE-MARK-MASQ: chain CNI-DNAT jumps to it",
					"nat KUBE-SEP-BBBBBBBBBBBBBBBB: chain KUBE-SVC-AAAAAAAAAAAAAAAA jumps to it",
					"nat KUBE-SVC-AAAAAAAAAAAAAAAA: chain CNI-DNAT jumps to it",
				},
				KeptChains: []string{"KUBE-MARK-MASQ", "KUBE-SEP-BBBBBBBBBBBBBBBB", "KUBE-SVC-AAAAAAAAAAAAAAAA"},
			},
		},
		{
			name: "goto and several targets in one rule",
			table: tableInfo{Name: "filter", Chains: []chainInfo{
				{Name: "FORWARD", Base: true, Rules: []ruleInfo{rule(1, "ACCEPTED", "KUBE-FORWARD")}},
				{Name: "ACCEPTED"}, {Name: "KUBE-FORWARD"},
			}},
			want: tablePlan{Table: "filter", DeleteRules: []ruleRef{{"FORWARD", 1}}, DeleteChains: []string{"KUBE-FORWARD"}},
		},
		{
			name: "prefixes alone and look-alikes are not kube-proxy's",
			table: tableInfo{Name: "nat", Chains: []chainInfo{
				{Name: "KUBE-SVC-"}, {Name: "KUBE-SERVICES-X"}, {Name: "KUBE-ROUTER-INPUT"}, {Name: "kube-services"},
				{Name: "KUBE-IPTABLES-HINT"}, {Name: "KUBE-NWPLCY-ABC"},
			}},
			want: tablePlan{Table: "nat"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := planTable(tc.table)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsKubeProxyIPSet(t *testing.T) {
	for name, want := range map[string]bool{
		"KUBE-CLUSTER-IP": true, "KUBE-6-CLUSTER-IP": true, "KUBE-IPVS-IPS": true, "KUBE-6-LOOP-BACK": true,
		"KUBE-SRC-ABCDEF": false, "KUBE-DST-ABCDEF": false, "KUBE-6-SRC-ABC": false, "KUBE-": false, "cilium_node_set_v4": false,
	} {
		if got := isKubeProxyIPSet(name); got != want {
			t.Errorf("isKubeProxyIPSet(%q) = %v, want %v", name, got, want)
		}
	}
}
