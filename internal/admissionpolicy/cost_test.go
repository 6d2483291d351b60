package admissionpolicy

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/vaptest"
)

// What the compiled policies cost the API server, and where its CEL budget
// ends (docs/performance.md, "ValidatingAdmissionPolicies: CEL cost and
// latency"). The API server stops an expression at celconfig.PerCallLimit
// and a binding's evaluation at celconfig.RuntimeCELCostBudget; the error
// that follows is a refusal under the policies' failurePolicy Fail. The
// largest policy and exceptions the guardrails permit, on the largest pods
// a request holds, must therefore be refused when the CEL cannot decide
// them, and decided as the engine decides them when it can: never admitted.
//
//	go test ./internal/admissionpolicy/ -run 'TestWorstPods|TestParamsSize' -count=1 -v
//	go test ./internal/admissionpolicy/ -run XXX -bench 'CELDecision|EngineDecision|CompilePolicy' -benchtime=20x

const (
	// costMaxRequestBytes is the API server's limit on a request body.
	costMaxRequestBytes = 3 << 20
	// costMaxObjectBytes is etcd's default limit on a request
	// (--max-request-bytes), which bounds one stored object: one
	// namespace's PodSecurityParams.
	costMaxObjectBytes = 3 << 19
	// costSentinel ends every list of values of a worst pod: no value glob
	// of the largest policy or exceptions matches it, so that no worst pod
	// is ever covered, while the values before it all match and make the
	// CEL test every one.
	costSentinel = "UNCOVERED"
	costNS       = "apps"
)

// costName is the i-th of the shortest distinct lower-case names (a..z,
// aa..zz, ...), as the engine's worst cases fill a list.
func costName(i int) string {
	var b []byte
	for {
		b = append(b, byte('a'+i%26))
		i /= 26
		if i == 0 {
			break
		}
		i--
	}
	return string(b)
}

// costPad is a glob of exactly n bytes: head, fill repeated, stars, tail.
func costPad(head, fill, tail string, n int) string {
	var b strings.Builder
	b.WriteString(head)
	for b.Len()+len(fill)+len(tail) <= n {
		b.WriteString(fill)
	}
	b.WriteString(strings.Repeat("*", n-b.Len()-len(tail)))
	b.WriteString(tail)
	return b.String()
}

// Globs of the largest policy and exceptions. costNeverValue never matches
// a worst pod's value (none holds "n?n?…x" over 250 bytes), costNeverImage
// no image spelling (none holds "/q?/q?…"), costNeverName no container
// name; costShortValues match every value of a worst pod but the sentinel.
var (
	costNeverValue  = costPad("*", "n?", "x", 256)
	costNeverImage  = costPad("**", "/q?", "*", 256)
	costNeverName   = costPad("*", "c?", "x", 63)
	costShortValues = []string{"?", "??", "???", "????"}
	costAnyName     = "?*" // every container name, as a regular expression (not "*", which the CEL skips)
)

func costValues(never int) []string {
	v := make([]string, 0, never+len(costShortValues))
	for range never {
		v = append(v, costNeverValue)
	}
	return append(v, costShortValues...)
}

func costImages(n int) []string {
	v := make([]string, n)
	for i := range v {
		v[i] = costNeverImage
	}
	return v
}

// costMissingControls are the controls whose violations of a bare container
// are missing settings (no values): entries of them reach their images.
var costMissingControls = []policyv1alpha1.ControlName{"Seccomp", "Running as Non-root", "Privilege Escalation", "Capabilities"}

// costPolicy is a largest policy: two restricted rules, each with entries
// entries (the schema allows engine.MaxRuleEntries), every field at its
// item limit, that reach as deep as they can into each worst pod's
// violations and cover none: container names and values match, images and
// the sentinel do not.
func costPolicy(entries int) *policyv1alpha1.SecurityPolicy {
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	sp.Spec.Action = policyv1alpha1.ActionEnforce
	sp.Spec.Exceptions = &policyv1alpha1.ExceptionGuardrails{}
	names := []string{costNeverName, costNeverName, costNeverName, costNeverName, costNeverName, costNeverName, costNeverName, costAnyName}
	for r := range 2 {
		rule := policyv1alpha1.PolicyRule{Name: fmt.Sprintf("r%d", r), PodSecurity: policyv1alpha1.PodSecurity{Level: "restricted"}}
		for i := range entries {
			var x policyv1alpha1.PodSecurityExclusion
			switch i % 8 {
			case 0, 1: // the capabilities pod's two violations, value by value
				x = policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", RestrictedField: "spec.containers[*].securityContext.capabilities.add",
					ContainerNames: names, Values: costValues(12)}
			case 2, 3: // every container's missing settings, image by image
				x = policyv1alpha1.PodSecurityExclusion{ControlName: costMissingControls[i/8%4], ContainerNames: names, Images: costImages(8)}
			case 4:
				x = policyv1alpha1.PodSecurityExclusion{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: costValues(12)}
			case 5:
				x = policyv1alpha1.PodSecurityExclusion{ControlName: "Sysctls", RestrictedField: "spec.securityContext.sysctls[*].name", Values: costValues(12)}
			case 6:
				x = policyv1alpha1.PodSecurityExclusion{ControlName: "SELinux", RestrictedField: "spec.containers[*].securityContext.seLinuxOptions.type",
					ContainerNames: names, Values: costValues(12)}
			case 7:
				x = policyv1alpha1.PodSecurityExclusion{ControlName: "AppArmor", RestrictedField: `metadata.annotations["container.apparmor.security.beta.kubernetes.io/*"]`,
					Values: costValues(12)}
			}
			rule.PodSecurity.Exclude = append(rule.PodSecurity.Exclude, x)
		}
		sp.Spec.Rules = append(sp.Spec.Rules, rule)
	}
	return sp
}

// costException is a largest exception in namespace ns: engine.MaxExceptionEntries
// entries within the schema's totals (16 image globs, 32 container names, 64
// values, all of 256 bytes but the short values), 16 names of which the last
// matches, of the same kinds as costPolicy's entries: all reach, none covers.
func costException(ns string, i int) *policyv1alpha1.PolicyException {
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("e%03d", i), CreationTimestamp: metav1.Now()}}
	pe.Spec.Exceptions = []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"*"}}}
	m := &policyv1alpha1.ExceptionMatch{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	for range 15 {
		m.Names = append(m.Names, costPad("*", "w?", "x", 253))
	}
	m.Names = append(m.Names, "web")
	pe.Spec.Match = m
	names := []string{costNeverName, costAnyName}
	for e := range engine.MaxExceptionEntries {
		var x policyv1alpha1.PodSecurityExclusion
		switch e % 4 {
		case 0:
			x = policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", RestrictedField: "spec.containers[*].securityContext.capabilities.add",
				ContainerNames: names, Values: costValues(1)}
		case 1:
			x = policyv1alpha1.PodSecurityExclusion{ControlName: costMissingControls[e/4], ContainerNames: names, Images: costImages(4)}
		case 2:
			x = policyv1alpha1.PodSecurityExclusion{ControlName: []policyv1alpha1.ControlName{"HostPath Volumes", "Sysctls"}[e/4%2],
				RestrictedField: []string{"spec.volumes[*].hostPath", "spec.securityContext.sysctls[*].name"}[e/4%2], Values: costValues(1)}
		case 3:
			x = policyv1alpha1.PodSecurityExclusion{ControlName: "SELinux", RestrictedField: "spec.containers[*].securityContext.seLinuxOptions.type",
				ContainerNames: names, Values: costValues(1)}
		}
		pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, x)
	}
	return pe
}

// costRestrictedSC is a container security context that passes restricted.
func costRestrictedSC() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// costPod is a pod named web, labelled app=web, that passes restricted but
// for what edit adds.
func costPod(ns string, edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{},
			Containers:      []corev1.Container{{Name: "app", Image: "registry.example/shop/web:2.1", SecurityContext: costRestrictedSC()}},
		},
	}
	edit(p)
	return p
}

// costShape is a worst pod of size n: n entries of one list, or one string
// of n bytes. Every list ends with costSentinel, every string starts with
// it, so that nothing covers it whatever n.
type costShape struct {
	name  string
	pod   func(ns string, n int) *corev1.Pod
	entry func(i int) any // the list's i-th entry (nil: a string of n bytes)
}

var costShapes = []costShape{
	{name: "capabilities", entry: func(i int) any { return costName(i) }, pod: func(ns string, n int) *corev1.Pod {
		return costPod(ns, func(p *corev1.Pod) {
			caps := make([]corev1.Capability, 0, n+1)
			for i := range n {
				caps = append(caps, corev1.Capability(costName(i)))
			}
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = append(caps, costSentinel)
		})
	}},
	{name: "containers", entry: func(i int) any { return corev1.Container{Name: costName(i), Image: "i"} }, pod: func(ns string, n int) *corev1.Pod {
		return costPod(ns, func(p *corev1.Pod) {
			p.Spec.Containers = make([]corev1.Container, max(n, 1))
			for i := range p.Spec.Containers {
				p.Spec.Containers[i] = corev1.Container{Name: costName(i), Image: "i"}
			}
		})
	}},
	{name: "hostPath", entry: func(i int) any { return costVolume(costName(i)) }, pod: func(ns string, n int) *corev1.Pod {
		return costPod(ns, func(p *corev1.Pod) {
			for i := range n {
				p.Spec.Volumes = append(p.Spec.Volumes, costVolume(costName(i)))
			}
			p.Spec.Volumes = append(p.Spec.Volumes, costVolume(costSentinel))
		})
	}},
	{name: "sysctls", entry: func(i int) any { return corev1.Sysctl{Name: costName(i)} }, pod: func(ns string, n int) *corev1.Pod {
		return costPod(ns, func(p *corev1.Pod) {
			for i := range n {
				p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: costName(i)})
			}
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: costSentinel})
		})
	}},
	{name: "seLinuxType", pod: func(ns string, n int) *corev1.Pod {
		return costPod(ns, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: costSentinel + strings.Repeat("a", n)}
		})
	}},
	{name: "image", pod: func(ns string, n int) *corev1.Pod {
		return costPod(ns, func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = costSentinel + strings.Repeat("a", n)
			p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
		})
	}},
	{name: "annotationValue", pod: func(ns string, n int) *corev1.Pod {
		return costPod(ns, func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/app": costSentinel + strings.Repeat("a", n)}
		})
	}},
}

func costVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: name}}}
}

// fill is the largest n whose pod, as JSON, fits a request (3 MiB).
func (s costShape) fill() int {
	raw, err := json.Marshal(s.pod(costNS, 1))
	if err != nil {
		panic(err)
	}
	if s.entry == nil {
		return costMaxRequestBytes - len(raw) + 1
	}
	size := len(raw)
	for n := 1; n < costMaxRequestBytes; n++ {
		e, err := json.Marshal(s.entry(n))
		if err != nil {
			panic(err)
		}
		if size += len(e) + 1; size > costMaxRequestBytes {
			return n
		}
	}
	return costMaxRequestBytes
}

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
	got, res := cw.celVerdict(t, pod, podsGVR, ns, "alice")
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
	o.RequestUser = "alice"
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
var costFull = flag.Bool("cost.full", false, "TestWorstPodsAreNeverAdmitted: every shape at 3 MiB, every exception count, every bisection")

// TestWorstPodsAreNeverAdmitted: the largest policy (costPolicy) and 0, 1
// and many of the largest exceptions (costException) in one namespace's
// parameters, against the largest pods a request holds: the CEL decides as
// the engine or refuses at its cost limit (failurePolicy Fail), and never
// admits. Then where the budget ends: the largest size of a shape the CEL
// still decides, and the most exceptions with which it decides a small
// violating pod. By default the lists stop at 256 entries (the strings
// go to 3 MiB) and two shapes are bisected; -cost.full does it all.
func TestWorstPodsAreNeverAdmitted(t *testing.T) {
	// The schema's largest rules do not compile: each expression must be
	// under cel-go's parser limit, which the API server keeps.
	entries := costLargestEntries(t)
	if entries < engine.MaxRuleEntries {
		cp := costCompile(t, costPolicy(engine.MaxRuleEntries))
		_, err := vaptest.New(costObjects(t, cp))
		t.Logf("FINDING: a rule of %d such entries compiles into an expression of %d code points, more than the %d the API server parses; "+
			"CompilePolicy returns it without error and the API server refuses the ValidatingAdmissionPolicy (vaptest.New refuses: %v). "+
			"The largest that compiles has %d entries per rule (longest expression %d code points): what follows uses it.",
			engine.MaxRuleEntries, costLongest(cp), costMaxCodePoints, err != nil, entries, costLongest(costCompile(t, costPolicy(entries))))
		if err == nil {
			t.Errorf("the API server's library accepts an expression of %d code points: costMaxCodePoints is wrong", costLongest(cp))
		}
	}

	// many: as many of these exceptions as one params object holds
	// (MaxParamsBytes; FitParams leaves the rest out): no namespace holds
	// more.
	start := time.Now()
	probe := newCostWorldParamsSize(t)
	many := MaxParamsBytes / probe
	ladder := []int{0, 1, many}
	if *costFull {
		ladder = []int{0, 1, 2, 4, 8, 16, many}
	}
	cw := newCostWorld(t, entries, ladder)
	t.Logf("the largest policy (2 rules × %d entries) with %v largest exceptions (%d params bytes each, %d fit in %d bytes), compiled and type-checked in %s",
		entries, ladder, probe, many, MaxParamsBytes, time.Since(start).Round(time.Millisecond))
	if cw.params[costNSFor(many)] > MaxParamsBytes+1024 {
		t.Fatalf("%d exceptions make a params object of %d bytes, more than %d", many, cw.params[costNSFor(many)], MaxParamsBytes)
	}

	// Every shape small and large, with none and one exception (and many).
	counts := []int{0, 1}
	if *costFull {
		counts = append(counts, many)
	}
	for _, k := range counts {
		ns := costNSFor(k)
		for _, s := range costShapes {
			large := s.fill()
			if s.entry != nil && !*costFull {
				// Past the budget of the largest policy (BUDGET below), cheaply.
				large = 256
				if s.name == "containers" {
					large = 64
				}
			}
			for _, size := range []int{8, large} {
				r := cw.decide(t, fmt.Sprintf("%s n=%d", s.name, size), s.pod(ns, size))
				t.Logf("%2d exceptions, %-15s n=%-7d: %v", k, s.name, size, r)
			}
		}
	}

	// Where the budget ends: the largest size each shape is decided at.
	shapes, hi, counts := costShapes[:2], 1_024, []int{0}
	if *costFull {
		shapes, hi, counts = costShapes, 0, []int{0, 1}
	}
	for _, k := range counts {
		for _, s := range shapes {
			top := s.fill()
			if hi > 0 {
				top = hi
			}
			n, r := cw.largestDecided(t, s, costNSFor(k), top)
			raw, _ := json.Marshal(s.pod(costNSFor(k), n))
			t.Logf("BUDGET %d exceptions, %-15s: the CEL decides up to n=%d (%d bytes of pod JSON): %v", k, s.name, n, len(raw), r)
		}
	}

	// And for a plain policy: two restricted rules without entries.
	if *costFull {
		plain := newCostWorld(t, 0, []int{0})
		for _, s := range costShapes {
			n, r := plain.largestDecided(t, s, costNSFor(0), s.fill())
			raw, _ := json.Marshal(s.pod(costNSFor(0), n))
			t.Logf("BUDGET plain restricted policy, %-15s: the CEL decides up to n=%d (%d bytes of pod JSON): %v", s.name, n, len(raw), r)
		}
	}

	// The most exceptions with which a small violating pod is decided.
	if testing.Short() {
		ladder = ladder[:2]
	}
	for _, k := range ladder {
		s := costShapes[1]
		r := cw.decide(t, fmt.Sprintf("%s n=1", s.name), s.pod(costNSFor(k), 1))
		t.Logf("EXCEPTIONS %s n=1 with %2d exceptions (%7d params bytes): %v", s.name, k, cw.params[costNSFor(k)], r)
	}
}

// newCostWorldParamsSize is the params bytes of one costException.
func newCostWorldParamsSize(tb testing.TB) int {
	sp := costPolicy(1)
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		tb.Fatal(err)
	}
	return perException(tb, "apps", p, func(i int) *policyv1alpha1.PolicyException { return costException(costNS, i) })
}

// paramsBytes is the size of the namespace's params object as the API
// server stores it: JSON.
func paramsBytes(tb testing.TB, ns string, excs []*ParamException) int {
	tb.Helper()
	raw, err := json.Marshal(ParamsObject(ns, excs))
	if err != nil {
		tb.Fatal(err)
	}
	return len(raw)
}

// perException is what each exception made by pe adds to a params object,
// measured over 8 of them.
func perException(tb testing.TB, ns string, p *engine.Policy, pe func(i int) *policyv1alpha1.PolicyException) int {
	tb.Helper()
	const n = 8
	var excs []*ParamException
	policy := func(name string) *engine.Policy {
		if name == p.Name {
			return p
		}
		return nil
	}
	for i := range n {
		x := pe(i)
		e, err := engine.CompileException(x, clusterNS)
		if err != nil {
			tb.Fatal(err)
		}
		if st := e.State(policy, time.Now()); !st.Ready {
			tb.Fatalf("PolicyException %s/%s is not in force: %s", x.Namespace, x.Name, st.Message)
		}
		px, err := CompileException(x, e, policy)
		if err != nil {
			tb.Fatal(err)
		}
		excs = append(excs, px)
	}
	return (paramsBytes(tb, ns, excs) - paramsBytes(tb, ns, nil)) / n
}

// costSamples reads the SecurityPolicies and PolicyExceptions of
// config/samples, by name.
func costSamples(tb testing.TB) (map[string]*policyv1alpha1.SecurityPolicy, map[string]*policyv1alpha1.PolicyException) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "policy_v1alpha1_*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("config/samples: %d files, %v", len(files), err)
	}
	sps := map[string]*policyv1alpha1.SecurityPolicy{}
	pes := map[string]*policyv1alpha1.PolicyException{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(data, &tm); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		switch tm.Kind {
		case "SecurityPolicy":
			sp := &policyv1alpha1.SecurityPolicy{}
			if err := yaml.UnmarshalStrict(data, sp); err != nil {
				tb.Fatalf("%s: %v", file, err)
			}
			sp.Generation = 1
			sps[sp.Name] = sp
		case "PolicyException":
			pe := &policyv1alpha1.PolicyException{}
			if err := yaml.UnmarshalStrict(data, pe); err != nil {
				tb.Fatalf("%s: %v", file, err)
			}
			pe.CreationTimestamp = metav1.Now()
			pes[pe.Name] = pe
		}
	}
	return sps, pes
}

// maximalException is a PolicyException with every field at the schema's
// limit: 8 targets of 8 rule names (their globs resolve to every rule of
// the policies they name), 16 names of 253 bytes, 9 kinds, a selector of 16
// requirements of 64 values of 63 bytes, 16 entries holding 16 image globs,
// 32 container names and 64 values of their maximum lengths, a 256-byte
// restrictedField... as long as a field name is.
func maximalException(ns string, i int, policies []string) *policyv1alpha1.PolicyException {
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
		Name: fmt.Sprintf("%03d-%s", i, strings.Repeat("e", 249)), CreationTimestamp: metav1.Now()}}
	for t := range 8 {
		target := policyv1alpha1.ExceptionTarget{PolicyName: policies[t%len(policies)]}
		for r := range 8 {
			target.RuleNames = append(target.RuleNames, costPad(fmt.Sprintf("*%d", r), "r?", "*", 63))
		}
		target.RuleNames[7] = "*"
		pe.Spec.Exceptions = append(pe.Spec.Exceptions, target)
	}
	m := &policyv1alpha1.ExceptionMatch{Selector: &metav1.LabelSelector{}}
	for n := range 16 {
		m.Names = append(m.Names, costPad(fmt.Sprintf("w%02d", n), "w?", "*", 253))
	}
	m.Kinds = []policyv1alpha1.PodBearingKind{"Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicationController", "PodTemplate"}
	for q := range engine.MaxSelectorRequirements {
		req := metav1.LabelSelectorRequirement{Key: fmt.Sprintf("%s/%s%02d", strings.Repeat("k", 253), strings.Repeat("l", 61), q), Operator: metav1.LabelSelectorOpIn}
		for v := range engine.MaxSelectorValues {
			req.Values = append(req.Values, fmt.Sprintf("%02d%s", v, strings.Repeat("v", 61)))
		}
		m.Selector.MatchExpressions = append(m.Selector.MatchExpressions, req)
	}
	pe.Spec.Match = m
	for e := range engine.MaxExceptionEntries {
		x := policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities",
			RestrictedField: "spec.containers[*].securityContext.capabilities.add",
			ContainerKinds:  []policyv1alpha1.ContainerKind{"Init", "Sidecar", "App", "Ephemeral"},
			Images:          []string{costPad(fmt.Sprintf("registry-%02d.example/**", e), "/a?", "*", 256)}}
		for k := range 2 {
			x.ContainerNames = append(x.ContainerNames, costPad(fmt.Sprintf("c%d%02d", k, e), "c?", "*", 63))
		}
		for k := range 4 {
			x.Values = append(x.Values, costPad(fmt.Sprintf("V%d%02d", k, e), "N?", "*", 256))
		}
		pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, x)
	}
	pe.Spec.Justification = strings.Repeat("j", 1024) // not compiled into the params
	return pe
}

// TestParamsSizePerException: what one PolicyException adds to its
// namespace's PodSecurityParams object, as JSON, typical and maximal, and
// how many fit in one object (etcd's 1.5 MiB).
func TestParamsSizePerException(t *testing.T) {
	sps, pes := costSamples(t)
	restricted, err := engine.CompilePolicy(sps["restricted-workloads"])
	if err != nil {
		t.Fatal(err)
	}
	mesh := pes["mesh-init"]
	if mesh == nil {
		t.Fatal("config/samples has no mesh-init PolicyException")
	}
	typical := perException(t, "staging", restricted, func(i int) *policyv1alpha1.PolicyException {
		pe := mesh.DeepCopy()
		pe.Name = fmt.Sprintf("mesh-init-%d", i)
		return pe
	})

	// The targets of a maximal exception are the rules its globs resolve
	// to: with "*", every rule of each policy it names. One policy of two
	// rules; and the most the schema allows, 8 policies of 64 rules of
	// 63-byte names (the cluster admin's, not the exception author's).
	maximal := func(rules int, policies []string) int {
		var compiled []*engine.Policy
		for _, name := range policies {
			sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
			sp.Spec.Action = policyv1alpha1.ActionEnforce
			sp.Spec.Exceptions = &policyv1alpha1.ExceptionGuardrails{}
			for r := range rules {
				sp.Spec.Rules = append(sp.Spec.Rules, policyv1alpha1.PolicyRule{Name: fmt.Sprintf("%02d%s", r, strings.Repeat("r", 61)),
					PodSecurity: policyv1alpha1.PodSecurity{Level: "restricted"}})
			}
			p, err := engine.CompilePolicy(sp)
			if err != nil {
				t.Fatal(err)
			}
			compiled = append(compiled, p)
		}
		const n = 4
		var excs []*ParamException
		policy := func(name string) *engine.Policy {
			for _, p := range compiled {
				if p.Name == name {
					return p
				}
			}
			return nil
		}
		for i := range n {
			pe := maximalException("staging", i, policies)
			e, err := engine.CompileException(pe, clusterNS)
			if err != nil {
				t.Fatal(err)
			}
			if st := e.State(policy, time.Now()); !st.Ready {
				t.Fatalf("the maximal exception is not in force: %s", st.Message)
			}
			px, err := CompileException(pe, e, policy)
			if err != nil {
				t.Fatal(err)
			}
			excs = append(excs, px)
		}
		return (paramsBytes(t, "staging", excs) - paramsBytes(t, "staging", nil)) / n
	}
	longName := func(i int) string { return fmt.Sprintf("%d%s", i, strings.Repeat("p", 243)) } // PolicyName's limit: 253 - len("podsieve.")
	var eight []string
	for i := range 8 {
		eight = append(eight, longName(i))
	}
	maxOne := maximal(2, []string{"p"})
	maxAll := maximal(64, eight)
	largest := newCostWorldParamsSize(t)
	empty := paramsBytes(t, "staging", nil)

	t.Logf("an empty params object: %d bytes", empty)
	// Where a maximal exception's bytes go: its selector is copied as is,
	// its globs become regular expressions (longer than the globs).
	pe := maximalException("staging", 0, []string{"p"})
	src, _ := json.Marshal(pe)
	sel, _ := json.Marshal(pe.Spec.Match.Selector)
	pe.Spec.Match.Selector = nil
	noSel := perException(t, "staging", costPolicyFor(t, "p"), func(i int) *policyv1alpha1.PolicyException {
		x := maximalException("staging", i, []string{"p"})
		x.Spec.Match.Selector = nil
		return x
	})
	t.Logf("a maximal PolicyException is %d bytes of JSON itself; its selector %d; compiled without its selector it adds %d bytes", len(src), len(sel), noSel)
	for _, c := range []struct {
		name  string
		bytes int
	}{
		{"typical (config/samples mesh-init: 3 entries)", typical},
		{"TestWorstPods' largest (16 entries, 256-byte globs)", largest},
		{"maximal, targeting one policy of 2 rules", maxOne},
		{"maximal, targeting 8 policies of 64 rules", maxAll},
	} {
		t.Logf("PARAMS %-55s %7d bytes per exception; %6d fit in one params object (MaxParamsBytes, %d bytes)", c.name+":", c.bytes, MaxParamsBytes/c.bytes, MaxParamsBytes)
	}
	// Bounds at about 1.25× what was measured, to catch a regression in
	// what CompileException writes.
	for _, c := range []struct {
		name       string
		bytes, max int
	}{
		{"typical", typical, 1_250},
		{"largest of TestWorstPods", largest, 40_000},
		{"maximal, one policy", maxOne, 180_000},
		{"maximal, 8 policies of 64 rules", maxAll, 390_000},
	} {
		if c.bytes > c.max {
			t.Errorf("%s exception: %d params bytes, more than %d", c.name, c.bytes, c.max)
		}
	}
	if maxAll > costMaxObjectBytes-empty {
		t.Errorf("one maximal exception (%d bytes) does not fit in an object etcd stores", maxAll)
	}
	if maxAll > MaxParamsBytes {
		t.Logf("one maximal exception targeting 8 policies of 64 rules (%d bytes) is more than MaxParamsBytes: FitParams leaves it out, and it waives nothing in the API server", maxAll)
	}
}

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
		o.RequestUser = "alice"
		got, res := w.celVerdict(tb, c.pod, podsGVR, "staging", "alice")
		if want := w.engineVerdict(o); !want.allowed || !got.allowed || len(res.Errors) > 0 {
			tb.Fatalf("%s: engine %v, CEL %v %q %v", c.name, want, got, res.Denials, res.Errors)
		}
		bp.pods = append(bp.pods, c)
	}
	unprotected := compliant.DeepCopy()
	unprotected.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
	if got, _ := w.celVerdict(tb, unprotected, podsGVR, "staging", "alice"); got.allowed {
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
				UserInfo: &user.DefaultInfo{Name: "alice"}}
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
