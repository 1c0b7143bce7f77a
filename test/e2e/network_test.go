//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// TestPodNetwork checks the harness itself: a pod reaches a pod on the other
// worker by its pod IP without NAT. It also records whether an endpoint
// sees the client pod's address through a ClusterIP (kube-proxy does not
// masquerade traffic from the cluster CIDR).
func TestPodNetwork(t *testing.T) {
	r := track(t)
	c := theCluster
	w1, w2 := c.workers()[0], c.workers()[1]
	pod(t, "net-target", w2.name, map[string]string{"app": "net-target"}, tcpPort(80))
	target := waitPods(t, map[string]string{"app": "net-target"}, 1)[0]
	cl := clientOn(w1.name)
	url := fmt.Sprintf("http://%s/clientip", hostPort(target.Status.PodIP, 80))
	var got string
	poll.Eventually(t, 30*time.Second, "pod to pod across nodes", func() (bool, string) {
		var err error
		got, err = cl.get(url)
		return err == nil, fmt.Sprint(err)
	})
	if got != cl.ip {
		t.Errorf("pod %s on %s saw source %s for client %s: pod traffic is NATed", target.Name, w2.name, got, cl.ip)
	}

	svc := service(t, simpleService("net-target", 80, tcp, map[string]string{"app": "net-target"}))
	poll.Eventually(t, 30*time.Second, "source through the ClusterIP", func() (bool, string) {
		var err error
		got, err = cl.get(fmt.Sprintf("http://%s/clientip", hostPort(svc.Spec.ClusterIP, 80)))
		return err == nil, fmt.Sprint(err)
	})
	if got == cl.ip {
		r.metric(t, "clusterip_source", "preserved")
	} else {
		r.metric(t, "clusterip_source", "masqueraded to %s", got)
	}
}
