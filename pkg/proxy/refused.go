package proxy

import (
	"sort"
	"strings"

	"github.com/svcproxy/svcproxy/pkg/endpoints"
)

// maxReasonLen bounds the kernel's reason as health reports it.
const maxReasonLen = 256

// refusals are the Services whose rules the kernel refuses: they stay queued and are
// retried every sync until they are accepted or deleted.
type refusals struct {
	m map[string]refusal // by owner
}

type refusal struct {
	svc    endpoints.ServiceKey
	reason string
}

// note records that the kernel refused owner's changes with err, and tells onRefused
// the first time, and whenever the reason changes. Owners that are not Services (the
// table skeleton) are only logged by the caller.
func (r *refusals) note(owner string, err error, onRefused func(endpoints.ServiceKey, error)) {
	svc, ok := serviceOf(owner)
	if !ok {
		return
	}
	reason := err.Error()
	if prev, ok := r.m[owner]; ok && prev.reason == reason {
		return
	}
	r.m[owner] = refusal{svc: svc, reason: reason}
	if onRefused != nil {
		onRefused(svc, err)
	}
}

// settle forgets the owners that have no change pending any more: the kernel took
// their rules, or they were deleted.
func (r *refusals) settle(pending map[string]bool) {
	for owner := range r.m {
		if !pending[owner] {
			delete(r.m, owner)
		}
	}
}

// list returns the refused Services, sorted, with their reasons.
func (r *refusals) list() []Refusal {
	out := make([]Refusal, 0, len(r.m))
	for _, f := range r.m {
		reason := f.reason
		if len(reason) > maxReasonLen {
			reason = reason[:maxReasonLen] + "..."
		}
		out = append(out, Refusal{Service: f.svc.String(), Reason: reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return out
}

// serviceOf is the inverse of ServiceOwner.
func serviceOf(owner string) (endpoints.ServiceKey, bool) {
	rest, ok := strings.CutPrefix(owner, "svc:")
	if !ok {
		return endpoints.ServiceKey{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	return endpoints.ServiceKey{Namespace: ns, Name: name}, ok
}
