package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"os"
	"path/filepath"
	"sort"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/safefile"
)

const (
	// pollEvery is how often Watch looks at its directory. A change is
	// applied once two polls in a row saw the same content: 1-2 polls after it.
	pollEvery = 200 * time.Millisecond
	// startPolls bounds the wait for files still being written at start.
	startPolls = 25
)

// Watch feeds tracker (a Sink: every family's tracker) with the manifests in
// dir, then keeps doing so as files change: svcproxy --manifests. The returned function blocks until the first content of every
// file has been fed (or startPolls have passed), so that the first sync
// does not drop Services that are still being read. errCount is set to the number of
// documents currently skipped.
func Watch(ctx context.Context, dir string, tracker Sink, errCount gauge) (func(context.Context) bool, error) {
	if _, err := os.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("read manifests dir: %w", err)
	}
	w := newWatcher(dir, tracker, errCount)
	t := time.NewTicker(pollEvery)
	go func() {
		defer t.Stop()
		w.run(ctx, t.C)
	}()
	return w.waitReady, nil
}

// gauge is the part of prometheus.Gauge the watcher uses (NewErrors).
type gauge interface{ Set(float64) }

// watcher polls a directory of  It stats each file through
// symlinks (so a ConfigMap volume's `..data` swap or a re-pointed link is seen),
// and applies a file only when two polls in a row saw the same content: a file
// caught half-written, even one that still parses, waits for the writer to finish.
// A file that disappears is dropped only once it stayed gone for a poll too. Only
// regular files of at most MaxFileBytes are read (ReadFile):
// a named pipe, a device or a bigger file is skipped, never waited on, and keeps
// what its name declared before, like a file that cannot be read.
type watcher struct {
	dir      string
	tracker  Sink // every family's tracker
	errCount gauge
	files    map[string]*watchedFile
	fed      *Objects // what the tracker was fed
	dirErr   string   // the last error reading dir, logged once
	polls    int
	ready    chan struct{}
}

type watchedFile struct {
	seen     observation // what the last poll saw
	pending  bool        // seen is not applied yet
	used     observation // what applied comes from
	applied  *Objects
	problems []Problem
}

// observation is a file's state as one poll saw it.
type observation struct {
	stamp string // identity, size and mtime of what the name resolves to; "" when absent
	data  []byte
	err   string // reading it failed
}

func (o observation) equal(p observation) bool {
	return o.stamp == p.stamp && o.err == p.err && bytes.Equal(o.data, p.data)
}

func newWatcher(dir string, tracker Sink, errCount gauge) *watcher {
	return &watcher{dir: dir, tracker: tracker, errCount: errCount, files: map[string]*watchedFile{},
		fed: &Objects{}, ready: make(chan struct{})}
}

// run polls now and on every tick until ctx ends.
func (w *watcher) run(ctx context.Context, tick <-chan time.Time) {
	for {
		w.poll()
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

func (w *watcher) waitReady(ctx context.Context) bool {
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// poll looks at the directory once, applies the files whose content is stable and
// feeds the tracker if anything changed.
func (w *watcher) poll() {
	w.polls++
	names, err := w.list()
	if err != nil {
		if err.Error() != w.dirErr {
			klog.ErrorS(err, "Reading the manifests directory; keeping what was read before", "dir", w.dir)
			w.dirErr = err.Error()
		}
		if w.polls >= startPolls {
			w.markReady()
		}
		return
	}
	w.dirErr = ""
	for name := range w.files {
		names[name] = true // gone since the last poll: seen as absent
	}
	changed := false
	for name := range names {
		if w.pollFile(name) {
			changed = true
		}
	}
	if changed {
		w.feed()
	}
	w.markReady()
}

// list returns the manifest files in dir.
func (w *watcher) list() (map[string]bool, error) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range entries {
		if IsManifest(e.Name()) && !e.IsDir() {
			names[e.Name()] = true
		}
	}
	return names, nil
}

// pollFile observes one file and applies it when it is stable; it reports whether
// what the file contributes changed.
func (w *watcher) pollFile(name string) bool {
	path := filepath.Join(w.dir, name)
	stamp, statErr := statThrough(path)
	f := w.files[name]
	if f == nil {
		if stamp == "" && statErr == nil {
			return false // a dangling link or a directory: nothing to read
		}
		f = &watchedFile{} // as if absent before
		w.files[name] = f
	}
	if !f.pending && stamp == f.seen.stamp && statErr == nil {
		return false // unchanged and applied: no need to read it
	}
	now := observation{stamp: stamp}
	if statErr != nil {
		now.err = statErr.Error()
	} else if stamp != "" {
		data, err := ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			now.stamp = ""
		case err != nil:
			now.err = err.Error()
		default:
			now.data = data
		}
	}
	if !now.equal(f.seen) {
		f.seen, f.pending = now, true
		return false // changed since the last poll: wait until it holds still
	}
	if !f.pending {
		return false
	}
	f.pending = false
	if f.seen.err == f.used.err && f.seen.stamp != "" && bytes.Equal(f.seen.data, f.used.data) {
		f.used = f.seen
		return false // rewritten with the same content
	}
	f.used = f.seen
	return w.apply(name, f)
}

// apply makes what f's stable content declares current; it reports whether that
// changed anything.
func (w *watcher) apply(name string, f *watchedFile) bool {
	var file *File
	switch {
	case f.seen.err != "":
		file = &File{Broken: true, Problems: []Problem{FileProblem(name, errors.New(f.seen.err))}}
	case f.seen.stamp == "":
		file = &File{} // gone
	default:
		file = Decode(name, f.seen.data)
	}
	prevProblems := f.problems
	f.applied, f.problems = file.Apply(f.applied), file.Problems
	if f.seen.stamp == "" && f.seen.err == "" {
		delete(w.files, name)
		klog.InfoS("Manifest file removed", "file", name)
		return true
	}
	for _, p := range f.problems {
		if p.Doc < 0 {
			klog.InfoS("Skipping manifest file", "file", p.File, "reason", p.Reason)
			continue
		}
		kv := []any{"file", p.File, "document", p.Doc}
		if p.Item >= 0 {
			kv = append(kv, "item", p.Item)
		}
		klog.InfoS("Skipping manifest document", append(kv, "reason", p.Reason)...)
	}
	if len(f.problems) == 0 && len(prevProblems) > 0 {
		klog.InfoS("Manifest file is valid again", "file", name)
	}
	klog.InfoS("Manifest file changed", "file", name, "services", len(f.applied.Services), "endpointSlices", len(f.applied.EndpointSlices))
	return true
}

// feed gives the tracker the objects of every file, in name order.
func (w *watcher) feed() {
	names := make([]string, 0, len(w.files))
	for name := range w.files {
		names = append(names, name)
	}
	sort.Strings(names)
	all := &Objects{}
	problems := 0
	for _, name := range names {
		all.Add(w.files[name].applied)
		problems += len(w.files[name].problems)
	}
	Feed(w.tracker, all, w.fed)
	w.fed = all
	if w.errCount != nil {
		w.errCount.Set(float64(problems))
	}
}

// markReady closes ready once every file seen has been applied, or after
// startPolls polls.
func (w *watcher) markReady() {
	select {
	case <-w.ready:
		return
	default:
	}
	if w.polls < startPolls {
		for _, f := range w.files {
			if f.pending {
				return
			}
		}
	}
	close(w.ready)
}

// statThrough returns what path resolves to, following every symlink: the file's
// device, inode, size and mtime; "" and no error when it does not exist (a dangling
// link included).
func statThrough(path string) (string, error) {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		return "", nil // a directory named like a manifest is not one
	}
	return safefile.Stamp(info), nil
}

// Sink takes Services and EndpointSlices: an endpoints.Tracker, or every
// family's.
type Sink interface {
	OnServiceAdd(*v1.Service)
	OnServiceDelete(*v1.Service)
	OnEndpointSliceAdd(*discoveryv1.EndpointSlice)
	OnEndpointSliceDelete(*discoveryv1.EndpointSlice)
}

// Feed applies the difference between prev and cur (nil: nothing before) to tr.
func Feed(tr Sink, cur, prev *Objects) {
	keep := map[string]bool{}
	for _, s := range cur.Services {
		keep["svc/"+s.Namespace+"/"+s.Name] = true
		tr.OnServiceAdd(s)
	}
	for _, s := range cur.EndpointSlices {
		keep["eps/"+s.Namespace+"/"+s.Name] = true
		tr.OnEndpointSliceAdd(s)
	}
	if prev == nil {
		return
	}
	for _, s := range prev.Services {
		if !keep["svc/"+s.Namespace+"/"+s.Name] {
			tr.OnServiceDelete(s)
		}
	}
	for _, s := range prev.EndpointSlices {
		if !keep["eps/"+s.Namespace+"/"+s.Name] {
			tr.OnEndpointSliceDelete(s)
		}
	}
}
