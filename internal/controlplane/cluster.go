package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// KindNode is one node of the cluster both suites build, named as kind names
// them.
type KindNode struct {
	Name    string // the Node object: svcproxy-control-plane, svcproxy-worker, svcproxy-worker2, ...
	Short   string // cp, w1, w2, ...: namespace, log and directory names
	Netns   string // prefix + Short
	IP      string // on the bridge: 172.18.0.2, .3, .4, ...
	PodCIDR string // 10.244.0.0/24, 10.244.1.0/24, 10.244.2.0/24, ...
	Worker  bool
}

// KindNodes lists the control plane node and the two workers, their
// namespaces named prefix+short.
func KindNodes(prefix string) []KindNode { return KindNodesWith(prefix, 2) }

// KindNodesWith lists the control plane node and the given number of workers
// (kind's svcproxy-worker, svcproxy-worker2, svcproxy-worker3, ...): some of
// upstream's e2e specs need three schedulable nodes.
func KindNodesWith(prefix string, workers int) []KindNode {
	out := []KindNode{{Name: "svcproxy-control-plane", Short: "cp"}}
	for i := 1; i <= workers; i++ {
		name := "svcproxy-worker"
		if i > 1 {
			name += strconv.Itoa(i)
		}
		out = append(out, KindNode{Name: name, Short: "w" + strconv.Itoa(i), Worker: true})
	}
	for i := range out {
		out[i].Netns = prefix + out[i].Short
		out[i].IP = fmt.Sprintf("172.18.0.%d", i+2)
		out[i].PodCIDR = fmt.Sprintf("10.244.%d.0/24", i)
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
