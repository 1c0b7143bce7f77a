//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is a process the harness started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start runs argv inside the named network namespace ("" for none) with
// output appended to logs/NAME.log. The process dies with the test binary.
func (c *cluster) start(name, ns string, argv ...string) (*proc, error) {
	f, err := os.OpenFile(filepath.Join(c.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	fmt.Fprintf(f, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) kill() { _ = p.cmd.Process.Signal(syscall.SIGKILL) }

func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
		<-p.done
	}
}

// poll calls cond every interval until it reports true, the timeout passes
// or ctx ends; the error carries cond's last message.
func poll(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string)) error {
	return pollOrAbort(ctx, timeout, interval, func() (bool, string, error) {
		ok, msg := cond()
		return ok, msg, nil
	})
}

// pollOrAbort is poll with a condition that can give up early by returning
// an error (a process it waits for has exited).
func pollOrAbort(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, msg, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		last = msg
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", ctx.Err(), last)
		case <-time.After(interval):
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
