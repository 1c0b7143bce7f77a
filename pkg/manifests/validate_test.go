package manifests

import (
	"reflect"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/internal/manifesttest"
)

// TestDecodeValidatesNames: names kube-apiserver v1.37 would refuse are refused
// here too, each with a Problem, and the valid objects of the file are used. Two
// such names could otherwise make one key (Service "a/b" in namespace "c" and
// Service "b" in namespace "c/a" both print as c/a/b, and one of them was lost
// without a word), and a port name is printed in the ruleset's comments.
func TestDecodeValidatesNames(t *testing.T) {
	svc := func(ns, name, port string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: '" + name + "', namespace: '" + ns + "'}\n" +
			"spec: {clusterIP: 10.96.0.53, ports: [{name: '" + port + "', port: 53, protocol: UDP}]}\n"
	}
	slice := func(ns, name, service, port string) string {
		return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n" +
			"metadata: {name: '" + name + "', namespace: '" + ns + "', labels: {kubernetes.io/service-name: '" + service + "'}}\n" +
			"addressType: IPv4\nports: [{name: '" + port + "', port: 53, protocol: UDP}]\nendpoints: [{addresses: [10.244.1.2]}]\n"
	}
	good := manifesttest.Service("good", "10.96.0.1")
	for _, tc := range []struct {
		name    string
		data    string
		want    summary // besides default/good
		problem string  // "": none
	}{
		{name: "valid names", data: svc("c", "b", "dns") + "---\n" + slice("c", "b-x.1", "b", "dns"),
			want: summary{Services: []string{"c/b"}, Slices: []string{"c/b-x.1:1"}}},
		{name: "a Service name may start with a digit (a DNS-1123 label since v1.34)", data: svc("c", "1b", ""),
			want: summary{Services: []string{"c/1b"}}},
		{name: "no namespace is kept as before", data: svc("", "b", "dns"),
			want: summary{Services: []string{"/b"}}},
		{name: "a slash in a Service name", data: svc("c", "a/b", "dns"),
			problem: `Service "a/b" in namespace "c": metadata.name: Invalid value: "a/b": a lowercase RFC 1123 label must consist of`},
		{name: "a slash in a namespace", data: svc("c/a", "b", "dns"),
			problem: `Service "b" in namespace "c/a": metadata.namespace: Invalid value: "c/a": a lowercase RFC 1123 label`},
		{name: "both halves of one key: both refused", data: svc("c", "a/b", "dns") + "---\n" + svc("c/a", "b", "dns"),
			problem: `Service "b" in namespace "c/a": metadata.namespace: Invalid value`},
		{name: "an upper-case Service name", data: svc("c", "Web", "dns"),
			problem: `Service "Web" in namespace "c": metadata.name: Invalid value: "Web"`},
		{name: "a Service name over 63 characters", data: svc("c", strings.Repeat("a", 64), "dns"),
			problem: `metadata.name: Invalid value: "` + strings.Repeat("a", 64) + `": must be no more than 63 characters`},
		{name: "a Service port name with a quote", data: svc("c", "b", `pört"x`),
			problem: `Service "b" in namespace "c": spec.ports[0].name: Invalid value: "pört\"x": a lowercase RFC 1123 label`},
		{name: "an upper-case Service port name", data: svc("c", "b", "DNS"),
			problem: `spec.ports[0].name: Invalid value: "DNS"`},
		{name: "a slash in an EndpointSlice name", data: slice("c", "b/x", "b", "dns"),
			problem: `EndpointSlice "b/x" in namespace "c": metadata.name: Invalid value: "b/x": a lowercase RFC 1123 subdomain`},
		{name: "a slash in an EndpointSlice namespace", data: slice("c/a", "x", "b", "dns"),
			problem: `EndpointSlice "x" in namespace "c/a": metadata.namespace: Invalid value: "c/a"`},
		{name: "a slash in the service-name label", data: slice("c", "x", "a/b", "dns"),
			problem: `EndpointSlice "x" in namespace "c": metadata.labels: Invalid value: "a/b"`},
		{name: "an EndpointSlice port name with a quote", data: slice("c", "x", "b", `pört"x`),
			problem: `EndpointSlice "x" in namespace "c": ports[0].name: Invalid value: "pört\"x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Decode("v.yaml", []byte(good+"---\n"+tc.data))
			want := summary{Services: append([]string{"default/good"}, tc.want.Services...), Slices: tc.want.Slices}
			if s := summarize(&f.Objects); !reflect.DeepEqual(s, want) {
				t.Errorf("objects %+v, want %+v", s, want)
			}
			if tc.problem == "" {
				checkProblems(t, f.Problems, nil)
				return
			}
			if len(f.Problems) == 0 || !strings.Contains(f.Problems[len(f.Problems)-1].String(), tc.problem) {
				t.Fatalf("problems %q, want the last to contain %q", f.Problems, tc.problem)
			}
			if f.Broken || len(f.Held) != len(f.Problems) {
				t.Errorf("held %v broken %v: an invalid object is held by its key, the file is not broken", f.Held, f.Broken)
			}
		})
	}
}
