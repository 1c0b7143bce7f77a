package agent

import (
	"k8s.io/client-go/kubernetes/fake"
)

// fakeCluster is a cluster on a fake Clientset, which tells the reflectors it
// cannot stream lists.
func fakeCluster(c *fake.Clientset) cluster {
	return cluster{core: c.CoreV1(), discovery: c.DiscoveryV1(), events: c.EventsV1(), networking: c.NetworkingV1(), watchList: c}
}
