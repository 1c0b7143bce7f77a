package nft

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// TestGenerateFuzzCorpus captures real kernel dump messages (sets, elements, chains,
// rules of the sample table plus foreign objects, and an entry of a dynamic map as
// traffic leaves it, with its expiry) as the seed corpora of the decoder
// fuzz targets. Run it once as root with SVCPROXY_FUZZ_CORPUS=1 and commit the files.
func TestGenerateFuzzCorpus(t *testing.T) {
	if os.Getenv("SVCPROXY_FUZZ_CORPUS") == "" {
		t.Skip("writes testdata/fuzz: set SVCPROXY_FUZZ_CORPUS=1 to regenerate the seed corpora")
	}
	ns := netnstest.New(t, "corpus")
	k := &Netlink{NetNSFd: ns.Fd}
	if err := k.Apply(context.Background(), PlanFull(sampleRuleset(), NewView())); err != nil {
		t.Fatal(err)
	}
	script := `add set ip sample foreign { type ether_addr; elements = { 00:11:22:33:44:55 } }
add map ip sample fmap { type ipv4_addr : ether_addr; elements = { 1.2.3.4 : 00:11:22:33:44:55 } }
add set ip sample fnets { type ipv4_addr; flags interval; elements = { 10.0.0.0/8 } }
add chain ip sample fbase { type filter hook input priority 0; policy drop; }
add rule ip sample services ip saddr { 1.1.1.1, 2.2.2.2 } counter drop comment "foreign"
add element ip sample dispatch { * : drop }
add element ip sample affinity { 10.244.2.9 . 10.96.0.10 . tcp . 80 timeout 1m : 10.244.1.2 . 8080 }`
	ns.MustRun(t, "sh", "-c", `printf '%s\n' "$0" | nft -f -`, script)
	addRawRule(t, ns, "sample", "svc-b", []byte{byte(ruleHashType), 0xff, 1, 2})

	// The ip6 twin, with an IPv6 affinity entry as traffic leaves one: the seeds
	// named kernel6-*.
	if err := k.Apply(context.Background(), PlanFull(sampleRuleset6(), NewView())); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "nft", "add element ip6 sample affinity { fd00:10:244:2::9 . fd00:10:96::12 . tcp . 80 timeout 1m : fd00:10:244:1::2 . 8080 }")
	capture(t, ns, FamilyIPv4, "kernel")
	capture(t, ns, FamilyIPv6, "kernel6")
}

// capture writes the dumps of table "sample" of family as seeds named prefix-*.
func capture(t *testing.T, ns *netnstest.NS, family Family, prefix string) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.Fd})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dump := func(typ int, attrs ...netlink.Attribute) [][]byte {
		msgs, err := nlkit.Dump(conn, typ, uint8(family), attrs)
		if err != nil {
			t.Fatalf("dump %d: %v", typ, err)
		}
		var out [][]byte
		for _, m := range msgs {
			out = append(out, m.Data)
		}
		return out
	}
	str := func(typ uint16, s string) netlink.Attribute {
		return netlink.Attribute{Type: typ, Data: []byte(s + "\x00")}
	}
	write := func(target, name string, args ...[]byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		text := "go test fuzz v1\n"
		for _, a := range args {
			text += fmt.Sprintf("[]byte(%q)\n", a)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, set := range dump(unix.NFT_MSG_GETSET, str(unix.NFTA_SET_TABLE, "sample")) {
		write("FuzzDecodeSet", fmt.Sprintf("%s-%02d", prefix, i), set)
		_, s, _, _ := decodeSet(set)
		for j, el := range dump(unix.NFT_MSG_GETSETELEM, str(unix.NFTA_SET_ELEM_LIST_TABLE, "sample"), str(unix.NFTA_SET_ELEM_LIST_SET, s.Name)) {
			write("FuzzDecodeElements", fmt.Sprintf("%s-%02d-%02d", prefix, i, j), set, el)
		}
	}
	for i, ch := range dump(unix.NFT_MSG_GETCHAIN, str(unix.NFTA_CHAIN_TABLE, "sample")) {
		write("FuzzDecodeChain", fmt.Sprintf("%s-%02d", prefix, i), ch)
		_, name, _, _ := decodeChain(ch)
		for j, r := range dump(unix.NFT_MSG_GETRULE, str(unix.NFTA_RULE_TABLE, "sample"), str(unix.NFTA_RULE_CHAIN, name)) {
			write("FuzzDecodeRule", fmt.Sprintf("%s-%02d-%02d", prefix, i, j), r)
			if ud := ruleUserDataOf(r); ud != nil {
				write("FuzzRuleUserData", fmt.Sprintf("%s-%02d-%02d", prefix, i, j), ud)
			}
		}
	}
}

func ruleUserDataOf(msg []byte) []byte {
	ad, err := nlkit.Msg(msg)
	if err != nil {
		return nil
	}
	var ud []byte
	for ad.Next() {
		if ad.Type() == unix.NFTA_RULE_USERDATA {
			ud = ad.Bytes()
		}
	}
	return ud
}
