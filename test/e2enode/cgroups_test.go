//go:build e2enode

package e2enode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This machine mounts cgroup v1 (and an empty v2 at /sys/fs/cgroup/unified).
// kubelet checks that its cgroupRoot exists in every v1 hierarchy it uses,
// so each node's is created beforehand, and removed (after every process in
// it is gone) in every hierarchy, the v2 one included where runc made it.

// cgroupMounts is the mount point of every cgroup hierarchy, v1 and v2.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 3 && (fields[2] == "cgroup" || fields[2] == "cgroup2") {
			out = append(out, fields[1])
		}
	}
	return out, s.Err()
}

// createCgroup makes /sys/fs/cgroup/<h>/<path> in every hierarchy; cpuset's
// cpus and mems are copied from the parent (a new cpuset is empty, and no
// task can join an empty one).
func createCgroup(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		dir := filepath.Join(m, path)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if filepath.Base(m) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return fmt.Errorf("cgroup %s/%s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// pidsCgroup is the pids hierarchy's directory of path: every process is in
// exactly one cgroup there, so it is where the suite finds what to kill.
func pidsCgroup(path string) string { return filepath.Join("/sys/fs/cgroup/pids", path) }

// cgroupPids lists the processes in path and below in the pids hierarchy.
func cgroupPids(path string) []int {
	var pids []int
	_ = filepath.WalkDir(pidsCgroup(path), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killCgroup SIGKILLs every process in path and below until none is left
// (a shim may fork while being killed).
func killCgroup(path string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pids := cgroupPids(path)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes path and everything below it, deepest first, in every
// hierarchy. The processes must be gone.
func removeCgroups(path string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		root := filepath.Join(m, path)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var rerr error
			for i := 0; i < 20; i++ { // the kernel frees a cgroup a little after its last task
				if rerr = syscall.Rmdir(d); rerr == nil || errors.Is(rerr, syscall.ENOENT) {
					rerr = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if rerr != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, rerr))
			}
		}
	}
	return errors.Join(errs...)
}
