package node

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcproxy/svcproxy/internal/poll"
)

func TestNodeEligible(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"unknown", nil, false},
		{"ready", &corev1.Node{}, true},
		{"being deleted", &corev1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false},
		{"autoscaler removes it", &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: toBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}}}, false},
		{"other taint", &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/not-ready"}}}}, true},
	}
	for _, tc := range tests {
		if got := eligible(tc.node); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWatchNodeEligible(t *testing.T) {
	client := fake.NewClientset()
	eligible := Watch(t.Context(), client.CoreV1(), client, "n1", 100*time.Millisecond).Eligible
	if eligible() {
		t.Fatal("eligible before the Node exists")
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if _, err := client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the Node to make it eligible", func() (bool, string) { return eligible(), "not eligible" })
	node.Spec.Taints = []corev1.Taint{{Key: toBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "the taint to make it ineligible", func() (bool, string) { return !eligible(), "eligible" })
}

// Like kube-proxy, the start waits for this node's Node (so /healthz's first
// answer is right), but not forever.
func TestWatchNodeWaitsForTheNode(t *testing.T) {
	client := fake.NewClientset()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	}()
	start := time.Now()
	if eligible := Watch(t.Context(), client.CoreV1(), client, "n1", 10*time.Second).Eligible; !eligible() {
		t.Errorf("not eligible once the Node exists (returned after %v)", time.Since(start))
	}
}

// The Node's addresses are what --nodeport-addresses=primary reads, once the
// start has waited for the Node.
func TestWatchNodeAddresses(t *testing.T) {
	client := fake.NewClientset()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.3"}}}}, metav1.CreateOptions{})
	}()
	w := Watch(t.Context(), client.CoreV1(), client, "n1", 10*time.Second)
	if got := w.Addresses(); len(got) != 1 || got[0].Address != "172.18.0.3" {
		t.Errorf("Addresses() = %v, want the InternalIP 172.18.0.3", got)
	}
	if got := Watch(t.Context(), client.CoreV1(), client, "n2", 100*time.Millisecond).Addresses(); got != nil {
		t.Errorf("Addresses() of an unknown Node = %v, want nil", got)
	}
}

// The zone label is followed live: set, changed and removed, each reaches the
// proxy (through FollowZone's setter) without a restart.
func TestFollowZone(t *testing.T) {
	client := fake.NewClientset()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	if _, err := client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := Watch(t.Context(), client.CoreV1(), client, "n1", 10*time.Second)
	if got := w.Zone(); got != "zone-a" {
		t.Fatalf("Zone() = %q, want zone-a", got)
	}
	zones := make(chan string, 16)
	go w.FollowZone(t.Context(), func(z string) { zones <- z })
	// Addresses are followed through the other channel: draining it must not hide
	// a zone change from FollowZone.
	go func() {
		for range w.Changed() {
		}
	}()
	for _, want := range []string{"zone-b", ""} {
		if want == "" {
			delete(node.Labels, corev1.LabelTopologyZone)
		} else {
			node.Labels[corev1.LabelTopologyZone] = want
		}
		if _, err := client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		last := "zone-a"
		poll.Eventually(t, 10*time.Second, "the zone "+want+" to be followed", func() (bool, string) {
			for {
				select {
				case last = <-zones:
				default:
					return last == want, "last zone set: " + last
				}
			}
		})
	}
}
