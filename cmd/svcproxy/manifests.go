package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"k8s.io/klog/v2"

	"github.com/svcproxy/svcproxy/pkg/manifests"
	"github.com/svcproxy/svcproxy/pkg/safefile"
)

const (
	// manifestPoll is how often --manifests looks at its directory. A change is
	// applied once two polls in a row saw the same content: 1-2 polls after it.
	manifestPoll = 200 * time.Millisecond
	// manifestStartPolls bounds the wait for files still being written at start.
	manifestStartPolls = 25
)

// watchManifests feeds the tracker with the manifests in dir, then keeps doing so
// as files change. The returned function blocks until the first content of every
// file has been fed (or manifestStartPolls have passed), so that the first sync
// does not drop Services that are still being read. errCount is set to the number of
// documents currently skipped.
func watchManifests(ctx context.Context, dir string, tracker objectSink, errCount gauge) (func(context.Context) bool, error) {
	if _, err := os.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("read manifests dir: %w", err)
	}
	w := newManifestWatcher(dir, tracker, errCount)
	t := time.NewTicker(manifestPoll)
	go func() {
		defer t.Stop()
		w.run(ctx, t.C)
	}()
	return w.waitReady, nil
}

// gauge is the part of prometheus.Gauge the watcher uses.
type gauge interface{ Set(float64) }

// manifestWatcher polls a directory of manifests. It stats each file through
// symlinks (so a ConfigMap volume's `..data` swap or a re-pointed link is seen),
// and applies a file only when two polls in a row saw the same content: a file
// caught half-written, even one that still parses, waits for the writer to finish.
// A file that disappears is dropped only once it stayed gone for a poll too. Only
// regular files of at most manifests.MaxFileBytes are read (manifests.ReadFile):
// a named pipe, a device or a bigger file is skipped, never waited on, and keeps
// what its name declared before, like a file that cannot be read.
type manifestWatcher struct {
	dir      string
	tracker  objectSink // every family's tracker
	errCount gauge
	files    map[string]*watchedFile
	fed      *manifests.Objects // what the tracker was fed
	dirErr   string             // the last error reading dir, logged once
	polls    int
	ready    chan struct{}
}

type watchedFile struct {
	seen     observation // what the last poll saw
	pending  bool        // seen is not applied yet
	used     observation // what applied comes from
	applied  *manifests.Objects
	problems []manifests.Problem
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

func newManifestWatcher(dir string, tracker objectSink, errCount gauge) *manifestWatcher {
	return &manifestWatcher{dir: dir, tracker: tracker, errCount: errCount, files: map[string]*watchedFile{},
		fed: &manifests.Objects{}, ready: make(chan struct{})}
}

// run polls now and on every tick until ctx ends.
func (w *manifestWatcher) run(ctx context.Context, tick <-chan time.Time) {
	for {
		w.poll()
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

func (w *manifestWatcher) waitReady(ctx context.Context) bool {
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// poll looks at the directory once, applies the files whose content is stable and
// feeds the tracker if anything changed.
func (w *manifestWatcher) poll() {
	w.polls++
	names, err := w.list()
	if err != nil {
		if err.Error() != w.dirErr {
			klog.ErrorS(err, "Reading the manifests directory; keeping what was read before", "dir", w.dir)
			w.dirErr = err.Error()
		}
		if w.polls >= manifestStartPolls {
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
func (w *manifestWatcher) list() (map[string]bool, error) {
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range entries {
		if manifests.IsManifest(e.Name()) && !e.IsDir() {
			names[e.Name()] = true
		}
	}
	return names, nil
}

// pollFile observes one file and applies it when it is stable; it reports whether
// what the file contributes changed.
func (w *manifestWatcher) pollFile(name string) bool {
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
		data, err := manifests.ReadFile(path)
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
func (w *manifestWatcher) apply(name string, f *watchedFile) bool {
	var file *manifests.File
	switch {
	case f.seen.err != "":
		file = &manifests.File{Broken: true, Problems: []manifests.Problem{manifests.FileProblem(name, errors.New(f.seen.err))}}
	case f.seen.stamp == "":
		file = &manifests.File{} // gone
	default:
		file = manifests.Decode(name, f.seen.data)
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
func (w *manifestWatcher) feed() {
	names := make([]string, 0, len(w.files))
	for name := range w.files {
		names = append(names, name)
	}
	sort.Strings(names)
	all := &manifests.Objects{}
	problems := 0
	for _, name := range names {
		all.Add(w.files[name].applied)
		problems += len(w.files[name].problems)
	}
	feed(w.tracker, all, w.fed)
	w.fed = all
	if w.errCount != nil {
		w.errCount.Set(float64(problems))
	}
}

// markReady closes ready once every file seen has been applied, or after
// manifestStartPolls polls.
func (w *manifestWatcher) markReady() {
	select {
	case <-w.ready:
		return
	default:
	}
	if w.polls < manifestStartPolls {
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
