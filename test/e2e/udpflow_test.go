//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/svcproxy/svcproxy/internal/poll"
)

// udpDialer opens connected UDP sockets from a client's namespace: a pod
// client, a node or the outside.
type udpDialer interface {
	udpConn(addr string) (net.Conn, error)
}

// udpAnsweredBy returns a connected UDP socket from cl to addr once pod has
// answered on it (a fresh socket per attempt, so that no attempt before the
// rules were in place leaves its conntrack entry behind).
func udpAnsweredBy(t *testing.T, cl udpDialer, addr, pod string) net.Conn {
	t.Helper()
	var conn net.Conn
	poll.Eventually(t, 30*time.Second, "UDP round trip to "+addr, func() (bool, string) {
		cn, err := cl.udpConn(addr)
		if err != nil {
			return false, err.Error()
		}
		got, err := udpAsk(cn, 300*time.Millisecond)
		if err != nil || got != pod {
			cn.Close()
			return false, fmt.Sprintf("%q %v", got, err)
		}
		conn = cn
		return true, ""
	})
	return conn
}

// awaitOtherAnswer asks on conn until a pod other than old answers (a stale
// conntrack entry towards old would black-hole the socket).
func awaitOtherAnswer(t *testing.T, conn net.Conn, old string) {
	t.Helper()
	var answers []string
	poll.Eventually(t, 45*time.Second, "same UDP socket answered by the replacement", func() (bool, string) {
		got, err := udpAsk(conn, 200*time.Millisecond)
		if err == nil && (len(answers) == 0 || answers[len(answers)-1] != got) {
			answers = append(answers, got)
		}
		return err == nil && got != old, fmt.Sprintf("%q %v (answers so far %v)", got, err, answers)
	})
}
