//go:build e2e

package e2e

import (
	"fmt"
	"time"
)

// ctFullHold is how long the conntrack fault keeps the table full.
const ctFullHold = 10 * time.Second

// conntrackFull fills the node's conntrack table (fillConntrack: its own
// count, nf_conntrack_max is left alone), keeps it full for ctFullHold,
// then deletes the fillers. Meanwhile the kernel drops every new connection
// through the node: those failures are the fault's named exceptions, for
// either proxy alike. What is judged is everything else: connections that
// were open live on (their entries exist), the proxy stays healthy (its
// rules are right: nftables needs no conntrack entry) and serves changes
// on the other nodes, and the node answers again as soon as there is room.
func (s *soak) conntrackFull(f *faultRecord) {
	f.disruptive, f.blocksChanges, f.dropsNew = true, true, true
	f.cause = "the node's conntrack table was full"
	start := time.Now()
	// The fillers expire by themselves a minute after the fault, should
	// the harness not get to delete them.
	n, err := fillConntrack(f.node.netns, ctFullHold+time.Minute)
	filled := time.Since(start)
	if err == nil {
		time.Sleep(ctFullHold)
	}
	if derr := drainConntrack(f.node.netns); err == nil {
		err = derr
	}
	f.end = time.Now()
	f.note = fmt.Sprintf("%d entries added in %v (full), held %v, deleted", n, filled.Round(time.Millisecond), ctFullHold)
	f.err = err
}
