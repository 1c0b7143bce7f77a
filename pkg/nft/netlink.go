package nft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// ErrOutcomeUnknown wraps a failure after which the kernel may or may not have
// committed the batch (ENOBUFS while reading the acknowledgements); the caller must
// re-read the table before planning again.
var ErrOutcomeUnknown = errors.New("transaction outcome unknown")

// Kernel applies transactions to the kernel and reads back what it holds. The caller
// (the sync loop) owns this interface; Netlink is the real thing, Fake is for tests.
type Kernel interface {
	Apply(ctx context.Context, tx *Tx) error
	Read(ctx context.Context, family Family, table string) (*View, error)
	DeleteTable(ctx context.Context, family Family, table string) error
	// Generation is the ruleset generation, bumped by every committed transaction
	// of any program: when it has not moved, nothing can have drifted.
	Generation(ctx context.Context) (uint32, error)
}

// Netlink talks to the kernel of the current network namespace (or of NetNSFd).
type Netlink struct {
	// NetNSFd, when non-zero, is a network namespace file descriptor to program instead
	// of the current one (tests).
	NetNSFd int
	// Notifications is the gate of the namespace's notification watchers
	// (WatchForeign), shared with the other family's Netlink of the same
	// namespace; nil: n's own.
	Notifications *NotifyGate
	gateMu        sync.Mutex // guards Notifications' lazy default (not mu: held through transactions)

	// batch is the socket transactions are sent on, kept open between them: closing
	// a NETLINK_NETFILTER socket makes nf_tables finish freeing what earlier commits
	// released, an RCU grace period, before close returns (its NETLINK_URELEASE
	// handler flushes the destroy work). That was 8-13 ms of every one-endpoint
	// change on this 2-core machine, against ~1 ms for the batch itself.
	mu     sync.Mutex
	batch  *netlink.Conn
	dialed int // sockets opened for transactions, for tests
	// What each transaction sends and reads back is encoded and received in
	// buffers kept between transactions (see sendbuf.go), under mu.
	sendBuf, replyBuf []byte
	seq               uint32
	// ports are the transaction sockets' port ids, which the kernel puts in the
	// notifications of what they changed (see WatchForeign).
	ports ownPorts
	// committed is the ruleset generation the last transaction's commit made,
	// as the kernel reported it (see sendBatch); committedOK is false after a
	// transaction that failed or whose report did not come.
	committed   uint32
	committedOK bool
}

// gate is n.Notifications, or n's own gate when none was given.
func (n *Netlink) gate() *NotifyGate {
	n.gateMu.Lock()
	defer n.gateMu.Unlock()
	if n.Notifications == nil {
		n.Notifications = &NotifyGate{}
	}
	return n.Notifications
}

// PauseNotifications stops the kernel from notifying the namespace's watchers of
// what anyone commits, until resume is called: see NotifyGate.
func (n *Netlink) PauseNotifications() (resume func()) { return n.gate().Pause() }

// Close closes the transaction socket, if open; the next Apply opens another.
func (n *Netlink) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropBatchConn()
}

// batchConn returns the open transaction socket or dials one; n.mu is held.
func (n *Netlink) batchConn() (*netlink.Conn, error) {
	if n.batch != nil {
		return n.batch, nil
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: n.NetNSFd})
	if err != nil {
		return nil, fmt.Errorf("dial netlink: %w", err)
	}
	if err := nlkit.RaiseBuffers(conn, socketBuffer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("netlink socket buffers: %w", err)
	}
	id, err := portID(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("netlink socket port id: %w", err)
	}
	n.ports.add(id)
	n.batch = conn
	n.dialed++
	return conn, nil
}

// withConn runs fn on the shared socket (see batch), holding it for fn's
// duration; after an error or a panic in fn, whose replies may still be
// queued, the socket is dropped and the next call opens another.
func (n *Netlink) withConn(fn func(*netlink.Conn) error) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	conn, err := n.batchConn()
	if err != nil {
		return err
	}
	clean := false
	defer func() {
		if !clean {
			_ = n.dropBatchConn()
		}
	}()
	err = fn(conn)
	clean = err == nil
	return err
}

// dropBatchConn closes the transaction socket; n.mu is held.
func (n *Netlink) dropBatchConn() error {
	if n.batch == nil {
		return nil
	}
	err := n.batch.Close()
	n.batch = nil
	return err
}

var _ Kernel = &Netlink{}

// socketBuffer is large enough for a cold load of tens of thousands of Services in one
// batch: the batch is sent in one sendmsg, and dumps read back large tables.
const socketBuffer = 256 << 20

// elementsPerMessage keeps each element list under netlink's 64 KiB attribute limit.
const elementsPerMessage = 512

// ruleHashType is the user-data TLV type that carries Rule.Hash. nft ignores TLV types
// it does not know and shows only the comment.
const ruleHashType userdata.Type = 0xbe

func (n *Netlink) conn() (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.WithSockOptions(func(c *netlink.Conn) error { return nlkit.RaiseBuffers(c, socketBuffer) })}
	if n.NetNSFd != 0 {
		opts = append(opts, nftables.WithNetNSFd(n.NetNSFd))
	}
	return nftables.New(opts...)
}

// queueSetsAndChains queues tx's new sets and chains on c, and returns the sets by
// name and the context its rules are encoded in (set IDs within the batch).
func queueSetsAndChains(c *nftables.Conn, t *nftables.Table, tx *Tx) (map[string]*nftables.Set, *encCtx, error) {
	sets := map[string]*nftables.Set{}
	for i, s := range tx.AddSets {
		ns, err := netlinkSet(t, s)
		if err != nil {
			return nil, nil, err
		}
		// The set's ID in this batch (what its rules and elements refer to it by
		// until the commit): ours, numbered per batch. Left at 0 the library takes
		// the next of a package-level counter that it increments without a lock,
		// a data race between the two families' proxies (TestKernelConcurrentApplies;
		// the race detector also saw it against a test's own connection).
		ns.ID = uint32(i + 1)
		if err := c.AddSet(ns, nil); err != nil {
			return nil, nil, fmt.Errorf("add set %s: %w", s.Name, err)
		}
		sets[s.Name] = ns
	}
	ctx := &encCtx{family: tx.Family, setID: func(name string) uint32 {
		if s, ok := sets[name]; ok {
			return s.ID
		}
		return 0
	}}
	for _, ch := range tx.NewChains {
		c.AddChain(netlinkChain(t, ch))
	}
	return sets, ctx, nil
}

// Apply sends the transaction as one netlink batch.
func (n *Netlink) Apply(callCtx context.Context, tx *Tx) error {
	if err := callCtx.Err(); err != nil {
		return err
	}
	if tx.Empty() {
		return nil
	}
	c, captured := captureConn()
	t := &nftables.Table{Family: nftables.TableFamily(tx.Family), Name: tx.Table}
	if tx.Recreate {
		c.DelTable(t)
	}
	c.AddTable(t)
	_, ctx, err := queueSetsAndChains(c, t, tx)
	if err != nil {
		return err
	}
	// The library encodes the table, sets, chains and rules; the elements,
	// most of a big transaction, are encoded here (elemmsg.go), in their place
	// in the batch: deletions before the rules change, additions after.
	b := batchOf(captured)
	if err := b.take(c); err != nil {
		return err
	}
	b.msgs = appendElementMessages(b.msgs, tx.Family, tx.Table, tx.DelElements, false)
	for _, ch := range tx.Chains {
		nc := &nftables.Chain{Table: t, Name: ch.Name}
		c.FlushChain(nc)
		for _, r := range ch.Rules {
			c.AddRule(&nftables.Rule{Table: t, Chain: nc, Exprs: ruleExprs(ctx, r), UserData: ruleUserData(r)})
		}
	}
	if err := b.take(c); err != nil {
		return err
	}
	b.msgs = appendElementMessages(b.msgs, tx.Family, tx.Table, tx.AddElements, true)
	b.msgs = appendRawElementMessages(b.msgs, tx.Family, tx.Table, tx.adds)
	// Empty every chain to delete before deleting any, then the sets, then the chains:
	// rules and verdict-map elements (ours or another program's) may refer to any of
	// them, and the kernel refuses to delete a chain or set still referred to.
	for _, name := range tx.DelChains {
		c.FlushChain(&nftables.Chain{Table: t, Name: name})
	}
	for _, name := range tx.DelSets {
		c.DelSet(&nftables.Set{Table: t, Name: name})
	}
	for _, name := range tx.DelChains {
		c.DelChain(&nftables.Chain{Table: t, Name: name})
	}
	if err := b.take(c); err != nil {
		return err
	}
	msgs := b.end()
	if err := withSetUserData(msgs, tx.AddSets); err != nil {
		return err
	}
	withCtIPKeys(msgs, tx.Family)
	return n.sendBatch(tx, msgs)
}

// batch assembles the messages of one transaction from what a capturing
// connection encodes, a part at a time, and messages encoded here in between.
type batch struct {
	captured *[]netlink.Message
	msgs     []netlink.Message
}

func batchOf(captured *[]netlink.Message) *batch { return &batch{captured: captured} }

// take encodes the messages queued on c and appends them, without the
// library's BATCH_BEGIN and BATCH_END: end frames the whole.
func (b *batch) take(c *nftables.Conn) error {
	*b.captured = (*b.captured)[:0]
	if err := c.Flush(); err != nil {
		return fmt.Errorf("encode batch: %w", err)
	}
	if got := *b.captured; len(got) > 2 { // nothing queued: Flush encodes nothing
		b.msgs = append(b.msgs, got[1:len(got)-1]...)
	}
	return nil
}

// end returns the messages framed as one batch.
func (b *batch) end() []netlink.Message { return framed(b.msgs) }

// framed is msgs between a BATCH_BEGIN and a BATCH_END for nf_tables, as the
// library frames a batch.
func framed(msgs []netlink.Message) []netlink.Message {
	mark := func(typ uint16) netlink.Message {
		return netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request},
			Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES},
		}
	}
	out := make([]netlink.Message, 0, len(msgs)+2)
	out = append(out, mark(unix.NFNL_MSG_BATCH_BEGIN))
	out = append(out, msgs...)
	return append(out, mark(unix.NFNL_MSG_BATCH_END))
}

// captureConn returns a google/nftables connection that encodes but does not send:
// Flush hands the batch to the returned slice instead of the kernel. The library asks
// the kernel to echo every rule and acknowledge every message, which for a cold load
// of tens of thousands of Services means hundreds of thousands of replies to read;
// sendBatch sends the same messages asking for one acknowledgement in all.
func captureConn() (*nftables.Conn, *[]netlink.Message) {
	var captured []netlink.Message
	ack := netlink.Message{Header: netlink.Header{Type: netlink.Error}, Data: make([]byte, 20)}
	c, _ := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		if req != nil {
			captured = append(captured, req...)
			return nil, nil
		}
		return []netlink.Message{ack}, nil // what the library waits for after each message
	}))
	return c, &captured
}

// sendBatch sends a BATCH_BEGIN ... BATCH_END batch in one sendmsg. The kernel
// processes it, commit included, before sendmsg returns, and reports every failed
// message, a failed commit (on the batch header), and the acknowledgement requested
// for the last message; so reading up to that acknowledgement tells the outcome.
func (n *Netlink) sendBatch(tx *Tx, msgs []netlink.Message) error {
	if len(msgs) < 3 {
		return nil
	}
	for i := range msgs {
		h := &msgs[i].Header
		h.Length, h.Sequence, h.PID = 0, 0, 0
		h.Flags &^= netlink.Acknowledge | netlink.Echo
	}
	last := len(msgs) - 2 // the message before BATCH_END
	msgs[last].Header.Flags |= netlink.Acknowledge
	// An echo asked on the batch's first message (the kernel takes BATCH_BEGIN
	// off before it looks) makes the commit send the generation it made to this
	// socket (nf_tables_gen_notify), ahead of the acknowledgements: the sync reads
	// no generation after its commits (CommittedGeneration). Only when that
	// message adds the table, which echoes nothing else unless it creates the
	// table: a recreation starts by deleting the table, and an echo asked there
	// would echo the deletion of every chain, set and rule in it.
	if msgs[1].Header.Type == newTable {
		msgs[1].Header.Flags |= netlink.Echo
	}
	// A refused or unread batch may leave replies queued: withConn then drops the
	// socket and the next transaction starts on a clean one.
	return n.withConn(func(conn *netlink.Conn) error {
		n.committedOK = false
		// Capped, extended acknowledgements for batches only: receiveOutcome
		// decodes them, the library's dump readers on the same socket do not.
		_ = batchAcks(conn, true) // best effort, as receiveOutcome reads either form
		if err := n.send(conn, msgs); err != nil {
			return fmt.Errorf("send batch of %d messages: %w", len(msgs), err)
		}
		gen, ok, err := receiveOutcome(conn, tx, msgs, last, n.reply())
		if err != nil {
			return err
		}
		n.committed, n.committedOK = gen, ok
		return batchAcks(conn, false)
	})
}

// CommittedGeneration is the ruleset generation the last transaction's commit
// made, as the kernel reported it with the commit; false when the last
// transaction failed or the report did not come.
func (n *Netlink) CommittedGeneration() (uint32, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.committed, n.committedOK
}

// batchAcks turns the capped and extended acknowledgements on or off; when off
// fails, the caller drops the socket.
func batchAcks(conn *netlink.Conn, on bool) error {
	if err := conn.SetOption(netlink.CapAcknowledge, on); err != nil {
		return fmt.Errorf("netlink capped acks: %w", err)
	}
	if err := conn.SetOption(netlink.ExtendedAcknowledge, on); err != nil {
		return fmt.Errorf("netlink extended acks: %w", err)
	}
	return nil
}

// receiveOutcome reads the kernel's replies to a batch up to the acknowledgement of
// message last and returns every refusal among them, each naming the kernel's
// reason and the object and owners of the refused message, and the generation
// the commit reported, if it did. The library's own receive cannot decode the
// capped extended acks we ask for, so the replies are read and decoded here.
func receiveOutcome(conn *netlink.Conn, tx *Tx, sent []netlink.Message, last int, buf []byte) (gen uint32, genOK bool, err error) {
	want, begin := sent[last].Header.Sequence, sent[0].Header.Sequence
	index := map[uint32]int{}
	for i, m := range sent {
		index[m.Header.Sequence] = i
	}
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, false, fmt.Errorf("netlink socket: %w", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	var refused []error
	// The kernel answers the whole batch before sendmsg returns; after an error on
	// the batch header (which may end the batch early) read only what is queued.
	drain := false
	for {
		n, err := nlkit.Recv(raw, buf, !drain)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			if errors.Is(err, syscall.ENOBUFS) {
				return 0, false, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			}
			if len(refused) > 0 {
				break
			}
			return 0, false, fmt.Errorf("read the kernel's answer to the batch: %w", err)
		}
		msgs, perr := nlkit.Split(buf[:n])
		if perr != nil {
			refused = append(refused, perr)
		}
		done := false
		for _, m := range msgs {
			if m.Type == newGen && m.Seq == sent[1].Header.Sequence {
				gen, genOK = generationOf(m.Data)
				continue
			}
			if m.Type != nlkit.Error {
				continue
			}
			a, err := nlkit.ParseAck(m)
			if err != nil {
				refused = append(refused, fmt.Errorf("undecodable answer to the batch: %w", err))
				continue
			}
			if a.Errno != 0 {
				i, ok := index[a.Seq]
				if !ok {
					refused = append(refused, fmt.Errorf("unknown message %d: %w", a.Seq, a.Errno))
					continue
				}
				refused = append(refused, refusal(tx, sent, i, a))
				drain = drain || a.Seq == begin
			}
			done = done || a.Seq == want
		}
		if done {
			break
		}
	}
	if len(refused) > 0 {
		return 0, false, fmt.Errorf("kernel refused the batch: %w", errors.Join(refused...))
	}
	return gen, genOK, nil
}

// newGen is the type of the message that reports a generation (NFT_MSG_NEWGEN):
// a GETGEN's answer, and a commit's report; newTable adds a table.
var (
	newGen   = uint16(nlkit.NftType(unix.NFT_MSG_NEWGEN))
	newTable = nlkit.NftType(unix.NFT_MSG_NEWTABLE)
)

// generationOf reads the generation (NFTA_GEN_ID) of a NEWGEN message's payload.
func generationOf(data []byte) (uint32, bool) {
	if len(data) < 4 {
		return 0, false
	}
	ad, err := nlkit.Msg(data)
	if err != nil {
		return 0, false
	}
	for ad.Next() {
		if ad.Type() == unix.NFTA_GEN_ID {
			return ad.Uint32(), true
		}
	}
	return 0, false
}

func ruleExprs(ctx *encCtx, r Rule) []expr.Any {
	var out []expr.Any
	for _, s := range r.Stmts {
		out = append(out, s.exprs(ctx)...)
	}
	return out
}

func ruleUserData(r Rule) []byte {
	var ud []byte
	if r.Comment != "" {
		ud = userdata.AppendString(ud, userdata.TypeComment, limitComment(r.Comment))
	}
	h := r.Hash()
	return userdata.Append(ud, ruleHashType, []byte{byte(h >> 56), byte(h >> 48), byte(h >> 40), byte(h >> 32), byte(h >> 24), byte(h >> 16), byte(h >> 8), byte(h)})
}

var setDatatypes = map[DataType]nftables.SetDatatype{
	TypeIPv4Addr:    nftables.TypeIPAddr,
	TypeIPv6Addr:    nftables.TypeIP6Addr,
	TypeInetProto:   nftables.TypeInetProto,
	TypeInetService: nftables.TypeInetService,
	TypeMark:        nftables.TypeMark,
	TypeInteger:     nftables.TypeInteger,
}

func datatypeOf(ts []DataType) (nftables.SetDatatype, error) {
	if len(ts) == 1 {
		return setDatatypes[ts[0]], nil
	}
	parts := make([]nftables.SetDatatype, len(ts))
	for i, t := range ts {
		parts[i] = setDatatypes[t]
	}
	return nftables.ConcatSetType(parts...)
}

func netlinkSet(t *nftables.Table, s *Set) (*nftables.Set, error) {
	key, err := datatypeOf(s.Key)
	if err != nil {
		return nil, fmt.Errorf("set %s key: %w", s.Name, err)
	}
	ns := &nftables.Set{Table: t, Name: s.Name, KeyType: key, Concatenation: len(s.Key) > 1,
		Dynamic: s.Dynamic, HasTimeout: s.Timeout, Size: s.Size, IsMap: s.IsMap()}
	switch {
	case s.Verdict:
		ns.DataType = nftables.TypeVerdict
	case len(s.Data) > 0:
		if ns.DataType, err = datatypeOf(s.Data); err != nil {
			return nil, fmt.Errorf("set %s data: %w", s.Name, err)
		}
	}
	return ns, nil
}

var hooks = map[string]nftables.ChainHook{
	"prerouting":  *nftables.ChainHookPrerouting,
	"input":       *nftables.ChainHookInput,
	"forward":     *nftables.ChainHookForward,
	"output":      *nftables.ChainHookOutput,
	"postrouting": *nftables.ChainHookPostrouting,
}

func netlinkChain(t *nftables.Table, c *Chain) *nftables.Chain {
	nc := &nftables.Chain{Table: t, Name: c.Name}
	if c.Hook != nil {
		h := hooks[c.Hook.Hook]
		p := nftables.ChainPriority(c.Hook.Priority)
		accept := nftables.ChainPolicyAccept
		nc.Hooknum, nc.Priority, nc.Type, nc.Policy = &h, &p, nftables.ChainType(c.Hook.Type), &accept
	}
	return nc
}
