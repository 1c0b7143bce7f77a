package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProcLogsExitAndRestart(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProc(dir, "echo", "", "sh", "-c", "echo hello; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("process did not exit")
	}
	if !p.Exited() || p.Err() == nil || !strings.Contains(p.Err().Error(), "exit status 3") {
		t.Fatalf("Exited %v, Err %v; want exited with status 3", p.Exited(), p.Err())
	}
	q, err := p.Restart()
	if err != nil {
		t.Fatal(err)
	}
	<-q.Done()
	b, err := os.ReadFile(filepath.Join(dir, "echo.log"))
	if err != nil {
		t.Fatal(err)
	}
	// Both runs in one log, each after a header naming the command.
	if got := strings.Count(string(b), "hello\n"); got != 2 {
		t.Errorf("log has %d answers, want 2 (the restart appends):\n%s", got, b)
	}
	if got := strings.Count(string(b), "=== "); got != 2 {
		t.Errorf("log has %d headers, want 2:\n%s", got, b)
	}
}

func TestProcStopAndRestartWhileRunning(t *testing.T) {
	p, err := StartProc(t.TempDir(), "sleep", "", "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	if p.Err() != nil || p.Exited() {
		t.Fatalf("running process: Exited %v, Err %v", p.Exited(), p.Err())
	}
	if _, err := p.Restart(); err == nil {
		t.Error("Restart of a running process: no error")
	}
	start := time.Now()
	p.Stop(10 * time.Second)
	if !p.Exited() {
		t.Fatal("Stop returned before the process exited")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %v: SIGTERM should end sleep at once", d)
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "c"},
		{2, "b\nc"},
		{3, "a\nb\nc"},
		{10, "a\nb\nc"},
	} {
		if got := Tail(path, tc.n); got != tc.want {
			t.Errorf("Tail(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("Tail of a missing file = %q, want the error", got)
	}
}
