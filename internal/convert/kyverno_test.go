package convert

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// TestKyvernoDecidesAsKyverno converts the service-mesh ClusterPolicy and
// PolicyException and decides a table of pods with the result. Each case's
// expectation is what Kyverno's documented podSecurity semantics decide for
// the source objects (an exclusion covers a violation of its control in the
// field it names, for containers whose image matches, when every offending
// value is listed; a PolicyException applies in the namespaces and to the
// names it matches). The cases are those where Kyverno and podsieve agree;
// docs/semantics.md lists where they differ.
func TestKyvernoDecidesAsKyverno(t *testing.T) {
	res, err := Kyverno(readTestdata(t, "testdata/kyverno/service-mesh.yaml"), KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Untranslated() {
		t.Fatalf("the service-mesh input translates whole; notes: %v", res.Notes)
	}
	c := compileResult(t, res)
	restrictedNS := map[string]string{"security.example.com/tier": "restricted"}
	const (
		baseline   = "Enforce:pod-security-service-mesh/baseline-service-mesh"
		restricted = "Audit:pod-security-service-mesh-audit/restricted-opt-in"
	)
	tests := []struct {
		name     string
		pod      *corev1.Pod
		nsLabels map[string]string
		// Kyverno's verdict: refused by the Enforce rule, and the rules
		// that report a failure.
		wantRefused bool
		wantFailing []string
	}{
		{name: "istio-init with NET_ADMIN and NET_RAW is excluded",
			pod: pod("payments", "web", withInit("istio-init", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN", "NET_RAW"))},
		{name: "linkerd-init with NET_ADMIN and NET_RAW is excluded",
			pod: pod("payments", "web", withInit("linkerd-init", "cr.l5d.io/linkerd/proxy-init:v2.4.1", "NET_ADMIN", "NET_RAW"))},
		{name: "the app container adding NET_ADMIN is refused: the exclusion names initContainers",
			pod:         pod("payments", "web", withApp("nginx:1.25", "NET_ADMIN")),
			wantRefused: true, wantFailing: []string{baseline}},
		{name: "an init container of another image is refused",
			pod:         pod("payments", "web", withInit("istio-init", "registry.example/evil/init:1", "NET_ADMIN")),
			wantRefused: true, wantFailing: []string{baseline}},
		{name: "istio-init adding SYS_ADMIN too is refused: every value must be listed",
			pod:         pod("payments", "web", withInit("istio-init", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN", "SYS_ADMIN")),
			wantRefused: true, wantFailing: []string{baseline}},
		{name: "hostNetwork in an excluded namespace is admitted",
			pod: pod("kube-system", "proxy", hostNetwork)},
		{name: "hostNetwork elsewhere is refused",
			pod:         pod("payments", "proxy", hostNetwork),
			wantRefused: true, wantFailing: []string{baseline}},
		{name: "the PolicyException lets netshoot add NET_ADMIN in payments",
			pod: pod("payments", "netshoot-debug", withApp("nicolaka/netshoot:v0.13", "NET_ADMIN", "NET_RAW"))},
		{name: "and in checkout",
			pod: pod("checkout", "netshoot-1", withApp("nicolaka/netshoot:v0.13", "NET_ADMIN"))},
		{name: "but not in a namespace it does not name",
			pod:         pod("orders", "netshoot-debug", withApp("nicolaka/netshoot:v0.13", "NET_ADMIN")),
			wantRefused: true, wantFailing: []string{baseline}},
		{name: "nor for a name it does not match",
			pod:         pod("payments", "debug", withApp("nicolaka/netshoot:v0.13", "NET_ADMIN")),
			wantRefused: true, wantFailing: []string{baseline}},
		{name: "nor for a capability it does not list",
			pod:         pod("payments", "netshoot-debug", withApp("nicolaka/netshoot:v0.13", "SYS_ADMIN")),
			wantRefused: true, wantFailing: []string{baseline}},
		{name: "a restricted pod in an opted-in namespace passes both rules",
			pod: pod("secure", "web", restrictedPod), nsLabels: restrictedNS},
		{name: "istio-init as root in an opted-in namespace is excluded from restricted",
			pod:      pod("secure", "web", withInit("istio-init", "docker.io/istio/proxyv2:1.24.0"), restrictedPod, meshInitAsRoot("NET_ADMIN", "NET_RAW")),
			nsLabels: restrictedNS},
		{name: "another image as root in an opted-in namespace fails restricted, which only audits",
			pod:      pod("secure", "web", withInit("init", "busybox:1.36"), restrictedPod, meshInitAsRoot()),
			nsLabels: restrictedNS, wantFailing: []string{restricted}},
		{name: "a plain pod in an opted-in namespace fails restricted, which only audits",
			pod: pod("secure", "web"), nsLabels: restrictedNS, wantFailing: []string{restricted}},
		{name: "a plain pod elsewhere is not checked at restricted",
			pod: pod("payments", "web")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := c.decide(t, tt.pod, tt.nsLabels)
			if d.Allowed == tt.wantRefused {
				t.Errorf("allowed %v, want %v; failing %v", d.Allowed, !tt.wantRefused, failing(d))
			}
			if got := failing(d); !slices.Equal(got, tt.wantFailing) {
				t.Errorf("failing rules %v, want %v", got, tt.wantFailing)
			}
		})
	}
}

// TestKyvernoUntranslatable checks that each part podsieve cannot express
// is reported on its field, and that what is written errs towards enforcing.
func TestKyvernoUntranslatable(t *testing.T) {
	res, err := Kyverno(readTestdata(t, "testdata/kyverno/untranslatable.yaml"), KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Untranslated() {
		t.Fatal("Untranslated() is false")
	}
	notes := map[string]Note{}
	for _, n := range res.Notes {
		notes[n.Object+" "+n.Field] = n
	}
	for _, want := range []struct {
		key      string
		severity Severity
		contains string
	}{
		{"ClusterPolicy platform-pss spec.validationFailureActionOverrides", Untranslated, "per-namespace actions"},
		{"ClusterPolicy platform-pss spec.rules[0]", Untranslated, "does not validate podSecurity"},
		{"ClusterPolicy platform-pss spec.rules[1].preconditions", Untranslated, "no counterpart"},
		{"ClusterPolicy platform-pss spec.rules[1].match.any[1].resources.names", Untranslated, "applies more widely"},
		{"ClusterPolicy platform-pss spec.rules[1].exclude.any[0]", Untranslated, "also applies to what it excluded"},
		{"ClusterPolicy platform-pss spec.rules[1].validate.podSecurity.exclude[0].restrictedField", Warning, "an entry on spec.volumes[*] never matches there"},
		{"ClusterPolicy platform-pss spec.rules[1].validate.podSecurity.exclude[1].restrictedField", Warning, "never matches metadata.annotations alone"},
		{"ClusterPolicy platform-pss spec.failurePolicy", Warning, "fails closed"},
		{"PolicyException kyverno/conditional spec.conditions", Untranslated, "left out"},
		{"PolicyException kyverno/team-debug spec.podSecurity[1].values[0]", Untranslated, "waives less"},
		{"PolicyException kyverno/team-debug spec.match.any[1].resources.operations", Untranslated, "waives less"},
		{"PolicyException kyverno/team-debug spec.exceptions[1].policyName", Warning, "not in the input"},
		{"ConfigMap kyverno/kyverno ", Warning, "ignored"},
	} {
		n, ok := notes[want.key]
		if !ok {
			t.Errorf("no note for %s", want.key)
			continue
		}
		if n.Severity != want.severity || !strings.Contains(n.Message, want.contains) {
			t.Errorf("%s: %v, want severity %v containing %q", want.key, n, want.severity, want.contains)
		}
	}

	byName := map[string]*policyv1alpha1.SecurityPolicy{}
	var exceptions []*policyv1alpha1.PolicyException
	for _, o := range res.Objects {
		switch obj := o.Object.(type) {
		case *policyv1alpha1.SecurityPolicy:
			byName[obj.Name] = obj
		case *policyv1alpha1.PolicyException:
			exceptions = append(exceptions, obj)
		}
	}
	pss := byName["platform-pss"]
	if pss == nil || pss.Spec.Action != policyv1alpha1.ActionAudit {
		t.Fatalf("platform-pss: %+v", pss)
	}
	// match.any becomes one rule per filter; the filter by name keeps its
	// selector; the exclude keeps only the namespace filter; the exclusion
	// that could not be translated is gone, the others stay.
	if len(pss.Spec.Rules) != 2 || pss.Spec.Rules[0].Name != "baseline-everywhere-1" || pss.Spec.Rules[1].Name != "baseline-everywhere-2" {
		t.Fatalf("rules: %+v", pss.Spec.Rules)
	}
	if got := pss.Spec.Rules[1].Match.Selector.MatchLabels["app.kubernetes.io/part-of"]; got != "legacy" {
		t.Errorf("second rule's selector: %q", got)
	}
	if ex := pss.Spec.Rules[0].Exclude; ex == nil || !slices.Equal(ex.Namespaces, []string{"apps-sandbox"}) || ex.Selector != nil {
		t.Errorf("exclude: %+v", ex)
	}
	// No Volume Types entry on spec.volumes[*] and no AppArmor entry on
	// bare metadata.annotations, which never match in Kyverno; Seccomp.
	if ex := pss.Spec.Rules[0].PodSecurity.Exclude; len(ex) != 1 || ex[0].ControlName != policyv1alpha1.ControlSeccomp {
		t.Errorf("exclusions %+v, want Seccomp only", ex)
	}
	// A namespaced Policy is pinned to its namespace.
	if p := byName["team-a-team-restricted"]; p == nil || !slices.Equal(p.Spec.Rules[0].Match.Namespaces, []string{"team-a"}) {
		t.Errorf("team-a-team-restricted: %+v", p)
	}
	// The exception with conditions is left out; the glob exception goes to
	// the cluster exceptions namespace without the filter it could not
	// translate, the entry it could not translate, or the Service kind.
	if len(exceptions) != 1 {
		t.Fatalf("%d exceptions, want 1", len(exceptions))
	}
	e := exceptions[0]
	if e.Namespace != "podsieve-system" || !slices.Equal(e.Spec.Match.Namespaces, []string{"team-*"}) ||
		!slices.Equal(e.Spec.Match.Kinds, []policyv1alpha1.PodBearingKind{"Pod"}) || len(e.Spec.PodSecurity) != 1 {
		t.Errorf("exception: %+v", e)
	}
	if len(e.Spec.Exceptions) != 2 || e.Spec.Exceptions[0].PolicyName != "team-a-team-restricted" ||
		!slices.Equal(e.Spec.Exceptions[1].RuleNames, []string{"check"}) {
		t.Errorf("targets: %+v", e.Spec.Exceptions)
	}
	compileResult(t, res)
}

// TestKyvernoAutogenAndSplitRules: an exception naming a rule and its
// autogen- variants waives the converted rule, followed through a split by
// action and by match.any.
func TestKyvernoAutogenAndSplitRules(t *testing.T) {
	docs, err := Read([]string{"-"}, strings.NewReader(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: pss}
spec:
  validationFailureAction: Audit
  rules:
  - name: base
    match: {any: [{resources: {kinds: [Pod], namespaces: [a]}}, {resources: {kinds: [Pod], namespaceSelector: {matchLabels: {x: "y"}}}}]}
    validate: {failureAction: Enforce, podSecurity: {level: baseline}}
  - name: restr
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {podSecurity: {level: restricted, version: v1.29}}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: e, namespace: kyverno}
spec:
  exceptions: [{policyName: pss, ruleNames: [base, autogen-base, autogen-cronjob-base]}]
  match: {any: [{resources: {kinds: [Pod, Deployment, CronJob], namespaces: [a]}}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Untranslated() {
		t.Fatalf("notes: %v", res.Notes)
	}
	if len(res.Objects) != 3 {
		t.Fatalf("%d objects, want 2 policies and 1 exception", len(res.Objects))
	}
	audit := res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy)
	enforce := res.Objects[1].Object.(*policyv1alpha1.SecurityPolicy)
	if audit.Name != "pss" || audit.Spec.Action != policyv1alpha1.ActionAudit || enforce.Name != "pss-enforce" || enforce.Spec.Action != policyv1alpha1.ActionEnforce {
		t.Fatalf("policies %s (%s), %s (%s)", audit.Name, audit.Spec.Action, enforce.Name, enforce.Spec.Action)
	}
	if len(enforce.Spec.Rules) != 2 || enforce.Spec.Rules[0].Name != "base-1" || enforce.Spec.Rules[1].Name != "base-2" {
		t.Fatalf("enforce rules %+v", enforce.Spec.Rules)
	}
	e := res.Objects[2].Object.(*policyv1alpha1.PolicyException)
	if e.Namespace != "a" || len(e.Spec.Exceptions) != 1 || e.Spec.Exceptions[0].PolicyName != "pss-enforce" ||
		!slices.Equal(e.Spec.Exceptions[0].RuleNames, []string{"base-1", "base-2"}) || e.Spec.PodSecurity != nil {
		t.Fatalf("exception %+v", e.Spec)
	}
	c := compileResult(t, res)
	// The whole-rule waiver admits a host-network pod in a, as Kyverno's
	// exception without podSecurity does; the restricted audit rule still
	// reports it.
	d := c.decide(t, pod("a", "x", hostNetwork), nil)
	if !d.Allowed || !slices.Equal(failing(d), []string{"Audit:pss/restr"}) {
		t.Errorf("allowed %v, failing %v", d.Allowed, failing(d))
	}
	d = c.decide(t, pod("b", "x", hostNetwork), map[string]string{"x": "y"})
	if d.Allowed {
		t.Errorf("a host-network pod in b is admitted; failing %v", failing(d))
	}
}

// TestKyvernoPrivilegedLevel: a rule at level privileged, which Kyverno
// evaluates and podsieve does not, is reported as not translated on its
// field, whatever its case; baseline is not.
func TestKyvernoPrivilegedLevel(t *testing.T) {
	const policy = "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec:\n  rules:\n  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate: {podSecurity: {level: LEVEL}}\n"
	tests := []struct {
		name, level      string
		wantUntranslated bool
	}{
		{"privileged", "privileged", true},
		{"Privileged, capitalised", "Privileged", true},
		{"baseline", "baseline", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Read([]string{"-"}, strings.NewReader(strings.Replace(policy, "LEVEL", tt.level, 1)))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
			if err != nil {
				t.Fatal(err)
			}
			found := slices.ContainsFunc(res.Notes, func(n Note) bool {
				return n.Severity == Untranslated && n.Field == "spec.rules[0].validate.podSecurity.level" && strings.Contains(n.Message, "checks nothing")
			})
			if found != tt.wantUntranslated || res.Untranslated() != tt.wantUntranslated {
				t.Errorf("untranslated note on the level: %v, Untranslated() %v; want %v: %v", found, res.Untranslated(), tt.wantUntranslated, res.Notes)
			}
		})
	}
}

// TestKyvernoNotesInStableOrder: a rule's context, preconditions and
// celPreconditions are noted in that order on every run (they were once
// noted in a map's order, which changes from run to run).
func TestKyvernoNotesInStableOrder(t *testing.T) {
	in := `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context: [{name: x, variable: {value: 1}}]
    preconditions: {all: [{key: a, operator: Equals, value: a}]}
    celPreconditions: [{name: c, expression: "true"}]
    validate: {podSecurity: {level: baseline, version: latest}}
`
	want := []string{"spec.rules[0].context", "spec.rules[0].preconditions", "spec.rules[0].celPreconditions"}
	for range 20 {
		docs, err := Read([]string{"-"}, strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range res.Notes {
			if slices.Contains(want, n.Field) {
				got = append(got, n.Field)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("notes on %v, want %v", got, want)
		}
	}
}

// TestKyvernoAnnotationSpellings converts Kyverno's spellings of the
// annotation fields and of Volume Types and decides, side by side with what
// Kyverno decides for the source, pods built after Kyverno's podSecurity
// conformance cases. The converted objects never admit what Kyverno refuses.
func TestKyvernoAnnotationSpellings(t *testing.T) {
	res, err := Kyverno(readTestdata(t, "testdata/kyverno/annotations.yaml"), KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Untranslated() {
		t.Fatalf("every spelling translates (or has no effect in Kyverno); notes: %v", res.Notes)
	}
	for _, o := range res.Objects {
		if _, ok := o.Object.(*policyv1alpha1.PolicyException); ok {
			t.Errorf("the exception whose only entry never matches in Kyverno was written: %+v", o.Object)
		}
	}
	c := compileResult(t, res)
	container := func(name string) podOpt {
		return func(p *corev1.Pod) { p.Spec.Containers[0].Name = name }
	}
	annotate := func(key, value string) podOpt {
		return func(p *corev1.Pod) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[key] = value
		}
	}
	volume := func(v corev1.VolumeSource) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: v})
		}
	}
	const apparmor, seccomp = "container.apparmor.security.beta.kubernetes.io/", "container.seccomp.security.alpha.kubernetes.io/"
	tests := []struct {
		name        string
		pod         *corev1.Pod
		wantRefused bool // Kyverno's verdict on the source
	}{
		{name: "unconfined AppArmor on the container the exclusion names is excluded",
			pod: pod("apparmor", "web", container("nginx"), annotate(apparmor+"nginx", "unconfined"))},
		{name: "unconfined AppArmor on another container is refused: the exclusion is that container's, and the bare field never matches",
			pod: pod("apparmor", "web", container("other"), annotate(apparmor+"other", "unconfined")), wantRefused: true},
		{name: "an entry for a container name with digits never matches in Kyverno",
			pod: pod("apparmor", "web", container("app1"), annotate(apparmor+"app1", "unconfined")), wantRefused: true},
		{name: "an annotation entry with images never matches in Kyverno",
			pod: pod("apparmor", "web", container("sidecar"), withApp("nginx"), annotate(apparmor+"sidecar", "unconfined")), wantRefused: true},
		{name: "an unconfined pod seccomp annotation under v1.18 is excluded",
			pod: pod("legacy", "web", annotate("seccomp.security.alpha.kubernetes.io/pod", "unconfined"))},
		{name: "a container seccomp annotation is refused: Kyverno re-checks those on a stand-in container, so its entry never matches",
			pod: pod("legacy", "web", container("nginx"), annotate(seccomp+"nginx", "unconfined")), wantRefused: true},
		{name: "an nfs volume, whatever its name, is excluded by the nfs entry, whose values Kyverno ignores",
			pod: pod("volumes", "web", restrictedPod, volume(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/"}}))},
		{name: "another restricted volume type is refused: the entry on spec.volumes[*] never matches in Kyverno",
			pod: pod("volumes", "web", restrictedPod, volume(corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: "iqn.2001-04.com.example:storage", Lun: 0}})), wantRefused: true},
		{name: "a hostPath volume is still refused: it also violates HostPath Volumes",
			pod: pod("volumes", "web", restrictedPod, volume(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}})), wantRefused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := c.decide(t, tt.pod, nil)
			if d.Allowed == tt.wantRefused {
				t.Errorf("allowed %v, Kyverno: refused %v; failing %v", d.Allowed, tt.wantRefused, failing(d))
			}
		})
	}
}

// TestKyvernoSelectorTooLarge: a Kyverno exception whose label selector
// holds more than a PolicyException's may is named in a note, and nothing
// converted fails to compile.
func TestKyvernoSelectorTooLarge(t *testing.T) {
	var labels strings.Builder
	for i := range engine.MaxSelectorRequirements + 1 {
		fmt.Fprintf(&labels, "            l%02d: v\n", i)
	}
	path := filepath.Join(t.TempDir(), "exception.yaml")
	doc := `apiVersion: kyverno.io/v2
kind: PolicyException
metadata:
  name: labelled
  namespace: team-a
spec:
  exceptions:
  - policyName: platform-pss
    ruleNames: ["baseline"]
  match:
    any:
    - resources:
        kinds: ["Pod"]
        selector:
          matchLabels:
` + labels.String() + `  podSecurity:
  - controlName: Capabilities
    restrictedField: spec.containers[*].securityContext.capabilities.add
    values: ["NET_ADMIN"]
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Kyverno(readTestdata(t, path), KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range res.Notes {
		if strings.HasSuffix(n.Field, ".resources.selector") && strings.Contains(n.Message, "at most 16 requirements") {
			found = true
		}
	}
	if !found {
		t.Errorf("no note on the selector: %+v", res.Notes)
	}
	for _, o := range res.Objects {
		if pe, ok := o.Object.(*policyv1alpha1.PolicyException); ok {
			if _, err := engine.CompileException(pe, "podsieve-system"); err != nil {
				t.Errorf("converted exception does not compile: %v", err)
			}
		}
	}
}

// TestKyvernoReportingAnnotations: a ClusterPolicy's severity and category
// annotations become its converted rules' severity and category, so that
// the reports group as Kyverno's did; one podsieve cannot carry is left to
// the default, with a warning naming the annotation.
func TestKyvernoReportingAnnotations(t *testing.T) {
	const policy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: pss
  annotations: {%s}
spec:
  validationFailureAction: Enforce
  rules:
  - name: baseline
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {podSecurity: {level: baseline, version: latest}}
`
	for _, tt := range []struct {
		name, annotations string
		wantSeverity      string // "" for unset
		wantCategory      string
		wantWarning       string
	}{
		{name: "none", annotations: ""},
		{name: "both", annotations: "policies.kyverno.io/severity: High, policies.kyverno.io/category: Pod Security Standards (Baseline)",
			wantSeverity: "high", wantCategory: "Pod Security Standards (Baseline)"},
		{name: "a severity podsieve does not know", annotations: "policies.kyverno.io/severity: urgent",
			wantWarning: `metadata.annotations[policies.kyverno.io/severity]: warning: metadata.annotations[policies.kyverno.io/severity].severity: "urgent" is not a severity`},
		{name: "a category the schema refuses", annotations: "policies.kyverno.io/category: '#1 priority', policies.kyverno.io/severity: low",
			wantSeverity: "low", wantWarning: "the rules report podsieve's default category"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Read([]string{"-"}, strings.NewReader(fmt.Sprintf(policy, tt.annotations)))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Kyverno(docs, KyvernoOptions{ExceptionsNamespace: "podsieve-system"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Objects) != 1 {
				t.Fatalf("%d objects, want one SecurityPolicy", len(res.Objects))
			}
			r := res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy).Spec.Rules[0]
			var gotSeverity, gotCategory string
			if r.Severity != nil {
				gotSeverity = string(*r.Severity)
			}
			if r.Category != nil {
				gotCategory = *r.Category
			}
			if got := gotSeverity; got != tt.wantSeverity {
				t.Errorf("severity %q, want %q", got, tt.wantSeverity)
			}
			if got := gotCategory; got != tt.wantCategory {
				t.Errorf("category %q, want %q", got, tt.wantCategory)
			}
			var notes []string
			for _, n := range res.Notes {
				notes = append(notes, n.String())
			}
			joined := strings.Join(notes, "\n")
			if tt.wantWarning == "" && strings.Contains(joined, "annotations[policies.kyverno.io") || !strings.Contains(joined, tt.wantWarning) {
				t.Errorf("notes:\n%s\nwant one saying %q", joined, tt.wantWarning)
			}
			compileResult(t, res) // what is written compiles
		})
	}
}
