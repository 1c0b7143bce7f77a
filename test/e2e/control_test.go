//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/svcproxy/svcproxy/internal/controlplane"
)

// waitAPIReady waits until kube-apiserver answers /readyz with ok.
func (c *cluster) waitAPIReady(ctx context.Context) error {
	if err := controlplane.WaitAPIReady(ctx, c.client, c.etcd.Proc, c.apiserver.Proc); err != nil {
		return fmt.Errorf("%w (see %s)", err, c.logDir)
	}
	return nil
}

// stopAPI takes the API away, as an outage: kube-apiserver first, with
// SIGKILL (a graceful stop would first remove its own address from the
// kubernetes Service's endpoints, a real change the proxies would rightly
// program), then etcd. Their data dirs stay; controllers, scheduler, agents
// and proxies keep running and see connections refused.
func (c *cluster) stopAPI() {
	c.apiserver.kill()
	<-c.apiserver.Done()
	c.etcd.stop(10 * time.Second)
}

// startAPI starts etcd and kube-apiserver again with the same flags, data
// dir and ports, and waits until the API server is ready.
func (c *cluster) startAPI(ctx context.Context) error {
	etcd, err := c.restartControl(c.etcd)
	if err != nil {
		return err
	}
	c.etcd = etcd
	api, err := c.restartControl(c.apiserver)
	if err != nil {
		return err
	}
	c.apiserver = api
	return c.waitAPIReady(ctx)
}

// restartControl starts the control-plane process p again (once it has
// exited) and puts the new one in its place.
func (c *cluster) restartControl(p *proc) (*proc, error) {
	q, err := c.restart(p)
	if err != nil {
		return nil, err
	}
	c.replaceControl(p, q)
	return q, nil
}

// replaceControl puts a restarted process where its predecessor was, so that
// teardown stops the control plane in the right order.
func (c *cluster) replaceControl(old, now *proc) {
	for i, p := range c.control {
		if p == old {
			c.control[i] = now
		}
	}
}
