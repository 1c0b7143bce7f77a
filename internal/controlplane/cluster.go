package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KindNode is one node of the three-node cluster both suites build, named as
// kind names them.
type KindNode struct {
	Name    string // the Node object: svcproxy-control-plane, svcproxy-worker, svcproxy-worker2
	Short   string // cp, w1, w2: namespace, log and directory names
	Netns   string // prefix + Short
	IP      string // on the bridge: 172.18.0.2, .3, .4
	PodCIDR string // 10.244.0.0/24, 10.244.1.0/24, 10.244.2.0/24
	Worker  bool
}

// KindNodes lists the control plane node and the two workers, their
// namespaces named prefix+short.
func KindNodes(prefix string) []KindNode {
	names := []string{"svcproxy-control-plane", "svcproxy-worker", "svcproxy-worker2"}
	shorts := []string{"cp", "w1", "w2"}
	var out []KindNode
	for i := range names {
		out = append(out, KindNode{
			Name:    names[i],
			Short:   shorts[i],
			Netns:   prefix + shorts[i],
			IP:      fmt.Sprintf("172.18.0.%d", i+2),
			PodCIDR: fmt.Sprintf("10.244.%d.0/24", i),
			Worker:  i > 0,
		})
	}
	return out
}

// WorkDir makes the run's directory, named after prefix, and its logs/.
func WorkDir(prefix string) (dir, logDir string, err error) {
	dir, err = os.MkdirTemp("", strings.TrimSuffix(prefix, "-")+".")
	if err != nil {
		return "", "", err
	}
	logDir = filepath.Join(dir, "logs")
	return dir, logDir, os.MkdirAll(logDir, 0o755)
}

// Step is one stage of bringing a cluster up.
type Step struct {
	Name string
	Fn   func(context.Context) error
}

// RunSteps runs the steps in order, logging how long each took, and stops at
// the first error (named after its step); the caller tears down.
func RunSteps(ctx context.Context, logf func(string, ...any), steps []Step) error {
	for _, s := range steps {
		start := time.Now()
		if err := s.Fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		logf("%s ready in %v", s.Name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
