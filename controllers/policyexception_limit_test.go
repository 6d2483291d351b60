package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestNamespaceLimit: the oldest MaxPerNamespace exceptions of a namespace
// (by creationTimestamp, then name) are within the limit, the others not;
// and a change of the namespace's exceptions re-judges those whose side of
// the limit it may have moved.
func TestNamespaceLimit(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		limit      int
		excs       []limitExc
		wantOut    []string // beyond the limit, of namespace a
		wantRejudg []string // what a change in namespace a re-judges
	}{
		{"no limit", 0, []limitExc{{"a", "x", 0}, {"a", "y", 1}}, nil, nil},
		{"under the limit", 3, []limitExc{{"a", "x", 0}, {"a", "y", 1}}, nil, nil},
		{"at the limit", 2, []limitExc{{"a", "x", 0}, {"a", "y", 1}}, nil, []string{"y"}},
		{"the newest are out", 2, []limitExc{{"a", "new", 5}, {"a", "old", 0}, {"a", "mid", 1}, {"a", "newer", 6}}, []string{"new", "newer"}, []string{"mid", "new", "newer"}},
		{"same second: by name", 1, []limitExc{{"a", "b", 0}, {"a", "a", 0}}, []string{"b"}, []string{"a", "b"}},
		{"other namespaces do not count", 1, []limitExc{{"a", "x", 1}, {"b", "y", 0}, {"b", "z", 0}}, nil, []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			var objs []client.Object
			for _, e := range tt.excs {
				objs = append(objs, &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{
					Namespace: e.ns, Name: e.name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(e.age) * time.Second))}})
			}
			c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(objs...).Build()
			r := &PolicyExceptionReconciler{Client: c, Index: index.New("podsieve-system"), MaxPerNamespace: tt.limit}
			var out []string
			for _, e := range tt.excs {
				pe := &policyv1alpha1.PolicyException{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: e.name}, pe); err != nil {
					t.Fatal(err)
				}
				st, ok, err := r.withinLimit(ctx, pe)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					continue
				}
				if e.ns == "a" {
					out = append(out, e.name)
				}
				if st.Reason != policyv1alpha1.ReasonLimitExceeded {
					t.Errorf("%s/%s: reason %q", e.ns, e.name, st.Reason)
				}
				want := fmt.Sprintf("namespace %q holds %d PolicyExceptions, more than the limit of %d (podsieve manager --max-exceptions-per-namespace)", e.ns, countIn(tt.excs, e.ns), tt.limit)
				if !containsAll(st.Message, want, "kubectl get podex -n "+e.ns+" -o wide") {
					t.Errorf("message %q\ndoes not say %q", st.Message, want)
				}
			}
			slices.Sort(out)
			if !slices.Equal(out, tt.wantOut) {
				t.Errorf("beyond the limit: %v, want %v", out, tt.wantOut)
			}
			var rejudged []string
			for _, req := range r.atLimit(ctx, &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "any"}}) {
				rejudged = append(rejudged, req.Name)
			}
			slices.Sort(rejudged)
			if !slices.Equal(rejudged, tt.wantRejudg) {
				t.Errorf("re-judged: %v, want %v", rejudged, tt.wantRejudg)
			}
		})
	}
}

type limitExc struct {
	ns, name string
	age      int // seconds after the first
}

func countIn(excs []limitExc, ns string) int {
	n := 0
	for _, e := range excs {
		if e.ns == ns {
			n++
		}
	}
	return n
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
