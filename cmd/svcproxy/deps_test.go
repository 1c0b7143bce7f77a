package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoWholeClientset: the svcproxy binary depends only on the client-go
// packages it uses. client-go's Clientset and its informer factory (and
// tools/events, which imports the Clientset) compile the clients, informers,
// listers and apply configurations of every API group: they once made a
// fresh clone's first build take four minutes on two cores (see cluster.go).
func TestNoWholeClientset(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to list the binary's dependencies")
	}
	out, err := exec.Command(gotool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := func(pkg string) bool {
		switch pkg {
		case "k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/tools/events":
			return true
		}
		return strings.HasPrefix(pkg, "k8s.io/client-go/informers/") || strings.HasPrefix(pkg, "k8s.io/client-go/listers/")
	}
	deps := strings.Fields(string(out))
	for _, pkg := range deps {
		if forbidden(pkg) {
			t.Errorf("svcproxy depends on %s: use the typed clients of the groups it calls and cache.NewSharedIndexInformer", pkg)
		}
	}
	t.Logf("%d packages", len(deps))
}
