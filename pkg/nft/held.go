package nft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// TableFlagOwner is NFT_TABLE_F_OWNER (Linux 5.12): only the socket that created the
// table may change it, and the table goes when that socket closes. x/sys/unix does
// not define it.
const TableFlagOwner = 0x2

// TableHeld reports whether `family table` exists with the owner flag. svcproxy
// never sets it on its tables, so another program's socket holds the table: every
// transaction of ours on it fails until that socket closes, and the kernel then
// deletes the table without a notification (no NFNLGRP_NFTABLES message, no new
// generation), so only asking tells when it is free again.
func (n *Netlink) TableHeld(ctx context.Context, family Family, table string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c, err := n.conn()
	if err != nil {
		return false, fmt.Errorf("table %s %s: %w", family, table, err)
	}
	t, err := c.ListTableOfFamily(table, nftables.TableFamily(family))
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("table %s %s: %w", family, table, err)
	}
	return wireFlags(t.Flags)&TableFlagOwner != 0, nil
}

// wireFlags undoes google/nftables' decoding of NFTA_TABLE_FLAGS: tableFromMsg
// reads the big-endian attribute in the host's byte order (its AttributeDecoder
// keeps the native default), so the owner flag 0x2 arrives as 0x02000000 here.
func wireFlags(decoded uint32) uint32 {
	return binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, decoded))
}
