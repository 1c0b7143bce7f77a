package proxy

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netnstest"
	"github.com/svcproxy/svcproxy/internal/poll"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

// holdTable swaps our table for an empty one of the same name that a socket of its
// own owns, in one transaction, as a hostile or careless program could: from then on
// every transaction of ours on the table fails with EPERM. release closes that
// socket, and the kernel deletes its table.
func holdTable(t *testing.T, ns *netnstest.NS) (release func()) {
	t.Helper()
	return holdTableOf(t, ns, nft.FamilyIPv4)
}

// holdTableOf is holdTable for our table of family (ip or ip6).
func holdTableOf(t *testing.T, ns *netnstest.NS, family nft.Family) (release func()) {
	t.Helper()
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.Fd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	name := netlink.NewAttributeEncoder()
	name.String(unix.NFTA_TABLE_NAME, TableName)
	del, err := name.Encode()
	if err != nil {
		t.Fatal(err)
	}
	add := netlink.NewAttributeEncoder()
	add.String(unix.NFTA_TABLE_NAME, TableName)
	add.Bytes(unix.NFTA_TABLE_FLAGS, binary.BigEndian.AppendUint32(nil, nft.TableFlagOwner))
	owned, err := add.Encode()
	if err != nil {
		t.Fatal(err)
	}
	gen := func(typ int, flags netlink.HeaderFlags, family byte, resID byte, attrs []byte) netlink.Message {
		return netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(typ), Flags: netlink.Request | flags},
			Data:   append([]byte{family, unix.NFNETLINK_V0, 0, resID}, attrs...),
		}
	}
	nftMsg := func(m int) int { return unix.NFNL_SUBSYS_NFTABLES<<8 | m }
	msgs := []netlink.Message{
		gen(unix.NFNL_MSG_BATCH_BEGIN, 0, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil),
		gen(nftMsg(unix.NFT_MSG_DELTABLE), netlink.Acknowledge, byte(family), 0, del),
		gen(nftMsg(unix.NFT_MSG_NEWTABLE), netlink.Acknowledge|netlink.Create|netlink.Excl, byte(family), 0, owned),
		gen(unix.NFNL_MSG_BATCH_END, 0, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil),
	}
	if _, err := conn.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the acknowledgements of the two table messages
		if _, err := conn.Receive(); err != nil {
			t.Fatalf("swap our table for an owned one: %v", err)
		}
	}
	if out := ns.MustRun(t, "nft", "list", "table", family.String(), TableName); !strings.Contains(out, "flags owner") {
		t.Fatalf("the table is not owned:\n%s", out)
	}
	return func() { conn.Close() }
}

// TestKernelHealthFailsWhileTheKernelRefusesOurTable: the case. Nothing in
// the cluster changes, so kube-proxy's rule (a queued change waiting past the
// timeout) never fires; yet every resync fails and no Service works. Health must go
// 503 on /healthz and /livez once that has lasted the timeout, and 200 again once a
// sync succeeds.
func TestKernelHealthFailsWhileTheKernelRefusesOurTable(t *testing.T) {
	const timeout = 2 * time.Second
	e := newKenv(t)
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	m := NewMetrics(nil)
	h := &Health{Timeout: timeout, Metrics: m}
	p := New(Config{Tracker: e.tr, Kernel: e.kernel, Metrics: m, Health: h, Options: e.p.cfg.Options,
		SyncPeriod: 200 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	runProxy(t, p)
	serves := func() (bool, string) {
		body, err := e.client.Get("10.96.0.10:80", time.Second)
		return err == nil && body == "pod1", fmt.Sprintf("answer %q, %v", body, err)
	}
	poll.Eventually(t, 10*time.Second, "the Service", serves)

	type answer struct {
		code int
		body healthJSON
	}
	get := func(path string) answer {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var b healthJSON
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("%s: %v: %s", path, err, rec.Body)
		}
		return answer{rec.Code, b}
	}
	healthIs := func(code int) func() (bool, string) {
		return func() (bool, string) {
			hz, lz := get("/healthz"), get("/livez")
			ok := hz.code == code && lz.code == code
			for _, a := range []answer{hz, lz} {
				ok = ok && a.body.Healthy == (code == 200) && a.body.Status["IPv4"].Healthy == (code == 200)
			}
			return ok, fmt.Sprintf("/healthz %d %+v, /livez %d %+v", hz.code, hz.body, lz.code, lz.body)
		}
	}
	poll.Eventually(t, 5*time.Second, "healthy while the kernel holds our rules", healthIs(200))

	held := time.Now()
	release := holdTable(t, e.w.Node)
	if ok, _ := serves(); ok {
		t.Fatal("the Service still works without our table")
	}
	poll.Eventually(t, timeout+5*time.Second, "503 once the kernel has refused our table for the timeout", healthIs(503))
	if took := time.Since(held); took < timeout {
		t.Fatalf("503 %v after the table was taken, before the timeout of %v", took, timeout)
	} else {
		t.Logf("503 %v after the table was taken (timeout %v)", took.Round(time.Millisecond), timeout)
	}
	if n := testutil.ToFloat64(m.SyncFailures); n < 1 {
		t.Fatalf("sync failures = %v while the table is held", n)
	}

	release()
	poll.Eventually(t, 10*time.Second, "the Service once the table is free again", serves)
	poll.Eventually(t, 5*time.Second, "healthy again after a successful sync", healthIs(200))
}

// TestKernelSyncsOnceOurTableIsReleased: the kernel deletes a held table without a
// notification when its owner lets go, and the failed syncs' retry has backed off by
// then (to 6.4 s here, up to 30 s by default); the Service must come back within a
// second or two of the release, not at the next retry.
func TestKernelSyncsOnceOurTableIsReleased(t *testing.T) {
	e := newKenv(t)
	addWeb(e.tr, "web", "10.96.0.10", "pod1")
	m := NewMetrics(nil)
	p := New(Config{Tracker: e.tr, Kernel: e.kernel, Metrics: m, Options: e.p.cfg.Options,
		SyncPeriod: time.Hour, MaxBackoff: time.Minute})
	runProxy(t, p)
	serves := func() (bool, string) {
		body, err := e.client.Get("10.96.0.10:80", time.Second)
		return err == nil && body == "pod1", fmt.Sprintf("answer %q, %v", body, err)
	}
	poll.Eventually(t, 10*time.Second, "the Service", serves)

	release := holdTable(t, e.w.Node)
	// A change makes the loop sync, fail and back off: 0.1, 0.2, 0.4, ... 6.4 s.
	addWeb(e.tr, "other", "10.96.0.11", "pod2")
	p.Trigger() // e.tr tells e.p of its changes, not p
	poll.Eventually(t, 10*time.Second, "a failed sync", func() (bool, string) {
		n := testutil.ToFloat64(m.SyncFailures)
		return n >= 1, fmt.Sprintf("%v sync failures", n)
	})
	time.Sleep(8 * time.Second)
	if n := testutil.ToFloat64(m.SyncFailures); n < 5 {
		t.Fatalf("%v sync failures in 8 s while the table is held, want the retries backing off", n)
	}
	released := time.Now()
	release()
	poll.Eventually(t, 10*time.Second, "the Service once the table is free again", serves)
	if took := time.Since(released); took > 2*time.Second {
		t.Fatalf("the Service came back %v after the table was released, want within 2 s", took.Round(time.Millisecond))
	} else {
		t.Logf("the Service came back %v after the table was released", took.Round(time.Millisecond))
	}
}
