package endpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUsableEndpoints(t *testing.T) {
	e := func(ip string, port uint16, ready, serving, terminating bool) Endpoint {
		return Endpoint{Port: port, Ready: ready, Serving: serving, Terminating: terminating}.WithAddr(addr(ip))
	}
	readyA := e("10.0.0.1", 80, true, true, false)
	readyB := e("10.0.0.2", 80, true, true, false)
	readyB81 := e("10.0.0.2", 81, true, true, false)
	drainingC := e("10.0.0.3", 80, false, true, true)
	drainingD := e("10.0.0.4", 80, false, true, true)
	notReady := e("10.0.0.5", 80, false, false, false)
	deadTerm := e("10.0.0.6", 80, false, false, true)
	servingNotTerm := e("10.0.0.7", 80, false, true, false)

	tests := []struct {
		name string
		in   []Endpoint
		want []Endpoint
	}{
		{"nil", nil, nil},
		{"ready only, sorted by addr then port", []Endpoint{readyB81, readyB, readyA}, []Endpoint{readyA, readyB, readyB81}},
		{"ready wins over draining", []Endpoint{drainingC, readyA, notReady}, []Endpoint{readyA}},
		{"fallback to serving+terminating when none ready", []Endpoint{drainingD, notReady, drainingC, deadTerm}, []Endpoint{drainingC, drainingD}},
		{"serving but not terminating is never a fallback", []Endpoint{servingNotTerm, notReady}, nil},
		{"neither ready nor serving => nothing", []Endpoint{notReady, deadTerm}, nil},
		{"ready and in order: as given", []Endpoint{readyA, readyB, readyB81}, []Endpoint{readyA, readyB, readyB81}},
		{"in order, one not ready", []Endpoint{readyA, readyB, drainingC}, []Endpoint{readyA, readyB}},
		{"ready, one address and port twice", []Endpoint{readyA, readyB, readyB}, []Endpoint{readyA, readyB, readyB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]Endpoint(nil), tt.in...)
			got := UsableEndpoints(tt.in)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("UsableEndpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tt.in, cmpOpts...); diff != "" {
				t.Errorf("input was modified (-before +after):\n%s", diff)
			}
		})
	}
	// Ready and in order, as a snapshot's lists come: no copy.
	in := []Endpoint{readyA, readyB, readyB81}
	if got := UsableEndpoints(in); &got[0] != &in[0] {
		t.Errorf("UsableEndpoints copied a list that was usable as it was")
	}
}

func TestCompareConditionsPreference(t *testing.T) {
	base := Endpoint{Port: 80}.WithAddr(addr("10.0.0.1"))
	with := func(ready, serving, terminating bool, node string) Endpoint {
		e := base
		e.Ready, e.Serving, e.Terminating = ready, serving, terminating
		e = e.OnNode(node)
		return e
	}
	// Each entry is strictly preferred over the next.
	order := []Endpoint{
		with(true, true, false, "a"),
		with(true, true, false, "b"),
		with(true, true, true, "a"),
		with(true, false, false, "a"),
		with(false, true, false, "a"),
		with(false, true, true, "a"),
		with(false, false, false, "a"),
		with(false, false, true, "a"),
	}
	for i := 0; i+1 < len(order); i++ {
		if c := compareConditions(order[i], order[i+1]); c >= 0 {
			t.Errorf("compareConditions(%+v, %+v) = %d, want < 0", order[i], order[i+1], c)
		}
		if c := compareConditions(order[i+1], order[i]); c <= 0 {
			t.Errorf("compareConditions(%+v, %+v) = %d, want > 0", order[i+1], order[i], c)
		}
	}
	mustEqualf(t, compareConditions(order[0], order[0]), 0, "equal endpoints")
}
