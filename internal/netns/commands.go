package netns

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// IP runs the ip(8) command with the given arguments.
func IP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command returns an unstarted command that runs inside the named namespace
// (`ip netns exec` execs in place, so the command's pid is the program's).
func Command(name string, argv ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", name}, argv...)...)
}

// Exec runs a command inside the named namespace and returns its combined
// output.
func Exec(name string, argv ...string) (string, error) {
	out, err := Command(name, argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip netns exec %s %s: %w: %s", name, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Delete removes the named namespace after killing every process in it.
// A missing namespace is not an error.
func Delete(name string) error {
	if _, err := os.Stat(Path(name)); err != nil {
		return nil
	}
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && pid != os.Getpid() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
	return IP("netns", "del", name)
}

// List returns the names of the named namespaces that start with prefix.
func List(prefix string) []string {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}
