package background

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestScanDecidesEachObjectVersionOnce: a rescan reuses the decisions of
// object versions already decided, and decides again exactly what a change
// can affect: a new version of an object, an index change that reaches the
// namespace (not one elsewhere), and an exception in force reaching its
// expiry.
func TestScanDecidesEachObjectVersionOnce(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	pod := func(name string, privileged bool) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged}}}}}
	}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}},
		pod("pod-1", true), pod("pod-2", false), pod("pod-3", false)).Build()
	ix := index.New("podsieve-system")
	ix.SetNamespace("team-a", map[string]string{"kubernetes.io/metadata.name": "team-a"})
	ix.SetNamespace("team-b", map[string]string{"kubernetes.io/metadata.name": "team-b"})
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1}}
	if err := yaml.UnmarshalStrict([]byte(`{rules: [{name: r, podSecurity: {level: baseline}}], exceptions: {allowedControls: ["Privileged Containers"]}}`), &sp.Spec); err != nil {
		t.Fatal(err)
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		t.Fatal(err)
	}
	ix.SetPolicy(p)
	exception := func(ns string, expires time.Time) *engine.Exception {
		t.Helper()
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e", UID: types.UID("uid-e-" + ns), Generation: 1,
			CreationTimestamp: metav1.NewTime(clk.Now())}}
		spec := `exceptions: [{policyName: p, ruleNames: ["*"]}]
podSecurity: [{controlName: Privileged Containers, images: ["registry.example/app*"]}]
expiresAt: "` + expires.Format(time.RFC3339) + `"`
		if err := yaml.UnmarshalStrict([]byte(spec), &pe.Spec); err != nil {
			t.Fatal(err)
		}
		e, err := engine.CompileException(pe, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	s := newScanner(c, c, nil, ix, Options{Clock: clk, ExceptionsNamespace: "podsieve-system"})
	q := &recordingQueue{added: map[string]time.Duration{}}
	if err := s.watchIndex(ctx, q); err != nil {
		t.Fatal(err)
	}
	violations := func() int {
		v, _ := s.totals()
		return v["p"]
	}

	steps := []struct {
		name           string
		change         func()
		decided        float64
		wantViolations int
	}{
		{"the first scan decides every object", func() {}, 3, 1},
		{"a rescan with nothing changed decides nothing", func() {}, 0, 1},
		{"a new version of one object decides that object", func() {
			p := pod("pod-2", false)
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				t.Fatal(err)
			}
			p.Labels = map[string]string{"app": "x"}
			if err := c.Update(ctx, p); err != nil {
				t.Fatal(err)
			}
		}, 1, 1},
		{"a new object is decided", func() {
			if err := c.Create(ctx, pod("pod-4", true)); err != nil {
				t.Fatal(err)
			}
		}, 1, 2},
		{"an index change elsewhere decides nothing", func() { ix.SetException(exception("team-b", clk.Now().Add(time.Hour))) }, 0, 2},
		{"an exception in the namespace decides everything again", func() { ix.SetException(exception("team-a", clk.Now().Add(time.Hour))) }, 4, 0},
		{"before the exception expires nothing is decided", func() { clk.Step(59 * time.Minute) }, 0, 0},
		{"at its expiry everything is decided again", func() { clk.Step(time.Minute) }, 4, 2},
		{"a policy change decides everything again", func() {
			sp.Generation = 2
			sp.Spec.Rules[0].PodSecurity.Version = "v1.30"
			p, err := engine.CompilePolicy(sp)
			if err != nil {
				t.Fatal(err)
			}
			ix.SetPolicy(p)
		}, 4, 2},
		{"a namespace's labels decide everything again", func() {
			ix.SetNamespace("team-a", map[string]string{"kubernetes.io/metadata.name": "team-a", "tier": "apps"})
		}, 4, 2},
	}
	for _, step := range steps {
		step.change()
		before := testenv.CounterValue(t, decidedObjects)
		if err := s.scanNamespace(ctx, "team-a"); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := testenv.CounterValue(t, decidedObjects) - before; got != step.decided {
			t.Errorf("%s: decided %v objects, want %v", step.name, got, step.decided)
		}
		if got := violations(); got != step.wantViolations {
			t.Errorf("%s: %d violations of p, want %d", step.name, got, step.wantViolations)
		}
	}
}

// TestMemoIgnoresScansOvertakenByTheIndex: decisions made from a snapshot
// that an index change affecting the namespace has replaced while the scan
// ran are not kept.
func TestMemoIgnoresScansOvertakenByTheIndex(t *testing.T) {
	ix := index.New("podsieve-system")
	s := newScanner(nil, nil, nil, ix, Options{ExceptionsNamespace: "podsieve-system"})
	q := &recordingQueue{added: map[string]time.Duration{}}
	if err := s.watchIndex(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		change func()
		kept   bool
	}{
		{"nothing changed", func() {}, true},
		{"another namespace's labels", func() { ix.SetNamespace("team-b", map[string]string{"x": "y"}) }, true},
		{"its own labels", func() { ix.SetNamespace("team-a", map[string]string{"x": "y"}) }, false},
		{"everything replaced", func() { ix.Load(nil, nil, nil, nil) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := ix.Snapshot()
			tt.change()
			s.remember("team-a", snap, &memo{decisions: map[types.UID]memoized{"u": {resourceVersion: "1"}}})
			got := s.reusable("team-a", ix.Snapshot(), now) != nil
			if got != tt.kept {
				t.Errorf("memo kept = %v, want %v", got, tt.kept)
			}
		})
	}
}
