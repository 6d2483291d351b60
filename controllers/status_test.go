package controllers

import (
	"strings"
	"testing"
	"unicode/utf8"

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
// person; not while it is being deleted, and not while the policy or rule
// it names is missing, which a GitOps tool applying both together meets.
func TestExceptionStalled(t *testing.T) {
	for _, tt := range []struct {
		reason string
		ready  bool
		want   bool
	}{
		{policyv1alpha1.ReasonActive, true, false},
		{policyv1alpha1.ReasonExpired, false, true},
		{policyv1alpha1.ReasonNotPermitted, false, true},
		{policyv1alpha1.ReasonInvalid, false, true},
		{policyv1alpha1.ReasonLimitExceeded, false, true},
		{policyv1alpha1.ReasonPolicyNotFound, false, false},
		{policyv1alpha1.ReasonRuleNotFound, false, false},
		{policyv1alpha1.ReasonDeleting, false, false},
	} {
		t.Run(tt.reason, func(t *testing.T) {
			if got := exceptionStalled(tt.ready, tt.reason); got != tt.want {
				t.Errorf("exceptionStalled(%v, %s) = %v, want %v", tt.ready, tt.reason, got, tt.want)
			}
		})
	}
}
