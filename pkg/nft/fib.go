package nft

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// FibLocal asks the routing table whether an address of the packet is one of this
// host's: "fib daddr type local", "fib saddr type != local". It is how a rule serves
// every local address (NodePorts) without a set of addresses to keep up to date.
type FibLocal struct {
	Saddr  bool // the source address; else the destination
	Negate bool
}

func (f FibLocal) String() string {
	which, op := "daddr", ""
	if f.Saddr {
		which = "saddr"
	}
	if f.Negate {
		op = "!= "
	}
	return fmt.Sprintf("fib %s type %slocal", which, op)
}

// rtnLocal is RTN_LOCAL, the address type fib returns for the host's own addresses.
const rtnLocal = 2

func (f FibLocal) exprs(*encCtx) []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: unix.NFT_REG_1, ResultADDRTYPE: true, FlagSADDR: f.Saddr, FlagDADDR: !f.Saddr},
		&expr.Cmp{Op: cmpOp(f.Negate), Register: unix.NFT_REG_1, Data: binary.NativeEndian.AppendUint32(nil, rtnLocal)},
	}
}

// CtStateInvalid matches packets conntrack could not place in a connection: "ct
// state invalid".
type CtStateInvalid struct{}

func (CtStateInvalid) String() string { return "ct state invalid" }

func (CtStateInvalid) exprs(*encCtx) []expr.Any {
	bit := binary.NativeEndian.AppendUint32(nil, 1<<0) // NF_CT_STATE_INVALID_BIT
	return []expr.Any{
		&expr.Ct{Register: unix.NFT_REG_1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: unix.NFT_REG_1, DestRegister: unix.NFT_REG_1, Len: 4, Mask: bit, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: unix.NFT_REG_1, Data: make([]byte, 4)},
	}
}
