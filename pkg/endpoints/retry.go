package endpoints

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/klog/v2"
)

// RetryOptions tune RetryingListerWatcher. Zero fields take the defaults.
type RetryOptions struct {
	// Interval between two attempts of a failing List or Watch (250 ms).
	Interval time.Duration
	// AuthzGrace is how long after the last transient failure a Forbidden or
	// Unauthorized answer is taken for an API server that is still warming up
	// its authorizer, and retried (10 s). Outside it, such an answer is
	// returned at once: missing RBAC must show in the log, not be hidden by
	// retries.
	AuthzGrace time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
	// Logger receives one line when the API server becomes unreachable, one
	// when it answers again, and every Forbidden/Unauthorized given up on
	// (klog's).
	Logger *klog.Logger
}

func (o RetryOptions) withDefaults() RetryOptions {
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.AuthzGrace <= 0 {
		o.AuthzGrace = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		l := klog.Background()
		o.Logger = &l
	}
	return o
}

// failure is how a List or Watch error is handled.
type failure int

const (
	permanent failure = iota // returned to the reflector as is
	transient                // the API server is away or overloaded: retry
	authz                    // Forbidden/Unauthorized: retry only right after a transient failure
)

// classify sorts a List or Watch error. Transient: the connection could not
// be made or broke (refused, reset, EOF, timeouts), 5xx and 429. Authz:
// 401 and 403. Everything else (410 Gone, 400, 404, ...) is the reflector's
// business: it knows to relist on an expired resource version.
func classify(err error) failure {
	var netErr net.Error
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return authz
	case apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err), apierrors.IsUnexpectedServerError(err):
		return transient
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if status.Status().Code >= 500 {
			return transient
		}
		return permanent
	}
	switch {
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		utilnet.IsProbableEOF(err), utilnet.IsHTTP2ConnectionLost(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &netErr) && netErr.Timeout():
		return transient
	}
	// A bad certificate or kubeconfig is not an outage: the reflector logs
	// it on every attempt.
	return permanent
}

// RetryingListerWatcher wraps lw so that a List or Watch that fails because
// the API server is away (see classify) is retried every Interval inside
// the call, until it succeeds or ctx ends. client-go's reflector backs off
// exponentially on such failures, up to [30 s, 60 s) between attempts after
// a minute of outage, and treats a Forbidden watch from an API server whose
// authorizer is not ready yet as a failed ListAndWatch with the same
// backoff; with this wrapper the reflector sees neither, and resumes within
// Interval of the API server answering. what names the resource in the log.
func RetryingListerWatcher(lw cache.ListerWatcher, what string, o RetryOptions) ListerWatcher {
	o = o.withDefaults()
	return &retrying{lw: cache.ToListerWatcherWithContext(lw), orig: lw, what: what, o: o}
}

// ListerWatcher is a cache.ListerWatcher that takes contexts.
type ListerWatcher interface {
	cache.ListerWatcher
	cache.ListerWatcherWithContext
}

type retrying struct {
	lw   cache.ListerWatcherWithContext
	orig cache.ListerWatcher
	what string
	o    RetryOptions

	mu            sync.Mutex
	downSince     time.Time // first failure of the current outage; zero when up
	lastTransient time.Time
	retries       int
	lastErr       error // of the current outage
	// watching: a Watch returned a stream. The reflector calls again only once
	// that stream has ended, which is how a restarting API server shows first:
	// the stream's end counts as a transient failure (streamEnded).
	watching bool
}

var _ ListerWatcher = &retrying{}

func (r *retrying) List(opts metav1.ListOptions) (runtime.Object, error) {
	return r.ListWithContext(context.Background(), opts)
}

func (r *retrying) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), opts)
}

func (r *retrying) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	r.streamEnded()
	var out runtime.Object
	err := r.retry(ctx, "list", func() error {
		var err error
		out, err = r.lw.ListWithContext(ctx, opts)
		return err
	})
	return out, err
}

func (r *retrying) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	r.streamEnded()
	var out watch.Interface
	err := r.retry(ctx, "watch", func() error {
		var err error
		out, err = r.lw.WatchWithContext(ctx, opts)
		return err
	})
	if err == nil {
		r.mu.Lock()
		r.watching = true
		r.mu.Unlock()
	}
	return out, err
}

// streamEnded notes, when a watch stream was open, that it has ended: the
// reflector lists or watches again only then. A restarted API server ends the
// streams, and client-go retries the broken connection inside the next call and
// hands back only what the new server answers, a Forbidden while its authorizer
// warms up (the chaos soak saw it at every restart): taken for missing RBAC, that
// logged a false "check its RBAC" error and sent the reflector into its backoff.
// A stream's end is a transient failure for AuthzGrace; so is the end of a watch
// the API server timed out, which at worst delays a real RBAC error by the grace.
func (r *retrying) streamEnded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watching {
		r.watching = false
		r.lastTransient = r.o.Now()
	}
}

// IsWatchListSemanticsUnSupported passes on what the wrapped ListerWatcher
// says, so that the reflector streams lists only where the client can.
func (r *retrying) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(r.orig)
}

// retry calls f until it succeeds, fails for good, or ctx ends.
func (r *retrying) retry(ctx context.Context, op string, f func() error) error {
	for {
		err := f()
		if err == nil {
			r.up()
			return nil
		}
		if ctx.Err() != nil || !r.shouldRetry(op, err) {
			return err
		}
		t := time.NewTimer(r.o.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// shouldRetry records a failure and decides whether to try again; it logs
// the first failure of an outage and every authorization error given up on.
func (r *retrying) shouldRetry(op string, err error) bool {
	kind := classify(err)
	if kind == permanent {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.o.Now()
	if kind == authz && (r.lastTransient.IsZero() || now.Sub(r.lastTransient) > r.o.AuthzGrace) {
		r.o.Logger.Error(err, "API server refuses svcproxy; check its RBAC", "resource", r.what, "op", op)
		return false
	}
	if kind == transient {
		r.lastTransient = now
	}
	if r.downSince.IsZero() {
		r.downSince = now
		r.o.Logger.Info("API server unavailable; retrying until it answers", "resource", r.what, "op", op, "every", r.o.Interval, "err", err.Error())
	}
	r.retries++
	r.lastErr = err
	return true
}

// up ends an outage, if there was one, with one log line that tells how
// long it lasted and what the API server answered last (a Forbidden there
// shows an authorizer that was not ready yet).
func (r *retrying) up() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downSince.IsZero() {
		return
	}
	r.o.Logger.Info("API server answers again", "resource", r.what, "after", r.o.Now().Sub(r.downSince).Round(time.Millisecond),
		"retries", r.retries, "lastError", r.lastErr.Error())
	r.downSince, r.retries, r.lastErr = time.Time{}, 0, nil
}
