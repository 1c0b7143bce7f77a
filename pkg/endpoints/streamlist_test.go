package endpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
)

// listServer answers GETs of path with list in the encoding the client's
// Accept header asks for first, recording each request's query.
func listServer(t *testing.T, path string, list runtime.Object) (*httptest.Server, *[]string) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.Error(w, "not "+path, http.StatusNotFound)
			return
		}
		queries = append(queries, r.URL.RawQuery)
		if accept := r.Header.Get("Accept"); len(accept) >= 30 && accept[:30] == "application/vnd.kubernetes.pro" {
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
			_, _ = w.Write(encodeProto(t, list))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv, &queries
}

// TestStreamListDelivers: through a real REST client, in protobuf (streamed)
// and in JSON (decoded whole), every listed object is delivered and the
// reflector gets stubs at the list's resource version; the request carries
// the reflector's options.
func TestStreamListDelivers(t *testing.T) {
	for _, ct := range []string{"application/vnd.kubernetes.protobuf", "application/json"} {
		t.Run(ct, func(t *testing.T) {
			srv, queries := listServer(t, "/api/v1/services", serviceList(3, metav1.ListMeta{ResourceVersion: "42"}))
			c, err := typedcorev1.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: ct}})
			if err != nil {
				t.Fatal(err)
			}
			var delivered []string
			out, err := streamList(context.Background(), c.RESTClient(), serviceLists,
				metav1.ListOptions{ResourceVersion: "0", Limit: 500, LabelSelector: "!service.kubernetes.io/headless"},
				func(obj any) error {
					s := obj.(*v1.Service)
					delivered = append(delivered, s.Namespace+"/"+s.Name+" "+s.Spec.ClusterIP)
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(delivered) != "[ns/s0 10.96.0.1 ns/s1 10.96.0.1 ns/s2 10.96.0.1]" {
				t.Errorf("delivered %v", delivered)
			}
			if out.ResourceVersion != "42" || len(out.Items) != 3 || out.Items[2].String() != "ns/s2" {
				t.Errorf("returned %+v, want 3 keys at 42", out)
			}
			if want := "labelSelector=%21service.kubernetes.io%2Fheadless&limit=500&resourceVersion=0"; len(*queries) != 1 || (*queries)[0] != want {
				t.Errorf("queries %v, want [%s]", *queries, want)
			}
		})
	}
	t.Run("an API error", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403, Message: "nope"})
		}))
		defer srv.Close()
		c, err := typeddiscoveryv1.NewForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		_, err = streamList(context.Background(), c.RESTClient(), sliceLists, metav1.ListOptions{}, func(any) error { return nil })
		if classify(err) != authz {
			t.Errorf("error %v: want a Forbidden the retrying lister knows", err)
		}
	})
}

// TestPagedListerListsFirst: a watch-list request before the
// first List is refused (the reflector falls back to a List), and passed on
// once a List completed; the keys a streamed List returns are not delivered
// again.
func TestPagedListerListsFirst(t *testing.T) {
	watches := 0
	lw := &stubLW{list: func() runtime.Object {
		return &keyList{ListMeta: metav1.ListMeta{ResourceVersion: "8"}, Items: []keyStub{*key("ns/a")}}
	}, watches: &watches}
	p := &pagedLister{lw: lw, pageSize: 500, deliver: func(obj any) error {
		t.Errorf("delivered %T again", obj)
		return nil
	}}
	watchList := metav1.ListOptions{SendInitialEvents: ptr(true)}
	if _, err := p.WatchWithContext(context.Background(), watchList); err != errListFirst {
		t.Fatalf("watch-list before a List: %v, want errListFirst", err)
	}
	if _, err := p.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "3"}); err != nil || watches != 1 {
		t.Fatalf("a plain watch: %v (%d watches), want it passed on", err, watches)
	}
	out, err := p.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if l := out.(*keyList); l.ResourceVersion != "8" || len(l.Items) != 1 || l.Items[0].String() != "ns/a" {
		t.Errorf("list %+v, want the key at 8", l)
	}
	if _, err := p.WatchWithContext(context.Background(), watchList); err != nil || watches != 2 {
		t.Errorf("watch-list after a List: %v (%d watches), want it passed on", err, watches)
	}
}

type stubLW struct {
	list    func() runtime.Object
	watches *int
}

func (s *stubLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return s.list(), nil
}

func (s *stubLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	*s.watches++
	return nil, nil
}

// TestPagedListerJoinsStreamedPages: the keys of streamed pages (a server that
// honours limit) are joined, at the last page's resource version.
func TestPagedListerJoinsStreamedPages(t *testing.T) {
	pages := []*keyList{
		{ListMeta: metav1.ListMeta{ResourceVersion: "5", Continue: "c1"}, Items: []keyStub{*key("ns/a"), *key("ns/b")}},
		{ListMeta: metav1.ListMeta{ResourceVersion: "5"}, Items: []keyStub{*key("c")}},
	}
	n := 0
	lw := &stubLW{list: func() runtime.Object { n++; return pages[n-1] }, watches: new(int)}
	p := &pagedLister{lw: lw, pageSize: 2, deliver: func(obj any) error {
		t.Errorf("delivered %T again", obj)
		return nil
	}}
	out, err := p.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	l := out.(*keyList)
	var keys []string
	for _, k := range l.Items {
		keys = append(keys, k.String())
	}
	if fmt.Sprint(keys) != "[ns/a ns/b c]" || l.ResourceVersion != "5" || n != 2 {
		t.Errorf("keys %v at %q after %d requests, want [ns/a ns/b c] at 5 after 2", keys, l.ResourceVersion, n)
	}
}

// TestPagedListerStreamsFirstWhenAsked: with streamFirst, a watch-list is
// passed on before any List.
func TestPagedListerStreamsFirstWhenAsked(t *testing.T) {
	watches := 0
	lw := &stubLW{list: func() runtime.Object { t.Error("listed"); return nil }, watches: &watches}
	p := &pagedLister{lw: lw, pageSize: 500, streamFirst: true}
	if _, err := p.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: ptr(true)}); err != nil || watches != 1 {
		t.Fatalf("watch-list before a List with streamFirst: %v (%d watches), want it passed on", err, watches)
	}
}
