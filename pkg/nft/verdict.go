package nft

import "github.com/google/nftables/expr"

func verdictFromExpr(k expr.VerdictKind, chain string) *Verdict {
	switch k {
	case expr.VerdictDrop:
		return &Verdict{Kind: Drop}
	case expr.VerdictReturn:
		return &Verdict{Kind: Return}
	case expr.VerdictJump:
		return &Verdict{Kind: Jump, Chain: chain}
	case expr.VerdictGoto:
		return &Verdict{Kind: Goto, Chain: chain}
	}
	return &Verdict{Kind: Accept}
}
