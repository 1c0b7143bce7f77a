//go:build e2enode

package e2enode

import (
	"github.com/svcproxy/svcproxy/internal/controlplane"
)

// proc is a process the harness started (internal/controlplane, shared with
// test/e2e).
type proc = controlplane.Proc

// start runs argv inside the named network namespace ("" for none) with
// output appended to logs/NAME.log. The process dies with the test binary.
func (c *cluster) start(name, ns string, argv ...string) (*proc, error) {
	return controlplane.StartProc(c.logDir, name, ns, argv...)
}

// tail returns the last n lines of a file.
func tail(path string, n int) string { return controlplane.Tail(path, n) }
