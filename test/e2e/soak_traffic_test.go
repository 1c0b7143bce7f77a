//go:build e2e

package e2e

import (
	"context"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// soakReq is one request of the soak's load.
type soakReq struct {
	caller     *soakCaller
	tg         soakTarget
	start, end time.Time
	err        error
	pod        string // who answered (sticky targets only)
}

// brokenConn is a long-lived connection that died.
type brokenConn struct {
	caller        *soakCaller
	tg            soakTarget
	opened, broke time.Time
	requests      int
	err           error
}

// soakTraffic is the load: every caller opens a new connection (a new
// socket for UDP) at a fixed rate, round robin over its targets, whether
// or not earlier ones answered (a black hole shows as failures, not as a
// slower load); and keeps long-lived keep-alive connections asking every
// 100 ms, dialled again when one dies (each death is recorded).
type soakTraffic struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu     sync.Mutex
	reqs   []soakReq
	broken []brokenConn
	longOK int // long-lived connections that lived to the end
}

func startSoakTraffic(w *soakWorkload, rate, longPer int) *soakTraffic {
	tr := &soakTraffic{stop: make(chan struct{})}
	for _, cl := range w.callers {
		tr.wg.Add(1)
		go tr.newConnections(cl, rate)
		for i := range min(longPer, len(cl.long)) {
			tr.wg.Add(1)
			go tr.longLived(cl, cl.long[i])
		}
	}
	return tr
}

func (tr *soakTraffic) newConnections(cl *soakCaller, rate int) {
	defer tr.wg.Done()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	slots := make(chan struct{}, maxInFlight)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for i := 0; ; i = (i + 1) % len(cl.targets) {
		select {
		case <-tr.stop:
			return
		case <-tick.C:
		}
		tg := cl.targets[i]
		select {
		case slots <- struct{}{}:
		default:
			continue // the machine is stalled; a skipped tick is not a failure of the proxy
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer func() { <-slots }()
			r := soakReq{caller: cl, tg: tg, start: time.Now()}
			if tg.sticky {
				r.pod, r.err = cl.cl.hit(tg.ip, tg.port)
			} else {
				r.err = (&stream{target: tg.swapTarget, client: cl.cl}).once()
			}
			r.end = time.Now()
			tr.mu.Lock()
			tr.reqs = append(tr.reqs, r)
			tr.mu.Unlock()
		}()
	}
}

// longLived keeps one long-lived connection to tg open (swaptraffic's
// longConn), dialling a new one a second after one dies.
func (tr *soakTraffic) longLived(cl *soakCaller, tg soakTarget) {
	defer tr.wg.Done()
	for {
		lc := &longConn{target: tg.swapTarget, client: cl.cl, answers: map[string]int{}}
		opened := time.Now()
		var wg sync.WaitGroup
		wg.Add(1)
		lc.run(tr.stop, 100*time.Millisecond, &wg)
		st := lc.state()
		tr.mu.Lock()
		if st.err != nil {
			tr.broken = append(tr.broken, brokenConn{caller: cl, tg: tg, opened: opened, broke: st.errAt, requests: st.requests, err: st.err})
		} else {
			tr.longOK++
		}
		tr.mu.Unlock()
		select {
		case <-tr.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

func (tr *soakTraffic) finish() {
	tr.once.Do(func() { close(tr.stop) })
	tr.wg.Wait()
}

// changeSample is one switch of the probe Service's endpoint: from the API
// write's return to the new pod's first answer to a new connection.
type changeSample struct {
	at     time.Time // the write returned
	ip     string
	caller *soakCaller
	took   time.Duration
	err    error
}

// probeEvery is the pause between the end of one probe change's
// measurement and the next write: a second, so that a 3-minute run has
// ~150 changes, each measured from both workers (~300 samples per
// family), and the p99 is not simply the slowest change. The proxies'
// syncs are spaced by their cost (tens of ms), so a change a second adds
// one small sync a second per node.
const probeEvery = time.Second

// changeProbe switches the probe Service between its two pods every
// probeEvery (every family's slice) and measures, from every worker's
// client pod at once (each node's proxy programs the ClusterIP for its own
// pod), when traffic reaches the new one: "every change served within 2 s"
// as a client sees it, whatever the faults do meanwhile. A write that
// fails (the API server is down) is retried at the next round.
type changeProbe struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu        sync.Mutex
	samples   []changeSample
	writeErrs int
}

func startChangeProbe(w *soakWorkload) *changeProbe {
	p := &changeProbe{stop: make(chan struct{}), done: make(chan struct{})}
	c := w.c
	esc := c.client.DiscoveryV1().EndpointSlices(ns)
	pr := &w.probe
	go func() {
		defer close(p.done)
		cur := 0
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(probeEvery):
			}
			next := 1 - cur
			ok := true
			for i, s := range pr.slices {
				s = s.DeepCopy()
				s.Endpoints = []discoveryv1.Endpoint{familyEndpoint(pr.pods[next], familyOf(pr.ips[i]))}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				out, err := esc.Update(ctx, s, metav1.UpdateOptions{})
				cancel()
				if err != nil {
					// A conflict after a failed write whose answer was lost:
					// read the slice again and retry next round.
					if fresh, gerr := esc.Get(context.Background(), s.Name, metav1.GetOptions{}); gerr == nil {
						pr.slices[i] = fresh
					}
					ok = false
					break
				}
				pr.slices[i] = out
			}
			if !ok {
				p.mu.Lock()
				p.writeErrs++
				p.mu.Unlock()
				continue
			}
			written := time.Now()
			cur = next
			// Every worker's pod and every family at once: measured one
			// after the other, the later ones would include the earlier
			// ones' wait.
			var wg sync.WaitGroup
			for _, cl := range w.callers[:len(c.workers())] {
				for _, ip := range pr.ips {
					wg.Add(1)
					go func() {
						defer wg.Done()
						took, err := firstAnswer(cl.cl, ip, 80, pr.pods[next].Name, written, 30*time.Second)
						p.mu.Lock()
						p.samples = append(p.samples, changeSample{at: written, ip: ip, caller: cl, took: took, err: err})
						p.mu.Unlock()
					}()
				}
			}
			wg.Wait()
		}
	}()
	return p
}

func (p *changeProbe) finish() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}
