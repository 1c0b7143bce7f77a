package endpoints

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// pagingLW serves n Services in pages of opts.Limit (all when 0), at resource
// version "5", recording what each request asked and how many objects had
// been delivered when it came.
type pagingLW struct {
	n         int
	delivered *int
	requests  []string // "limit continue rv" per request
	seenAt    []int    // delivered count at each request
}

func (p *pagingLW) ListWithContext(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	p.requests = append(p.requests, fmt.Sprintf("%d %q %q", opts.Limit, opts.Continue, opts.ResourceVersion))
	p.seenAt = append(p.seenAt, *p.delivered)
	from := 0
	if opts.Continue != "" {
		from, _ = strconv.Atoi(opts.Continue)
	}
	to := p.n
	if opts.Limit > 0 && from+int(opts.Limit) < p.n {
		to = from + int(opts.Limit)
	}
	list := &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}}
	if to < p.n {
		list.Continue = strconv.Itoa(to)
	}
	for i := from; i < to; i++ {
		list.Items = append(list.Items, *makeService("ns", fmt.Sprintf("s%d", i), "10.96.0.1", nil))
	}
	return list, nil
}

func (p *pagingLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// TestPagedListerDeliversPageByPage: each page's objects reach the trackers
// before the next page is asked for, and the reflector gets only key stubs,
// at the list's resource version.
func TestPagedListerDeliversPageByPage(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n          int
		page       int64
		wantSeenAt []int
	}{
		{"one short page", 3, 4, []int{0}},
		{"exact pages", 8, 4, []int{0, 4}},
		{"a last partial page", 10, 4, []int{0, 4, 8}},
		{"empty", 0, 4, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delivered := 0
			lw := &pagingLW{n: tc.n, delivered: &delivered}
			p := &pagedLister{lw: lw, pageSize: tc.page, deliver: func(obj any) error {
				if _, ok := obj.(*v1.Service); !ok {
					t.Errorf("delivered %T", obj)
				}
				delivered++
				return nil
			}}
			out, err := p.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(lw.seenAt) != fmt.Sprint(tc.wantSeenAt) {
				t.Errorf("delivered before each request: %v, want %v (requests %v)", lw.seenAt, tc.wantSeenAt, lw.requests)
			}
			if lw.requests[0] != fmt.Sprintf("%d \"\" \"0\"", tc.page) {
				t.Errorf("first request %s: want our page size at the reflector's resource version", lw.requests[0])
			}
			for _, r := range lw.requests[1:] {
				if r[len(r)-2:] != `""` {
					t.Errorf("continued request %s carries a resource version", r)
				}
			}
			items, err := meta.ExtractList(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != tc.n || delivered != tc.n {
				t.Fatalf("%d stubs, %d delivered; want %d", len(items), delivered, tc.n)
			}
			for i, it := range items {
				k, ok := it.(*keyStub)
				if !ok || k.String() != fmt.Sprintf("ns/s%d", i) {
					t.Errorf("item %d = %#v, want the key of ns/s%d", i, it, i)
				}
			}
			if rv := out.(*keyList).ResourceVersion; rv != "5" {
				t.Errorf("list resource version %q, want 5", rv)
			}
		})
	}
}
