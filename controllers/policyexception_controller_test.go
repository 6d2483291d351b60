package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// exceptionFixture is a PolicyException reconciler on the leader, over a fake
// client holding one policy, "open", which honours exceptions, in force.
type exceptionFixture struct {
	c   client.Client
	ix  *index.Index
	clk *clocktesting.FakeClock
	rec *events.FakeRecorder
	r   *PolicyExceptionReconciler
}

func newExceptionFixture(t *testing.T, objs ...client.Object) *exceptionFixture {
	t.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "open", UID: "uid-open", Generation: 1}}
	noErr(t, yaml.UnmarshalStrict([]byte("exceptions: {}\nrules: [{name: baseline, podSecurity: {level: baseline}}]"), &sp.Spec))
	f := &exceptionFixture{
		c: fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(append(objs, sp)...).
			WithStatusSubresource(&policyv1alpha1.PolicyException{}).
			WithIndex(&policyv1alpha1.PolicyException{}, IndexExceptionPolicy, exceptionPolicies).Build(),
		ix:  index.New("podsieve-system"),
		clk: clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 250_000_000, time.UTC)),
		rec: events.NewFakeRecorder(10),
	}
	p, err := engine.CompilePolicy(sp)
	noErr(t, err)
	f.ix.SetPolicy(p)
	elected := make(chan struct{})
	close(elected)
	f.r = &PolicyExceptionReconciler{Client: f.c, Index: f.ix, Recorder: f.rec, Clock: f.clk, ExceptionsNamespace: "podsieve-system",
		leader: &leadership{elected: elected}, sync: newSyncTracker(f.ix)}
	return f
}

func exceptionNaming(ns, name, policy, extra string) *policyv1alpha1.PolicyException {
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1}}
	if err := yaml.UnmarshalStrict([]byte(`exceptions: [{policyName: `+policy+`, ruleNames: ["*"]}]
podSecurity: [{controlName: Host Ports, restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]
`+extra), &pe.Spec); err != nil {
		panic(err)
	}
	return pe
}

func (f *exceptionFixture) ready(t *testing.T, key client.ObjectKey) *metav1.Condition {
	t.Helper()
	var pe policyv1alpha1.PolicyException
	noErr(t, f.c.Get(context.Background(), key, &pe))
	return meta.FindStatusCondition(pe.Status.Conditions, policyv1alpha1.ConditionReady)
}

func (f *exceptionFixture) event(t *testing.T) string {
	t.Helper()
	select {
	case e := <-f.rec.Events:
		return e
	default:
		t.Fatal("no event")
		return ""
	}
}

// TestExceptionExpiresAtItsRequeue: an Active exception with expiresAt asks
// to be reconciled just after it; when that comes, it turns Expired, leaves
// the index's exceptions in force and says so in an event. The clock is
// the reconciler's; the test moves it instead of waiting.
func TestExceptionExpiresAtItsRequeue(t *testing.T) {
	ctx := context.Background()
	pe := exceptionNaming("team", "soon", "open", `expiresAt: "2026-11-23T13:00:00Z"`)
	f := newExceptionFixture(t, pe)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pe)}

	res, err := f.r.Reconcile(ctx, req)
	noErr(t, err)
	if c := f.ready(t, req.NamespacedName); c == nil || c.Reason != policyv1alpha1.ReasonActive {
		t.Fatalf("Ready = %+v, want reason Active", c)
	}
	if f.ix.Snapshot().Exception("team", "soon") == nil {
		t.Fatal("the Active exception is not in force")
	}
	if e := f.event(t); !strings.HasPrefix(e, "Normal "+policyv1alpha1.EventReasonActivated+" ") {
		t.Errorf("event %q, want Activated", e)
	}
	expiry := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	if want := expiry.Sub(f.clk.Now()) + time.Millisecond; res.RequeueAfter != want {
		t.Fatalf("RequeueAfter = %s, want %s (just after expiresAt)", res.RequeueAfter, want)
	}

	f.clk.Step(res.RequeueAfter)
	res, err = f.r.Reconcile(ctx, req)
	noErr(t, err)
	if res.RequeueAfter != 0 {
		t.Errorf("an expired exception asks to be reconciled again in %s", res.RequeueAfter)
	}
	c := f.ready(t, req.NamespacedName)
	if c == nil || c.Reason != policyv1alpha1.ReasonExpired || c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "spec.expiresAt 2026-11-23T13:00:00Z has passed") {
		t.Fatalf("Ready = %+v, want Expired, False, saying when", c)
	}
	if f.ix.Snapshot().Exception("team", "soon") != nil {
		t.Error("the expired exception is still in force")
	}
	if e := f.event(t); !strings.HasPrefix(e, "Normal "+policyv1alpha1.EventReasonExpired+" ") {
		t.Errorf("event %q, want Expired", e)
	}
}

// recordingQueue records what is queued. Only Add is called: the embedded
// queue is nil.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []string
}

func (q *recordingQueue) Add(req reconcile.Request) { q.added = append(q.added, req.String()) }

// TestPolicyChangeRejudgesItsExceptions: when the index says a policy
// changed or left it, the exceptions that name it are queued, and only
// those; other changes queue nothing.
func TestPolicyChangeRejudgesItsExceptions(t *testing.T) {
	f := newExceptionFixture(t,
		exceptionNaming("team-a", "x", "open", ""), exceptionNaming("team-b", "y", "open", ""), exceptionNaming("team-a", "z", "other", ""))
	q := &recordingQueue{}
	noErr(t, f.r.policyChanges(context.Background(), q))

	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "open", UID: "uid-open", Generation: 2}}
	noErr(t, yaml.UnmarshalStrict([]byte("rules: [{name: baseline, podSecurity: {level: baseline}}]"), &sp.Spec))
	p, err := engine.CompilePolicy(sp)
	noErr(t, err)
	f.ix.SetPolicy(p)
	slices.Sort(q.added)
	if want := []string{"team-a/x", "team-b/y"}; !slices.Equal(q.added, want) {
		t.Errorf("a policy changed: queued %v, want %v", q.added, want)
	}

	q.added = nil
	f.ix.SetNamespace("team-a", nil)
	f.ix.DeletePolicy("no-such-policy") // not in the index: no change
	if len(q.added) != 0 {
		t.Errorf("other changes queued %v", q.added)
	}

	f.ix.DeletePolicy("open")
	slices.Sort(q.added)
	if want := []string{"team-a/x", "team-b/y"}; !slices.Equal(q.added, want) {
		t.Errorf("a policy deleted: queued %v, want %v", q.added, want)
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeletedExceptionWaivesNothing: an exception that is deleted but held
// by a finalizer (which whoever may edit it may add) leaves the index at
// once and says why, rather than waiving until the finalizer goes.
func TestDeletedExceptionWaivesNothing(t *testing.T) {
	pe := exceptionNaming("team", "held", "open", "")
	pe.Finalizers = []string{"example.com/hold"}
	f := newExceptionFixture(t, pe)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pe)}
	ctx := context.Background()
	_, err := f.r.Reconcile(ctx, req)
	noErr(t, err)
	if f.ix.Snapshot().Exception("team", "held") == nil {
		t.Fatal("the exception is not in force before its deletion")
	}
	noErr(t, f.c.Delete(ctx, pe))
	_, err = f.r.Reconcile(ctx, req)
	noErr(t, err)
	if f.ix.Snapshot().Exception("team", "held") != nil {
		t.Error("a deleted exception is still in force")
	}
	if c := f.ready(t, req.NamespacedName); c.Status != metav1.ConditionFalse || c.Reason != policyv1alpha1.ReasonDeleting {
		t.Errorf("Ready %s %s, want False %s", c.Status, c.Reason, policyv1alpha1.ReasonDeleting)
	}
}

// TestOnlyDeletionMovesTheLimit: of the updates of an exception, only the
// start of its deletion re-judges its namespace's exceptions at the limit.
func TestOnlyDeletionMovesTheLimit(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		edit func(*policyv1alpha1.PolicyException)
		want bool
	}{
		{"labels", func(pe *policyv1alpha1.PolicyException) { pe.Labels = map[string]string{"a": "b"} }, false},
		{"status", func(pe *policyv1alpha1.PolicyException) { pe.Status.ObservedGeneration = 7 }, false},
		{"spec", func(pe *policyv1alpha1.PolicyException) { pe.Generation++ }, false},
		{"deletion", func(pe *policyv1alpha1.PolicyException) { pe.DeletionTimestamp = &now }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := exceptionNaming("team", "e", "open", "")
			updated := old.DeepCopy()
			tc.edit(updated)
			if got := mayMoveLimit(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
