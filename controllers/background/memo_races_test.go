package background

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
)

// exception compiles team-a's exception e.
func (w *scanWorld) exception(t *testing.T, spec string) *engine.Exception {
	t.Helper()
	e, _ := w.compileException(t, "e", spec)
	return e
}

func messages(t *testing.T, s *Scanner, snap *index.Snapshot, now time.Time) []string {
	t.Helper()
	entries, _, _, err := s.decide(context.Background(), snap, "team-a", now)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Result.Message)
	}
	return out
}

// TestMemoNotReusedBeforeTheChangeIsMarked: a scan that takes its snapshot
// after the index published a change but before markStale classified it
// (another listener first, or s.mu held elsewhere) decides again, and what
// it keeps is not reused against what the change made stale.
func TestMemoNotReusedBeforeTheChangeIsMarked(t *testing.T) {
	const policy = `{rules: [{name: r, podSecurity: {level: baseline}}], exceptions: {allowedControls: ["Privileged Containers"]}}`
	w := newScanWorld(t, policy, nil, testPod("pod-1", privileged))
	ctx := context.Background()
	var inWindow func()
	// A listener that runs before the scanner's markStale: it stands for
	// the scan's worker taking the new snapshot in the window between
	// cur.Store and markStale.
	w.ix.OnChange(func(index.Change) {
		if f := inWindow; f != nil {
			inWindow = nil
			f()
		}
	})
	s := w.scanner()
	violations := func() int { v, _ := s.totals(); return v["p"] }
	if err := s.scanNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	if got := violations(); got != 1 {
		t.Fatalf("first scan: %d violations, want 1", got)
	}
	inWindow = func() {
		if err := s.scanNamespace(ctx, "team-a"); err != nil {
			t.Fatal(err)
		}
	}
	w.ix.SetException(w.exception(t, `exceptions: [{policyName: p, ruleNames: ["*"]}]
podSecurity: [{controlName: Privileged Containers, images: ["registry.example/app*"]}]`))
	// The scan the change queues, well after it.
	if err := s.scanNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	fresh := w.scanner()
	if err := fresh.scanNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	fv, _ := fresh.totals()
	t.Logf("memo scanner: %d violations; fresh scanner: %d violations", violations(), fv["p"])
	if violations() != fv["p"] {
		t.Errorf("the memo's result differs from a fresh scan after the index change: %d vs %d", violations(), fv["p"])
	}
}

// TestMemoFollowsInactiveExceptionsExpiry: an inactive exception's refusal
// changes with the clock (a guardrail's refusal becomes "expired at ..."),
// though the index publishes nothing at its expiry: the memo ends there.
func TestMemoFollowsInactiveExceptionsExpiry(t *testing.T) {
	const policy = `{rules: [{name: r, podSecurity: {level: baseline}}], exceptions: {allowedControls: ["Privileged Containers"], requireJustification: true}}`
	w := newScanWorld(t, policy, nil, testPod("pod-1", privileged))
	e := w.exception(t, `exceptions: [{policyName: p, ruleNames: ["*"]}]
podSecurity: [{controlName: Privileged Containers, images: ["registry.example/app*"]}]
expiresAt: "`+w.clk.Now().Add(time.Hour).Format(time.RFC3339)+`"`)
	st := e.State(w.ix.Snapshot().Policy, w.clk.Now())
	if st.Ready {
		t.Fatalf("exception is Ready: %+v", st)
	}
	w.ix.Place("team-a", "e", e, st)
	s := w.scanner()
	t.Logf("before expiry: %q", messages(t, s, w.ix.Snapshot(), w.clk.Now()))
	w.clk.Step(2 * time.Hour)
	// The exception controller wakes at expiry and places it again.
	gen := w.ix.Snapshot().Generation()
	w.ix.Place("team-a", "e", e, e.State(w.ix.Snapshot().Policy, w.clk.Now()))
	t.Logf("index generation before/after re-placing at expiry: %d/%d", gen, w.ix.Snapshot().Generation())
	got := messages(t, s, w.ix.Snapshot(), w.clk.Now())
	fresh := w.scanner()
	want := messages(t, fresh, w.ix.Snapshot(), w.clk.Now())
	t.Logf("memo:  %q", got)
	t.Logf("fresh: %q", want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the memo's report message differs from a fresh scan's after an inactive exception expired")
	}
}

// TestReusedResultsCarryTheScansTime: reused results carry the time of the
// scan that reuses them, as a fresh decision's do (visible wherever the old
// report lacks the result: deleted, a write failed, a controlled pod's
// result starting to differ from its controller's).
func TestReusedResultsCarryTheScansTime(t *testing.T) {
	w := newScanWorld(t, `{rules: [{name: r, podSecurity: {level: baseline}}]}`, nil, testPod("pod-1", privileged))
	s := w.scanner()
	ts := func(s *Scanner) int64 {
		entries, _, _, err := s.decide(context.Background(), w.ix.Snapshot(), "team-a", w.clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return entries[0].Result.Timestamp.Seconds
	}
	first := ts(s)
	w.clk.Step(time.Hour)
	fresh := w.scanner()
	t.Logf("memo timestamp %d, fresh %d (first %d)", ts(s), ts(fresh), first)
	if ts(s) != ts(fresh) {
		t.Errorf("entry timestamps differ between memo and fresh decision")
	}
}

// TestCrossCheckBoundsAreNotSpoofed: a tenant-written string in a denial
// message that reads like the compiled form's size-bound refusal does not
// make the policy not_compared, which would mask a disagreement.
func TestCrossCheckBoundsAreNotSpoofed(t *testing.T) {
	ctx := context.Background()
	magic := "X, more than the API server's form of podsieve's policies evaluates"
	spoof := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{corev1.Capability(magic)}}}
	}
	plainPriv := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	w := newScanWorld(t, crossCheckPolicy, nil, testPod("spoof", spoof), testPod("plain-priv", plainPriv))
	w.injectBug(t)
	before := crossCounts(t)
	if err := w.s.scanNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	got := crossDelta(t, before)
	t.Logf("with a bug on every non-web pod: %v (want disagree: 2)", got)
	if got[crossDisagree] != 2 {
		t.Errorf("a tenant string in a violation masks the disagreement: %v", got)
	}
}
