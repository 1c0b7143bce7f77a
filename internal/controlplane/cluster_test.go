package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestKindNodes(t *testing.T) {
	got := KindNodes("p-")
	want := []KindNode{
		{Name: "svcproxy-control-plane", Short: "cp", Netns: "p-cp", IP: "172.18.0.2", PodCIDR: "10.244.0.0/24"},
		{Name: "svcproxy-worker", Short: "w1", Netns: "p-w1", IP: "172.18.0.3", PodCIDR: "10.244.1.0/24", Worker: true},
		{Name: "svcproxy-worker2", Short: "w2", Netns: "p-w2", IP: "172.18.0.4", PodCIDR: "10.244.2.0/24", Worker: true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("KindNodes = %+v, want %+v", got, want)
	}
	third := KindNodesWith("p-", 3)
	if len(third) != 4 || fmt.Sprint(third[:3]) != fmt.Sprint(want) {
		t.Fatalf("KindNodesWith(3) = %+v, want KindNodes' and a fourth", third)
	}
	if w := (KindNode{Name: "svcproxy-worker3", Short: "w3", Netns: "p-w3", IP: "172.18.0.5", PodCIDR: "10.244.3.0/24", Worker: true}); third[3] != w {
		t.Errorf("third worker = %+v, want %+v", third[3], w)
	}
}

func TestRunSteps(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name       string
		fail       string // the step that fails
		wantRan    string
		wantLogged int // one line per finished step
		wantErr    string
	}{
		{name: "all run in order", wantRan: "a,b,c", wantLogged: 3},
		{name: "stops at the first error, named after its step", fail: "b", wantRan: "a,b", wantLogged: 1, wantErr: "b: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran, logged []string
			step := func(name string) Step {
				return Step{Name: name, Fn: func(context.Context) error {
					ran = append(ran, name)
					if name == tc.fail {
						return boom
					}
					return nil
				}}
			}
			logf := func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
			err := RunSteps(context.Background(), logf, []Step{step("a"), step("b"), step("c")})
			if got := strings.Join(ran, ","); got != tc.wantRan {
				t.Errorf("ran %s, want %s", got, tc.wantRan)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr || !errors.Is(err, boom)):
				t.Errorf("err = %v, want %q wrapping boom", err, tc.wantErr)
			}
			if len(logged) != tc.wantLogged {
				t.Errorf("logged %q, want %d lines", logged, tc.wantLogged)
			}
		})
	}
}
