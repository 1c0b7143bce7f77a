// Package nft models one nftables table as plain Go values that print exactly as
// `nft list table` prints them, diffs two such values into a transaction, and applies
// transactions to the kernel over netlink. It knows nothing of Kubernetes.
package nft

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Family is an nftables address family. Only the families svcproxy uses are modelled.
type Family byte

const (
	FamilyIPv4 Family = 2  // "ip" (NFPROTO_IPV4)
	FamilyIPv6 Family = 10 // "ip6" (NFPROTO_IPV6)
)

func (f Family) String() string {
	switch f {
	case FamilyIPv4:
		return "ip"
	case FamilyIPv6:
		return "ip6"
	}
	return fmt.Sprintf("family(%d)", byte(f))
}

// Set is a named set or map. Elements are not part of the definition: they live in
// Element values so that they can be diffed one by one.
type Set struct {
	Name string
	Key  []DataType
	// Data is the element data type of a data map; nil for a plain set or a verdict map.
	Data []DataType
	// Verdict marks a verdict map ("type ... : verdict").
	Verdict bool
	// Dynamic sets are filled by the kernel (update @set); their elements are never diffed.
	Dynamic bool
	// Timeout enables per-element timeouts ("flags timeout").
	Timeout bool
	// Size bounds a dynamic set; 0 leaves the kernel default.
	Size uint32
	// KeyExpr and DataExpr, when set, name the expressions the key and the data
	// are taken from (fields and numgen, no constants): the set is declared
	// "typeof ip daddr . numgen random mod 65536 : ..." as nft declares it, so that
	// nft can type what it prints and `nft list` output loads back with `nft -f`.
	// Their types must be Key and Data. They are metadata: the kernel does not
	// compare them, and neither does Compatible.
	KeyExpr, DataExpr []Operand
}

// IsMap reports whether elements carry a value.
func (s *Set) IsMap() bool { return s.Verdict || len(s.Data) > 0 }

// ChainHook describes a base chain.
type ChainHook struct {
	Type     string // "nat" or "filter"
	Hook     string // "prerouting", "input", "forward", "output", "postrouting"
	Priority int32
}

// Chain is a chain with its rules. Base chains have a Hook and policy accept.
type Chain struct {
	Name  string
	Hook  *ChainHook
	Rules []Rule
}

// Rule is a list of statements, evaluated left to right, plus an optional comment.
type Rule struct {
	Stmts   []Stmt
	Comment string
}

// VerdictKind is what a verdict does.
type VerdictKind int

const (
	Accept VerdictKind = iota
	Drop
	Return
	Jump
	Goto
)

// Verdict is a verdict statement or a verdict map's element value.
type Verdict struct {
	Kind  VerdictKind
	Chain string // for Jump and Goto
}

// Element is one element of a set or map.
type Element struct {
	Set     string
	Key     []Datum
	Data    []Datum  // data maps
	Verdict *Verdict // verdict maps
	// Timeout, when non-zero, is the element's own timeout (sets with flags timeout).
	Timeout time.Duration
	// Comment names what the element is for (nft shows it).
	Comment string
}

// ID identifies the element within its table: its set's code (setcode.go) and
// its key bytes. It is built in one allocation: every element rendered computes it.
func (e Element) ID() string {
	var b strings.Builder
	b.Grow(idPrefixLen(e.Set) + concatLen(e.Key))
	writeIDPrefix(&b, e.Set)
	writeConcat(&b, e.Key)
	return b.String()
}

// clone is e with its own Key and Data: a renderer may reuse the memory of the
// elements it handed over (Fragment.Reset), so what the ruleset keeps of one is
// a copy.
func (e Element) clone() Element {
	e.Key, e.Data = slices.Clone(e.Key), slices.Clone(e.Data)
	return e
}
