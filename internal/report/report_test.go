package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/index"
)

func pod(ns, name string, mut func(*corev1.Pod)) *engine.Object {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	if mut != nil {
		mut(p)
	}
	o, err := engine.NewObject(p)
	if err != nil {
		panic(err)
	}
	return o
}

func netAdmin(p *corev1.Pod) {
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
}

func hostNetwork(p *corev1.Pod) { p.Spec.HostNetwork = true }

const baseline = `
exceptions: {}
rules:
- name: baseline
  podSecurity:
    level: baseline
    exclude:
    - controlName: Host Namespaces
      restrictedField: spec.hostNetwork
      values: ["true"]
`

func entry(policy, name, rule string, result reportv1alpha2.PolicyResult) Entry {
	return Entry{Policy: policy, Result: reportv1alpha2.PolicyReportResult{
		Source: Source, Policy: policy, Rule: rule, Result: result, Message: "m",
		Timestamp: metav1.Timestamp{Seconds: 100},
		Resources: []corev1.ObjectReference{{Kind: "Pod", Namespace: "ns", Name: name, UID: types.UID(name)}},
	}}
}

func TestReports(t *testing.T) {
	var entries []Entry
	for i := range MaxResults + 3 {
		entries = append(entries, entry(fmt.Sprintf("p-%04d", i), "big", "r", reportv1alpha2.ResultPass))
	}
	entries = append(entries, entry("b", "web", "r", reportv1alpha2.ResultFail), entry("a", "web", "r", reportv1alpha2.ResultSkip),
		entry("a", "web", "q", reportv1alpha2.ResultPass))
	reps := Reports("ns", entries)
	if len(reps) != 3 {
		t.Fatalf("got %d reports, want 3 (big split in two, web)", len(reps))
	}
	tests := []struct {
		name, report, object string
		results              int
		summary              reportv1alpha2.PolicyReportSummary
		policyLabels         []string
	}{
		{name: "first chunk is full", report: "podsieve-big", object: "big", results: MaxResults, summary: reportv1alpha2.PolicyReportSummary{Pass: MaxResults}},
		{name: "second chunk holds the rest", report: "podsieve-big-2", object: "big", results: 3, summary: reportv1alpha2.PolicyReportSummary{Pass: 3}},
		{name: "another object has its own report with every policy's results", report: "podsieve-web", object: "web", results: 3,
			summary: reportv1alpha2.PolicyReportSummary{Pass: 1, Fail: 1, Skip: 1}, policyLabels: []string{"policy.podsieve.dev/a", "policy.podsieve.dev/b"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := reps[i]
			if r.Name != tc.report || r.Namespace != "ns" || len(r.Results) != tc.results || r.Summary != tc.summary {
				t.Errorf("got %s/%s with %d results, summary %+v", r.Namespace, r.Name, len(r.Results), r.Summary)
			}
			if r.Scope == nil || r.Scope.Kind != "Pod" || r.Scope.Name != tc.object || r.Scope.Namespace != "ns" || r.Scope.UID != types.UID(tc.object) {
				t.Errorf("scope %+v, want Pod ns/%s", r.Scope, tc.object)
			}
			if r.Labels[LabelManagedBy] != ManagedBy || r.Labels[LabelScopeKind] != "Pod" || r.Labels[LabelScopeUID] != tc.object {
				t.Errorf("labels %v", r.Labels)
			}
			for _, l := range tc.policyLabels {
				if _, ok := r.Labels[l]; !ok {
					t.Errorf("no label %s in %v", l, r.Labels)
				}
			}
			if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].Kind != "Pod" || r.OwnerReferences[0].Name != tc.object || r.OwnerReferences[0].UID != types.UID(tc.object) {
				t.Errorf("owner references %+v: want the object, so that its report goes with it", r.OwnerReferences)
			}
		})
	}
	if got := reps[2].Results; got[0].Policy != "a" || got[0].Rule != "q" || got[1].Rule != "r" || got[2].Policy != "b" {
		t.Errorf("results are not ordered by policy and rule: %+v", got)
	}
	t.Run("a policy name too long for a label key gets none", func(t *testing.T) {
		long := strings.Repeat("p", 64)
		r := Reports("ns", []Entry{entry(long, "x", "r", reportv1alpha2.ResultPass)})[0]
		if len(r.Labels) != 3 {
			t.Errorf("labels %v", r.Labels)
		}
	})
}

func TestName(t *testing.T) {
	withUID := corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web", UID: "0b6f6e0c-1d5e-4bc7-9d6c-111111111111"}
	noUID := corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"}
	tests := []struct {
		name  string
		ref   corev1.ObjectReference
		chunk int
		want  string
	}{
		{name: "first", ref: withUID, want: "podsieve-0b6f6e0c-1d5e-4bc7-9d6c-111111111111"},
		{name: "third", ref: withUID, chunk: 2, want: "podsieve-0b6f6e0c-1d5e-4bc7-9d6c-111111111111-3"},
		{name: "without a UID, by a hash of kind and name", ref: noUID, want: "podsieve-" + hashOf("/Pod/ns/web", 32)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Name(tc.ref, tc.chunk); got != tc.want {
				t.Errorf("Name(%v, %d) = %q, want %q", tc.ref, tc.chunk, got, tc.want)
			}
		})
	}
}

// TestDiffering: a controlled pod's result is kept only where it says
// something its controller's does not.
func TestDiffering(t *testing.T) {
	p := enginetest.MustPolicy(t, "pss", baseline)
	q := enginetest.MustPolicy(t, "labelled", `
exceptions: {}
rules:
- name: baseline
  match: {selector: {matchLabels: {tier: edge}}}
  podSecurity: {level: baseline}
`)
	excs := []*engine.Exception{enginetest.MustException(t, "ns", "app", `
exceptions: [{policyName: pss, ruleNames: ["*"]}]
match: {names: ["waived-*"]}
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]
`)}
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{p, q}, excs, nil, nil)
	snap := ix.Snapshot()
	at := time.Unix(100, 0)
	entries := func(o *engine.Object) []Entry {
		return Entries(snap.Decide(o, at, engine.Background), corev1.ObjectReference{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: types.UID("uid-" + o.Name)}, at)
	}
	deployment := func(name string, mut func(*corev1.PodSpec)) *engine.Object {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}
		if mut != nil {
			mut(&d.Spec.Template.Spec)
		}
		o, err := engine.NewObject(d)
		if err != nil {
			t.Fatal(err)
		}
		o.Kind = "Deployment"
		return o
	}
	addNetAdmin := func(s *corev1.PodSpec) {
		s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	}
	injected := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}}
	}
	digest := func(p *corev1.Pod) {
		netAdmin(p)
		p.Spec.Containers[0].Image = "registry.example/app@sha256:" + strings.Repeat("a", 64)
	}
	tests := []struct {
		name       string
		controller *engine.Object
		pod        *engine.Object
		want       []string // policy/rule/result of the pod's entries kept
	}{
		{name: "a violating replica repeats its Deployment", controller: deployment("web", addNetAdmin), pod: pod("ns", "web-1", netAdmin),
			want: nil},
		{name: "a passing replica repeats its Deployment", controller: deployment("web", nil), pod: pod("ns", "web-1", nil),
			want: nil},
		{name: "a waived replica repeats its Deployment", controller: deployment("waived-web", addNetAdmin), pod: pod("ns", "waived-web-1", netAdmin),
			want: nil},
		{name: "another image with the same violation is reported", controller: deployment("web", addNetAdmin),
			pod:  pod("ns", "web-1", func(p *corev1.Pod) { netAdmin(p); p.Spec.Containers[0].Image = "registry.attacker.example/app:1" }),
			want: []string{"pss/baseline/fail"}},
		{name: "a rule that matches the pod but not its Deployment is reported", controller: deployment("web", addNetAdmin),
			pod:  pod("ns", "web-1", func(p *corev1.Pod) { netAdmin(p); p.Labels = map[string]string{"tier": "edge"} }),
			want: []string{"labelled/baseline/fail"}},
		{name: "an image pinned to a digest by a mutating webhook is the same violation", controller: deployment("web", addNetAdmin), pod: pod("ns", "web-1", digest),
			want: nil},
		{name: "a container injected into a passing template is reported", controller: deployment("web", nil), pod: pod("ns", "web-1", injected),
			want: []string{"pss/baseline/fail"}},
		{name: "a container injected into a violating template is reported", controller: deployment("web", addNetAdmin), pod: pod("ns", "web-1", func(p *corev1.Pod) { netAdmin(p); injected(p) }),
			want: []string{"pss/baseline/fail"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range Differing(entries(tc.pod), entries(tc.controller)) {
				got = append(got, e.Policy+"/"+e.Result.Rule+"/"+string(e.Result.Result))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestKeepTimestamps(t *testing.T) {
	old := Reports("ns", []Entry{entry("a", "same", "r", reportv1alpha2.ResultFail), entry("a", "changed", "r", reportv1alpha2.ResultFail)})
	next := []Entry{entry("a", "same", "r", reportv1alpha2.ResultFail), entry("a", "changed", "r", reportv1alpha2.ResultPass), entry("a", "new", "r", reportv1alpha2.ResultPass)}
	for i := range next {
		next[i].Result.Timestamp = metav1.Timestamp{Seconds: 200}
	}
	reps := Reports("ns", next)
	KeepTimestamps(reps, []reportv1alpha2.PolicyReport{*old[0], *old[1]})
	want := map[string]int64{"same": 100, "changed": 200, "new": 200}
	for _, rep := range reps {
		for _, r := range rep.Results {
			if got := r.Timestamp.Seconds; got != want[r.Resources[0].Name] {
				t.Errorf("%s: timestamp %d, want %d", r.Resources[0].Name, got, want[r.Resources[0].Name])
			}
		}
	}
}

func TestTruncate(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	got := truncate(s, 8)
	if len(got) > 8 || !strings.HasSuffix(got, "...") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("truncate = %q", got)
	}
	if truncate("short", 8) != "short" {
		t.Error("a short string changed")
	}
}

// BenchmarkScan is the CPU side of a full background scan of 5,000 pods in
// 100 namespaces: decide each pod in background mode, turn the decision into
// report entries and group each namespace's entries into reports, one per
// pod. The API
// side (cache reads, report writes) is measured by TestBackgroundScale.
func BenchmarkScan(b *testing.B) {
	p := enginetest.MustPolicy(b, "pss", baseline)
	var excs []*engine.Exception
	const namespaces, perNS = 100, 50
	objects := make([][]*engine.Object, namespaces)
	for n := range namespaces {
		ns := fmt.Sprintf("ns-%03d", n)
		if n%2 == 0 {
			excs = append(excs, enginetest.MustException(b, ns, "mesh", `
exceptions: [{policyName: pss, ruleNames: ["*"]}]
match: {names: ["mesh-*"]}
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]
`))
		}
		for i := range perNS {
			name, mut := fmt.Sprintf("ok-%d", i), (func(*corev1.Pod))(nil)
			switch i % 5 {
			case 0:
				name, mut = fmt.Sprintf("mesh-%d", i), netAdmin
			case 1:
				name, mut = fmt.Sprintf("app-%d", i), netAdmin
			}
			objects[n] = append(objects[n], pod(ns, name, mut))
		}
	}
	ix := index.New("podsieve-system")
	ix.Load([]*engine.Policy{p}, excs, nil, nil)
	at := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		snap := ix.Snapshot()
		for n := range namespaces {
			var entries []Entry
			for _, o := range objects[n] {
				d := snap.Decide(o, at, engine.Background)
				entries = append(entries, Entries(d, corev1.ObjectReference{Kind: "Pod", Namespace: o.Namespace, Name: o.Name, UID: types.UID("uid-" + o.Name)}, at)...)
			}
			if reps := Reports(o0(objects[n]).Namespace, entries); len(reps) != perNS {
				b.Fatalf("%d reports", len(reps))
			}
		}
	}
}

func o0(os []*engine.Object) *engine.Object { return os[0] }

func hashOf(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// TestReportsBoundedBySize: long messages split an object's results before
// MaxResults, so that no report nears the API server's size limit.
func TestReportsBoundedBySize(t *testing.T) {
	var entries []Entry
	for i := range 400 {
		e := entry(fmt.Sprintf("p-%04d", i), "pod", "r", reportv1alpha2.ResultFail)
		e.Result.Message = strings.Repeat("m", MaxMessage)
		e.Result.Properties = map[string]string{PropertyFields: strings.Repeat("f", MaxProperty)}
		entries = append(entries, e)
	}
	reps := Reports("ns", entries)
	if len(reps) < 2 {
		t.Fatalf("400 results of ~3.5 KiB in %d report(s)", len(reps))
	}
	total := 0
	for _, r := range reps {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxBytes {
			t.Errorf("%s is %d bytes, more than %d", r.Name, len(b), MaxBytes)
		}
		total += len(r.Results)
	}
	if total != 400 {
		t.Errorf("%d results in the reports, want 400", total)
	}
}

// TestOpenReportsRoundTrip: a report written as an OpenReports Report and
// read back is the report computed, field for field, and the Report says
// what the PolicyReport says under OpenReports' names.
func TestOpenReportsRoundTrip(t *testing.T) {
	var entries []Entry
	for _, name := range []string{"a", "b"} {
		e := entry(name, "web", "r", reportv1alpha2.ResultFail)
		e.Result.Severity, e.Result.Category, e.Result.Scored = reportv1alpha2.SeverityHigh, "Pod Security Standards (Baseline)", true
		e.Result.Properties = map[string]string{PropertyResultID: "id-" + name}
		entries = append(entries, e)
	}
	r := Reports("ns", entries)[0]
	o := ToOpenReport(r)
	if o.APIVersion != "openreports.io/v1alpha1" || o.Kind != "Report" || o.Source != Source || o.Name != r.Name || o.Namespace != "ns" {
		t.Errorf("Report %s %s source %q name %s/%s", o.APIVersion, o.Kind, o.Source, o.Namespace, o.Name)
	}
	if o.Scope == nil || *o.Scope != *r.Scope {
		t.Errorf("scope %+v, want %+v", o.Scope, r.Scope)
	}
	if o.Summary.Fail != 2 || len(o.Results) != 2 || o.Results[0].Description != "m" || o.Results[1].Policy != "b" || o.Results[1].Subjects[0].Name != "web" ||
		o.Results[0].Properties[PropertyResultID] != "id-a" || string(o.Results[0].Severity) != "high" || string(o.Results[0].Result) != "fail" {
		t.Errorf("Report %+v", o)
	}
	if !reflect.DeepEqual(o.OwnerReferences, r.OwnerReferences) || !reflect.DeepEqual(o.Labels, r.Labels) || !reflect.DeepEqual(o.Annotations, r.Annotations) {
		t.Errorf("metadata %+v, want %+v", o.ObjectMeta, r.ObjectMeta)
	}
	if back := FromOpenReport(o); !reflect.DeepEqual(back, r) {
		t.Errorf("round trip\n got %+v\nwant %+v", back, r)
	}
	// The JSON keys are the old ones: tools that read both see the same names.
	raw, err := json.Marshal(o.Results[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"resources":[`) || !strings.Contains(string(raw), `"message":"m"`) {
		t.Errorf("result JSON %s", raw)
	}
}
