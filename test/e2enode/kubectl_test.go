//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// kubectl runs the suite's kubectl (v1.37.2, built from the pinned module)
// with the admin kubeconfig, inside the control plane's namespace, where the
// API server listens on 127.0.0.1.
func (c *cluster) kubectl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	argv := append([]string{"ip", "netns", "exec", c.cp().netns, c.nodeBin("kubectl"), "--kubeconfig=" + c.adminKC}, args...)
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
