// Package controlplane starts what the end-to-end suites (test/e2e,
// test/e2enode) run a cluster on: processes with their logs, the bridge
// network of node namespaces ("the docker network" of kind), and the
// Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) in the control-plane node's namespace.
package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// Proc is a process a harness started, its output appended to
// <logDir>/<Name>.log.
type Proc struct {
	Name   string
	Netns  string   // "" for none
	Argv   []string // as given to StartProc, for Restart
	Cmd    *exec.Cmd
	logDir string
	done   chan struct{}
	err    error
}

// StartProc runs argv inside the named network namespace ("" for none) with
// output appended to logDir/name.log. The process dies with the test binary
// (SIGKILL on the parent's death).
func StartProc(logDir, name, ns string, argv ...string) (*Proc, error) {
	f, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if ns != "" {
		cmd = netns.Command(ns, argv...)
	}
	fmt.Fprintf(f, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Netns: ns, Argv: argv, Cmd: cmd, logDir: logDir, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Restart starts p's command again, with the same arguments and log file,
// once p has exited.
func (p *Proc) Restart() (*Proc, error) {
	if !p.Exited() {
		return nil, fmt.Errorf("restart %s: still running", p.Name)
	}
	return StartProc(p.logDir, p.Name, p.Netns, p.Argv...)
}

// Pid is the process id (`ip netns exec` execs in place: the program's own).
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended (cmd.Wait's error); nil while it runs.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Exited says whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL.
func (p *Proc) Kill() { _ = p.Cmd.Process.Signal(syscall.SIGKILL) }

// Stop sends SIGTERM and, if the process is still there after grace,
// SIGKILL; it returns once the process has exited.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
		<-p.done
	}
}

// Tail returns the last n lines of a file (or the error reading it).
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
