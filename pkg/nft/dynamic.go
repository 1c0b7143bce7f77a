package nft

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// Dynamic sets and maps are filled by the kernel (update @set), so they are not part
// of the desired ruleset nor of the View; DynamicElements and DestroyElements let a
// caller read and prune them.

// nftMsgDestroySetElem is NFT_MSG_DESTROYSETELEM (Linux 6.3): delete elements,
// ignoring those already gone. x/sys/unix does not define it.
const nftMsgDestroySetElem = 30

// DynamicElements returns the elements the kernel holds in the dynamic set s of the
// table (s is the set's definition, used to decode them).
func (n *Netlink) DynamicElements(ctx context.Context, family Family, table string, s *Set) ([]Element, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Element
	err := n.withConn(func(conn *netlink.Conn) (err error) {
		out, err = readElements(conn, family, table, s)
		return err
	})
	return out, err
}

// DestroyElements deletes elements from sets of the table in one transaction. It
// asks the kernel to destroy them (elements that expired meanwhile are no error);
// where the kernel does not know that message (before Linux 6.3) it deletes them,
// and then an element that expired since the caller saw it makes the whole
// transaction fail with ENOENT: the caller reads again and retries.
func (n *Netlink) DestroyElements(ctx context.Context, family Family, table string, elems []Element) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(elems) == 0 {
		return nil
	}
	err := n.deleteElements(family, table, elems, true)
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	if derr := n.deleteElements(family, table, elems, false); derr != nil {
		return fmt.Errorf("delete elements (destroy refused: %v): %w", err, derr)
	}
	return nil
}

func (n *Netlink) deleteElements(family Family, table string, elems []Element, destroy bool) error {
	msgs := framed(appendElementMessages(nil, family, table, elems, false))
	if destroy {
		for i := range msgs {
			if int(msgs[i].Header.Type)&0xff == unix.NFT_MSG_DELSETELEM {
				msgs[i].Header.Type = nlkit.NftType(nftMsgDestroySetElem)
			}
		}
	}
	return n.sendBatch(&Tx{Family: family, Table: table, DelElements: elems}, msgs)
}
