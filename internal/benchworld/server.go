package benchworld

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/svcproxy/svcproxy/internal/netns"
)

// addrServer answers every TCP connection with the address the client reached it
// on (the endpoint a proxy chose) and a newline, then closes it.
type addrServer struct {
	l    net.Listener
	wg   sync.WaitGroup
	once sync.Once
}

// serveAddrs listens on network ("tcp4", "tcp6": one family per server) at addr in
// namespace ns.
func serveAddrs(ns, network, addr string) (*addrServer, error) {
	l, err := netns.Listen(ns, network, addr)
	if err != nil {
		return nil, err
	}
	s := &addrServer{l: l}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(time.Millisecond) // EMFILE and the like: let conns close
				continue
			}
			go func() {
				_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
				host, _, _ := net.SplitHostPort(c.LocalAddr().String())
				_, _ = c.Write([]byte(host + "\n"))
				c.Close()
			}()
		}
	}()
	return s, nil
}

func (s *addrServer) close() {
	s.once.Do(func() {
		s.l.Close()
		s.wg.Wait()
	})
}
