package admissionpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/vaptest"
)

// The differential tests: the engine and the compiled CEL, evaluated by the
// API server's own admission library (internal/vaptest), decide the same
// objects; every disagreement is a bug in one of them.

const clusterNS = enginetest.ClusterNamespace

var testOptions = Options{SystemNamespaces: []string{"kube-system", clusterNS}}

// world is a set of policies, exceptions and namespaces, compiled both
// ways: the engine's and the API server's.
type world struct {
	policies   []*engine.Policy
	exceptions []*engine.Exception
	nsLabels   map[string]map[string]string
	cluster    *vaptest.Cluster
}

func newWorld(tb testing.TB, sps []*policyv1alpha1.SecurityPolicy, pes []*policyv1alpha1.PolicyException, namespaces map[string]map[string]string) *world {
	tb.Helper()
	w := &world{nsLabels: namespaces}
	byName := map[string]*engine.Policy{}
	var objs []*unstructured.Unstructured
	crd, err := ParamsCRD()
	if err != nil {
		tb.Fatal(err)
	}
	objs = append(objs, toUnstructured(tb, crd))
	for _, sp := range sps {
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			tb.Fatalf("SecurityPolicy %s: %v", sp.Name, err)
		}
		w.policies = append(w.policies, p)
		byName[p.Name] = p
		c, err := CompilePolicy(sp, p, testOptions)
		if err != nil {
			tb.Fatalf("compile %s: %v", sp.Name, err)
		}
		objs = append(objs, toUnstructured(tb, c.Policy))
		for _, b := range c.Bindings {
			objs = append(objs, toUnstructured(tb, b))
		}
	}
	policy := func(name string) *engine.Policy { return byName[name] }
	now := time.Now()
	var inForce, refusedPEs []*policyv1alpha1.PolicyException
	var refused []*engine.Exception
	for _, pe := range pes {
		e, err := engine.CompileException(pe, clusterNS)
		if err != nil {
			tb.Fatalf("PolicyException %s/%s: %v", pe.Namespace, pe.Name, err)
		}
		if !e.State(policy, now).Ready {
			// Held to be named in refusals: it must waive nothing.
			refused = append(refused, e)
			refusedPEs = append(refusedPEs, pe)
			continue
		}
		w.exceptions = append(w.exceptions, e)
		inForce = append(inForce, pe)
	}
	for ns, labels := range namespaces {
		all := map[string]string{engine.NamespaceNameLabel: ns}
		for k, v := range labels {
			all[k] = v
		}
		namespaces[ns] = all
		nsObj := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: all}}
		objs = append(objs, toUnstructured(tb, nsObj))
		var here []*ParamException
		for i, e := range w.exceptions {
			if !e.ReachesNamespace(ns, all) {
				continue
			}
			px, err := CompileException(inForce[i], e, policy)
			if err != nil {
				tb.Fatal(err)
			}
			here = append(here, px)
		}
		for i, e := range refused {
			if !e.ReachesNamespace(ns, all) {
				continue
			}
			px, err := CompileRefused(refusedPEs[i], e, policy, now)
			if err != nil {
				tb.Fatal(err)
			}
			if px != nil {
				here = append(here, px)
			}
		}
		objs = append(objs, toUnstructured(tb, ParamsObject(ns, here)))
	}
	c, err := vaptest.New(objs)
	if err != nil {
		tb.Fatalf("the compiled policies do not compile: %v", err)
	}
	w.cluster = c
	return w
}

// paramsUnstructured is a namespace's parameters as an unstructured
// object.
func paramsUnstructured(ns string, excs []*ParamException) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ParamsObject(ns, excs))
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func toUnstructured(tb testing.TB, obj runtime.Object) *unstructured.Unstructured {
	tb.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// verdict is a decision reduced to what both forms say: whether it is
// allowed, and which rules fail.
type verdict struct {
	allowed bool
	failing []string // policy/rule, sorted
}

func (v verdict) String() string {
	return fmt.Sprintf("allowed=%v failing=%v", v.allowed, v.failing)
}

// engineVerdict decides the object with the engine, as the webhook does.
func (w *world) engineVerdict(o *engine.Object) verdict {
	d := engine.DecideWithin(engine.Limits{}, w.policies, engine.AllExceptions(w.exceptions), o, w.nsLabels[o.Namespace], time.Now(), engine.Admission)
	v := verdict{allowed: d.Allowed}
	for _, r := range d.Results {
		if r.Outcome == engine.Fail {
			v.failing = append(v.failing, r.Rule.Policy.Name+"/"+r.Rule.Name)
		}
	}
	return v
}

// requestUser is who sends every request the tests decide, with the
// compiled policies (celVerdict) and with the engine (its RequestUser), so
// that a rule that excludes users decides alike in both.
const requestUser = "alice"

// celVerdict decides the object, created in namespace by requestUser, with
// the compiled policies.
func (w *world) celVerdict(tb testing.TB, obj runtime.Object, gvr schema.GroupVersionResource, namespace string) (verdict, vaptest.Result) {
	tb.Helper()
	u := toUnstructured(tb, obj)
	res := w.cluster.Admit(context.Background(), vaptest.Request{
		Operation: admission.Create, Object: u, Namespace: namespace, Resource: gvr,
		UserInfo: &user.DefaultInfo{Name: requestUser},
	})
	v := verdict{allowed: res.Allowed}
	for _, msg := range append(append(append([]string(nil), res.Denials...), res.Warnings...), res.Audit...) {
		i := strings.Index(msg, "SecurityPolicy \"")
		if i < 0 {
			continue
		}
		var p, r string
		if _, err := fmt.Sscanf(strings.ReplaceAll(msg[i:], "\"", " "), "SecurityPolicy %s rule %s", &p, &r); err == nil {
			v.failing = append(v.failing, p+"/"+r)
		}
	}
	slices.Sort(v.failing)
	return v, res
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

func mustSecurityPolicy(tb testing.TB, name, spec string) *policyv1alpha1.SecurityPolicy {
	tb.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
	if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
		tb.Fatalf("SecurityPolicy %s: %v", name, err)
	}
	return sp
}

// TestFixturesDecideAsTheEngine: every upstream fixture, at its own level
// and version and at both levels' latest, is decided by the compiled policy
// as by the engine.
func TestFixturesDecideAsTheEngine(t *testing.T) {
	fixtures, err := enginetest.UpstreamFixtures()
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) != 4537 {
		t.Fatalf("loaded %d fixtures, want the 4,537 upstream ships", len(fixtures))
	}
	worlds := map[string]*world{}
	worldFor := func(level, version string) *world {
		key := level + ":" + version
		if worlds[key] == nil {
			sp := mustSecurityPolicy(t, "pss", "rules:\n- name: pss\n  podSecurity: {level: "+level+", version: "+version+"}")
			worlds[key] = newWorld(t, []*policyv1alpha1.SecurityPolicy{sp}, nil, map[string]map[string]string{"apps": nil})
		}
		return worlds[key]
	}
	disagreements, denied, allowed := 0, 0, 0
	for _, f := range fixtures {
		pod := f.Pod.DeepCopy()
		pod.APIVersion, pod.Kind = "v1", "Pod"
		pod.Namespace = "apps"
		if pod.Name == "" {
			pod.Name = "fixture"
		}
		o, err := engine.NewAdmissionObject(pod)
		if err != nil {
			t.Fatal(err)
		}
		for _, lv := range [][2]string{{string(f.Level), f.Version.String()}, {"baseline", "latest"}, {"restricted", "latest"}} {
			w := worldFor(lv[0], lv[1])
			want := w.engineVerdict(o)
			got, res := w.celVerdict(t, pod, podsGVR, "apps")
			if got.allowed {
				allowed++
			} else {
				denied++
				if len(res.Denials) == 0 || !strings.Contains(res.Denials[0], `Pod apps/`+pod.Name+` is refused by SecurityPolicy "pss" rule "pss"`) {
					t.Errorf("%s: the denial does not name the object, policy and rule: %q", f.Rel, res.Denials)
				}
			}
			if got.allowed != want.allowed || len(res.Errors) > 0 {
				disagreements++
				if disagreements <= 20 {
					t.Errorf("%s at %s:%s: engine %v, CEL %v %v %v", f.Rel, lv[0], lv[1], want, got, res.Denials, res.Errors)
				}
			}
		}
	}
	if disagreements > 0 {
		t.Errorf("%d disagreements", disagreements)
	}
	t.Logf("%d decisions allowed and %d denied by both", allowed, denied)
	if allowed == 0 || denied == 0 {
		t.Errorf("the fixtures must give both outcomes: %d allowed, %d denied", allowed, denied)
	}
}

// TestRefusalsNameTheExceptionsThatDoNotApply: an exception that names the
// rule and matches the object but expired, or that the guardrails refuse,
// waives nothing, and the refusal names it with the reason, as the
// webhook's does.
func TestRefusalsNameTheExceptionsThatDoNotApply(t *testing.T) {
	sp := mustSecurityPolicy(t, "pss", `
rules:
- name: baseline
  podSecurity: {level: baseline}
exceptions:
  allowedControls: [Capabilities]`)
	exception := func(name, control string, expires *metav1.Time) *policyv1alpha1.PolicyException {
		return &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, CreationTimestamp: metav1.Now()},
			Spec: policyv1alpha1.PolicyExceptionSpec{
				Exceptions:  []policyv1alpha1.ExceptionTarget{{PolicyName: "pss", RuleNames: []string{"*"}}},
				PodSecurity: []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlName(control)}},
				ExpiresAt:   expires,
			}}
	}
	w := newWorld(t, []*policyv1alpha1.SecurityPolicy{sp}, []*policyv1alpha1.PolicyException{
		exception("old", "Capabilities", &metav1.Time{Time: time.Now().Add(-time.Hour).Truncate(time.Second)}),
		exception("too-wide", "Host Namespaces", nil),
	}, map[string]map[string]string{"apps": nil})
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"},
		Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "app", Image: "nginx",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}}}
	got, res := w.celVerdict(t, pod, podsGVR, "apps")
	if got.allowed || len(res.Denials) != 1 {
		t.Fatalf("the pod is not refused once: %v %q %v", got, res.Denials, res.Errors)
	}
	for _, want := range []string{
		"exception/apps/old does not apply: expired at ",
		`exception/apps/too-wide does not apply: policy "pss" allows exceptions only for controls`,
	} {
		if !strings.Contains(res.Denials[0], want) {
			t.Errorf("the refusal does not say %q:\n%s", want, res.Denials[0])
		}
	}
}

// TestFitParams: what does not fit in a namespace's parameters goes, the
// exceptions that only name refusals first, then the largest in force;
// what stays keeps its order.
func TestFitParams(t *testing.T) {
	mk := func(name string, size int, refusal bool) *ParamException {
		t := policyv1alpha1.CompiledTarget{Policy: "p", Rule: "r"}
		if refusal {
			t.Refusal = ptr.To("expired at 2026-01-01T00:00:00Z")
		}
		return &ParamException{Source: "exception/ns/" + name, Targets: []policyv1alpha1.CompiledTarget{t},
			Names: &policyv1alpha1.GlobSet{Exact: []string{strings.Repeat("x", size)}}}
	}
	small, big, bigger, refused, big2 := mk("small", 1000, false), mk("big", MaxParamsBytes/2, false), mk("bigger", MaxParamsBytes/2+1000, false),
		mk("refused", 5000, true), mk("big2", MaxParamsBytes/2-2000, false)
	names := func(excs []*ParamException) []string {
		var out []string
		for _, e := range excs {
			out = append(out, strings.TrimPrefix(e.Source, "exception/ns/"))
		}
		return out
	}
	tests := []struct {
		name          string
		in            []*ParamException
		kept, dropped []string
	}{
		{"everything fits", []*ParamException{small, refused, big}, []string{"small", "refused", "big"}, nil},
		{"refusals go first", []*ParamException{small, refused, big, big2}, []string{"small", "big", "big2"}, []string{"refused"}},
		{"then the largest in force", []*ParamException{small, big, bigger}, []string{"small", "big"}, []string{"bigger"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kept, dropped := FitParams(tc.in)
			if !slices.Equal(names(kept), tc.kept) || !slices.Equal(names(dropped), tc.dropped) {
				t.Errorf("kept %v, dropped %v; want %v and %v", names(kept), names(dropped), tc.kept, tc.dropped)
			}
			total := 0
			for _, e := range kept {
				b, _ := json.Marshal(e)
				total += len(b)
			}
			if total > MaxParamsBytes {
				t.Errorf("kept %d bytes, more than %d", total, MaxParamsBytes)
			}
		})
	}
}

// TestRefusalHintIsTheEngines: the API server's refusal ends with the
// engine's hint wherever the compiled form can say it exactly, and says
// nothing where a control's own guardrails decide (which the webhook and
// podsieve explain then say).
func TestRefusalHintIsTheEngines(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "apps"},
		Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "nginx",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}
	tests := []struct {
		name, exceptions string
		hint             bool
	}{
		{"no exceptions", "", true},
		{"controls left out", "exceptions: {allowedControls: [Capabilities]}", true},
		{"any control", "exceptions: {}", true},
		{"cluster exceptions only", "exceptions: {clusterExceptionsOnly: true}", true},
		{"bounded control", `exceptions: {controls: [{controlName: Host Namespaces, allowedValues: ["true"]}]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := mustSecurityPolicy(t, "pss", "rules:\n- name: r\n  podSecurity: {level: baseline}\n"+tc.exceptions)
			w := newWorld(t, []*policyv1alpha1.SecurityPolicy{sp}, nil, map[string]map[string]string{"apps": nil})
			o, err := engine.NewAdmissionObject(pod)
			if err != nil {
				t.Fatal(err)
			}
			d := engine.DecideWithin(engine.Limits{}, w.policies, engine.AllExceptions(nil), o, w.nsLabels["apps"], time.Now(), engine.Admission)
			hint := d.Results[0].Hint(o)
			_, res := w.celVerdict(t, pod, podsGVR, "apps")
			if len(res.Denials) != 1 {
				t.Fatalf("denials %q, errors %v", res.Denials, res.Errors)
			}
			if got := strings.Contains(res.Denials[0], hint); got != tc.hint {
				t.Errorf("the refusal %s the engine's hint %q:\n%s", map[bool]string{true: "ends with", false: "lacks"}[got], hint, res.Denials[0])
			}
			if !tc.hint && strings.Contains(res.Denials[0], "PolicyException") {
				t.Errorf("the refusal says something of PolicyExceptions where the guardrails decide:\n%s", res.Denials[0])
			}
		})
	}
}

// TestTooLargeIsTheCEL: TooLarge says, in Go, what the compiled form's
// bounds say in CEL: at each bound the object is decided, one over it is
// refused with TooLarge's words and TooLargeMessage, and TooLarge names the
// same bound.
func TestTooLargeIsTheCEL(t *testing.T) {
	sp := mustSecurityPolicy(t, "pss", "rules:\n- name: r\n  podSecurity: {level: baseline}\nexceptions: {}\n")
	w := newWorld(t, []*policyv1alpha1.SecurityPolicy{sp}, nil, map[string]map[string]string{"apps": nil})
	ctr := func(i int) corev1.Container { return corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "nginx"} }
	build := func(change func(*corev1.Pod)) *corev1.Pod {
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "apps"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{ctr(0)}}}
		change(pod)
		return pod
	}
	containers := func(n int) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := 1; i < n; i++ {
				if i%2 == 0 {
					p.Spec.Containers = append(p.Spec.Containers, ctr(i))
				} else {
					p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: fmt.Sprintf("c%d", i), Image: "nginx"}})
				}
			}
		}
	}
	volumes := func(n int) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := range n {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i), VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
		}
	}
	sysctls := func(n int) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
			for i := range n {
				p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: fmt.Sprintf("net.ipv4.ping_group_range.x%d", i), Value: "0"})
			}
		}
	}
	annotations := func(n int) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{}
			for i := range n {
				p.Annotations[fmt.Sprintf("a%d", i)] = "x"
			}
		}
	}
	capabilities := func(n int) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			c := &corev1.Capabilities{}
			for i := range n {
				if i%2 == 0 {
					c.Add = append(c.Add, corev1.Capability(fmt.Sprintf("X_%d", i)))
				} else {
					c.Drop = append(c.Drop, corev1.Capability(fmt.Sprintf("X_%d", i)))
				}
			}
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "nginx", SecurityContext: &corev1.SecurityContext{Capabilities: c}}}
		}
	}
	ports := func(n int) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := range n {
				p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: int32(1000 + i)})
			}
		}
	}
	tests := []struct {
		name   string
		change func(int) func(*corev1.Pod)
		bound  int
	}{
		{"containers", containers, maxContainers},
		{"volumes", volumes, maxVolumes},
		{"sysctls", sysctls, maxSysctls},
		{"annotations", annotations, maxAnnotations},
		{"capabilities", capabilities, maxCapabilities},
		{"ports", ports, maxPorts},
	}
	for _, tt := range tests {
		for _, n := range []int{tt.bound, tt.bound + 1} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, n), func(t *testing.T) {
				pod := build(tt.change(n))
				_, res := w.celVerdict(t, pod, podsGVR, "apps")
				refusal := strings.Join(res.Denials, "\n")
				over := strings.Contains(refusal, TooLargeMessage)
				words := TooLarge(&pod.Spec, pod.Annotations)
				if over != (n > tt.bound) || (words != "") != over {
					t.Fatalf("n=%d: the CEL refused as too large: %v; TooLarge says %q; refusal:\n%s", n, over, words, refusal)
				}
				if over && !strings.Contains(refusal, words+TooLargeMessage) {
					t.Errorf("the refusal does not name %q:\n%s", words, refusal)
				}
			})
		}
	}
}
