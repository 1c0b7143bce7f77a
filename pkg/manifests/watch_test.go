package manifests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/internal/manifesttest"
	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// An endpoints.Tracker is what Watch feeds.
var _ Sink = &endpoints.Tracker{}

// fakeGauge records what the watcher sets.
type fakeGauge struct{ v float64 }

func (g *fakeGauge) Set(v float64) { g.v = v }

// watchRig drives a watcher poll by poll and reads what the tracker holds.
type watchRig struct {
	t       *testing.T
	w       *watcher
	tracker *endpoints.Tracker
	errs    *fakeGauge
}

func newWatchRig(t *testing.T, dir string) *watchRig {
	r := &watchRig{t: t, tracker: endpoints.NewTracker(endpoints.TrackerOptions{}), errs: &fakeGauge{}}
	r.w = newWatcher(dir, r.tracker, r.errs)
	return r
}

func (r *watchRig) poll(n int) {
	for i := 0; i < n; i++ {
		r.w.poll()
	}
}

// state is what the tracker would program: per service port, its endpoints.
func (r *watchRig) state() map[string]string {
	snap, _, _ := r.tracker.Take()
	out := map[string]string{}
	for _, ports := range snap.Services() {
		for _, sp := range ports {
			name := sp.Name
			var eps []string
			for _, ep := range snap.Endpoints(name) {
				eps = append(eps, ep.Addr().String())
			}
			sort.Strings(eps)
			out[name.Namespace+"/"+name.Name] = strings.Join(eps, ",")
		}
	}
	return out
}

// expect checks the tracker's state after polls more polls.
func (r *watchRig) expect(polls int, what string, want map[string]string) {
	r.t.Helper()
	r.poll(polls)
	if got := r.state(); !reflect.DeepEqual(got, want) {
		r.t.Fatalf("%s: tracker holds %v, want %v", what, got, want)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes data next to path and renames it over path, as editors and
// `kubectl ... > tmp && mv` do.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	writeFile(t, path+".tmp~", data)
	if err := os.Rename(path+".tmp~", path); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestManifestWatcherHalfWrittenFile: a file is applied only once two polls saw
// the same content, so a write caught half-way, even one that still parses (an
// EndpointSlice that lost its last endpoints), is never programmed.
func TestManifestWatcherHalfWrittenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	full := manifesttest.Service("web", "10.96.0.5") + "---\n" + manifesttest.Slice("web", "10.244.1.2", "10.244.1.3", "10.244.1.4")
	writeFile(t, path, manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.2", "10.244.1.3"))
	r := newWatchRig(t, dir)
	r.expect(1, "first sight of a file", map[string]string{})
	r.expect(1, "the same content a poll later", map[string]string{"default/web": "10.244.1.2,10.244.1.3"})

	// A writer truncates the file and has written all but the last two endpoints:
	// the prefix parses and declares a single endpoint.
	cut := strings.Index(full, "- {addresses: [10.244.1.3]")
	writeFile(t, path, full[:cut])
	r.expect(1, "a half-written file", map[string]string{"default/web": "10.244.1.2,10.244.1.3"})
	// It goes on writing.
	writeFile(t, path, full[:len(full)-10])
	r.expect(1, "still being written", map[string]string{"default/web": "10.244.1.2,10.244.1.3"})
	writeFile(t, path, full)
	r.expect(1, "written in full, seen once", map[string]string{"default/web": "10.244.1.2,10.244.1.3"})
	r.expect(1, "written in full, stable", map[string]string{"default/web": "10.244.1.2,10.244.1.3,10.244.1.4"})

	// A writer that stops half-way for good: what it left is what the file says.
	writeFile(t, path, full[:cut])
	r.expect(2, "a truncated file that stays so", map[string]string{"default/web": "10.244.1.2"})

	// A file removed (rm, then written again a poll later) is dropped only once it stayed gone.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r.expect(1, "a file gone for one poll", map[string]string{"default/web": "10.244.1.2"})
	r.expect(1, "a file gone for two polls", map[string]string{})
}

// TestManifestWatcherBadDocuments: a document that does not decode is skipped and
// reported (metric, log once per change); the rest of its file and the other files
// are applied, at start and on every later change.
func TestManifestWatcherBadDocuments(t *testing.T) {
	logs := captureKlog(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "a-good.yaml")
	mixed := filepath.Join(dir, "b-mixed.yaml")
	badPort := func(s string) string { return strings.Replace(s, "port: 80", `port: "80"`, 1) }
	writeFile(t, good, manifesttest.Service("a", "10.96.0.1")+"---\n"+manifesttest.Slice("a", "10.244.1.2"))
	writeFile(t, mixed, badPort(manifesttest.Service("b", "10.96.0.2"))+"---\n"+manifesttest.Slice("b", "10.244.2.2")+"---\n"+manifesttest.Service("c", "10.96.0.3"))
	writeFile(t, filepath.Join(dir, "c-nokind.yaml"), "metadata: {name: x}\n")
	r := newWatchRig(t, dir)
	r.expect(2, "start with two bad documents", map[string]string{"default/a": "10.244.1.2", "default/c": ""})
	if r.errs.v != 2 {
		t.Errorf("svcproxy_manifest_errors = %v, want 2", r.errs.v)
	}
	for _, s := range []string{`"Skipping manifest document" file="b-mixed.yaml" document=0 reason="Service default/b: json: cannot unmarshal string`,
		`"Skipping manifest document" file="c-nokind.yaml" document=0 reason="no kind"`} {
		if n := strings.Count(logs(), s); n != 1 {
			t.Errorf("log has %d lines %s, want 1:\n%s", n, s, logs())
		}
	}

	// The other files' updates still flow, and the bad ones are not logged again.
	replaceFile(t, good, manifesttest.Service("a", "10.96.0.1")+"---\n"+manifesttest.Slice("a", "10.244.1.2", "10.244.1.3"))
	r.expect(2, "a good file changes next to bad ones", map[string]string{"default/a": "10.244.1.2,10.244.1.3", "default/c": ""})
	r.poll(5)
	if n := strings.Count(logs(), `"Skipping manifest document"`); n != 2 {
		t.Errorf("problems logged %d times after 9 polls, want once each (2):\n%s", n, logs())
	}

	// Fixed: b appears, the error count drops.
	replaceFile(t, mixed, manifesttest.Service("b", "10.96.0.2")+"---\n"+manifesttest.Slice("b", "10.244.2.2")+"---\n"+manifesttest.Service("c", "10.96.0.3"))
	r.expect(2, "the bad document fixed", map[string]string{"default/a": "10.244.1.2,10.244.1.3", "default/b": "10.244.2.2", "default/c": ""})
	if r.errs.v != 1 {
		t.Errorf("svcproxy_manifest_errors = %v, want 1", r.errs.v)
	}

	// Broken again, differently: the slice does not decode, so its previous version
	// stays; the file then loses a document to invalid YAML, so everything it
	// declared before stays.
	replaceFile(t, mixed, manifesttest.Service("b", "10.96.0.2")+"---\n"+badPort(manifesttest.Slice("b", "10.244.2.9"))+"---\n"+manifesttest.Service("c", "10.96.0.3"))
	r.expect(2, "a bad slice keeps its previous endpoints", map[string]string{"default/a": "10.244.1.2,10.244.1.3", "default/b": "10.244.2.2", "default/c": ""})
	replaceFile(t, mixed, manifesttest.Service("b", "10.96.0.2")+"---\nkind: [\n")
	r.expect(2, "invalid YAML keeps the file's previous objects", map[string]string{"default/a": "10.244.1.2,10.244.1.3", "default/b": "10.244.2.2", "default/c": ""})
	if r.errs.v != 2 {
		t.Errorf("svcproxy_manifest_errors = %v, want 2", r.errs.v)
	}
	if !strings.Contains(logs(), `"Skipping manifest document" file="b-mixed.yaml" document=1 reason="not valid YAML`) {
		t.Errorf("the invalid YAML is not logged:\n%s", logs())
	}
}

// TestManifestWatcherSymlinkedFile: a manifest that is a symlink is reloaded when
// the file it points to changes, and when the link is pointed elsewhere.
func TestManifestWatcherSymlinkedFile(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	target := filepath.Join(elsewhere, "web.yaml")
	writeFile(t, target, manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.2"))
	symlink(t, target, filepath.Join(dir, "web.yaml"))
	r := newWatchRig(t, dir)
	r.expect(2, "start", map[string]string{"default/web": "10.244.1.2"})

	replaceFile(t, target, manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.3"))
	r.expect(2, "the target replaced", map[string]string{"default/web": "10.244.1.3"})
	writeFile(t, target, manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.4", "10.244.1.5"))
	r.expect(2, "the target rewritten in place", map[string]string{"default/web": "10.244.1.4,10.244.1.5"})

	other := filepath.Join(elsewhere, "other.yaml")
	writeFile(t, other, manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.6"))
	symlink(t, other, filepath.Join(dir, "tmp-link"))
	if err := os.Rename(filepath.Join(dir, "tmp-link"), filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	r.expect(2, "the link pointed elsewhere", map[string]string{"default/web": "10.244.1.6"})

	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	r.expect(2, "the link dangles", map[string]string{})
}

// TestManifestWatcherSymlinkedDir: --manifests names a symlink to a directory,
// and the link is swapped to another directory (ln -sfn, atomically).
func TestManifestWatcherSymlinkedDir(t *testing.T) {
	top := t.TempDir()
	for i, addr := range []string{"10.244.1.2", "10.244.1.3"} {
		d := filepath.Join(top, fmt.Sprintf("v%d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "web.yaml"), manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", addr))
	}
	link := filepath.Join(top, "current")
	symlink(t, "v0", link)
	r := newWatchRig(t, link)
	r.expect(2, "start", map[string]string{"default/web": "10.244.1.2"})
	symlink(t, "v1", filepath.Join(top, "current.tmp"))
	if err := os.Rename(filepath.Join(top, "current.tmp"), link); err != nil {
		t.Fatal(err)
	}
	r.expect(2, "the directory link swapped", map[string]string{"default/web": "10.244.1.3"})
}

// configMapVolume lays out dir as kubelet's atomic writer does for a ConfigMap
// volume: a timestamped directory holding the data, `..data` pointing at it, and
// each key a symlink `key -> ..data/key`.
type configMapVolume struct {
	t   *testing.T
	dir string
	gen int
	cur string // the timestamped directory ..data points at
}

// write publishes files as the volume's new content, exactly as the atomic writer
// does: a new timestamped directory, a `..data_tmp` symlink to it renamed over
// `..data`, then the user-visible links of new keys created and those of removed
// keys deleted, then the old directory removed.
func (v *configMapVolume) write(files map[string]string) {
	t := v.t
	t.Helper()
	v.gen++
	ts := fmt.Sprintf("..2026_11_30_14_00_%02d.%09d", v.gen, v.gen)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, data := range files {
		writeFile(t, filepath.Join(v.dir, ts, k), data)
	}
	symlink(t, ts, filepath.Join(v.dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k := range files {
		if _, err := os.Lstat(filepath.Join(v.dir, k)); os.IsNotExist(err) {
			symlink(t, filepath.Join("..data", k), filepath.Join(v.dir, k))
		}
	}
	entries, err := os.ReadDir(v.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && !strings.HasPrefix(e.Name(), "..") {
			if err := os.Remove(filepath.Join(v.dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v.cur != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, v.cur)); err != nil {
			t.Fatal(err)
		}
	}
	v.cur = ts
}

// TestManifestWatcherConfigMapVolume: the files of a ConfigMap volume are symlinks
// through `..data`, which kubelet swaps atomically; every swap is seen.
func TestManifestWatcherConfigMapVolume(t *testing.T) {
	v := &configMapVolume{t: t, dir: t.TempDir()}
	svc := manifesttest.Service("web", "10.96.0.5")
	v.write(map[string]string{"service.yaml": svc, "slice.yaml": manifesttest.Slice("web", "10.244.1.2", "10.244.1.3")})
	r := newWatchRig(t, v.dir)
	r.expect(2, "start", map[string]string{"default/web": "10.244.1.2,10.244.1.3"})

	v.write(map[string]string{"service.yaml": svc, "slice.yaml": manifesttest.Slice("web", "10.244.1.2", "10.244.1.3", "10.244.1.4")})
	r.expect(2, "..data swapped: scaled to 3", map[string]string{"default/web": "10.244.1.2,10.244.1.3,10.244.1.4"})
	v.write(map[string]string{"service.yaml": svc, "slice.yaml": manifesttest.Slice("web", "10.244.1.4")})
	r.expect(2, "..data swapped again: scaled to 1", map[string]string{"default/web": "10.244.1.4"})
	v.write(map[string]string{"service.yaml": svc, "other.json": `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns", "namespace": "default"}, "spec": {"clusterIP": "10.96.0.53", "ports": [{"port": 53}]}}`})
	r.expect(2, "a key removed, another added", map[string]string{"default/web": "", "default/dns": ""})
	if r.errs.v != 0 {
		t.Errorf("svcproxy_manifest_errors = %v, want 0", r.errs.v)
	}
}

// TestManifestWatcherReady: the first sync waits until every file's first content
// was fed; bad documents do not hold it; a missing directory is refused at start.
func TestManifestWatcherReady(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.2"))
	writeFile(t, filepath.Join(dir, "bad.yaml"), "kind: [\n")
	r := newWatchRig(t, dir)
	ready := func() bool {
		select {
		case <-r.w.ready:
			return true
		default:
			return false
		}
	}
	r.poll(1)
	if ready() {
		t.Fatal("ready after one poll, before any file was fed")
	}
	r.poll(1)
	if !ready() {
		t.Fatal("not ready after two polls")
	}
	if got := r.state(); !reflect.DeepEqual(got, map[string]string{"default/web": "10.244.1.2"}) {
		t.Fatalf("ready with %v fed", got)
	}

	// run polls at once, then at each tick: one tick makes it ready.
	r = newWatchRig(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() { r.w.run(ctx, tick); close(done) }()
	tick <- time.Time{}
	if !r.w.waitReady(ctx) {
		t.Fatal("waitReady returned false")
	}
	cancel()
	<-done
	if r.w.waitReady(context.Background()) != true {
		t.Fatal("waitReady after ready returned false")
	}

	if _, err := Watch(context.Background(), filepath.Join(dir, "nope"), endpoints.NewTracker(endpoints.TrackerOptions{}), nil); err == nil {
		t.Error("watchManifests accepted a missing directory")
	}
}

// TestManifestWatcherReadyBounded: a file rewritten at every poll does not hold the
// start forever.
func TestManifestWatcherReadyBounded(t *testing.T) {
	dir := t.TempDir()
	r := newWatchRig(t, dir)
	for i := 0; i < startPolls; i++ {
		select {
		case <-r.w.ready:
			t.Fatalf("ready after %d polls while a file keeps changing", i)
		default:
		}
		writeFile(t, filepath.Join(dir, "busy.yaml"), manifesttest.Service("web", "10.96.0.5")+strings.Repeat("#\n", i))
		r.poll(1)
	}
	select {
	case <-r.w.ready:
	default:
		t.Fatalf("not ready after %d polls", startPolls)
	}
}

// captureKlog sends klog's output to a buffer for the test's duration.
func captureKlog(t *testing.T) func() string {
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		klog.Flush()
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	return func() string { klog.Flush(); return buf.String() }
}

// TestManifestErrorsMetric: the count of bad documents reaches the registry as
// svcproxy_manifest_errors.
func TestManifestErrorsMetric(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "x.yaml"), manifesttest.Service("a", "10.96.0.1")+"---\nkind: [\n---\nmetadata: {}\n")
	reg := prometheus.NewRegistry()
	errs := NewErrors(reg)
	w := newWatcher(dir, endpoints.NewTracker(endpoints.TrackerOptions{}), errs)
	w.poll()
	w.poll()
	if n, err := testutil.GatherAndCount(reg, "svcproxy_manifest_errors"); err != nil || n != 1 {
		t.Fatalf("svcproxy_manifest_errors series: %d, %v", n, err)
	}
	if v := testutil.ToFloat64(errs); v != 2 {
		t.Errorf("svcproxy_manifest_errors = %v, want 2", v)
	}
}

// TestManifestWatcherUnreadableFiles: a name in the directory that is not a regular
// file (a named pipe nobody writes, a link to /dev/zero) or is over the size cap is
// skipped without being opened for long: it is logged once, naming the file and why,
// counted in svcproxy_manifest_errors, and the other files' changes keep flowing.
// A file that becomes unreadable keeps what it declared before.
func TestManifestWatcherUnreadableFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		make    func(t *testing.T, path string)
		wantLog string
	}{
		{name: "a named pipe nobody writes", file: "30-fifo.yaml",
			make:    func(t *testing.T, path string) { mkfifo(t, path) },
			wantLog: `is a named pipe (FIFO), not a regular file: not read"`},
		{name: "a link to a named pipe", file: "30-fifo.yaml",
			make: func(t *testing.T, path string) {
				mkfifo(t, path+".pipe")
				symlink(t, path+".pipe", path)
			},
			wantLog: `is a named pipe (FIFO), not a regular file: not read"`},
		{name: "a link to /dev/zero", file: "31-zero.yaml",
			make:    func(t *testing.T, path string) { symlink(t, "/dev/zero", path) },
			wantLog: `is a character device, not a regular file: not read"`},
		{name: "a file over the cap", file: "32-big.yaml",
			make: func(t *testing.T, path string) {
				writeFile(t, path, manifesttest.Service("big", "10.96.0.9")+"# "+strings.Repeat("x", MaxFileBytes)+"\n")
			},
			wantLog: fmt.Sprintf(`is %d bytes (3 MiB), over the cap of 3 MiB: not read"`, MaxFileBytes+len(manifesttest.Service("big", "10.96.0.9"))+3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureKlog(t)
			dir := t.TempDir()
			good := filepath.Join(dir, "a-good.yaml")
			writeFile(t, good, manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.2"))
			tc.make(t, filepath.Join(dir, tc.file))
			r := newWatchRig(t, dir)
			pollWithin := func(n int) {
				t.Helper()
				done := make(chan struct{})
				go func() { r.poll(n); close(done) }()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatalf("%d polls took over 5 s: the watcher is blocked", n)
				}
			}
			pollWithin(2)
			if got, want := r.state(), map[string]string{"default/web": "10.244.1.2"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("tracker holds %v, want %v", got, want)
			}
			if r.errs.v != 1 {
				t.Errorf("svcproxy_manifest_errors = %v, want 1", r.errs.v)
			}
			replaceFile(t, good, manifesttest.Service("web", "10.96.0.5")+"---\n"+manifesttest.Slice("web", "10.244.1.2", "10.244.1.3"))
			pollWithin(4)
			if got, want := r.state(), map[string]string{"default/web": "10.244.1.2,10.244.1.3"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("after a change next to %s: tracker holds %v, want %v", tc.file, got, want)
			}
			line := `"Skipping manifest file" file="` + tc.file + `" reason="` + filepath.Join(dir, tc.file) + " " + tc.wantLog
			if n := strings.Count(logs(), line); n != 1 {
				t.Errorf("log has %d lines %s, want 1:\n%s", n, line, logs())
			}

			// A good file that becomes unreadable keeps what it declared.
			if err := os.Remove(good); err != nil {
				t.Fatal(err)
			}
			tc.make(t, good)
			pollWithin(3)
			if got, want := r.state(), map[string]string{"default/web": "10.244.1.2,10.244.1.3"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("a manifest replaced by %s: tracker holds %v, want %v", tc.name, got, want)
			}
			if r.errs.v != 2 {
				t.Errorf("svcproxy_manifest_errors = %v, want 2", r.errs.v)
			}
		})
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}
