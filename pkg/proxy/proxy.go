package proxy

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// Config wires a Proxy.
type Config struct {
	Options
	Tracker *endpoints.Tracker
	Kernel  nft.Kernel
	// Conntrack may be nil (no cleanup, e.g. the fake kernel).
	Conntrack ConntrackReconciler
	// Ledger is shared by the proxies of one node (dual-stack: one per family), so
	// that each tells its siblings' commits from another program's; nil with one.
	Ledger  *CommitLedger
	Metrics *Metrics
	Health  *Health
	// SyncPeriod is how often the kernel is re-read and repaired (kube-proxy --sync-period).
	SyncPeriod time.Duration
	// MinSyncPeriod bounds how often changes are synced (kube-proxy --min-sync-period).
	// The first change after a quiet period is synced at once.
	MinSyncPeriod time.Duration
	// SpaceByCost makes MinSyncPeriod a ceiling: syncs are spaced by nine times the
	// last one's duration (spacing.go), svcproxy's default when --min-sync-period is
	// not given, where kube-proxy always waits MinSyncPeriod.
	SpaceByCost bool
	// MaxBackoff bounds the retry delay after a failed transaction.
	MaxBackoff time.Duration
	// Clock drives the loop's timers (nil: the real clock).
	Clock clock.WithTicker
	// OnRefused, when set, is called once per Service and distinct error when the
	// kernel refuses that Service's rules (e.g. to post an Event on it).
	OnRefused func(svc endpoints.ServiceKey, err error)
	// OnSynced, when set, is called in the loop's goroutine after every sync whose
	// changes the kernel took whole (no Service refused), as Health.Synced is: from
	// then on our table serves every Service (e.g. another proxy's rules can go).
	OnSynced func()
	// OnHealthCheckServices, when set, is called in the loop's goroutine after a sync
	// that committed, with the Services the health check node port server must serve
	// (see HealthCheckServices), whenever they differ from the last call (and once
	// after the first sync). The map is the callee's.
	OnHealthCheckServices func(map[endpoints.ServiceKey]HealthCheckService)
	// SetSysctl writes a sysctl (path under /proc/sys, value) in the network namespace
	// the Proxy programs: main sets WriteProcSys (its own namespace), tests that program
	// another namespace over its fd write there. Only used with LocalhostNodePorts
	// (route_localnet). nil writes nothing, so that a test with a fake kernel never
	// changes the machine's own namespace.
	SetSysctl func(path, value string) error
}

// Proxy is the reconcile loop: tracker -> render changed Services -> plan against the
// kernel view -> one transaction.
type Proxy struct {
	cfg     Config
	desired *nft.Ruleset
	view    *nft.View
	trigger chan struct{}
	lb      sharedChains // one value per shared chain, for every Service that uses it
	// scratch is the fragment each Service is rendered into, its memory reused
	// by the next (nft.Fragment.Reset); only the sync uses it.
	scratch nft.Fragment
	// adoptLater: the table an early window reads whole is adopted after the
	// rendering (openWindow).
	adoptLater bool
	serving    *servingTable
	refused    *refusals
	// affinity is what the kernel's sticky ports serve, for the affinity sweeper.
	affinity *affinityTable
	noLocal  noLocalPorts
	health   healthChecks
	// renderedNodeAddrs are the node addresses the desired skeleton serves NodePorts on.
	renderedNodeAddrs NodeAddresses
	// renderedServiceCIDRs are the service CIDRs the desired table drops for.
	renderedServiceCIDRs []netip.Prefix
	// programming holds trigger times of changes not yet committed.
	programming programmingTimes

	mu       sync.Mutex
	needFull bool
	// foreign names what other programs changed in our table since the last sync
	// took it (noteForeign): a repair reads back and compares only that.
	foreign   nft.Parts
	resyncs   uint64        // RequestResync calls, so that a sync clears only those it saw
	nodeAddrs NodeAddresses // where NodePorts are served (SetNodeAddresses)
	// serviceCIDRs are the cluster's service CIDRs of this family (SetServiceCIDRs).
	serviceCIDRs []netip.Prefix
	zone         string // this node's zone (SetZone); cfg.Zone is the rendered one
	lastSync     time.Time
	costs        syncCosts // the last syncs' CPU time (spacing.go)
	// releaseWatch: a watch for another program to let go of our table runs (released.go).
	releaseWatch atomic.Bool

	// anchor is the anchor table's desired state (anchor.go); anchorDue, under mu,
	// asks the next sync to check it; anchorOK: the last check succeeded;
	// anchorErr is the last error logged about it.
	anchor    *nft.Ruleset
	anchorDue bool
	anchorOK  bool
	anchorErr string

	// verifiedGen is the ruleset generation at which the view was last known to equal
	// the kernel (read, or only our own commits since). A periodic resync at that
	// generation has nothing to compare: no program committed anything.
	verifiedGen uint32
	verified    bool
	nextRead    time.Time // earliest time for the next drift-check read
	driftDue    time.Time // when a deferred drift check is due (zero: none deferred)
	// nextUnanswered is the earliest time for the next dump of unanswered TCP
	// entries (reconcileUnanswered).
	nextUnanswered time.Time
	// unansweredOwed: a sync that changed the kernel skipped its pass (too soon
	// after the last one); the loop syncs again when nextUnanswered comes.
	unansweredOwed bool
	commits        uint32 // our commits during the current Sync
	// overlapFailed: a transaction applyOverlapped sent was refused; the next
	// writes of a whole table go one transaction after the other, until a sync
	// succeeds.
	overlapFailed bool
}

// New returns a Proxy; Run starts it.
func New(cfg Config) *Proxy {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	// Its ip_family children: two Proxies of a dual-stack node share one Metrics.
	cfg.Metrics = cfg.Metrics.ForFamily(cfg.Options.Family)
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	return &Proxy{
		cfg:         cfg,
		desired:     NewRuleset(cfg.Options),
		anchor:      AnchorRuleset(TableFamily(cfg.Options.Family)),
		trigger:     make(chan struct{}, 1),
		lb:          sharedChains{},
		serving:     newServingTable(),
		refused:     &refusals{m: map[string]refusal{}},
		affinity:    newAffinityTable(),
		programming: programmingTimes{},
		needFull:    true,
		zone:        cfg.Zone,
		nodeAddrs:   NodeAddresses{All: true},
		// NewRuleset renders the skeleton for all local addresses.
		renderedNodeAddrs: NodeAddresses{All: true},
	}
}

// Desired exposes the desired ruleset (read-only use: tracing, tests).
func (p *Proxy) Desired() *nft.Ruleset { return p.desired }
