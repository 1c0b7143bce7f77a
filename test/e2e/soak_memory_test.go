//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroupV1Memory is where a cgroup v1 machine mounts the memory controller.
const cgroupV1Memory = "/sys/fs/cgroup/memory"

// memoryHold is how long the proxy runs under the limit once healthy.
const memoryHold = 20 * time.Second

// needsCgroupMemory: the memory-limit fault starts the proxy in a cgroup of
// its own: under the cgroup v2 root, which needs the memory controller
// enabled for the root's children already (the soak enables nothing), or
// under the cgroup v1 memory hierarchy.
func needsCgroupMemory(s *soak) string {
	if cgroupV1() {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"))
	if err != nil {
		return "no cgroup v2 hierarchy at " + cgroupRoot + ", no cgroup v1 memory controller at " + cgroupV1Memory
	}
	if !slices.Contains(strings.Fields(string(b)), "memory") {
		return "the cgroup v2 root does not delegate the memory controller"
	}
	return ""
}

// cgroupV1 reports whether the memory controller is mounted as cgroup v1.
func cgroupV1() bool {
	_, err := os.Stat(filepath.Join(cgroupV1Memory, "memory.limit_in_bytes"))
	return err == nil
}

// memCgroup is a memory cgroup the soak made, directly under the
// hierarchy's root.
type memCgroup struct {
	dir string
	v1  bool
}

// newMemCgroup makes the cgroup name with a memory limit of limit bytes
// (cgroup v2: memory.max and no swap; v1: memory.limit_in_bytes).
func newMemCgroup(name string, limit int) (*memCgroup, error) {
	cg := &memCgroup{dir: filepath.Join(cgroupRoot, name), v1: cgroupV1()}
	if cg.v1 {
		cg.dir = filepath.Join(cgroupV1Memory, name)
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, err
	}
	files := [][2]string{{"memory.max", strconv.Itoa(limit)}, {"memory.swap.max", "0"}}
	if cg.v1 {
		files = [][2]string{{"memory.limit_in_bytes", strconv.Itoa(limit)}}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(cg.dir, f[0]), []byte(f[1]), 0o644); err != nil && !(f[0] == "memory.swap.max" && os.IsNotExist(err)) {
			cg.remove()
			return nil, fmt.Errorf("%s: %w", f[0], err)
		}
	}
	return cg, nil
}

func (cg *memCgroup) read(name string) string {
	b, _ := os.ReadFile(filepath.Join(cg.dir, name))
	return strings.Join(strings.Fields(string(b)), " ")
}

// stats is the cgroup's peak and its limit and OOM counts, for the note.
func (cg *memCgroup) stats() string {
	if cg.v1 {
		return fmt.Sprintf("peak %s B, failcnt %s, oom_control: %s", cg.read("memory.max_usage_in_bytes"), cg.read("memory.failcnt"), cg.read("memory.oom_control"))
	}
	return fmt.Sprintf("peak %s B, events: %s", cg.read("memory.peak"), cg.read("memory.events"))
}

// remove removes the cgroup, which must hold no process by then (what its
// processes were charged goes to the parent).
func (cg *memCgroup) remove() error { return os.Remove(cg.dir) }

// cgroupOf is the cgroup of pid in the hierarchy cg is in, as a path under
// its root.
func (cg *memCgroup) cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-id:controllers:path; cgroup v2's is 0::path.
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (!cg.v1 && parts[0] == "0" || cg.v1 && slices.Contains(strings.Split(parts[1], ","), "memory")) {
			return parts[2], nil
		}
	}
	return "", fmt.Errorf("no memory cgroup in /proc/%d/cgroup: %s", pid, b)
}

// moveTo moves pid into the cgroup at path (under the same root as cg).
func (cg *memCgroup) moveTo(path string, pid int) error {
	root := cgroupRoot
	if cg.v1 {
		root = cgroupV1Memory
	}
	return os.WriteFile(filepath.Join(root, path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// memoryLimit runs the node's proxy under a memory limit of twice its RSS:
// it stops the proxy (SIGTERM) and starts it again inside a new memory
// cgroup, so that the whole process is charged from its first page,
// through its cold start, and then for memoryHold under the load. (Moving a
// running process in would not do: cgroup v2 never moves the pages it
// already has, and this machine's kernel refuses cgroup v1's
// move_charge_at_immigrate.) Then the proxy goes back to the harness's
// cgroup and the new one is removed. A proxy the OOM killer ends is started
// again as the harness would, and the note says so.
func (s *soak) memoryLimit(f *faultRecord) {
	n := f.node
	f.blocksChanges, f.restarts = true, true
	n.mu.Lock()
	p := n.proxy
	n.mu.Unlock()
	rss, err := rssKiB(p.pid())
	if err != nil {
		f.err = err
		return
	}
	limit := 2 * rss * 1024
	cg, err := newMemCgroup(fmt.Sprintf("%ssoak-%s-%d", s.c.prefix, n.short, p.pid()), limit)
	if err != nil {
		f.err = err
		return
	}
	home, err := cg.cgroupOf(os.Getpid())
	if err != nil {
		f.err = errors.Join(err, cg.remove())
		return
	}
	p.stop(10 * time.Second)
	if err := s.startProxyIn(n, filepath.Join(cg.dir, "cgroup.procs")); err != nil {
		f.err = errors.Join(err, cg.remove())
		return
	}
	healthy := s.c.waitProxyHealthy(context.Background(), n, 60*time.Second)
	if healthy == nil {
		time.Sleep(memoryHold)
	}
	n.mu.Lock()
	q := n.proxy
	n.mu.Unlock()
	stats := cg.stats()
	failed := healthy != nil || q.exited()
	switch {
	case failed && !q.exited():
		q.kill() // unhealthy under the limit: out of the cgroup with it
		<-q.Done()
	case !failed:
		if err := cg.moveTo(home, q.pid()); err != nil {
			f.err = fmt.Errorf("move the proxy back to %s: %w", home, err)
		}
	}
	if err := cg.remove(); err != nil && f.err == nil {
		f.err = fmt.Errorf("remove %s: %w", cg.dir, err)
	}
	f.note = fmt.Sprintf("started in a cgroup limited to %d MiB (2x the RSS of %d MiB), held %v: %s", limit>>20, rss>>10, memoryHold, stats)
	if failed {
		f.note += fmt.Sprintf("; the proxy did not run under the limit (healthy: %v; %s), restarted", healthy, errString(q.Err()))
		s.restartProxy(n, f)
	}
}
