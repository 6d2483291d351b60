package admissionpolicy

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/vaptest"
)

// The benchmarks' world: the samples' restricted-workloads policy,
// enforced, with the samples' mesh-init exception in its namespace, and
// three pods that it admits.
type costBench struct {
	w    *world
	pods []struct {
		name string
		pod  *corev1.Pod
	}
}

func costBenchWorld(tb testing.TB) *costBench {
	sps, pes := costSamples(tb)
	sp := sps["restricted-workloads"].DeepCopy()
	sp.Spec.Action = policyv1alpha1.ActionEnforce
	w := newWorld(tb, []*policyv1alpha1.SecurityPolicy{sp}, []*policyv1alpha1.PolicyException{pes["mesh-init"]},
		map[string]map[string]string{"staging": {"security.podsieve.dev/profile": "restricted"}})
	if len(w.exceptions) != 1 {
		tb.Fatalf("mesh-init is not in force")
	}
	restricted := func(p *corev1.Pod) {
		p.Namespace = "staging"
		p.Name = "web-7d4b9c-x2x9z"
	}
	compliant := costPod("staging", restricted)
	compliant.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	mesh := compliant.DeepCopy()
	mesh.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.24.0", SecurityContext: &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(false), RunAsUser: ptr.To[int64](0),
		Capabilities:   &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}}}
	twenty := compliant.DeepCopy()
	for i := 1; i < 20; i++ {
		c := compliant.Spec.Containers[0]
		c.Name = fmt.Sprintf("app-%02d", i)
		c.SecurityContext = costRestrictedSC()
		twenty.Spec.Containers = append(twenty.Spec.Containers, c)
	}
	bp := &costBench{w: w}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
	}{{"compliant", compliant}, {"mesh-istio-init", mesh}, {"20-containers", twenty}} {
		// Each is admitted, by both, the mesh pod thanks to its exception.
		o, err := engine.NewAdmissionObject(c.pod)
		if err != nil {
			tb.Fatal(err)
		}
		o.RequestUser = requestUser
		got, res := w.celVerdict(tb, c.pod, podsGVR, "staging")
		if want := w.engineVerdict(o); !want.allowed || !got.allowed || len(res.Errors) > 0 {
			tb.Fatalf("%s: engine %v, CEL %v %q %v", c.name, want, got, res.Denials, res.Errors)
		}
		bp.pods = append(bp.pods, c)
	}
	unprotected := compliant.DeepCopy()
	unprotected.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
	if got, _ := w.celVerdict(tb, unprotected, podsGVR, "staging"); got.allowed {
		tb.Fatal("the benchmarks' policy admits a privileged pod")
	}
	return bp
}

// BenchmarkCELDecision: one admission through the compiled policies,
// evaluated by the API server's library (vaptest): matching, the params
// lookup, the policy's variables and validations. The object is converted
// to unstructured once, outside the loop. vaptest.Admit evaluates twice
// (the dispatcher decides, then its explanation walks the same hooks), so
// what the API server spends is about half of ns/op: reported as
// ns/evaluation.
func BenchmarkCELDecision(b *testing.B) {
	bp := costBenchWorld(b)
	for _, c := range bp.pods {
		b.Run(c.name, func(b *testing.B) {
			u := toUnstructured(b, c.pod)
			req := vaptest.Request{Operation: admission.Create, Object: u, Namespace: "staging", Resource: podsGVR,
				UserInfo: &user.DefaultInfo{Name: requestUser}}
			b.ReportAllocs()
			for b.Loop() {
				if res := bp.w.cluster.Admit(b.Context(), req); !res.Allowed {
					b.Fatalf("refused: %q %v", res.Denials, res.Errors)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/evaluation")
		})
	}
}

// BenchmarkEngineDecision: the engine's decision on the same pods, as the
// webhook makes it (DecideWithin, default budget), the object built once.
func BenchmarkEngineDecision(b *testing.B) {
	bp := costBenchWorld(b)
	for _, c := range bp.pods {
		b.Run(c.name, func(b *testing.B) {
			o, err := engine.NewAdmissionObject(c.pod)
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			ns := bp.w.nsLabels["staging"]
			b.ReportAllocs()
			for b.Loop() {
				if d := engine.DecideWithin(engine.Limits{}, bp.w.policies, engine.AllExceptions(bp.w.exceptions), o, ns, now, engine.Admission); !d.Allowed {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkCompilePolicy: compiling SecurityPolicies into
// ValidatingAdmissionPolicies and having the API server's library compile
// and type-check every expression (vaptest.New does what the API server
// does when a policy is created, and again when its informer sees it): the
// samples, and the largest policy.
func BenchmarkCompilePolicy(b *testing.B) {
	sps, _ := costSamples(b)
	var samples []*policyv1alpha1.SecurityPolicy
	for _, name := range slices.Sorted(maps.Keys(sps)) {
		samples = append(samples, sps[name])
	}
	crd, err := ParamsCRD()
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sps  []*policyv1alpha1.SecurityPolicy
	}{{"samples", samples}, {"largest", []*policyv1alpha1.SecurityPolicy{costPolicy(costLargestEntries(b))}}} {
		b.Run(c.name, func(b *testing.B) {
			var exprs, bytes int
			for b.Loop() {
				objs := []*unstructured.Unstructured{toUnstructured(b, crd)}
				exprs, bytes = 0, 0
				for _, sp := range c.sps {
					p, err := engine.CompilePolicy(sp)
					if err != nil {
						b.Fatal(err)
					}
					cp, err := CompilePolicy(sp, p, testOptions)
					if err != nil {
						b.Fatal(err)
					}
					for _, v := range cp.Policy.Spec.Variables {
						exprs, bytes = exprs+1, bytes+len(v.Expression)
					}
					for _, v := range cp.Policy.Spec.Validations {
						exprs, bytes = exprs+2, bytes+len(v.Expression)+len(v.MessageExpression)
					}
					objs = append(objs, toUnstructured(b, cp.Policy))
					for _, bd := range cp.Bindings {
						objs = append(objs, toUnstructured(b, bd))
					}
				}
				if _, err := vaptest.New(objs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(exprs), "expressions")
			b.ReportMetric(float64(bytes), "CEL-bytes")
		})
	}
}
