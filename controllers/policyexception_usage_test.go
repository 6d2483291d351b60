package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestSetLastApplied: lastAppliedTime moves forward by at least the
// granularity, never back.
func TestSetLastApplied(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		current *time.Time
		at      time.Time
		want    time.Time
	}{
		{name: "first application is written", at: base, want: base},
		{name: "a later one moves it", current: &base, at: base.Add(lastAppliedGranularity), want: base.Add(lastAppliedGranularity)},
		{name: "one within the granularity does not", current: &base, at: base.Add(lastAppliedGranularity - time.Second), want: base},
		{name: "an older one never moves it back", current: &base, at: base.Add(-time.Hour), want: base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var st policyv1alpha1.PolicyExceptionStatus
			if tc.current != nil {
				st.LastAppliedTime = &metav1.Time{Time: *tc.current}
			}
			setLastApplied(&st, tc.at)
			if st.LastAppliedTime == nil || !st.LastAppliedTime.Time.Equal(tc.want) {
				t.Errorf("lastAppliedTime = %v, want %v", st.LastAppliedTime, tc.want)
			}
		})
	}
}

// TestUsageFlusher: a flush writes each recorded exception's latest time
// (to the second), forgets what it wrote, ignores policy rules and deleted
// exceptions; the flusher's timer only calls flush.
func TestUsageFlusher(t *testing.T) {
	ctx := context.Background()
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "mesh"}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(pe).WithStatusSubresource(pe).Build()
	usage := NewExceptionUsage()
	f := &usageFlusher{client: c, usage: usage, interval: time.Hour}

	at := time.Date(2026, 11, 23, 12, 0, 0, 700_000_000, time.UTC)
	usage.Applied([]engine.Source{engine.ExceptionSource("team", "mesh"), engine.PolicyRuleSource("p", "r"), engine.ExceptionSource("team", "gone")}, at)
	usage.Applied([]engine.Source{engine.ExceptionSource("team", "mesh")}, at.Add(-time.Minute)) // older: kept out
	f.flush(ctx)
	noErr(t, c.Get(ctx, client.ObjectKeyFromObject(pe), pe))
	if got, want := pe.Status.LastAppliedTime, at.Truncate(time.Second); got == nil || !got.Time.Equal(want) {
		t.Fatalf("lastAppliedTime = %v, want %v", got, want)
	}
	if left := usage.take(); len(left) != 0 {
		t.Errorf("the record still holds %v after a flush", left)
	}
}
