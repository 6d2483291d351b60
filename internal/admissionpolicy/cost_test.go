package admissionpolicy

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
