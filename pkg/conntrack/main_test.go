package conntrack

import (
	"os"
	"testing"

	"github.com/svcproxy/svcproxy/internal/netnstest"
)

func TestMain(m *testing.M) {
	netnstest.ServeEchoIfAsked()
	os.Exit(m.Run())
}
