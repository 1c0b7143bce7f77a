package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// File is what one manifest file declares.
type File struct {
	Objects
	// Problems lists the documents (and List items) that could not be used.
	Problems []Problem
	// Held names the objects whose documents are present but unusable: Apply
	// keeps their previous versions.
	Held []Key
	// Broken is set when some document could not be parsed far enough to tell
	// which object it declares: Apply then keeps every previous object of the file.
	Broken bool
}

var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	_ = v1.AddToScheme(s)
	_ = discoveryv1.AddToScheme(s)
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// kinds are the proxied kinds, with the one apiVersion read for each.
var kinds = map[string]string{"Service": "v1", "EndpointSlice": "discovery.k8s.io/v1"}

// Decode splits data (YAML documents, or a stream of JSON objects) into documents
// and decodes each on its own, each item of a List too: a bad one becomes a
// Problem and the others are used, as does an object whose names kube-apiserver
// would refuse (see invalid). Kinds other than Service and EndpointSlice are
// skipped.
func Decode(name string, data []byte) *File {
	f := &File{}
	eachDocument(data, func(doc int, raw []byte, err error) {
		loc := Problem{File: name, Doc: doc, Item: -1}
		if err != nil {
			f.broken(loc, err.Error())
			return
		}
		js, err := utilyaml.ToJSON(raw)
		if err != nil {
			f.broken(loc, fmt.Sprintf("not valid YAML: %v", err))
			return
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			return // empty or comment-only document
		}
		f.object(loc, js, true)
	})
	return f
}

// eachDocument calls fn with each document of data, or with the error that stops
// one from being read.
func eachDocument(data []byte, fn func(doc int, raw []byte, err error)) {
	if utilyaml.IsJSONBuffer(data) {
		d := json.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var raw json.RawMessage
			err := d.Decode(&raw)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				fn(i, nil, fmt.Errorf("not valid JSON: %w", err)) // the rest of the stream is lost
				return
			}
			fn(i, raw, nil)
		}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		var syntax utilyaml.YAMLSyntaxError
		if errors.As(err, &syntax) {
			fn(i, nil, fmt.Errorf("not valid YAML: %w", err)) // a bad separator: the reader goes on after it
			continue
		}
		if err != nil {
			fn(i, nil, fmt.Errorf("read: %w", err))
			return
		}
		fn(i, raw, nil)
	}
}

// object decodes one JSON object at loc; listOK is false for a List's items.
func (f *File) object(loc Problem, js []byte, listOK bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil {
		f.broken(loc, "not an object")
		return
	}
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(fields["metadata"], &meta)
	apiVersion, kind := str(fields["apiVersion"]), str(fields["kind"])
	key := Key{Kind: kind, Namespace: str(meta["namespace"]), Name: str(meta["name"])}
	switch {
	case kind == "":
		f.broken(loc, "no kind")
	case kind == "List":
		if !listOK {
			f.broken(loc, "a List inside a List")
			return
		}
		var items []json.RawMessage
		if len(fields["items"]) > 0 {
			if err := json.Unmarshal(fields["items"], &items); err != nil {
				f.broken(loc, fmt.Sprintf("items: %v", err))
				return
			}
		}
		for j, item := range items {
			at := loc
			at.Item = j
			f.object(at, item, false)
		}
	case kinds[kind] == "":
		// not proxied
	case key.Name == "":
		f.broken(loc, kind+" without metadata.name")
	case apiVersion != kinds[kind]:
		f.held(loc, key, fmt.Sprintf("%s: apiVersion %q is not read, only %q", key, apiVersion, kinds[kind]))
	default:
		obj, _, err := decoder.Decode(js, nil, nil)
		if err != nil {
			f.held(loc, key, fmt.Sprintf("%s: %v", key, err))
			return
		}
		switch x := obj.(type) {
		case *v1.Service:
			if why := validateService(x); why != "" {
				f.held(loc, key, why)
				return
			}
			f.Services = append(f.Services, x)
		case *discoveryv1.EndpointSlice:
			if why := validateEndpointSlice(x); why != "" {
				f.held(loc, key, why)
				return
			}
			f.EndpointSlices = append(f.EndpointSlices, x)
		}
	}
}

// str is a JSON string's value; "" if raw is not a string.
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func (f *File) broken(loc Problem, reason string) {
	loc.Reason = reason
	f.Problems = append(f.Problems, loc)
	f.Broken = true
}

func (f *File) held(loc Problem, key Key, reason string) {
	loc.Reason = reason
	f.Problems = append(f.Problems, loc)
	f.Held = append(f.Held, key)
}

// Apply returns the objects to use for this file when prev (nil: none) were used
// for it before: the objects it declares now, plus the previous version of each
// object whose document is unusable, or of every previous object when the file is
// Broken. An object is dropped only when the file says so in full.
func (f *File) Apply(prev *Objects) *Objects {
	out := &Objects{
		Services:       append([]*v1.Service(nil), f.Services...),
		EndpointSlices: append([]*discoveryv1.EndpointSlice(nil), f.EndpointSlices...),
	}
	if prev == nil {
		return out
	}
	have := map[Key]bool{}
	for _, k := range out.Keys() {
		have[k] = true
	}
	keep := func(k Key) bool {
		if have[k] {
			return false
		}
		if f.Broken {
			return true
		}
		for _, h := range f.Held {
			if h == k {
				return true
			}
		}
		return false
	}
	for _, s := range prev.Services {
		if keep(Key{"Service", s.Namespace, s.Name}) {
			out.Services = append(out.Services, s)
		}
	}
	for _, s := range prev.EndpointSlices {
		if keep(Key{"EndpointSlice", s.Namespace, s.Name}) {
			out.EndpointSlices = append(out.EndpointSlices, s)
		}
	}
	return out
}
