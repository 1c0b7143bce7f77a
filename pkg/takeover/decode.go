package takeover

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// The decoders below read the kernel's chain and rule dump messages of iptables-nft's
// tables. They are pure and bounds-checked, and never panic whatever the bytes: the
// tables are other programs' (iptables-nft, Docker, CNI plugins) and hold expressions
// svcproxy never writes (xtables matches and targets). Of a rule only the verdicts of
// its immediate expressions are read: that is how iptables-nft encodes `-j CHAIN` and
// `-g CHAIN`, and all the plan needs.

// decodeChainMsg returns the table and name of an NFT_MSG_NEWCHAIN message, and
// whether the chain is a base chain (attached to a hook).
func decodeChainMsg(data []byte) (table, name string, base bool, err error) {
	ad, err := nlkit.Msg(data)
	if err != nil {
		return "", "", false, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_CHAIN_TABLE:
			table = nlkit.CString(ad.Bytes())
		case unix.NFTA_CHAIN_NAME:
			name = nlkit.CString(ad.Bytes())
		case unix.NFTA_CHAIN_HOOK:
			base = true
		}
	}
	if err := ad.Err(); err != nil {
		return "", "", false, fmt.Errorf("decode chain: %w", err)
	}
	return table, name, base, nil
}

// decodeRuleMsg returns the table, chain and handle of an NFT_MSG_NEWRULE message, and
// the chains its immediate verdicts jump or go to.
func decodeRuleMsg(data []byte) (table, chain string, r ruleInfo, err error) {
	ad, err := nlkit.Msg(data)
	if err != nil {
		return "", "", ruleInfo{}, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_TABLE:
			table = nlkit.CString(ad.Bytes())
		case unix.NFTA_RULE_CHAIN:
			chain = nlkit.CString(ad.Bytes())
		case unix.NFTA_RULE_HANDLE:
			r.Handle = ad.Uint64()
		case unix.NFTA_RULE_EXPRESSIONS:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				for nd.Next() {
					if nd.Type() != unix.NFTA_LIST_ELEM {
						continue
					}
					target, err := decodeExprTarget(nd.Bytes())
					if err != nil {
						return err
					}
					if target != "" {
						r.Targets = append(r.Targets, target)
					}
				}
				return nd.Err()
			})
		}
	}
	if err := ad.Err(); err != nil {
		return "", "", ruleInfo{}, fmt.Errorf("decode rule: %w", err)
	}
	return table, chain, r, nil
}

// decodeExprTarget returns the chain an expression jumps or goes to: the verdict of an
// immediate expression into the verdict register; "" for any other expression.
func decodeExprTarget(b []byte) (string, error) {
	ad, err := nlkit.Nested(b)
	if err != nil {
		return "", err
	}
	var name string
	var data []byte
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_EXPR_NAME:
			name = nlkit.CString(ad.Bytes())
		case unix.NFTA_EXPR_DATA:
			data = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return "", fmt.Errorf("decode expression: %w", err)
	}
	if name != "immediate" || data == nil {
		return "", nil
	}
	return decodeImmediateTarget(data)
}

func decodeImmediateTarget(b []byte) (string, error) {
	ad, err := nlkit.Nested(b)
	if err != nil {
		return "", err
	}
	dreg := uint32(1) // not the verdict register unless the message says so
	var target string
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_IMMEDIATE_DREG:
			dreg = ad.Uint32()
		case unix.NFTA_IMMEDIATE_DATA:
			ad.Nested(func(data *netlink.AttributeDecoder) error {
				data.ByteOrder = binary.BigEndian
				for data.Next() {
					if data.Type() != unix.NFTA_DATA_VERDICT {
						continue
					}
					data.Nested(func(v *netlink.AttributeDecoder) error {
						v.ByteOrder = binary.BigEndian
						var code int32
						var chain string
						for v.Next() {
							switch v.Type() {
							case unix.NFTA_VERDICT_CODE:
								code = int32(v.Uint32())
							case unix.NFTA_VERDICT_CHAIN:
								chain = nlkit.CString(v.Bytes())
							}
						}
						if code == unix.NFT_JUMP || code == unix.NFT_GOTO {
							target = chain
						}
						return v.Err()
					})
				}
				return data.Err()
			})
		}
	}
	if err := ad.Err(); err != nil {
		return "", fmt.Errorf("decode immediate: %w", err)
	}
	if dreg != unix.NFT_REG_VERDICT {
		return "", nil
	}
	return target, nil
}
