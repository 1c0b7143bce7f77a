package manifests

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/svcproxy/svcproxy/deploy"
	"github.com/svcproxy/svcproxy/internal/manifesttest"
)

const svcJSON = `{"apiVersion": "v1", "kind": "Service",
 "metadata": {"name": "json-svc", "namespace": "ns"},
 "spec": {"clusterIP": "10.96.1.1", "ports": [{"port": 53, "protocol": "UDP"}]}}`

func bigSliceJSON(n int) string {
	var eps []string
	for i := 0; i < n; i++ {
		eps = append(eps, fmt.Sprintf(`{"addresses": ["10.244.%d.%d"], "conditions": {"ready": true}}`, i/250, i%250+1))
	}
	return `{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
 "metadata": {"name": "json-svc-1", "namespace": "ns", "labels": {"kubernetes.io/service-name": "json-svc"}},
 "addressType": "IPv4", "ports": [{"port": 53, "protocol": "UDP"}],
 "endpoints": [` + strings.Join(eps, ",") + `]}`
}

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 2}
`

const configMapYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {a: b}
`

const crdYAML = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec: {anything: [1, 2]}
`

// summary is what a test compares: object names in load order, and per slice its
// endpoint count.
type summary struct {
	Services []string
	Slices   []string
}

func summarize(o *Objects) summary {
	var s summary
	for _, x := range o.Services {
		s.Services = append(s.Services, x.Namespace+"/"+x.Name)
	}
	for _, x := range o.EndpointSlices {
		s.Slices = append(s.Slices, fmt.Sprintf("%s/%s:%d", x.Namespace, x.Name, len(x.Endpoints)))
	}
	return s
}

func TestRead(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name     string
		fs       fstest.MapFS
		dir      string
		want     summary
		problems []string // substrings of each problem, in order
		wantErr  []string // substrings of the error
	}{
		{
			name: "multi-document YAML with empty, null and comment-only documents",
			fs: fstest.MapFS{"all.yaml": file("# header\n---\n" + manifesttest.Service("a", "10.96.0.1") + "---\n---\nnull\n---\n# just a comment\n---\n" +
				manifesttest.Slice("a", "10.244.1.2", "10.244.1.3") + "...\n---\n" + manifesttest.Service("b", "10.96.0.2"))},
			want: summary{Services: []string{"default/a", "default/b"}, Slices: []string{"default/a-abc:2"}},
		},
		{
			name: "JSON files: one object, and a large slice in a .json next to YAML",
			fs:   fstest.MapFS{"svc.json": file(svcJSON), "slice.json": file(bigSliceJSON(300)), "y.yml": file(manifesttest.Service("yml-svc", "10.96.0.3"))},
			want: summary{Services: []string{"ns/json-svc", "default/yml-svc"}, Slices: []string{"ns/json-svc-1:300"}},
		},
		{
			name: "JSON stream of two objects in one file",
			fs:   fstest.MapFS{"stream.json": file(svcJSON + "\n" + bigSliceJSON(2))},
			want: summary{Services: []string{"ns/json-svc"}, Slices: []string{"ns/json-svc-1:2"}},
		},
		{
			name: "other kinds are skipped, registered or not",
			fs: fstest.MapFS{"mixed.yaml": file(deploymentYAML + "---\n" + configMapYAML + "---\n" + manifesttest.Service("a", "10.96.0.1") +
				"---\n" + crdYAML + "---\n" + manifesttest.Slice("a", "10.244.1.2"))},
			want: summary{Services: []string{"default/a"}, Slices: []string{"default/a-abc:1"}},
		},
		{
			name: "files are read in name order",
			fs: fstest.MapFS{
				"20-b.yaml": file(manifesttest.Service("b", "10.96.0.2") + "---\n" + manifesttest.Slice("b", "10.244.1.3")),
				"03-c.yml":  file(manifesttest.Service("c", "10.96.0.3")),
				"10-a.json": file(strings.Replace(svcJSON, "json-svc", "a", 1)),
				"99-z.yaml": file(manifesttest.Slice("a", "10.244.1.2")),
			},
			want: summary{Services: []string{"default/c", "ns/a", "default/b"}, Slices: []string{"default/b-abc:1", "default/a-abc:1"}},
		},
		{
			name: "non-manifest files and directories are ignored, and so are subdirectories' files",
			fs: fstest.MapFS{
				"svc.yaml":          file(manifesttest.Service("a", "10.96.0.1")),
				"README.md":         file("# not yaml: [\n"),
				"broken.yaml.bak":   file("{{{"),
				"notes.txt":         file(": : :"),
				"svc.yaml~":         file("{{{"),
				"Makefile":          file("all:\n"),
				"sub.yaml/x.yaml":   file(manifesttest.Service("in-dir-named-yaml", "10.96.0.9")),
				"nested/more.yaml":  file(manifesttest.Service("nested", "10.96.0.8")),
				"nested/bad.json":   file("{"),
				"log/svcproxy.log":  file("x"),
				"zz-empty.yaml":     file(""),
				"zz-only-dash.yaml": file("---\n"),
			},
			want: summary{Services: []string{"default/a"}},
		},
		{
			name: "a subdirectory given as dir",
			fs:   fstest.MapFS{"top.yaml": file(manifesttest.Service("top", "10.96.0.1")), "m/x.yaml": file(manifesttest.Service("x", "10.96.0.2"))},
			dir:  "m",
			want: summary{Services: []string{"default/x"}},
		},
		{
			name: "malformed YAML: the file and document are named, the file's other documents and the other files are used",
			fs: fstest.MapFS{"a.yaml": file(manifesttest.Service("a", "10.96.0.1")),
				"b-bad.yaml": file(manifesttest.Service("b", "10.96.0.2") + "---\nkind: Service\n  metadata: [oops\n---\n" + manifesttest.Slice("b", "10.244.1.2"))},
			want:     summary{Services: []string{"default/a", "default/b"}, Slices: []string{"default/b-abc:1"}},
			problems: []string{"b-bad.yaml: document 1: not valid YAML"},
		},
		{
			name:     "a field of the wrong type (port: \"80\") skips that document only",
			fs:       fstest.MapFS{"ports.yaml": file(strings.Replace(manifesttest.Service("a", "10.96.0.1"), "port: 80", `port: "80"`, 1) + "---\n" + manifesttest.Service("b", "10.96.0.2"))},
			want:     summary{Services: []string{"default/b"}},
			problems: []string{"ports.yaml: document 0: Service default/a: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32"},
		},
		{
			name:     "a document without kind",
			fs:       fstest.MapFS{"nokind.yaml": file("apiVersion: v1\nmetadata: {name: x}\n---\n" + manifesttest.Service("a", "10.96.0.1")), "ok.yaml": file(manifesttest.Service("b", "10.96.0.2"))},
			want:     summary{Services: []string{"default/a", "default/b"}},
			problems: []string{"nokind.yaml: document 0: no kind"},
		},
		{
			name:     "truncated JSON: the objects before the cut are used",
			fs:       fstest.MapFS{"ok.yaml": file(manifesttest.Service("a", "10.96.0.1")), "trunc.json": file(svcJSON + "\n" + bigSliceJSON(3)[:60])},
			want:     summary{Services: []string{"default/a", "ns/json-svc"}},
			problems: []string{"trunc.json: document 1: not valid JSON"},
		},
		{
			name:     "a bad document separator",
			fs:       fstest.MapFS{"sep.yaml": file(manifesttest.Service("a", "10.96.0.1") + "--- x\n" + manifesttest.Service("b", "10.96.0.2"))},
			want:     summary{Services: []string{"default/b"}},
			problems: []string{"sep.yaml: document 0: not valid YAML: invalid Yaml document separator"},
		},
		{
			name:     "a Service of an apiVersion not read, a Service without a name, a scalar document",
			fs:       fstest.MapFS{"x.yaml": file(strings.Replace(manifesttest.Service("a", "10.96.0.1"), "apiVersion: v1", "apiVersion: v2", 1) + "---\nkind: Service\napiVersion: v1\n---\nhello\n---\n" + manifesttest.Service("b", "10.96.0.2"))},
			want:     summary{Services: []string{"default/b"}},
			problems: []string{`x.yaml: document 0: Service default/a: apiVersion "v2" is not read, only "v1"`, "x.yaml: document 1: Service without metadata.name", "x.yaml: document 2: not an object"},
		},
		{
			name: "a directory named like a manifest is not read",
			fs:   fstest.MapFS{"a.yaml": file(manifesttest.Service("a", "10.96.0.1")), "d.yaml": &fstest.MapFile{Mode: fs.ModeDir}},
			want: summary{Services: []string{"default/a"}},
		},
		{
			name:    "missing directory",
			fs:      fstest.MapFS{"a.yaml": file(manifesttest.Service("a", "10.96.0.1"))},
			dir:     "nope",
			wantErr: []string{"nope"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = "."
			}
			got, problems, err := Read(tc.fs, dir)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Load succeeded with %+v, want an error", summarize(got))
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if s := summarize(got); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("Load =\n %+v\nwant\n %+v", s, tc.want)
			}
			checkProblems(t, problems, tc.problems)
		})
	}
}

// TestLoadDecodesFields checks that decoded objects carry their content, not just
// their names.
func TestLoadDecodesFields(t *testing.T) {
	got, problems, err := Read(deploy.Examples, "examples")
	if err != nil || problems != nil {
		t.Fatal(err, problems)
	}
	if len(got.Services) != 1 || len(got.EndpointSlices) != 1 {
		t.Fatalf("seed example: %+v", summarize(got))
	}
	svc, slice := got.Services[0], got.EndpointSlices[0]
	if svc.Name != "my-nginx" || svc.Spec.ClusterIP != "10.96.0.10" || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].Protocol != "TCP" || svc.Kind != "Service" {
		t.Errorf("service decoded as %+v", svc)
	}
	if slice.Labels["kubernetes.io/service-name"] != "my-nginx" || string(slice.AddressType) != "IPv4" ||
		len(slice.Ports) != 1 || slice.Ports[0].Port == nil || *slice.Ports[0].Port != 80 {
		t.Errorf("slice decoded as %+v", slice)
	}
	var addrs []string
	for _, ep := range slice.Endpoints {
		if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
			t.Errorf("endpoint %v not ready", ep.Addresses)
		}
		addrs = append(addrs, ep.Addresses...)
	}
	if want := []string{"10.244.1.2", "10.244.1.3"}; !reflect.DeepEqual(addrs, want) {
		t.Errorf("endpoints %v, want %v", addrs, want)
	}

	// JSON decodes the same fields.
	j, err := Load(fstest.MapFS{"s.json": &fstest.MapFile{Data: []byte(svcJSON)}}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if s := j.Services[0]; s.Spec.ClusterIP != "10.96.1.1" || s.Spec.Ports[0].Port != 53 || s.Spec.Ports[0].Protocol != "UDP" {
		t.Errorf("JSON service decoded as %+v", s.Spec)
	}
}

func TestLoadReadsKubectlLists(t *testing.T) {
	fsys := fstest.MapFS{"list.yaml": {Data: []byte(`apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: ns}
  spec: {clusterIP: 10.96.0.9, ports: [{port: 80}]}
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}
  addressType: IPv4
  endpoints: [{addresses: [10.244.1.9]}]
`)}}
	objs, problems, err := Read(fsys, ".")
	if err != nil || problems != nil {
		t.Fatal(err, problems)
	}
	if len(objs.Services) != 1 || len(objs.EndpointSlices) != 1 || objs.Services[0].Name != "web" {
		t.Fatalf("List items not loaded: %d services, %d slices", len(objs.Services), len(objs.EndpointSlices))
	}
}

// checkProblems compares problems with substrings, one per problem in order.
func checkProblems(t *testing.T, got []Problem, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("problems %q, want %d like %q", got, len(want), want)
		return
	}
	for i, p := range got {
		if !strings.Contains(p.String(), want[i]) {
			t.Errorf("problem %d is %q, want it to contain %q", i, p, want[i])
		}
	}
}

func TestLoadIsStrict(t *testing.T) {
	fsys := fstest.MapFS{"a.yaml": {Data: []byte(manifesttest.Service("a", "10.96.0.1"))}, "b.yaml": {Data: []byte("kind: [\n---\nmetadata: {}\n")}}
	objs, err := Load(fsys, ".")
	if err == nil || objs != nil {
		t.Fatalf("Load = %v, %v; want an error", objs, err)
	}
	for _, s := range []string{"b.yaml: document 0: not valid YAML", "b.yaml: document 1: no kind"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
}

// TestReadUnreadableFiles: a manifest name that is not a regular file, or a file
// over MaxFileBytes, is one problem naming the file and why, read neither for long
// nor in full; the other files are used. ReadDir reads a directory of the OS
// (named pipes, links to devices), Read an fs.FS.
func TestReadUnreadableFiles(t *testing.T) {
	svc := manifesttest.Service("a", "10.96.0.1")
	big := svc + "# " + strings.Repeat("x", MaxFileBytes) + "\n"
	tooBig := fmt.Sprintf("bad.yaml is %d bytes (3 MiB), over the cap of 3 MiB: not read", len(big))
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir string) // adds bad.yaml to dir
		fs   fstest.MapFS                   // or, for Read: bad.yaml
		want string
	}{
		{name: "a named pipe", want: "bad.yaml is a named pipe (FIFO), not a regular file: not read",
			make: func(t *testing.T, dir string) { mustMkfifo(t, filepath.Join(dir, "bad.yaml")) }},
		{name: "a link to /dev/zero", want: "bad.yaml is a character device, not a regular file: not read",
			make: func(t *testing.T, dir string) { mustSymlink(t, "/dev/zero", filepath.Join(dir, "bad.yaml")) }},
		{name: "a link to a directory", want: "bad.yaml is a directory, not a regular file: not read",
			make: func(t *testing.T, dir string) { mustSymlink(t, ".", filepath.Join(dir, "bad.yaml")) }},
		{name: "a file over the cap", want: tooBig,
			make: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(big), 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "fs.FS: a named pipe", want: "bad.yaml is a named pipe (FIFO), not a regular file: not read",
			fs: fstest.MapFS{"bad.yaml": {Mode: fs.ModeNamedPipe}}},
		{name: "fs.FS: a file over the cap", want: tooBig,
			fs: fstest.MapFS{"bad.yaml": {Data: []byte(big)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				objs     *Objects
				problems []Problem
				err      error
			}
			done := make(chan result, 1)
			if tc.fs != nil {
				tc.fs["good.yaml"] = &fstest.MapFile{Data: []byte(svc)}
				go func() { o, p, err := Read(tc.fs, "."); done <- result{o, p, err} }()
			} else {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(svc), 0o644); err != nil {
					t.Fatal(err)
				}
				tc.make(t, dir)
				go func() { o, p, err := ReadDir(dir); done <- result{o, p, err} }()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("reading took over 5 s")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := summarize(r.objs); !reflect.DeepEqual(got, summary{Services: []string{"default/a"}}) {
				t.Errorf("read %+v, want default/a", got)
			}
			checkProblems(t, r.problems, []string{tc.want})
			if len(r.problems) == 1 && (r.problems[0].Doc != -1 || !strings.HasPrefix(r.problems[0].String(), "bad.yaml: ")) {
				t.Errorf("problem %q (document %d) does not name the whole file", r.problems[0], r.problems[0].Doc)
			}
		})
	}
}

func mustMkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
