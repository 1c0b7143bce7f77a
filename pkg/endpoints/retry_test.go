package endpoints

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

var (
	svcGR       = schema.GroupResource{Resource: "endpointslices", Group: "discovery.k8s.io"}
	errRefused  = &url.Error{Op: "Get", URL: "https://172.18.0.2:6443", Err: fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED)}
	errReset    = &url.Error{Op: "Get", URL: "https://172.18.0.2:6443", Err: syscall.ECONNRESET}
	errEOF      = &url.Error{Op: "Get", URL: "https://172.18.0.2:6443", Err: io.EOF}
	errForbid   = apierrors.NewForbidden(svcGR, "", errors.New(`User "system:kube-proxy" cannot watch resource "endpointslices"`))
	errUnauth   = apierrors.NewUnauthorized("token not yet valid")
	errGone     = apierrors.NewResourceExpired("too old resource version: 10 (20)")
	errUnavail  = apierrors.NewServiceUnavailable("etcd is down")
	errInternal = apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	errTooMany  = apierrors.NewTooManyRequests("storage is (re)initializing", 1)
	errBadCert  = &url.Error{Op: "Get", URL: "https://172.18.0.2:6443", Err: x509.UnknownAuthorityError{}}
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want failure
	}{
		{"connection refused", errRefused, transient},
		{"connection reset", errReset, transient},
		{"EOF", errEOF, transient},
		{"bare unexpected EOF", io.ErrUnexpectedEOF, transient},
		{"503", errUnavail, transient},
		{"500", errInternal, transient},
		{"504", apierrors.NewTimeoutError("slow", 1), transient},
		{"502 from a proxy", apierrors.NewGenericServerResponse(502, "get", svcGR, "", "bad gateway", 0, true), transient},
		{"429", errTooMany, transient},
		{"403", errForbid, authz},
		{"401", errUnauth, authz},
		{"410 resource version too old", errGone, permanent},
		{"400", apierrors.NewBadRequest("bad selector"), permanent},
		{"404", apierrors.NewNotFound(svcGR, "x"), permanent},
		{"unknown certificate authority", errBadCert, permanent},
		{"context canceled", context.Canceled, permanent},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: classify(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

// scriptedLW fails List and Watch with the scripted errors in turn, then
// succeeds; every call advances the test clock by step.
type scriptedLW struct {
	mu     sync.Mutex
	errs   []error
	calls  int
	now    time.Time
	step   time.Duration
	cancel func() // called at call cancelAt, when set
	at     int
}

func (s *scriptedLW) next() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.now = s.now.Add(s.step)
	if s.cancel != nil && s.calls == s.at {
		s.cancel()
	}
	if s.calls <= len(s.errs) {
		return s.errs[s.calls-1]
	}
	return nil
}

func (s *scriptedLW) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *scriptedLW) List(metav1.ListOptions) (runtime.Object, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return &v1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}, nil
}

func (s *scriptedLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return watch.NewFake(), nil
}

// logLines collects what the wrapper logs, one string per line.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() *klog.Logger {
	lg := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
	return &lg
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// checkCallsAndLogs checks how many calls the fake got and that the log lines
// contain wantLogs, one each, in order.
func checkCallsAndLogs(t *testing.T, fake *scriptedLW, wantCalls int, logs *logLines, wantLogs []string) {
	t.Helper()
	if fake.calls != wantCalls {
		t.Errorf("%d calls, want %d", fake.calls, wantCalls)
	}
	got := logs.get()
	if len(got) != len(wantLogs) {
		t.Fatalf("%d log lines, want %d:\n%s", len(got), len(wantLogs), strings.Join(got, "\n"))
	}
	for i, want := range wantLogs {
		if !strings.Contains(got[i], want) {
			t.Errorf("log line %d = %s, want it to contain %s", i, got[i], want)
		}
	}
}

func TestRetryingListerWatcher(t *testing.T) {
	many := func(err error, n int) []error {
		out := make([]error, n)
		for i := range out {
			out[i] = err
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		errs      []error
		step      time.Duration // test clock advance per call
		cancelAt  int           // the caller gives up during this call
		wantErr   error
		wantCalls int
		wantLogs  []string // substrings, one per line, in order
	}{
		{
			name: "a minute of refused connections: one line when it starts, one when it ends",
			errs: many(errRefused, 240), step: 250 * time.Millisecond, wantCalls: 241,
			wantLogs: []string{`"msg"="API server unavailable; retrying until it answers"`, `"msg"="API server answers again" "resource"="Services" "after"="1m0s" "retries"=240 "lastError"="Get \"https://172.18.0.2:6443\": dial tcp: connection refused"`},
		},
		{
			name: "every transient kind is retried",
			errs: []error{errReset, errEOF, errUnavail, errInternal, errTooMany, io.ErrUnexpectedEOF}, wantCalls: 7,
			wantLogs: []string{"API server unavailable", "API server answers again"},
		},
		{
			name: "forbidden right after the restart is retried until the authorizer is ready",
			errs: []error{errRefused, errRefused, errForbid, errUnauth, errForbid}, step: time.Second, wantCalls: 6,
			wantLogs: []string{"API server unavailable", `"retries"=5 "lastError"="endpointslices.discovery.k8s.io is forbidden`},
		},
		{
			name: "forbidden without an outage is missing RBAC: returned at once and logged",
			errs: []error{errForbid}, wantErr: errForbid, wantCalls: 1,
			wantLogs: []string{`"msg"="API server refuses svcproxy; check its RBAC" "error"="endpointslices.discovery.k8s.io is forbidden`},
		},
		{
			name: "forbidden long after the outage is missing RBAC too",
			errs: append([]error{errRefused}, many(errForbid, 20)...), step: time.Second, wantErr: errForbid, wantCalls: 12,
			wantLogs: []string{"API server unavailable", "API server refuses svcproxy; check its RBAC"},
		},
		{
			name: "resource version too old goes to the reflector, which relists",
			errs: []error{errGone}, wantErr: errGone, wantCalls: 1,
		},
		{
			name: "a bad certificate is not an outage",
			errs: []error{errBadCert}, wantErr: errBadCert, wantCalls: 1,
		},
		{
			name: "the caller gives up while the API server is away",
			errs: many(errRefused, 1000), cancelAt: 3, wantErr: errRefused, wantCalls: 3,
			wantLogs: []string{"API server unavailable"},
		},
	} {
		for _, op := range []string{"list", "watch"} {
			t.Run(op+": "+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				fake := &scriptedLW{errs: tc.errs, step: tc.step, now: time.Unix(1000, 0)}
				if tc.cancelAt > 0 {
					fake.cancel, fake.at = cancel, tc.cancelAt
				}
				logs := &logLines{}
				lw := RetryingListerWatcher(fake, "Services", RetryOptions{Interval: time.Microsecond, Now: fake.clock, Logger: logs.logger()})
				var err error
				if op == "list" {
					var obj runtime.Object
					obj, err = lw.ListWithContext(ctx, metav1.ListOptions{})
					if err == nil && obj == nil {
						t.Error("List returned neither an object nor an error")
					}
				} else {
					var w watch.Interface
					w, err = lw.WatchWithContext(ctx, metav1.ListOptions{})
					if err == nil && w == nil {
						t.Error("Watch returned neither a watch nor an error")
					}
				}
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
				checkCallsAndLogs(t, fake, tc.wantCalls, logs, tc.wantLogs)
			})
		}
	}
}

// TestRetryingListerWatcherKeepsWatchListSemantics: the reflector streams
// lists (WatchListClient) only when the client supports it; the fake
// clientset does not, and a wrapper hiding that would make informers on it
// wait for a bookmark that never comes.
func TestRetryingListerWatcherKeepsWatchListSemantics(t *testing.T) {
	type unsupported interface{ IsWatchListSemanticsUnSupported() bool }
	for _, tc := range []struct {
		name string
		lw   cache.ListerWatcher
		want bool
	}{
		{"a client without watch-list", cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{}, noWatchList{}), true},
		{"a client with watch-list", cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{}, struct{}{}), false},
		{"a plain ListerWatcher", &scriptedLW{}, false},
	} {
		lw, ok := RetryingListerWatcher(tc.lw, "Services", RetryOptions{}).(unsupported)
		if !ok {
			t.Fatalf("%s: the wrapper does not say whether it supports watch-list", tc.name)
		}
		if got := lw.IsWatchListSemanticsUnSupported(); got != tc.want {
			t.Errorf("%s: IsWatchListSemanticsUnSupported = %v, want %v", tc.name, got, tc.want)
		}
	}
}

type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// TestRetryingAfterAWatchEnded: a restarted API server ends the watch streams, and
// client-go retries the broken connection inside the next Watch and hands back what
// the new server answers: a Forbidden while its authorizer warms up. Right after a
// stream ended that is retried, not logged as missing RBAC; for longer than the
// grace, it is.
func TestRetryingAfterAWatchEnded(t *testing.T) {
	forbidden := func(n int) []error {
		out := []error{nil} // the first Watch opens a stream
		for range n {
			out = append(out, errForbid)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		errs      []error
		wantErr   error
		wantCalls int
		wantLogs  []string
	}{
		{
			name: "forbidden right after the stream ended: the restart's, retried", errs: forbidden(3), wantCalls: 5,
			wantLogs: []string{"API server unavailable", `"msg"="API server answers again" "resource"="Services" "after"="3s" "retries"=3`},
		},
		{
			name: "forbidden for longer than the grace: missing RBAC", errs: forbidden(20), wantErr: errForbid, wantCalls: 12,
			wantLogs: []string{"API server unavailable", "API server refuses svcproxy; check its RBAC"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &scriptedLW{errs: tc.errs, step: time.Second, now: time.Unix(1000, 0)}
			logs := &logLines{}
			lw := RetryingListerWatcher(fake, "Services", RetryOptions{Interval: time.Microsecond, Now: fake.clock, Logger: logs.logger()})
			if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{}); err != nil {
				t.Fatalf("first watch: %v", err)
			}
			if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{}); !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			checkCallsAndLogs(t, fake, tc.wantCalls, logs, tc.wantLogs)
		})
	}
}
