// Package manifests reads Service and EndpointSlice YAML files, so svcproxy can run
// without a cluster: `svcproxy render -f DIR` and `svcproxy --manifests DIR`, whose
// directory Watch follows as files change.
//
// Each document (and each item of a List) is decoded on its own: one that does not
// decode is reported as a Problem naming its file and index, and the rest are used.
package manifests

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/svcproxy/svcproxy/pkg/safefile"
)

// Objects are the proxied kinds found in a set of manifests.
type Objects struct {
	Services       []*v1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
}

// Add appends o2's objects to o's.
func (o *Objects) Add(o2 *Objects) {
	if o2 == nil {
		return
	}
	o.Services = append(o.Services, o2.Services...)
	o.EndpointSlices = append(o.EndpointSlices, o2.EndpointSlices...)
}

// Keys names the objects, Services first.
func (o *Objects) Keys() []Key {
	var keys []Key
	for _, s := range o.Services {
		keys = append(keys, Key{"Service", s.Namespace, s.Name})
	}
	for _, s := range o.EndpointSlices {
		keys = append(keys, Key{"EndpointSlice", s.Namespace, s.Name})
	}
	return keys
}

// MaxFileBytes caps what is read of one manifest file: kube-apiserver's cap on a
// request body (3 MiB).
const MaxFileBytes = 3 << 20

// IsManifest tells whether a file name is read as a manifest: *.yaml, *.yml, *.json.
func IsManifest(name string) bool {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Load is Read for callers that want all or nothing (the embedded example, tests):
// any problem is an error.
func Load(fsys fs.FS, dir string) (*Objects, error) {
	objs, problems, err := Read(fsys, dir)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = errors.New(p.String())
		}
		return nil, errors.Join(errs...)
	}
	return objs, nil
}

// Read reads every manifest file directly in dir of fsys, in name order, and
// returns the usable objects and the problems of the others. Only a directory that
// cannot be read is an error. A file that is not regular or holds more than
// MaxFileBytes is a problem of its own. For a directory of the OS, ReadDir never
// blocks on a named pipe; Read is for embedded files and tests.
func Read(fsys fs.FS, dir string) (*Objects, []Problem, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifests dir %s: %w", dir, err)
	}
	objs, problems := readEach(entries, func(name string) ([]byte, error) { return readFS(fsys, path.Join(dir, name)) })
	return objs, problems, nil
}

// ReadDir is Read for a directory of the OS, each file read with ReadFile.
func ReadDir(dir string) (*Objects, []Problem, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifests dir %s: %w", dir, err)
	}
	objs, problems := readEach(entries, func(name string) ([]byte, error) { return ReadFile(filepath.Join(dir, name)) })
	return objs, problems, nil
}

// ReadFile reads a manifest file of the OS if it is a regular file (or a link to
// one) of at most MaxFileBytes. Anything else is refused at once with an error
// saying why (see safefile.Read): opening a named pipe nobody writes would block,
// a link to /dev/zero would never end.
func ReadFile(path string) ([]byte, error) { return safefile.Read(path, MaxFileBytes) }

// FileProblem is the Problem of a file that could not be read at all.
func FileProblem(name string, err error) Problem {
	return Problem{File: name, Doc: -1, Item: -1, Reason: err.Error()}
}

// readEach decodes the manifest files among entries, in name order.
func readEach(entries []fs.DirEntry, read func(name string) ([]byte, error)) (*Objects, []Problem) {
	var names []string
	for _, e := range entries {
		if !e.IsDir() && IsManifest(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	out := &Objects{}
	var problems []Problem
	for _, name := range names {
		data, err := read(name)
		if err != nil {
			problems = append(problems, FileProblem(name, err))
			continue
		}
		f := Decode(name, data)
		out.Add(f.Apply(nil))
		problems = append(problems, f.Problems...)
	}
	return out, problems
}

// readFS reads name of fsys as ReadFile reads the OS's files, as far as fs.FS
// allows: it looks before it opens, and reads at most MaxFileBytes+1 bytes.
func readFS(fsys fs.FS, name string) ([]byte, error) {
	info, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if err := safefile.Check(name, info, MaxFileBytes); err != nil {
		return nil, err
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, &safefile.TooLargeError{Path: name, Size: int64(len(data)), Limit: MaxFileBytes}
	}
	return data, nil
}
