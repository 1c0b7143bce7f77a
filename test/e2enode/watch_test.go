//go:build e2enode

package e2enode

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// watcher runs event monitors in the nodes while a scenario measures, each
// line stamped with the time it was read, so that a failed connection can be
// laid beside what the kernel did then: conntrack events (`conntrack -E`) for
// the Service address and ruleset changes (`nft monitor`).
type watcher struct {
	c     *cluster
	vip   string
	mu    sync.Mutex // serialises snapshots
	wg    sync.WaitGroup
	stops []func()
}

// watchNodes starts the monitors in every node; the logs are
// <logDir>/watch-<what>-<node>.log.
func (c *cluster) watchNodes(vip string) *watcher {
	w := &watcher{c: c, vip: vip}
	w.conntrackStats("start")
	for _, n := range c.nodes {
		w.start(filepath.Join(c.logDir, "watch-conntrack-"+n.short+".log"), n.netns,
			"conntrack", "-E", "-p", "tcp", "-o", "id", "--orig-dst", vip)
		w.start(filepath.Join(c.logDir, "watch-nft-"+n.short+".log"), n.netns, "nft", "monitor")
	}
	return w
}

func (w *watcher) start(path, ns string, argv ...string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	cmd := netns.Command(ns, argv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(f, "%v\n", err)
		f.Close()
		return
	}
	w.stops = append(w.stops, func() { _ = cmd.Process.Kill() })
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer f.Close()
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			fmt.Fprintf(f, "%s %s\n", time.Now().Format("15:04:05.000000"), s.Text())
		}
		_ = cmd.Wait()
	}()
}

func (w *watcher) stop() {
	for _, s := range w.stops {
		s()
	}
	w.wg.Wait()
	w.conntrackStats("end")
}

// conntrackStats appends each node's conntrack counters (insert_failed,
// drop, invalid: packets conntrack refused) to watch-conntrack-stats.log.
func (w *watcher) conntrackStats(when string) {
	f, err := os.OpenFile(filepath.Join(w.c.logDir, "watch-conntrack-stats.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	for _, n := range w.c.nodes {
		out, err := netns.Exec(n.netns, "conntrack", "-S")
		fmt.Fprintf(f, "%s %s %s %v\n%s", time.Now().Format("15:04:05.000000"), when, n.short, err, out)
	}
}

// snapshot appends to watch-slow.log what the kernel holds while a client's
// connection is slow: the client's sockets (ss, with TCP internals) and every
// node's conntrack entries for the Service address.
func (w *watcher) snapshot(client, netnsPath string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(w.c.logDir, "watch-slow.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "===== %s %s slow\n", time.Now().Format("15:04:05.000000"), client)
	out, err := exec.Command("nsenter", "--net="+netnsPath, "ss", "-tanoi").CombinedOutput()
	fmt.Fprintf(f, "--- ss -tanoi in %s (%v)\n%s", client, err, out)
	for _, n := range w.c.nodes {
		out, err := netns.Exec(n.netns, "conntrack", "-L", "-p", "tcp", "--orig-dst", w.vip)
		fmt.Fprintf(f, "--- conntrack -L in %s (%v)\n%s", n.short, err, out)
	}
}
