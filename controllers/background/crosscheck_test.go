package background

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/testenv"
)

// crossCounts reads the cross-check counters of policy p.
func crossCounts(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range []string{crossAgree, crossDisagree, crossNotCompared} {
		out[r] = testenv.CounterValue(t, crossChecks.WithLabelValues("p", r))
	}
	return out
}

func crossDelta(t *testing.T, before map[string]float64) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for r, v := range crossCounts(t) {
		if d := v - before[r]; d != 0 {
			out[r] = d
		}
	}
	return out
}

const crossCheckPolicy = `
action: Enforce
rules:
- name: baseline
  podSecurity: {level: baseline}
  exclude: {usernames: ["system:*"]}
- name: restricted-for-web
  match: {selector: {matchLabels: {app: web}}}
  podSecurity: {level: restricted, version: v1.30}
exceptions: {allowedControls: ["Privileged Containers", "Capabilities"]}
`

// TestCrossCheck: the scan decides each object with the engine and with
// the compiled policies, and counts one result per policy and object:
// agree on pods that pass, fail one rule, fail both, are waived by an
// exception or partly waived; not_compared over the compiled form's bounds;
// and disagree when the two forms differ (here the compiled form of another
// policy stands in for a bug).
func TestCrossCheck(t *testing.T) {
	ctx := context.Background()
	web := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }
	netAdmin := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	}
	tooMany := func(p *corev1.Pod) {
		for i := range 200 {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "registry.example/app:1"})
		}
	}
	w := newScanWorld(t, crossCheckPolicy, []string{`
exceptions: [{policyName: p, ruleNames: ["*"]}]
match: {names: ["waived*"]}
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]
`},
		testPod("plain", nil),
		testPod("privileged", privileged),
		testPod("web", web),
		testPod("web-privileged", func(p *corev1.Pod) { web(p); privileged(p) }),
		testPod("waived", netAdmin),
		testPod("waived-web", func(p *corev1.Pod) { netAdmin(p); web(p) }),
		testPod("not-waived", netAdmin),
		testPod("too-large", tooMany),
	)
	before := crossCounts(t)
	if err := w.s.scanNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	if got, want := crossDelta(t, before), map[string]float64{crossAgree: 7, crossNotCompared: 1}; !equalCounts(got, want) {
		t.Fatalf("first scan: %v, want %v", got, want)
	}

	// A rescan decides nothing again, so compares nothing again.
	before = crossCounts(t)
	if err := w.s.scanNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	if got := crossDelta(t, before); len(got) != 0 {
		t.Fatalf("rescan: %v, want nothing", got)
	}

	// A bug (injectBug): the compiled form runs restricted on every pod.
	// Every pod but the one over the bounds now fails restricted-for-web
	// in the compiled form, and only web pods fail it in the engine too.
	w.injectBug(t)
	w.ix.SetNamespace("team-a", map[string]string{"kubernetes.io/metadata.name": "team-a", "rescan": "yes"})
	before = crossCounts(t)
	if err := w.s.scanNamespace(ctx, "team-a"); err != nil {
		t.Fatal(err)
	}
	if got, want := crossDelta(t, before), map[string]float64{crossAgree: 3, crossDisagree: 4, crossNotCompared: 1}; !equalCounts(got, want) {
		t.Fatalf("with a bug: %v, want %v", got, want)
	}
}

func equalCounts(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCrossCheckBudget: once a namespace's scan has spent its cross-check
// budget, the objects it decides next are not_compared, not evaluated.
func TestCrossCheckBudget(t *testing.T) {
	ctx := context.Background()
	pod := testPod("plain", nil)
	w := newScanWorld(t, crossCheckPolicy, nil, pod)
	snap := w.ix.Snapshot()
	labels := snap.NamespaceLabels("team-a")
	nc, err := w.s.namespaceCheck(ctx, snap, "team-a", labels, w.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	u.SetGroupVersionKind(gvk)
	o, err := engine.NewObject(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		spent time.Duration
		want  string
	}{
		{0, crossAgree},
		{w.s.opts.CrossCheckBudget, crossNotCompared},
	} {
		nc.spent = tt.spent
		before := crossCounts(t)
		w.s.crossCheck(ctx, nc, u, gvk, o, snap, labels, w.clk.Now())
		if got := crossDelta(t, before); !equalCounts(got, map[string]float64{tt.want: 1}) {
			t.Errorf("spent %s: %v, want one %s", tt.spent, got, tt.want)
		}
	}
}
