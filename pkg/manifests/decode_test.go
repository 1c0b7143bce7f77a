package manifests

import (
	"reflect"
	"strings"
	"testing"

	"github.com/svcproxy/svcproxy/internal/manifesttest"
)

func TestDecodeLists(t *testing.T) {
	item := func(s string) string { // a manifest as a List item
		return "- " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
	}
	list := func(items ...string) string { return "apiVersion: v1\nkind: List\nitems:\n" + strings.Join(items, "") }
	for _, tc := range []struct {
		name     string
		data     string
		want     summary
		problems []string
		held     []Key
		broken   bool
	}{
		{
			name: "every item used",
			data: list(item(manifesttest.Service("a", "10.96.0.1")), item(manifesttest.Slice("a", "10.244.1.2"))),
			want: summary{Services: []string{"default/a"}, Slices: []string{"default/a-abc:1"}},
		},
		{
			name:     "one bad item: the others are used, the bad one is named by document and item",
			data:     manifesttest.Service("z", "10.96.0.9") + "---\n" + list(item(manifesttest.Service("a", "10.96.0.1")), item(strings.Replace(manifesttest.Slice("b", "10.244.1.2"), "port: 80", "port: [80]", 1)), item(manifesttest.Service("c", "10.96.0.3"))),
			want:     summary{Services: []string{"default/z", "default/a", "default/c"}},
			problems: []string{"l.yaml: document 1: item 1: EndpointSlice default/b-abc: json: cannot unmarshal array"},
			held:     []Key{{"EndpointSlice", "default", "b-abc"}},
		},
		{
			name:     "an item without kind",
			data:     list(item("metadata: {name: x}"), item(manifesttest.Service("a", "10.96.0.1"))),
			want:     summary{Services: []string{"default/a"}},
			problems: []string{"l.yaml: document 0: item 0: no kind"},
			broken:   true,
		},
		{
			name:     "items that are not a list",
			data:     "apiVersion: v1\nkind: List\nitems: {a: b}\n",
			problems: []string{"l.yaml: document 0: items: json: cannot unmarshal object"},
			broken:   true,
		},
		{
			name:     "a List in a List",
			data:     list(item(list(item(manifesttest.Service("a", "10.96.0.1")))), item(manifesttest.Service("b", "10.96.0.2"))),
			want:     summary{Services: []string{"default/b"}},
			problems: []string{"l.yaml: document 0: item 0: a List inside a List"},
			broken:   true,
		},
		{
			name: "an empty List, other kinds among the items",
			data: "apiVersion: v1\nkind: List\n---\n" + list(item(configMapYAML), item(crdYAML)),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Decode("l.yaml", []byte(tc.data))
			if s := summarize(&f.Objects); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("objects %+v, want %+v", s, tc.want)
			}
			checkProblems(t, f.Problems, tc.problems)
			if !reflect.DeepEqual(f.Held, tc.held) || f.Broken != tc.broken {
				t.Errorf("held %v broken %v, want %v %v", f.Held, f.Broken, tc.held, tc.broken)
			}
		})
	}
}

// TestApply: an object is dropped only when its file says so in full; an unusable
// document keeps the previous version of what it declared.
func TestApply(t *testing.T) {
	prev := Decode("f.yaml", []byte(manifesttest.Service("a", "10.96.0.1")+"---\n"+manifesttest.Service("b", "10.96.0.2")+"---\n"+manifesttest.Slice("a", "10.244.1.2", "10.244.1.3")))
	if prev.Problems != nil {
		t.Fatal(prev.Problems)
	}
	badPort := func(s string) string { return strings.Replace(s, "port: 80", `port: "80"`, 1) }
	for _, tc := range []struct {
		name string
		data string
		want summary
	}{
		{
			name: "the file parses in full: what it lacks goes",
			data: manifesttest.Service("a", "10.96.0.1") + "---\n" + manifesttest.Slice("a", "10.244.1.9"),
			want: summary{Services: []string{"default/a"}, Slices: []string{"default/a-abc:1"}},
		},
		{
			name: "a bad document keeps the previous version of its object; b goes",
			data: manifesttest.Service("a", "10.96.0.1") + "---\n" + badPort(manifesttest.Slice("a", "10.244.1.9")),
			want: summary{Services: []string{"default/a"}, Slices: []string{"default/a-abc:2"}},
		},
		{
			name: "a document that does not parse keeps every previous object the file does not declare now",
			data: manifesttest.Service("a", "10.96.0.1") + "---\nkind: [\n",
			want: summary{Services: []string{"default/a", "default/b"}, Slices: []string{"default/a-abc:2"}},
		},
		{
			name: "an empty file declares nothing",
			data: "",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decode("f.yaml", []byte(tc.data)).Apply(&prev.Objects)
			if s := summarize(got); !reflect.DeepEqual(s, tc.want) {
				t.Errorf("Apply = %+v, want %+v", s, tc.want)
			}
		})
	}
}
