//go:build e2e

package e2e

import (
	"os"
	"time"

	"github.com/svcproxy/svcproxy/internal/controlplane"
)

// proc is a process the harness started (internal/controlplane.Proc, shared
// with test/e2enode), under the names the scenarios use.
type proc struct{ *controlplane.Proc }

// start runs argv inside the named network namespace ("" for none) with
// output appended to logs/NAME.log. The process dies with the test binary.
func (c *cluster) start(name, ns string, argv ...string) (*proc, error) {
	p, err := controlplane.StartProc(c.logDir, name, ns, argv...)
	if err != nil {
		return nil, err
	}
	return &proc{p}, nil
}

// restart starts p's command again, with the same arguments and log file,
// once p has exited.
func (c *cluster) restart(p *proc) (*proc, error) {
	q, err := p.Restart()
	if err != nil {
		return nil, err
	}
	return &proc{q}, nil
}

// pid is the process id (`ip netns exec` execs in place: the program's own).
func (p *proc) pid() int                 { return p.Pid() }
func (p *proc) exited() bool             { return p.Exited() }
func (p *proc) kill()                    { p.Kill() }
func (p *proc) stop(grace time.Duration) { p.Stop(grace) }

// tail returns the last n lines of a file.
func tail(path string, n int) string { return controlplane.Tail(path, n) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
