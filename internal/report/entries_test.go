package report

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/index"
)

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
