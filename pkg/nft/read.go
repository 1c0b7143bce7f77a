package nft

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// Read returns what the kernel holds in the table. Each rule is read as the hash in
// its user data (which rule svcproxy wrote) and the digest of its expressions (what
// the rule does, ruledigest.go): a rule someone else added shows up as a hash we
// never render, and a rule replaced by another that carries our user data as a
// digest that differs from the rendered rule's; either makes its chain differ and
// get repaired. Every message is decoded by the
// bounds-checked decoders of decode.go, never by google/nftables: whatever another
// program put in the table, Read returns a view (objects svcproxy cannot represent
// come back as definitions that equal nothing desired) or an error, never a panic.
func (n *Netlink) Read(ctx context.Context, family Family, table string) (*View, error) {
	return n.read(ctx, family, table, nil)
}

// ReadParts is Read of the named parts only (see Parts): the table's existence and
// flags, the named chains with their rules, the named sets with their elements. A
// named part missing from the kernel is missing from the view; other parts are
// not read. It costs what the named parts hold, not what the table holds.
func (n *Netlink) ReadParts(ctx context.Context, family Family, table string, p Parts) (*View, error) {
	return n.read(ctx, family, table, &p)
}

// read is Read, or ReadParts of *p when p is not nil.
func (n *Netlink) read(ctx context.Context, family Family, table string, p *Parts) (v *View, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("read table %s %s: decoder panic: %v", family, table, r)
		}
	}()
	// On the shared socket, whose buffers are large enough for the many dump
	// messages of a large table (see Netlink.batch for why it stays open).
	v = NewView()
	if err := n.withConn(func(conn *netlink.Conn) error { return readInto(conn, family, table, v, p) }); err != nil {
		return nil, err
	}
	return v, nil
}

// readInto reads the table into v: all of it, or when p is not nil the parts p
// names.
func readInto(conn *netlink.Conn, family Family, table string, v *View, p *Parts) error {
	flags, exists, err := readTable(conn, family, table)
	if err != nil || !exists {
		return err
	}
	v.TableExists, v.TableFlags = true, flags
	wantSet, wantChain := func(string) bool { return true }, func(string) bool { return true }
	if p != nil {
		wantSet = func(name string) bool { return p.Sets[name] }
		wantChain = func(name string) bool { return p.Chains[name] }
	}
	if p == nil || len(p.Sets) > 0 {
		if err := readSets(conn, family, table, v, wantSet); err != nil {
			return err
		}
	}
	if p != nil && len(p.Chains) == 0 {
		return nil
	}
	if err := readChains(conn, family, table, v, wantChain); err != nil {
		return err
	}
	for _, name := range sortedKeys(v.Chains) {
		hashes, digests, err := readRules(conn, family, table, name)
		if err != nil {
			return err
		}
		cv := v.Chains[name]
		cv.Rules, cv.Exprs = hashes, digests
		v.Chains[name] = cv
	}
	return nil
}

// readTable asks for the table by name: its flags, or exists false when it is missing.
func readTable(conn *netlink.Conn, family Family, table string) (flags uint32, exists bool, err error) {
	data, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_TABLE_NAME, Data: []byte(table + "\x00")}})
	if err != nil {
		return 0, false, err
	}
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{Type: nlkit.NftType(unix.NFT_MSG_GETTABLE), Flags: netlink.Request},
		Data:   append(nlkit.NfGenMsg(uint8(family)), data...),
	})
	if errors.Is(err, unix.ENOENT) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("get table %s %s: %w", family, table, err)
	}
	for _, m := range msgs {
		ad, err := nlkit.Msg(m.Data)
		if err != nil {
			continue
		}
		for ad.Next() {
			if ad.Type() == unix.NFTA_TABLE_FLAGS {
				flags = ad.Uint32()
			}
		}
		if err := ad.Err(); err != nil {
			return 0, false, fmt.Errorf("decode table %s: %w", table, err)
		}
	}
	return flags, true, nil
}

// readSets reads the set definitions and the elements of the non-dynamic ones. A set
// svcproxy cannot represent, or one holding an element it cannot represent, is kept
// as a definition without key type and without elements: drift that the plan
// deletes, or that makes Compatible ask for a recreate if the name is one of ours.
// Only the sets whose name want accepts are kept (their definitions are few; their
// elements are what costs).
func readSets(conn *netlink.Conn, family Family, table string, v *View, want func(string) bool) error {
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETSET, uint8(family), []netlink.Attribute{{Type: unix.NFTA_SET_TABLE, Data: []byte(table + "\x00")}})
	if err != nil {
		return fmt.Errorf("dump sets of %s: %w", table, err)
	}
	for _, m := range msgs {
		tbl, s, anonymous, err := decodeSet(m.Data)
		switch {
		case errors.Is(err, errForeign):
		case err != nil:
			return err
		}
		if tbl != table || anonymous || s.Name == "" || !want(s.Name) {
			continue // anonymous sets belong to a rule and go away with it
		}
		v.Sets[s.Name] = s
		if err != nil || s.Dynamic {
			continue
		}
		elems, err := readElements(conn, family, table, s)
		if errors.Is(err, errForeign) {
			v.Sets[s.Name] = &Set{Name: s.Name}
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range elems {
			v.Elements[e.ID()] = valueHash(e)
		}
	}
	return nil
}

func readElements(conn *netlink.Conn, family Family, table string, s *Set) ([]Element, error) {
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETSETELEM, uint8(family), []netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(s.Name + "\x00")},
	})
	if err != nil {
		return nil, fmt.Errorf("list elements of %s: %w", s.Name, err)
	}
	var out []Element
	for _, m := range msgs {
		tbl, set, elems, err := decodeElements(s, m.Data)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		if tbl == table && set == s.Name {
			out = append(out, elems...)
		}
	}
	return out, nil
}

// readChains reads the chains of the table (the kernel dumps every table's chains;
// other tables' are skipped unread), those whose name want accepts.
func readChains(conn *netlink.Conn, family Family, table string, v *View, want func(string) bool) error {
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETCHAIN, uint8(family), []netlink.Attribute{{Type: unix.NFTA_CHAIN_TABLE, Data: []byte(table + "\x00")}})
	if err != nil {
		return fmt.Errorf("list chains: %w", err)
	}
	for _, m := range msgs {
		tbl, name, cv, err := decodeChain(m.Data)
		if err != nil {
			return err
		}
		if tbl == table && name != "" && want(name) {
			v.Chains[name] = cv
		}
	}
	return nil
}

// readRules reads the rules of one chain: the hash from each one's user data and
// the digest of its expressions. It asks chain by chain: a table-wide dump is
// resumed every 32 KiB by re-walking the table from the start, which at 100k
// rules took seconds.
func readRules(conn *netlink.Conn, family Family, table, chain string) (hashes, digests []uint64, err error) {
	msgs, err := nlkit.Dump(conn, unix.NFT_MSG_GETRULE, uint8(family), []netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_RULE_CHAIN, Data: []byte(chain + "\x00")},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dump rules of chain %s: %w", chain, err)
	}
	// Never nil, even for an empty chain: a nil Exprs means a view recorded from
	// our own commit (ChainView).
	hashes, digests = []uint64{}, []uint64{}
	for _, m := range msgs {
		tbl, ch, hash, digest, err := decodeRule(m.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("chain %s: %w", chain, err)
		}
		if tbl == table && ch == chain {
			hashes, digests = append(hashes, hash), append(digests, digest)
		}
	}
	return hashes, digests, nil
}

// Generation returns the netns' nftables ruleset generation, which every committed
// transaction (anyone's) increments.
func (n *Netlink) Generation(ctx context.Context) (uint32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// On the transaction socket: every sync reads the generation right after its
	// commit, and a socket of its own would pay the grace period its close waits for
	// (see Netlink.batch).
	var msgs []netlink.Message
	err := n.withConn(func(conn *netlink.Conn) (err error) {
		msgs, err = conn.Execute(netlink.Message{
			Header: netlink.Header{Type: nlkit.NftType(unix.NFT_MSG_GETGEN), Flags: netlink.Request},
			Data:   nlkit.NfGenMsg(unix.AF_UNSPEC),
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("get nftables generation: %w", err)
	}
	for _, m := range msgs {
		if gen, ok := generationOf(m.Data); ok {
			return gen, nil
		}
	}
	return 0, errors.New("get nftables generation: no NFTA_GEN_ID in reply")
}

// DeleteTable removes the table and everything in it by name, without reading or
// decoding anything in it (so that --cleanup works on any table, however damaged); a
// missing table is not an error.
func (n *Netlink) DeleteTable(ctx context.Context, family Family, table string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := n.conn()
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamily(family), Name: table})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete table %s %s: %w", family, table, err)
	}
	return nil
}
