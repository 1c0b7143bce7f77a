// Package manifests reads Service and EndpointSlice YAML files, so svcproxy can run
// without a cluster: `svcproxy render -f DIR` and `svcproxy --manifests DIR`.
//
// Each document (and each item of a List) is decoded on its own: one that does not
// decode is reported as a Problem naming its file and index, and the rest are used.
package manifests

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
// cannot be read is an error.
func Read(fsys fs.FS, dir string) (*Objects, []Problem, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifests dir %s: %w", dir, err)
	}
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
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			problems = append(problems, Problem{File: name, Item: -1, Reason: fmt.Sprintf("read: %v", err)})
			continue
		}
		f := Decode(name, data)
		out.Add(f.Apply(nil))
		problems = append(problems, f.Problems...)
	}
	return out, problems, nil
}
