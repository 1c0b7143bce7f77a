// Package manifests reads Service and EndpointSlice YAML files, so svcproxy can run
// without a cluster: `svcproxy render -f DIR` and `svcproxy --manifests DIR`.
package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Objects are the proxied kinds found in a set of manifests.
type Objects struct {
	Services       []*v1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
}

var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	_ = v1.AddToScheme(s)
	_ = discoveryv1.AddToScheme(s)
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// Load reads every *.yaml, *.yml and *.json file directly in dir of fsys, in name
// order. Kinds other than Service and EndpointSlice are skipped; a document that
// does not decode is an error naming the file.
func Load(fsys fs.FS, dir string) (*Objects, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read manifests dir %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		ext := path.Ext(e.Name())
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	out := &Objects{}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if err := out.decodeAll(data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return out, nil
}

func (o *Objects) decodeAll(data []byte) error {
	r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 0; ; i++ {
		var raw runtime.RawExtension
		if err := r.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(raw.Raw)) == 0 || strings.TrimSpace(string(raw.Raw)) == "null" {
			continue
		}
		obj, _, err := decoder.Decode(raw.Raw, nil, nil)
		if err != nil {
			if runtime.IsNotRegisteredError(err) {
				continue
			}
			return fmt.Errorf("document %d: %w", i, err)
		}
		switch x := obj.(type) {
		case *v1.Service:
			o.Services = append(o.Services, x)
		case *discoveryv1.EndpointSlice:
			o.EndpointSlices = append(o.EndpointSlices, x)
		case *v1.List: // what `kubectl get svc,endpointslices -o yaml` writes
			for _, item := range x.Items {
				if err := o.decodeAll(item.Raw); err != nil {
					return fmt.Errorf("document %d: %w", i, err)
				}
			}
		}
	}
}
