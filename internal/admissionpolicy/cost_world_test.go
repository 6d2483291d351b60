package admissionpolicy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// costWorld is the largest policy with, in each of its namespaces, a number
// of largest exceptions: one world, so that the policy is type-checked once.
type costWorld struct {
	*world
	counts map[string]int                 // namespace → exceptions in its params
	excs   map[string][]*engine.Exception // namespace → the engine's candidates
	params map[string]int                 // namespace → bytes of its params object
}

func costNSFor(k int) string { return fmt.Sprintf("k%03d", k) }

func newCostWorld(tb testing.TB, entries int, counts []int) *costWorld {
	tb.Helper()
	namespaces := map[string]map[string]string{}
	var pes []*policyv1alpha1.PolicyException
	cw := &costWorld{counts: map[string]int{}, excs: map[string][]*engine.Exception{}, params: map[string]int{}}
	for _, k := range counts {
		ns := costNSFor(k)
		namespaces[ns] = nil
		cw.counts[ns] = k
		for i := range k {
			pes = append(pes, costException(ns, i))
		}
	}
	cw.world = newWorld(tb, []*policyv1alpha1.SecurityPolicy{costPolicy(entries)}, pes, namespaces)
	if len(cw.exceptions) != len(pes) {
		tb.Fatalf("%d of %d exceptions are in force", len(cw.exceptions), len(pes))
	}
	for _, e := range cw.exceptions {
		for ns := range namespaces {
			if e.ReachesNamespace(ns, cw.nsLabels[ns]) {
				cw.excs[ns] = append(cw.excs[ns], e)
			}
		}
	}
	for ns, k := range cw.counts {
		var here []*ParamException
		for i := range k {
			pe := costException(ns, i)
			e, err := engine.CompileException(pe, clusterNS)
			if err != nil {
				tb.Fatal(err)
			}
			px, err := CompileException(pe, e, func(string) *engine.Policy { return cw.policies[0] })
			if err != nil {
				tb.Fatal(err)
			}
			here = append(here, px)
		}
		cw.params[ns] = paramsBytes(tb, ns, here)
	}
	return cw
}

// costResult is what each side made of one worst pod.
type costResult struct {
	celAllowed, engineAllowed bool
	celCost                   bool     // the CEL stopped at its cost limit or budget
	celOther                  []string // any other evaluation error
	engineStopped             bool     // the engine's budget stopped it
	celTime, engineTime       time.Duration
}

func (r costResult) String() string {
	cel := fmt.Sprintf("CEL allowed=%v", r.celAllowed)
	if r.celCost {
		cel = "CEL refused: cost limit"
	}
	eng := fmt.Sprintf("engine allowed=%v", r.engineAllowed)
	if r.engineStopped {
		eng = "engine refused: budget"
	}
	return fmt.Sprintf("%s (%s), %s (%s)", cel, r.celTime.Round(time.Millisecond), eng, r.engineTime.Round(time.Millisecond))
}

// decide decides a worst pod both ways and fails the test on any admission,
// any disagreement when both decide, and any error but the cost limit's.
func (cw *costWorld) decide(t *testing.T, what string, pod *corev1.Pod) costResult {
	t.Helper()
	ns := pod.Namespace
	start := time.Now()
	got, res := cw.celVerdict(t, pod, podsGVR, ns)
	r := costResult{celAllowed: got.allowed, celTime: time.Since(start)}
	for _, err := range res.Errors {
		if strings.Contains(err.Error(), "cost") {
			r.celCost = true
		} else {
			r.celOther = append(r.celOther, err.Error())
		}
	}
	o, err := engine.NewAdmissionObject(pod)
	if err != nil {
		t.Fatal(err)
	}
	o.RequestUser = requestUser
	start = time.Now()
	d := engine.DecideWithin(engine.Limits{}, cw.policies, engine.AllExceptions(cw.excs[ns]), o, cw.nsLabels[ns], time.Now(), engine.Admission)
	r.engineTime = time.Since(start)
	r.engineAllowed, r.engineStopped = d.Allowed, d.Err != nil
	if got.allowed {
		t.Errorf("CRITICAL: %s in %s (%d exceptions): the CEL admits a pod that violates every rule (engine: allowed=%v err=%v)", what, ns, cw.counts[ns], d.Allowed, d.Err)
	}
	if d.Allowed {
		t.Errorf("%s in %s: the engine admits it: the worst pod is not built to violate", what, ns)
	}
	if len(r.celOther) > 0 {
		t.Errorf("%s in %s: evaluation errors other than the cost limit (a refusal under failurePolicy Fail, but a bug): %.2000s", what, ns, r.celOther)
	}
	if len(res.Errors) == 0 && d.Err == nil {
		var want []string
		for _, rr := range d.Results {
			if rr.Outcome == engine.Fail {
				want = append(want, rr.Rule.Policy.Name+"/"+rr.Rule.Name)
			}
		}
		slices.Sort(want)
		if got.allowed != d.Allowed || !slices.Equal(got.failing, want) {
			t.Errorf("%s in %s: engine allowed=%v failing %v, CEL %v", what, ns, d.Allowed, want, got)
		}
	}
	return r
}

// largestDecided is the largest n ≤ hi at which the CEL decides shape
// without reaching its cost limit (0 if it never does), by doubling then
// bisection to within 1%, checking every probe; at most 2·log2(hi)+1 probes.
func (cw *costWorld) largestDecided(t *testing.T, s costShape, ns string, hi int) (int, costResult) {
	decides := func(n int) (bool, costResult) {
		r := cw.decide(t, fmt.Sprintf("%s n=%d", s.name, n), s.pod(ns, n))
		return !r.celCost, r
	}
	var last costResult
	lo, up := 0, 1
	for up <= hi {
		ok, r := decides(up)
		if !ok {
			break
		}
		lo, last, up = up, r, up*2
	}
	if up > hi {
		if lo == hi {
			return lo, last
		}
		ok, r := decides(hi)
		if ok {
			return hi, r
		}
		up = hi
	}
	for up-lo > 1 && up-lo > lo/100 { // to within 1%
		mid := lo + (up-lo)/2
		if ok, r := decides(mid); ok {
			lo, last = mid, r
		} else {
			up = mid
		}
	}
	return lo, last
}

// costFull runs TestWorstPodsAreNeverAdmitted on every shape at 3 MiB,
// with every exception count, and bisects every shape: minutes, not
// seconds, because the CEL's CPU time grows with the square of a list's
// length (docs/performance.md).
//
//	go test ./internal/admissionpolicy/ -run TestWorstPods -count=1 -v -timeout 30m -args -cost.full

// costPolicyFor is a compiled policy of two restricted rules, open to
// exceptions.
func costPolicyFor(tb testing.TB, name string) *engine.Policy {
	tb.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
	sp.Spec.Action = policyv1alpha1.ActionEnforce
	sp.Spec.Exceptions = &policyv1alpha1.ExceptionGuardrails{}
	for r := range 2 {
		sp.Spec.Rules = append(sp.Spec.Rules, policyv1alpha1.PolicyRule{Name: fmt.Sprintf("r%d", r), PodSecurity: policyv1alpha1.PodSecurity{Level: "restricted"}})
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// costMaxCodePoints is the longest expression the API server parses: cel-go's
// parser default (parser.ExpressionSizeCodePointLimit), which Kubernetes
// keeps. A longer one is a compile error, and the API server refuses to
// store the ValidatingAdmissionPolicy that holds it.
const costMaxCodePoints = 100_000

func costCompile(tb testing.TB, sp *policyv1alpha1.SecurityPolicy) *Compiled {
	tb.Helper()
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		tb.Fatal(err)
	}
	cp, err := CompilePolicy(sp, p, testOptions)
	if err != nil {
		tb.Fatal(err)
	}
	return cp
}

func costObjects(tb testing.TB, cp *Compiled) []*unstructured.Unstructured {
	tb.Helper()
	crd, err := ParamsCRD()
	if err != nil {
		tb.Fatal(err)
	}
	objs := []*unstructured.Unstructured{toUnstructured(tb, crd), toUnstructured(tb, cp.Policy)}
	for _, b := range cp.Bindings {
		objs = append(objs, toUnstructured(tb, b))
	}
	return objs
}

// costLongest is the code points of the policy's longest expression.
func costLongest(cp *Compiled) int {
	n := 0
	for _, v := range cp.Policy.Spec.Variables {
		n = max(n, utf8.RuneCountInString(v.Expression))
	}
	for _, v := range cp.Policy.Spec.Validations {
		n = max(n, utf8.RuneCountInString(v.Expression), utf8.RuneCountInString(v.MessageExpression))
	}
	return n
}

// costLargestEntries is the most entries per rule of costPolicy whose
// expressions the API server parses, by bisection (6 compilations).
func costLargestEntries(tb testing.TB) int {
	lo, hi := 0, engine.MaxRuleEntries+1 // fits(lo), !fits(hi)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if costLongest(costCompile(tb, costPolicy(mid))) <= costMaxCodePoints {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
