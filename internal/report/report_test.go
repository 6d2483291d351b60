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
	"k8s.io/utils/ptr"

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

func TestEntries(t *testing.T) {
	at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name           string
		policy         string
		action         string
		exceptions     []*engine.Exception
		object         *engine.Object
		wantResult     reportv1alpha2.PolicyResult
		wantViolations int
		wantExceptions string
		wantProps      map[string]string
		wantMessage    string
	}{
		{
			name: "no violation passes", policy: baseline, object: pod("team-a", "clean", nil),
			wantResult: reportv1alpha2.ResultPass, wantMessage: "meets baseline:latest",
		},
		{
			name: "a violation the policy excludes passes", policy: baseline, object: pod("team-a", "hostnet", hostNetwork),
			wantResult: reportv1alpha2.ResultPass, wantMessage: "meets baseline:latest (1 violation excluded by the policy)",
			wantProps: map[string]string{PropertyControls: "Host Namespaces", PropertyFields: "spec.hostNetwork"},
		},
		{
			name: "an uncovered violation fails", policy: baseline, object: pod("team-a", "netadmin", netAdmin),
			wantResult: reportv1alpha2.ResultFail, wantViolations: 1,
			wantMessage: `1 violation of baseline:latest: Capabilities: container "app" (image registry.example/app:1) sets spec.containers[*].securityContext.capabilities.add to NET_ADMIN`,
			wantProps:   map[string]string{PropertyControls: "Capabilities", PropertyFields: "spec.containers[*].securityContext.capabilities.add", PropertyViolations: "1"},
		},
		{
			name: "a Warn policy's violation warns", policy: baseline, action: "Warn", object: pod("team-a", "netadmin", netAdmin),
			wantResult: reportv1alpha2.ResultWarn, wantViolations: 1,
		},
		{
			name: "a violation an exception covers is skipped", policy: baseline, object: pod("team-a", "netadmin", netAdmin),
			exceptions: []*engine.Exception{enginetest.MustException(t, "team-a", "net", `
exceptions: [{policyName: pss, ruleNames: ["*"]}]
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]
`)},
			wantResult: reportv1alpha2.ResultSkip, wantExceptions: "team-a/net",
			wantMessage: "1 violation of baseline:latest waived by PolicyException team-a/net",
			wantProps:   map[string]string{PropertyExceptions: "team-a/net", PropertyControls: "Capabilities"},
		},
		{
			name: "an exception in another namespace does not apply", policy: baseline, object: pod("team-a", "netadmin", netAdmin),
			exceptions: []*engine.Exception{enginetest.MustException(t, "team-b", "net", `
exceptions: [{policyName: pss, ruleNames: ["*"]}]
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]
`)},
			wantResult: reportv1alpha2.ResultFail, wantViolations: 1,
		},
		{
			name: "an expired exception fails and says why", policy: baseline, object: pod("team-a", "netadmin", netAdmin),
			exceptions: []*engine.Exception{enginetest.MustException(t, "team-a", "old", `
exceptions: [{policyName: pss, ruleNames: ["*"]}]
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]
expiresAt: "2026-01-01T00:00:00Z"
`)},
			wantResult: reportv1alpha2.ResultFail, wantViolations: 1,
			wantProps: map[string]string{PropertyRefusedExceptions: "team-a/old"},
		},
		{
			name: "an exception without background is not used", policy: baseline, object: pod("team-a", "netadmin", netAdmin),
			exceptions: []*engine.Exception{enginetest.MustException(t, "team-a", "admission-only", `
exceptions: [{policyName: pss, ruleNames: ["*"]}]
podSecurity: [{controlName: Capabilities, restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN]}]
background: false
`)},
			wantResult: reportv1alpha2.ResultFail, wantViolations: 1,
		},
		{
			name: "a whole-rule waiver is skipped", policy: baseline, object: pod("team-a", "netadmin", func(p *corev1.Pod) { netAdmin(p); p.Spec.HostPID = true }),
			exceptions: []*engine.Exception{enginetest.MustException(t, "team-a", "all", `
exceptions: [{policyName: pss, ruleNames: [baseline]}]
`)},
			wantResult: reportv1alpha2.ResultSkip, wantExceptions: "team-a/all",
			wantMessage: "2 violations of baseline:latest waived by PolicyException team-a/all",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.policy
			if tc.action != "" {
				spec = "action: " + tc.action + "\n" + spec
			}
			p := enginetest.MustPolicy(t, "pss", spec)
			var active, inactive []*engine.Exception
			for _, e := range tc.exceptions {
				if e.State(func(string) *engine.Policy { return p }, at).Ready {
					active = append(active, e)
				} else {
					inactive = append(inactive, e)
				}
			}
			ix := index.New("podsieve-system")
			ix.Load([]*engine.Policy{p}, active, inactive, nil)
			d := ix.Snapshot().Decide(tc.object, at, engine.Background)
			ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: tc.object.Namespace, Name: tc.object.Name}
			es := Entries(d, ref, at)
			if len(es) != 1 {
				t.Fatalf("got %d entries, want 1", len(es))
			}
			e := es[0]
			r := e.Result
			if r.Result != tc.wantResult {
				t.Errorf("result %q, want %q (message %q)", r.Result, tc.wantResult, r.Message)
			}
			if e.Violations != tc.wantViolations {
				t.Errorf("violations %d, want %d", e.Violations, tc.wantViolations)
			}
			if got := strings.Join(e.Exceptions, ","); got != tc.wantExceptions {
				t.Errorf("exceptions %q, want %q", got, tc.wantExceptions)
			}
			if tc.wantMessage != "" && r.Message != tc.wantMessage {
				t.Errorf("message\n got %q\nwant %q", r.Message, tc.wantMessage)
			}
			for k, v := range tc.wantProps {
				if r.Properties[k] != v {
					t.Errorf("property %s = %q, want %q", k, r.Properties[k], v)
				}
			}
			if r.Source != Source || r.Policy != "pss" || r.Rule != "baseline" || r.Timestamp.Seconds != at.Unix() {
				t.Errorf("identity fields: %+v", r)
			}
			// The specification pairs scored with pass and fail; warn is
			// advisory.
			if want := r.Result != reportv1alpha2.ResultWarn; r.Scored != want {
				t.Errorf("scored %v for a %s result, want %v", r.Scored, r.Result, want)
			}
			// Kyverno's keys, so Policy Reporter configurations carry over.
			if r.Properties[PropertyStandard] != "baseline" || r.Properties[PropertyProcess] != "background scan" {
				t.Errorf("properties standard %q, process %q; want baseline, background scan", r.Properties[PropertyStandard], r.Properties[PropertyProcess])
			}
			if got, want := r.Properties[PropertyResultID], ResultID(ref, "pss", "baseline", r.Result); got != want || len(got) != 32 {
				t.Errorf("resultID %q, want %q", got, want)
			}
			if r.Severity != reportv1alpha2.SeverityHigh || r.Category != "Pod Security Standards (Baseline)" {
				t.Errorf("severity %q category %q", r.Severity, r.Category)
			}
			if len(r.Resources) != 1 || r.Resources[0] != ref {
				t.Errorf("resources %+v, want [%+v]", r.Resources, ref)
			}
		})
	}
}

// TestResultID: a result's ID depends on the object's identity, the policy
// and the rule only, never on other objects or where the result sits.
func TestResultID(t *testing.T) {
	pod := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web-1", UID: "uid-1"}
	renamed := pod
	renamed.Name, renamed.ResourceVersion = "web-2", "42"
	recreated := pod
	recreated.UID = "uid-2"
	noUID := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web"}
	otherNS := noUID
	otherNS.Namespace = "ns2"
	fail := reportv1alpha2.ResultFail
	cases := []struct {
		name string
		a, b string
		same bool
	}{
		{"same object, policy and rule", ResultID(pod, "p", "r", fail), ResultID(pod, "p", "r", fail), true},
		{"same UID whatever else the reference says", ResultID(pod, "p", "r", fail), ResultID(renamed, "p", "r", fail), true},
		{"another object of the same name", ResultID(pod, "p", "r", fail), ResultID(recreated, "p", "r", fail), false},
		{"another policy", ResultID(pod, "p", "r", fail), ResultID(pod, "q", "r", fail), false},
		{"another rule", ResultID(pod, "p", "r", fail), ResultID(pod, "p", "s", fail), false},
		{"policy and rule do not run together", ResultID(pod, "pr", "", fail), ResultID(pod, "p", "r", fail), false},
		{"another outcome", ResultID(pod, "p", "r", fail), ResultID(pod, "p", "r", reportv1alpha2.ResultPass), false},
		{"without a UID, by kind, namespace and name", ResultID(noUID, "p", "r", fail), ResultID(otherNS, "p", "r", fail), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.a == tc.b) != tc.same {
				t.Errorf("ResultIDs %q and %q: want equal=%v", tc.a, tc.b, tc.same)
			}
		})
	}
}

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

// TestEntriesSeverity: a result's severity and category are the rule's
// (engine.RuleResult.Reporting): the defaults, the rule's own, or for a
// failing result the highest of its uncovered violations' controls.
func TestEntriesSeverity(t *testing.T) {
	at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	privileged := func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	const controls = `
  controlSeverities:
  - {controlName: Privileged Containers, severity: critical, category: Privilege}
  - {controlName: Host Namespaces, severity: low}
`
	for _, tc := range []struct {
		name, rule   string
		action       string
		object       *engine.Object
		wantResult   reportv1alpha2.PolicyResult
		wantSeverity reportv1alpha2.PolicySeverity
		wantCategory string
	}{
		{name: "baseline default", rule: "podSecurity: {level: baseline}", object: pod("team-a", "p", privileged),
			wantResult: reportv1alpha2.ResultFail, wantSeverity: reportv1alpha2.SeverityHigh, wantCategory: "Pod Security Standards (Baseline)"},
		{name: "restricted default", rule: "podSecurity: {level: restricted}", object: pod("team-a", "p", privileged),
			wantResult: reportv1alpha2.ResultFail, wantSeverity: reportv1alpha2.SeverityMedium, wantCategory: "Pod Security Standards (Restricted)"},
		{name: "the rule's severity and category on a pass", rule: "podSecurity: {level: baseline}\n  severity: info\n  category: Host Isolation" + controls, object: pod("team-a", "p", nil),
			wantResult: reportv1alpha2.ResultPass, wantSeverity: reportv1alpha2.SeverityInfo, wantCategory: "Host Isolation"},
		{name: "a critical control on a fail", rule: "podSecurity: {level: baseline}" + controls, object: pod("team-a", "p", privileged),
			wantResult: reportv1alpha2.ResultFail, wantSeverity: reportv1alpha2.SeverityCritical, wantCategory: "Privilege"},
		{name: "a critical control on a warn", action: "Warn", rule: "podSecurity: {level: baseline}" + controls, object: pod("team-a", "p", privileged),
			wantResult: reportv1alpha2.ResultWarn, wantSeverity: reportv1alpha2.SeverityCritical, wantCategory: "Privilege"},
		{name: "the highest of two controls", rule: "podSecurity: {level: baseline}" + controls, object: pod("team-a", "p", func(p *corev1.Pod) { privileged(p); hostNetwork(p) }),
			wantResult: reportv1alpha2.ResultFail, wantSeverity: reportv1alpha2.SeverityCritical, wantCategory: "Privilege"},
		{name: "a low control", rule: "podSecurity: {level: baseline}" + controls, object: pod("team-a", "p", hostNetwork),
			wantResult: reportv1alpha2.ResultFail, wantSeverity: reportv1alpha2.SeverityLow, wantCategory: "Pod Security Standards (Baseline)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := "rules:\n- name: baseline\n  " + tc.rule + "\n"
			if tc.action != "" {
				spec = "action: " + tc.action + "\n" + spec
			}
			ix := index.New("podsieve-system")
			ix.Load([]*engine.Policy{enginetest.MustPolicy(t, "pss", spec)}, nil, nil, nil)
			d := ix.Snapshot().Decide(tc.object, at, engine.Background)
			ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: tc.object.Namespace, Name: tc.object.Name}
			es := Entries(d, ref, at)
			if len(es) != 1 {
				t.Fatalf("got %d entries, want 1", len(es))
			}
			r := es[0].Result
			if r.Result != tc.wantResult || r.Severity != tc.wantSeverity || r.Category != tc.wantCategory {
				t.Errorf("result %q severity %q category %q; want %q %q %q", r.Result, r.Severity, r.Category, tc.wantResult, tc.wantSeverity, tc.wantCategory)
			}
		})
	}
}
