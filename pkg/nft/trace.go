package nft

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// Packet is the first packet of a new connection, as the tracer sees it.
type Packet struct {
	Src, Dst netip.Addr
	Proto    uint8
	DPort    uint16
	// Local marks traffic originated on the node (the output hook) rather than routed
	// through it (prerouting).
	Local bool
	// NodeAddrs are the node's own addresses, for "fib ... type local" (127.0.0.0/8
	// always is local).
	NodeAddrs []netip.Addr
}

// isLocal answers "fib ... type local" for a.
func (p Packet) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(p.NodeAddrs, a)
}

// Outcome is one way a packet can leave the table's NAT hooks.
type Outcome struct {
	// DNAT is the new destination, if any.
	DNAT netip.AddrPort
	// Reject and Drop end the connection attempt.
	Reject, Drop bool
	// Masquerade is set when postrouting masquerades the connection.
	Masquerade bool
}

func (o Outcome) String() string {
	s := "accept"
	switch {
	case o.Reject:
		s = "reject"
	case o.Drop:
		s = "drop"
	case o.DNAT.IsValid():
		s = "dnat " + o.DNAT.String()
	}
	if o.Masquerade {
		s += " masquerade"
	}
	return s
}

// Affinity is the content of dynamic sets and maps the tracer should assume: the
// keys present (as Element.ID(), see AffinityEntry) and, for a map, their data.
type Affinity map[string][]Datum

// Trace returns every outcome a new connection can have, exploring both sides of
// each random choice, sorted and deduplicated. It answers "where can this go" from
// the ruleset value alone, so render tests check behaviour rather than text.
//
// A packet of the other IP family never enters the table's hooks (an ip table sees
// IPv4 only, an ip6 table IPv6): it is accepted untouched.
func Trace(r *Ruleset, p Packet, dyn Affinity) ([]Outcome, error) {
	if p.Dst.Is4() != (r.Family == FamilyIPv4) {
		return []Outcome{{}}, nil
	}
	t := &tracer{r: r, dyn: dyn}
	hook := "prerouting"
	if p.Local {
		hook = "output"
	}
	pre, err := t.hookOutcomes("nat", hook, state{pkt: p})
	if err != nil {
		return nil, err
	}
	var out []Outcome
	for _, s := range pre {
		o := Outcome{DNAT: s.dnat, Reject: s.end == endReject, Drop: s.end == endDrop}
		if o.Reject || o.Drop {
			out = append(out, o)
			continue
		}
		post := s
		post.end, post.stack = endNone, nil
		if s.dnat.IsValid() {
			post.pkt.Dst, post.pkt.DPort = s.dnat.Addr(), s.dnat.Port()
		}
		verdict, err := t.filterVerdict(post)
		if err != nil {
			return nil, err
		}
		if verdict != endNone {
			o.Reject, o.Drop = verdict == endReject, verdict == endDrop
			out = append(out, o)
			continue
		}
		posts, err := t.hookOutcomes("nat", "postrouting", post)
		if err != nil {
			return nil, err
		}
		for _, ps := range posts {
			o.Masquerade = ps.masq
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b Outcome) int {
		if c := a.DNAT.Compare(b.DNAT); c != 0 {
			return c
		}
		return cmp.Compare(a.String(), b.String())
	})
	return slices.Compact(out), nil
}

// filterVerdict is endDrop or endReject when the filter chains after NAT end the
// connection attempt (endNone otherwise): those of
// the forward hook for a packet routed through the node to another host, of the
// output hook for one the node sends. Only chains at the filter priority (0) or
// later decide: earlier filter chains (affinity recording at dstnat+1) never drop.
// The input hook is not followed: the tracer answers where a connection goes, and
// one to the node itself goes nowhere else.
func (t *tracer) filterVerdict(s state) (end, error) {
	hook := "forward"
	switch {
	case s.pkt.Local:
		hook = "output"
	case s.pkt.isLocal(s.pkt.Dst):
		return endNone, nil
	}
	for _, name := range sortedKeys(t.r.Chains) {
		c := t.r.Chains[name]
		if c.Hook == nil || c.Hook.Type != "filter" || c.Hook.Hook != hook || c.Hook.Priority < 0 {
			continue
		}
		res, err := t.chain(c, 0, s)
		if err != nil {
			return endNone, err
		}
		for _, r := range res {
			if r.end == endDrop || r.end == endReject {
				return r.end, nil
			}
		}
	}
	return endNone, nil
}

type end int

const (
	endNone end = iota
	endAccept
	endReject
	endDrop
)

type state struct {
	pkt   Packet
	mark  uint32
	dnat  netip.AddrPort
	masq  bool
	end   end
	stack []returnTo // where each jump returns to
}

// returnTo is the rule after a jump.
type returnTo struct {
	chain *Chain
	rule  int
}

type tracer struct {
	r     *Ruleset
	dyn   Affinity
	steps int
}

func (t *tracer) hookOutcomes(typ, hook string, s state) ([]state, error) {
	var out []state
	for _, name := range sortedKeys(t.r.Chains) {
		c := t.r.Chains[name]
		if c.Hook == nil || c.Hook.Type != typ || c.Hook.Hook != hook {
			continue
		}
		res, err := t.chain(c, 0, s)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	if len(out) == 0 {
		out = []state{s}
	}
	return out, nil
}

// chain evaluates chain c from rule i and returns the terminal states.
func (t *tracer) chain(c *Chain, i int, s state) ([]state, error) {
	if t.steps++; t.steps > 100000 {
		return nil, fmt.Errorf("trace: too many steps (loop?) in chain %s", c.Name)
	}
	if i >= len(c.Rules) {
		return t.ret(s)
	}
	branches, err := t.rule(c.Rules[i].Stmts, s)
	if err != nil {
		return nil, fmt.Errorf("chain %s rule %d: %w", c.Name, i, err)
	}
	var out []state
	for _, b := range branches {
		var res []state
		switch {
		case b.next == nextRule:
			res, err = t.chain(c, i+1, b.s)
		case b.next == nextDone:
			res = []state{b.s}
		case b.next == nextReturn:
			res, err = t.ret(b.s)
		case b.next == nextJump || b.next == nextGoto:
			target, ok := t.r.Chains[b.chain]
			if !ok {
				return nil, fmt.Errorf("jump to missing chain %s", b.chain)
			}
			ns := b.s
			if b.next == nextJump {
				ns.stack = append(slices.Clone(ns.stack), returnTo{c, i + 1})
			}
			res, err = t.chain(target, 0, ns)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// ret continues after the jump that led here, or ends the base chain (policy accept).
func (t *tracer) ret(s state) ([]state, error) {
	if len(s.stack) == 0 {
		s.end = endAccept
		return []state{s}, nil
	}
	top := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	return t.chain(top.chain, top.rule, s)
}

type next int

const (
	nextRule next = iota
	nextDone
	nextReturn
	nextJump
	nextGoto
)

type branch struct {
	s     state
	next  next
	chain string
}

// rule evaluates statements; random choices fork the state.
func (t *tracer) rule(stmts []Stmt, s state) ([]branch, error) {
	if len(stmts) == 0 {
		return []branch{{s: s, next: nextRule}}, nil
	}
	rest := stmts[1:]
	cont := func(ok bool, s state) ([]branch, error) {
		if !ok {
			return []branch{{s: s, next: nextRule}}, nil
		}
		return t.rule(rest, s)
	}
	switch st := stmts[0].(type) {
	case Match:
		d, err := t.value(F(st.Field), s)
		if err != nil {
			return nil, err
		}
		return cont((d == st.Value) != st.Negate, s)
	case MatchPrefix:
		d, err := t.value(F(st.Field), s)
		if err != nil {
			return nil, err
		}
		a, _ := netip.AddrFromSlice(d.Bytes())
		return cont(st.Prefix.Masked().Contains(a) != st.Negate, s)
	case Lookup:
		id, err := t.key(st.Set, st.Key, s)
		if err != nil {
			return nil, err
		}
		_, present := t.dyn[id]
		if set := t.r.Sets[st.Set]; set != nil && !set.Dynamic {
			_, present = t.r.Element(id)
		}
		return cont(present != st.Negate, s)
	case VMap:
		id, err := t.key(st.Map, st.Key, s)
		if err != nil {
			return nil, err
		}
		e, ok := t.r.Element(id)
		if !ok || e.Verdict == nil {
			return []branch{{s: s, next: nextRule}}, nil
		}
		return t.verdict(*e.Verdict, s), nil
	case Numgen:
		if st.Mod <= 1 {
			return cont(st.Value == 0, s)
		}
		hit, err := t.rule(rest, s)
		if err != nil {
			return nil, err
		}
		return append(hit, branch{s: s, next: nextRule}), nil
	case Update:
		return t.rule(rest, s)
	case DNAT:
		s.dnat = netip.AddrPortFrom(st.Addr, st.Port)
		return []branch{{s: s, next: nextDone}}, nil
	case DNATMap:
		return t.dnatMap(st, s)
	case Masquerade:
		s.masq = true
		return []branch{{s: s, next: nextDone}}, nil
	case MarkOr:
		s.mark |= st.Bits
		return t.rule(rest, s)
	case MarkXor:
		s.mark ^= st.Bits
		return t.rule(rest, s)
	case MarkMatch:
		return cont(s.mark&st.Mask == st.Value, s)
	case CtStatusDNAT:
		return cont(s.dnat.IsValid(), s)
	case CtStateNew:
		return cont(true, s) // the tracer follows new connections only
	case CtStateInvalid:
		return cont(false, s)
	case FibLocal:
		a := s.pkt.Dst
		if st.Saddr {
			a = s.pkt.Src
		}
		// A packet the node sends (output hook) comes from one of its addresses.
		local := s.pkt.isLocal(a) || (st.Saddr && s.pkt.Local)
		return cont(local != st.Negate, s)
	case Reject:
		if st.TCPReset && s.pkt.Proto != ProtoTCP {
			return []branch{{s: s, next: nextRule}}, nil
		}
		s.end = endReject
		return []branch{{s: s, next: nextDone}}, nil
	case Verdict:
		return t.verdict(st, s), nil
	}
	return nil, fmt.Errorf("trace: statement %T not supported", stmts[0])
}

// dnatMap follows every value a random key part can take; a key the map lacks ends
// the rule like a failed match.
func (t *tracer) dnatMap(st DNATMap, s state) ([]branch, error) {
	keys := [][]Datum{nil}
	for _, o := range st.Key {
		var vals []Datum
		if o.Random != 0 {
			for i := uint32(0); i < o.Random; i++ {
				vals = append(vals, Int(o.Offset+i))
			}
		} else {
			d, err := t.value(o, s)
			if err != nil {
				return nil, err
			}
			vals = []Datum{d}
		}
		var next [][]Datum
		for _, k := range keys {
			for _, v := range vals {
				next = append(next, append(slices.Clone(k), v))
			}
		}
		keys = next
	}
	var out []branch
	for _, k := range keys {
		e, ok := t.r.Element(Element{Set: st.Map, Key: k}.ID())
		if set := t.r.Sets[st.Map]; set != nil && set.Dynamic {
			e.Data, ok = t.dyn[Element{Set: st.Map, Key: k}.ID()]
		}
		if !ok || len(e.Data) != 2 {
			out = append(out, branch{s: s, next: nextRule})
			continue
		}
		a, _ := netip.AddrFromSlice(e.Data[0].Bytes())
		ns := s
		ns.dnat = netip.AddrPortFrom(a, binary.BigEndian.Uint16(e.Data[1].Bytes()))
		out = append(out, branch{s: ns, next: nextDone})
	}
	return out, nil
}

func (t *tracer) verdict(v Verdict, s state) []branch {
	switch v.Kind {
	case Accept:
		s.end = endAccept
		return []branch{{s: s, next: nextDone}}
	case Drop:
		s.end = endDrop
		return []branch{{s: s, next: nextDone}}
	case Return:
		return []branch{{s: s, next: nextReturn}}
	case Jump:
		return []branch{{s: s, next: nextJump, chain: v.Chain}}
	}
	return []branch{{s: s, next: nextGoto, chain: v.Chain}}
}

func (t *tracer) key(set string, ops []Operand, s state) (string, error) {
	ds := make([]Datum, len(ops))
	for i, o := range ops {
		d, err := t.value(o, s)
		if err != nil {
			return "", err
		}
		ds[i] = d
	}
	return Element{Set: set, Key: ds}.ID(), nil
}

func (t *tracer) value(o Operand, s state) (Datum, error) {
	if o.Const != nil {
		return *o.Const, nil
	}
	if o.Mask != nil {
		d, err := t.value(F(o.Field), s)
		if err != nil {
			return Datum{}, err
		}
		for i := range d.n {
			d.b[i] &= o.Mask.b[i]
		}
		return d, nil
	}
	switch o.Field {
	case FieldIPSaddr, FieldIP6Saddr:
		return IP(s.pkt.Src), nil
	case FieldIPDaddr, FieldIP6Daddr:
		return IP(s.pkt.Dst), nil
	case FieldL4Proto:
		return Proto(s.pkt.Proto), nil
	case FieldThDport:
		return Port(s.pkt.DPort), nil
	case FieldMark:
		return Mark(s.mark), nil
	case FieldCtProtocol:
		return Proto(s.pkt.Proto), nil
	case FieldCtOrigDaddr, FieldCtOrigDaddr6:
		return IP(s.pkt.Dst), nil // the nat hooks see the packet as the client sent it
	case FieldCtOrigProtoDst:
		return Port(s.pkt.DPort), nil
	case FieldCtReplyProtoSrc:
		if s.dnat.IsValid() {
			return Port(s.dnat.Port()), nil
		}
		return Port(s.pkt.DPort), nil
	}
	return Datum{}, fmt.Errorf("trace: field %v not supported", o.Field)
}

// AffinityEntry returns the dynamic-set ID a lookup with these values would test, so
// tests and tools can seed Affinity.
func AffinityEntry(set string, key ...Datum) string { return Element{Set: set, Key: key}.ID() }
