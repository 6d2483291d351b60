package admissionpolicy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/vaptest"
)

// BenchmarkCELDecisionParts splits what one admission of a compliant pod
// costs in the API server's library (vaptest) into the parts of the
// compiled policy: the samples' pod-security-standards (the policy of
// test/perf's BenchmarkPodCreate) as compiled, then with one part taken
// away or replaced, in its own namespace with empty parameters. The
// variants are for measuring only: most of them no longer decide as the
// engine does (docs/performance.md, "Pod creates through the API server").
// As in BenchmarkCELDecision, ns/evaluation is half of ns/op.
func BenchmarkCELDecisionParts(b *testing.B) {
	sps, _ := costSamples(b)
	sample := sps["pod-security-standards"]
	if sample == nil {
		b.Fatal("config/samples has no SecurityPolicy pod-security-standards")
	}
	compile := func(params bool) *Compiled {
		sp := sample.DeepCopy()
		if !params {
			sp.Spec.Exceptions = nil
		}
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			b.Fatal(err)
		}
		c, err := CompilePolicy(sp, p, testOptions)
		if err != nil {
			b.Fatal(err)
		}
		if c.Params != params {
			b.Fatalf("compiled with params %v, want %v", c.Params, params)
		}
		return c
	}
	// Edits of the compiled policy. validations replaces each validation's
	// expression and message expression ("" drops it).
	noMatchConditions := func(c *Compiled) { c.Policy.Spec.MatchConditions = nil }
	oneBinding := func(c *Compiled) { c.Bindings = c.Bindings[:1] }
	validations := func(expr, msg string) func(*Compiled) {
		return func(c *Compiled) {
			for i := range c.Policy.Spec.Validations {
				c.Policy.Spec.Validations[i].Expression = expr
				c.Policy.Spec.Validations[i].MessageExpression = msg
			}
		}
	}
	noMessage := func(c *Compiled) {
		for i := range c.Policy.Spec.Validations {
			c.Policy.Spec.Validations[i].MessageExpression = ""
		}
	}
	for _, v := range []struct {
		name   string
		params bool
		edits  []func(*Compiled)
	}{
		{"as compiled", true, nil},
		{"no matchConditions", true, []func(*Compiled){noMatchConditions}},
		{"one binding", true, []func(*Compiled){oneBinding}},
		{"no paramKind", false, nil},
		{"no messageExpression", true, []func(*Compiled){noMessage}},
		{"validations true, no messageExpression", true, []func(*Compiled){validations("true", "")}},
		// From here on: one binding, no params, no match condition, no
		// message; the validation evaluates one part alone.
		{"bare: true", false, []func(*Compiled){noMatchConditions, oneBinding, validations("true", "")}},
		{"bare: rule's match and exclude", false, []func(*Compiled){noMatchConditions, oneBinding, validations("variables.r0_applies", "")}},
		{"bare: tooLarge", false, []func(*Compiled){noMatchConditions, oneBinding, validations(`variables.tooLarge == ""`, "")}},
		{"bare: the containers' records", false, []func(*Compiled){noMatchConditions, oneBinding, validations("size(variables.ctrs) >= 0", "")}},
		{"bare: the checks' test", false, []func(*Compiled){noMatchConditions, oneBinding, validations("!variables.violates_baseline_v1_37", "")}},
	} {
		b.Run(v.name, func(b *testing.B) {
			c := compile(v.params)
			for _, edit := range v.edits {
				edit(c)
			}
			crd, err := ParamsCRD()
			if err != nil {
				b.Fatal(err)
			}
			objs := []*unstructured.Unstructured{toUnstructured(b, crd), toUnstructured(b, c.Policy)}
			for _, bd := range c.Bindings {
				objs = append(objs, toUnstructured(b, bd))
			}
			ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
				ObjectMeta: metav1.ObjectMeta{Name: "staging", Labels: map[string]string{engine.NamespaceNameLabel: "staging"}}}
			objs = append(objs, toUnstructured(b, ns), toUnstructured(b, ParamsObject("staging", nil)))
			// vaptest.New refuses a policy that does not type-check, such as
			// one naming a variable the compiler no longer writes.
			cluster, err := vaptest.New(objs)
			if err != nil {
				b.Fatal(err)
			}
			req := func(p *corev1.Pod) vaptest.Request {
				return vaptest.Request{Operation: admission.Create, Object: toUnstructured(b, p), Namespace: "staging", Resource: podsGVR,
					UserInfo: &user.DefaultInfo{Name: requestUser}}
			}
			// The pod of BenchmarkPodCreate.
			pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "staging", Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
				}}
			if v.name == "as compiled" {
				privileged := pod.DeepCopy()
				privileged.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
				if res := cluster.Admit(b.Context(), req(privileged)); res.Allowed {
					b.Fatal("the compiled sample admits a privileged pod")
				}
			}
			r := req(pod)
			b.ReportAllocs()
			for b.Loop() {
				if res := cluster.Admit(b.Context(), r); !res.Allowed {
					b.Fatalf("refused: %q %v", res.Denials, res.Errors)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/evaluation")
		})
	}
}
