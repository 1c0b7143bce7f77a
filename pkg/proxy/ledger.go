package proxy

import "sync"

// CommitLedger is shared by the proxies of one node, one per IP family: each
// records the ruleset generations its own commits produced, so that a sibling's
// commits (to its own table) do not count as another program's and force a full
// read of the table at every resync. Its lock keeps the siblings' windows from
// the generation read before a sync's commits to the one after them apart, so
// that each can tell its commits' generations exactly.
//
// The zero value is ready; a nil *CommitLedger is a node with one proxy.
type CommitLedger struct {
	window sync.Mutex
	mu     sync.Mutex
	ranges []genRange // oldest first, at most maxLedgerRanges
}

// genRange is the generations (from, to] that one sync of a sibling produced.
type genRange struct{ from, to uint32 }

// maxLedgerRanges bounds the ledger: a proxy whose view was verified more
// syncs ago than this reads its table again, as it would without a ledger.
const maxLedgerRanges = 256

func (l *CommitLedger) lock() {
	if l != nil {
		l.window.Lock()
	}
}

// tryLock takes the window if no sibling holds it.
func (l *CommitLedger) tryLock() bool {
	return l == nil || l.window.TryLock()
}

func (l *CommitLedger) unlock() {
	if l != nil {
		l.window.Unlock()
	}
}

// record notes that the generations (from, to] were a sibling's commits.
func (l *CommitLedger) record(from, to uint32) {
	if l == nil || from == to {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.ranges); n > 0 && l.ranges[n-1].to == from {
		l.ranges[n-1].to = to
		return
	}
	l.ranges = append(l.ranges, genRange{from, to})
	if len(l.ranges) > maxLedgerRanges {
		l.ranges = l.ranges[len(l.ranges)-maxLedgerRanges:]
	}
}

// accounts reports whether every generation in (from, to] was recorded, that is,
// whether only this node's proxies committed anything between the two.
func (l *CommitLedger) accounts(from, to uint32) bool {
	if from == to {
		return true
	}
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	at := from
	for _, r := range l.ranges {
		if r.from <= at && at < r.to {
			at = r.to
		}
		if at == to {
			return true
		}
	}
	return false
}
