package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
	"github.com/svcproxy/svcproxy/pkg/nft"
)

type healthBody struct {
	RefusedServices []Refusal `json:"refusedServices"`
}

func getHealthz(t *testing.T, h *Health) (int, healthBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	var b healthBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("healthz body %q: %v", rec.Body, err)
	}
	return rec.Code, b
}

func TestARefusedServiceShowsInHealth(t *testing.T) {
	for _, end := range []string{"accepted", "deleted"} {
		t.Run(end, func(t *testing.T) {
			k := nft.NewFake()
			refusing := refuseService(k, "ns/bad")
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			m := NewMetrics(nil)
			h := &Health{Timeout: time.Minute, Now: clk.Now, Metrics: m}
			var calls []string
			tr := endpoints.NewTracker(endpoints.TrackerOptions{})
			p := New(Config{Tracker: tr, Kernel: k, Metrics: m, Health: h, Clock: clk,
				OnRefused: func(svc endpoints.ServiceKey, err error) { calls = append(calls, svc.String()+": "+err.Error()) }})
			addWeb(tr, "good", "10.96.0.10", "pod1")
			p.Trigger()
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			addWeb(tr, "bad", "10.96.0.11", "pod2")
			p.Trigger()
			for range 3 { // the loop retries every sync
				if err := p.Sync(t.Context()); err == nil {
					t.Fatal("sync succeeded although the kernel refuses ns/bad")
				}
			}
			code, body := getHealthz(t, h)
			if code != http.StatusOK || len(body.RefusedServices) != 1 ||
				body.RefusedServices[0].Service != "ns/bad" || !strings.Contains(body.RefusedServices[0].Reason, "fake: invalid argument") {
				t.Fatalf("refused within the health timeout: %d %+v", code, body)
			}
			if len(calls) != 1 || calls[0] != "ns/bad: fake: invalid argument" {
				t.Fatalf("OnRefused calls %q, want one for ns/bad", calls)
			}
			if got := testutil.ToFloat64(m.RefusedServices); got != 1 {
				t.Fatalf("refused services gauge = %v, want 1", got)
			}
			// Past the timeout, with another Service's change landing in the same sync.
			clk.Step(2 * time.Minute)
			tr.OnEndpointSliceUpdate(nil, testSlice("good", readyEP("pod3")))
			p.Trigger()
			if err := p.Sync(t.Context()); err == nil {
				t.Fatal("sync succeeded although the kernel refuses ns/bad")
			}
			if code, _ := getHealthz(t, h); code != http.StatusServiceUnavailable {
				t.Fatalf("refused past the timeout: /healthz %d, want 503", code)
			}
			switch end {
			case "accepted":
				*refusing = false
			case "deleted":
				tr.OnServiceDelete(testService("bad", "10.96.0.11", false, httpPort))
				p.Trigger()
			}
			if err := p.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			code, body = getHealthz(t, h)
			if code != http.StatusOK || len(body.RefusedServices) != 0 {
				t.Fatalf("after ns/bad was %s: %d %+v", end, code, body)
			}
			if got := testutil.ToFloat64(m.RefusedServices); got != 0 {
				t.Fatalf("refused services gauge = %v, want 0", got)
			}
		})
	}
}
