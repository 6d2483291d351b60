package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// TestTruncate: a message over the limit is cut to at most the limit, with
// "...", between characters: never inside a multi-byte one.
func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{name: "within the limit", s: "abc", n: 10, want: "abc"},
		{name: "exactly the limit", s: "abcdefghij", n: 10, want: "abcdefghij"},
		{name: "ASCII over the limit", s: "abcdefghijk", n: 10, want: "abcdefg..."},
		{name: "a 2-byte character at the cut", s: "abcdeféghij", n: 10, want: "abcdef..."},
		{name: "a 2-byte character ending at the cut", s: "abcdeéfghij", n: 10, want: "abcdeé..."},
		{name: "a 3-byte character at the cut", s: "abcde日本語", n: 10, want: "abcde..."},
		{name: "a 4-byte character at the cut", s: "abcd🙂efghij", n: 10, want: "abcd..."},
		{name: "nothing but multi-byte characters", s: strings.Repeat("日", 10), n: 10, want: "日日..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncate(tt.s, tt.n)
			if got != tt.want {
				t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			}
			if len(got) > tt.n || !utf8.ValidString(got) {
				t.Errorf("truncate(%q, %d) = %q: %d bytes, valid UTF-8: %v", tt.s, tt.n, got, len(got), utf8.ValidString(got))
			}
		})
	}
}

// TestExceptionStalled: an exception is Stalled exactly when it waits for a
// person; not while it is being deleted, and, for a missing policy or rule
// (which a GitOps tool applying both together meets), only once it is older
// than missingPolicyGrace, with a recheck then.
func TestExceptionStalled(t *testing.T) {
	created := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name        string
		reason      string
		ready       bool
		age         time.Duration
		want        bool
		wantRecheck time.Duration
	}{
		{"active", policyv1alpha1.ReasonActive, true, 0, false, 0},
		{"expired", policyv1alpha1.ReasonExpired, false, 0, true, 0},
		{"not permitted", policyv1alpha1.ReasonNotPermitted, false, 0, true, 0},
		{"invalid", policyv1alpha1.ReasonInvalid, false, 0, true, 0},
		{"limit exceeded", policyv1alpha1.ReasonLimitExceeded, false, 0, true, 0},
		{"deleting", policyv1alpha1.ReasonDeleting, false, time.Hour, false, 0},
		{"policy not found, just created", policyv1alpha1.ReasonPolicyNotFound, false, 20 * time.Second, false, 40*time.Second + time.Millisecond},
		{"rule not found, just created", policyv1alpha1.ReasonRuleNotFound, false, 0, false, missingPolicyGrace + time.Millisecond},
		{"policy not found, past the grace", policyv1alpha1.ReasonPolicyNotFound, false, missingPolicyGrace, true, 0},
		{"rule not found, long after", policyv1alpha1.ReasonRuleNotFound, false, 24 * time.Hour, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, recheck := exceptionStalled(tt.ready, tt.reason, created, created.Add(tt.age))
			if got != tt.want || recheck != tt.wantRecheck {
				t.Errorf("exceptionStalled = %v, recheck %s; want %v, %s", got, recheck, tt.want, tt.wantRecheck)
			}
		})
	}
}

// TestRequeueOnConflict: the conflict of a locked status apply is a requeue
// within a second, not an error; any other error and any other result pass
// through.
func TestRequeueOnConflict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: policyv1alpha1.GroupVersion.Group, Resource: "securitypolicies"}, "p",
		errors.New("the object has been modified"))
	other := errors.New("connection refused")
	tests := []struct {
		name    string
		result  ctrl.Result
		err     error
		want    ctrl.Result
		wantErr error
	}{
		{name: "written", result: ctrl.Result{RequeueAfter: time.Hour}, want: ctrl.Result{RequeueAfter: time.Hour}},
		{name: "a conflict: requeued", err: conflict, want: ctrl.Result{RequeueAfter: time.Second}},
		{name: "a conflict, with a later wake: requeued sooner", result: ctrl.Result{RequeueAfter: time.Hour}, err: conflict,
			want: ctrl.Result{RequeueAfter: time.Second}},
		{name: "a conflict, with a sooner wake: kept", result: ctrl.Result{RequeueAfter: time.Millisecond}, err: conflict,
			want: ctrl.Result{RequeueAfter: time.Millisecond}},
		{name: "another error: returned", result: ctrl.Result{RequeueAfter: time.Hour}, err: other,
			want: ctrl.Result{RequeueAfter: time.Hour}, wantErr: other},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := requeueOnConflict(tt.result, tt.err)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("requeueOnConflict(%v, %v) = %v, %v; want %v, %v", tt.result, tt.err, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
