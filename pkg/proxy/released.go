package proxy

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/nft"
)

// tableHolders is a Kernel that can tell whether another program holds our table
// (nft.Netlink; nobody holds the fake kernel's).
type tableHolders interface {
	TableHeld(ctx context.Context, family nft.Family, table string) (bool, error)
}

// releasePoll is how often a held table is asked about: one netlink round trip.
const releasePoll = 250 * time.Millisecond

// syncWhenReleased, after a failed sync, checks whether another program holds our
// table and, if so, asks for a repair as soon as it lets go. The kernel deletes a
// held table without a notification when its owner's socket closes, so
// WatchForeignChanges never hears of it, and the failed sync's retry may be up to
// MaxBackoff (30 s) away: every Service of the node would stay down that long after
// the table was free (seen in the soak, docs/soak.md). At most one watch runs.
func (p *Proxy) syncWhenReleased(ctx context.Context) {
	h, ok := p.cfg.Kernel.(tableHolders)
	if !ok || p.releaseWatch.Load() {
		return
	}
	held, err := h.TableHeld(ctx, p.desired.Family, TableName)
	if err != nil || !held {
		return
	}
	klog.InfoS("Another program holds our table; syncing as soon as it lets go", "table", p.desired.Family.String()+" "+TableName)
	p.releaseWatch.Store(true)
	go func() {
		defer p.releaseWatch.Store(false)
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.cfg.Clock.After(releasePoll):
			}
			if held, err := h.TableHeld(ctx, p.desired.Family, TableName); err == nil && !held {
				klog.InfoS("Our table is free again; repairing it", "table", p.desired.Family.String()+" "+TableName)
				p.RequestRepair()
				return
			}
		}
	}()
}
