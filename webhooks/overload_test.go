package webhooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

func TestReviewDeadline(t *testing.T) {
	at := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		query string
		want  time.Duration
	}{
		{name: "the API server's 5s less the margin", query: "?timeout=5s", want: 5*time.Second - answerMargin},
		{name: "a tenth of a short timeout", query: "?timeout=1s", want: 900 * time.Millisecond},
		{name: "no timeout: the cap", query: "", want: DefaultMaxReviewTime},
		{name: "a longer timeout than the cap: the cap", query: "?timeout=30s", want: DefaultMaxReviewTime},
		{name: "a malformed timeout: the cap", query: "?timeout=soon", want: DefaultMaxReviewTime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := withRequestTimeout(context.Background(), httptest.NewRequest(http.MethodPost, PodsPath+tt.query, nil))
			a := ctx.Value(timeoutKey{}).(arrival)
			a.at = at
			ctx = context.WithValue(ctx, timeoutKey{}, a)
			if got := reviewDeadline(ctx, 0).Sub(at); got != tt.want {
				t.Errorf("deadline %s after arrival, want %s", got, tt.want)
			}
		})
	}
}

// TestAdmissionLimiterFairness: one namespace holds at most half the slots,
// and a freed slot goes to the waiting namespace that holds the fewest.
func TestAdmissionLimiterFairness(t *testing.T) {
	l := newAdmissionLimiter(4)
	bg := context.Background()
	// A review whose context has ended takes a free slot but waits for none:
	// whether it got one says whether one was free to it.
	ended, cancel := context.WithCancel(bg)
	cancel()
	var releaseA, releaseB []func()
	for range 2 {
		r, ok := l.acquire(bg, "flood", time.Minute)
		if !ok {
			t.Fatal("flood: no slot while slots are free")
		}
		releaseA = append(releaseA, r)
	}
	if _, ok := l.acquire(ended, "flood", time.Minute); ok {
		t.Fatal("flood got a third of 4 slots: one namespace must hold at most 2")
	}
	for range 2 {
		r, ok := l.acquire(ended, "quiet", time.Minute)
		if !ok {
			t.Fatal("quiet waited behind a namespace that holds its share")
		}
		releaseB = append(releaseB, r)
	}
	// Every slot is held. A flood review queues first, then one from a third
	// namespace: the next freed slot goes to the third namespace.
	got := make(chan string, 2)
	var wg sync.WaitGroup
	for i, ns := range []string{"flood", "third"} {
		wg.Go(func() {
			if r, ok := l.acquire(bg, ns, time.Minute); ok {
				got <- ns
				r()
			}
		})
		if !l.awaitQueued(i+1, awaitLimit) {
			t.Fatalf("%s: not queued within %v", ns, awaitLimit)
		}
	}
	releaseB[0]()
	if ns := <-got; ns != "third" {
		t.Fatalf("a freed slot went to %q, want the namespace holding none", ns)
	}
	releaseA[0]()
	if ns := <-got; ns != "flood" {
		t.Fatalf("got %q, want flood once it is under its share", ns)
	}
	wg.Wait()
	releaseA[1]()
	releaseB[1]()
	releaseB[1]() // a second call is harmless
	if n := l.load(); n != 0 {
		t.Fatalf("%d slots held after every release", n)
	}
}

// awaitQueued reports whether n reviews wait for a slot within limit, in
// real time: a timer wakes the wait when the limit is reached.
func (l *admissionLimiter) awaitQueued(n int, limit time.Duration) bool {
	expired := false
	timer := time.AfterFunc(limit, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		expired = true
		l.queueChanged.Broadcast()
	})
	defer timer.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.waiting) < n {
		if expired {
			return false
		}
		l.queueChanged.Wait()
	}
	return true
}

// TestOverloadedFailsClosed: a review that finds no slot in time is refused
// at once with 429 and a message to retry, never allowed.
func TestOverloadedFailsClosed(t *testing.T) {
	h := &PodAdmission{Index: restrictedIndex(t), Clock: clocktesting.NewFakePassiveClock(now),
		MaxConcurrentReviews: 1, ReviewQueueTimeout: 20 * time.Millisecond}
	unblock := make(chan struct{})
	started := make(chan struct{}, 1)
	SlowDecisions(h, func(ctx context.Context, _ *engine.Object) {
		started <- struct{}{}
		select {
		case <-unblock:
		case <-ctx.Done():
		}
	})
	clean := restrictedPod(`[]`)
	var wg sync.WaitGroup
	wg.Go(func() {
		if resp := h.Handle(context.Background(), rawPodRequest(clean)); !resp.Allowed {
			t.Errorf("the review holding the slot was refused: %+v", resp.Result)
		}
	})
	<-started
	before := testenv.CounterValue(t, rejectedOverload)
	req := rawPodRequest(clean)
	req.Namespace = "other"
	resp := h.Handle(context.Background(), req)
	close(unblock)
	wg.Wait()
	if resp.Allowed {
		t.Fatal("an overloaded review was allowed")
	}
	if resp.Result.Code != http.StatusTooManyRequests || !strings.Contains(resp.Result.Message, "podsieve is overloaded") ||
		!strings.Contains(resp.Result.Message, "retry") {
		t.Errorf("answer %d %q, want 429 saying podsieve is overloaded, retry", resp.Result.Code, resp.Result.Message)
	}
	if got := testenv.CounterValue(t, rejectedOverload) - before; got != 1 {
		t.Errorf("podsieve_admission_rejected_overload_total grew by %v, want 1", got)
	}
}

// TestDeadlineFailsClosed: a decision still running at the API server's
// timeout (less the margin) is refused, not allowed.
func TestDeadlineFailsClosed(t *testing.T) {
	h := &PodAdmission{Index: restrictedIndex(t), Clock: clocktesting.NewFakePassiveClock(now)}
	SlowDecisions(h, func(ctx context.Context, _ *engine.Object) { <-ctx.Done() })
	ctx := withRequestTimeout(context.Background(), httptest.NewRequest(http.MethodPost, PodsPath+"?timeout=200ms", nil))
	start := time.Now()
	resp := h.Handle(ctx, rawPodRequest(restrictedPod(`[]`)))
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("answered after %s, past the API server's 200ms", took)
	}
	if resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable || !strings.Contains(resp.Result.Message, "could not finish deciding") {
		t.Fatalf("answer allowed=%v %d %q, want a 503 refusal", resp.Allowed, resp.Result.Code, resp.Result.Message)
	}
}

// TestRefusalLogged: the log line of a refusal names the policy, rule,
// controls, request and user.
func TestRefusalLogged(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	h := &PodAdmission{Index: restrictedIndex(t), Clock: clocktesting.NewFakePassiveClock(now)}
	req := rawPodRequest(restrictedPod(`[{"name":"h","hostPath":{"path":"/"}}]`))
	req.UID = "uid-42"
	req.UserInfo = authenticationv1.UserInfo{Username: "alice"}
	req.Operation = admissionv1.Create
	if resp := h.Handle(logf.IntoContext(context.Background(), log), req); resp.Allowed {
		t.Fatal("a hostPath volume was allowed at restricted")
	}
	want := []string{`"policy"="restricted"`, `"rule"="restricted"`, `"controls"=["Volume Types"]`, `"requestID"="uid-42"`, `"user"="alice"`}
	for _, line := range lines {
		if strings.Contains(line, `"msg"="refused"`) {
			for _, w := range want {
				if !strings.Contains(line, w) {
					t.Errorf("refusal log line lacks %s:\n%s", w, line)
				}
			}
			return
		}
	}
	t.Fatalf("no refusal logged: %q", lines)
}

// TestBudgetStopFollowsTheAction: a review that exceeds its work budget is
// refused, with the engine's reason, by an Enforce policy; an Audit policy
// admits it and records the stop, as it records any violation, and does not
// turn into enforcement.
func TestBudgetStopFollowsTheAction(t *testing.T) {
	for _, tt := range []struct {
		action  string
		allowed bool
	}{{"Enforce", false}, {"Audit", true}} {
		t.Run(tt.action, func(t *testing.T) {
			ix := index.New("podsieve-system")
			ix.Load([]*engine.Policy{enginetest.MustPolicy(t, "restricted", "action: "+tt.action+"\nrules:\n- name: restricted\n  podSecurity: {level: restricted, version: latest}")}, nil, nil, nil)
			ix.MarkReady()
			h := &PodAdmission{Index: ix, Clock: clocktesting.NewFakePassiveClock(now)}
			LimitSteps(h, 10)
			resp := h.Handle(context.Background(), rawPodRequest(restrictedPod(`[]`)))
			if resp.Allowed != tt.allowed {
				t.Fatalf("allowed %v, want %v: %v", resp.Allowed, tt.allowed, resp.Result)
			}
			if !tt.allowed {
				if msg := resp.Result.Message; !strings.Contains(msg, `podsieve stopped evaluating SecurityPolicy "restricted" rule "restricted": the review exceeded its work budget of 10 steps`) {
					t.Errorf("refusal %q lacks the engine's reason", msg)
				}
				return
			}
			if a := resp.AuditAnnotations[AnnotationAuditViolations]; !strings.Contains(a, `"control":"Evaluation stopped"`) {
				t.Errorf("audit annotation %q does not record the stop", a)
			}
		})
	}
}

// TestUsernameExemption: a rule's exclude.usernames exempts requests by
// that user at admission, as Pod Security Admission's exemptions do; the
// same pod from anyone else is refused.
func TestUsernameExemption(t *testing.T) {
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{enginetest.MustPolicy(t, "restricted", `
rules:
- name: restricted
  exclude: {usernames: ["system:serviceaccount:ci:image-builder"]}
  podSecurity: {level: restricted, version: latest}`)}, nil, nil, nil)
	ix.MarkReady()
	h := &PodAdmission{Index: ix, Clock: clocktesting.NewFakePassiveClock(now)}
	for _, tt := range []struct {
		user    string
		allowed bool
	}{{"system:serviceaccount:ci:image-builder", true}, {"alice", false}, {"", false}} {
		req := rawPodRequest(restrictedPod(`[{"name":"h","hostPath":{"path":"/"}}]`))
		req.UserInfo = authenticationv1.UserInfo{Username: tt.user}
		resp := h.Handle(context.Background(), req)
		if resp.Allowed != tt.allowed {
			t.Errorf("request by %q: allowed %v, want %v (%s)", tt.user, resp.Allowed, tt.allowed, resp.Result.Message)
		}
		if !tt.allowed && !strings.Contains(resp.Result.Message, `is refused by SecurityPolicy "restricted" rule "restricted"`) {
			t.Errorf("request by %q: refusal %q does not name the rule", tt.user, resp.Result.Message)
		}
	}
}
