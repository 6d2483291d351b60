package report

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/index"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

// TestGoldenPolicyReporter: the report of a Deployment with a violation and
// of one replica that a mesh's webhook changed, as podsieve writes them
// (testdata/deployment.golden.yaml), and the fields Policy Reporter reads
// from them: the scope its kinds and uncontrolledOnly filters act on (a
// report about a Pod is filtered by the Pod's owners, which Policy Reporter
// reads from the API server), the source its source filters select, the
// result ID it remembers results by, and what it shows and counts.
func TestGoldenPolicyReporter(t *testing.T) {
	p := enginetest.MustPolicy(t, "pod-security-standards", `
exceptions: {}
rules:
- name: baseline
  podSecurity: {level: baseline}
`)
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{p}, nil, nil, nil)
	snap := ix.Snapshot()
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "6f1c8a52-0d4e-4a3b-9d61-2c7f1e9b0a11"}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/web:1",
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}
	dep, err := engine.NewObject(d)
	if err != nil {
		t.Fatal(err)
	}
	dep.APIVersion, dep.Kind = "apps/v1", "Deployment"
	depRef := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "web", UID: d.UID}
	depEntries := Entries(snap.Decide(dep, at, engine.Background), depRef, at)

	replica := func(name, uid string, injected bool) []Entry {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Spec: *d.Spec.Template.Spec.DeepCopy()}
		if injected {
			pod.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0",
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}}
		}
		o, err := engine.NewObject(pod)
		if err != nil {
			t.Fatal(err)
		}
		o.APIVersion, o.Kind = "v1", "Pod"
		ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: name, UID: types.UID(uid)}
		return Differing(Entries(snap.Decide(o, at, engine.Background), ref, at), depEntries)
	}
	entries := append([]Entry{}, depEntries...)
	entries = append(entries, replica("web-7d9c5-a1", "0a6e2d1c-5b7f-4c88-8e0d-9f3a6b2c4d01", false)...)
	entries = append(entries, replica("web-7d9c5-b2", "0a6e2d1c-5b7f-4c88-8e0d-9f3a6b2c4d02", false)...)
	entries = append(entries, replica("web-7d9c5-c3", "0a6e2d1c-5b7f-4c88-8e0d-9f3a6b2c4d03", true)...)
	reps := Reports("team-a", entries)

	// What Policy Reporter reads.
	if len(reps) != 2 {
		t.Fatalf("%d reports, want 2: the Deployment's and the changed replica's", len(reps))
	}
	byKind := map[string]int{}
	for _, r := range reps {
		if r.Scope == nil || r.Scope.Namespace != "team-a" || r.Scope.UID == "" || r.Scope.APIVersion == "" {
			t.Fatalf("%s: scope %+v, want the whole object reference", r.Name, r.Scope)
		}
		byKind[r.Scope.Kind]++
		if r.Summary.Fail != 1 || len(r.Results) != 1 {
			t.Errorf("%s: summary %+v, %d results", r.Name, r.Summary, len(r.Results))
		}
		res := r.Results[0]
		if res.Source != Source || res.Policy != "pod-security-standards" || res.Rule != "baseline" || res.Result != "fail" ||
			!res.Scored || res.Severity != "high" || res.Category != "Pod Security Standards (Baseline)" || res.Timestamp.Seconds != at.Unix() {
			t.Errorf("%s: result %+v", r.Name, res)
		}
		if res.Properties[PropertyResultID] != ResultID(*r.Scope, res.Policy, res.Rule, res.Result) {
			t.Errorf("%s: resultID %q is not the scope's", r.Name, res.Properties[PropertyResultID])
		}
	}
	if byKind["Deployment"] != 1 || byKind["Pod"] != 1 {
		t.Errorf("reports by scope kind %v", byKind)
	}

	got, err := yaml.Marshal(reps)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "deployment.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -run TestGoldenPolicyReporter -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("the reports differ from %s (run with -update after checking the change):\n%s", golden, got)
	}
}
