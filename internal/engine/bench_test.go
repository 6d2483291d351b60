package engine

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Compare in one run, as ratios: the machine is shared and noisy.
//
//	go test ./internal/engine -run '^$' -bench 'BenchmarkPSA|BenchmarkEvaluate' -benchmem -count 6
//
// BenchmarkPSA is upstream's evaluator alone; BenchmarkEvaluate is podsieve's
// whole decision on the same pod: rule matching, exception selection with
// guardrails, the upstream checks, attribution of the failures and coverage
// by every entry. Target: Evaluate <= 3x PSA on each case.

type benchCase struct {
	name       string
	level      string
	pod        *corev1.Pod
	policy     string
	exceptions []string
}

func benchCases() []benchCase {
	istio := mkPod(withInit(istioInit()), withContainers(corev1.Container{Name: "app", Image: "registry.example/shop/web:2.1",
		SecurityContext: restrictedSC()}), withPodSC(&corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}))
	istioPolicy := `
exceptions: {}
rules:
- name: r
  podSecurity:
    level: restricted
    exclude:
    - {controlName: Capabilities, images: ["*/istio/proxyv2*"], restrictedField: "spec.initContainers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]}
    - {controlName: Host Ports, containerNames: [metrics], restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}
    - {controlName: Sysctls, restrictedField: "spec.securityContext.sysctls[*].name", values: ["net.core.somaxconn"]}
`
	istioException := `
exceptions: [{policyName: p, ruleNames: [r]}]
match: {names: ["web*"]}
podSecurity:
- {controlName: Running as Non-root, containerNames: [istio-init], images: ["*/istio/proxyv2*"], restrictedField: "spec.initContainers[*].securityContext.runAsNonRoot", values: ["false"]}
- {controlName: Running as Non-root user, containerNames: [istio-init], images: ["*/istio/proxyv2*"], restrictedField: "spec.initContainers[*].securityContext.runAsUser", values: ["0"]}
- {controlName: Seccomp, containerNames: [istio-init]}
- {controlName: AppArmor, containerNames: [istio-init]}
- {controlName: Privilege Escalation, containerNames: [istio-init]}
`
	var many strings.Builder
	many.WriteString("exceptions: {}\nrules:\n- name: r\n  podSecurity:\n    level: restricted\n    exclude:\n")
	for i := range 63 { // and the Istio entry: the schema's 64
		fmt.Fprintf(&many, "    - {controlName: Capabilities, images: [\"registry.example/team-%d/*\"], restrictedField: \"spec.containers[*].securityContext.capabilities.add\", values: [NET_ADMIN]}\n", i)
	}
	bad := corev1.Container{Name: "bad", Image: "nginx:1.25", Ports: []corev1.ContainerPort{{HostPort: 80}},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](0),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN", "NET_ADMIN"}}}}
	manyViolations := mkPod(withSpec(func(s *corev1.PodSpec) {
		s.HostNetwork, s.HostPID = true, true
		s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	}), withContainers(bad, withName(bad, "bad2")), withInit(withName(bad, "init")))
	return []benchCase{
		{name: "minimal", level: "restricted", pod: restrictedPod(withContainers(ctr("app", restrictedSC()))),
			policy: "rules:\n- name: r\n  podSecurity: {level: restricted}"},
		{name: "istio", level: "restricted", pod: istio, policy: istioPolicy, exceptions: []string{istioException}},
		{name: "istio-64-entries", level: "restricted", pod: istio, policy: strings.Replace(many.String(), "    exclude:\n",
			"    exclude:\n    - {controlName: Capabilities, images: [\"*/istio/proxyv2*\"], restrictedField: \"spec.initContainers[*].securityContext.capabilities.add\", values: [NET_ADMIN, NET_RAW]}\n", 1),
			exceptions: []string{istioException}},
		{name: "many-violations", level: "restricted", pod: manyViolations, policy: "rules:\n- name: r\n  podSecurity: {level: restricted}"},
	}
}

func withName(c corev1.Container, name string) corev1.Container {
	c.Name = name
	return c
}

func BenchmarkPSA(b *testing.B) {
	upstream, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range benchCases() {
		lv := api.LevelVersion{Level: api.Level(bc.level), Version: api.LatestVersion()}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				policy.AggregateCheckResults(upstream.EvaluatePod(lv, &bc.pod.ObjectMeta, &bc.pod.Spec))
			}
		})
	}
}

// compile turns a case into what Decide takes.
func (bc benchCase) compile(tb testing.TB) (*Policy, []*Exception, *Object) {
	p := mustPolicy(tb, "p", bc.policy)
	var excs []*Exception
	for i, e := range bc.exceptions {
		excs = append(excs, mustException(tb, "staging", fmt.Sprintf("e%d", i), e))
	}
	bc.pod.Name = "web"
	return p, excs, podObject("staging", bc.pod)
}

var benchNow = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func BenchmarkEvaluate(b *testing.B) {
	for _, bc := range benchCases() {
		p, excs, o := bc.compile(b)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Decide([]*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
			}
		})
	}
}

// TestBenchCasesDecide keeps the benchmark honest: each case decides what it
// is meant to.
func TestBenchCasesDecide(t *testing.T) {
	want := map[string]bool{"minimal": true, "istio": true, "istio-64-entries": true, "many-violations": false}
	for _, bc := range benchCases() {
		p, excs, o := bc.compile(t)
		d := Decide([]*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
		if d.Allowed != want[bc.name] {
			t.Errorf("%s: allowed=%v, want %v; findings:\n%s", bc.name, d.Allowed, want[bc.name], dumpFindings(d.Results[0].Findings))
		}
		// Realistic reviews stay far from the budget.
		if d.Err != nil || d.Steps > DefaultMaxSteps/100 {
			t.Errorf("%s: %d steps (err %v), more than 1%% of the budget", bc.name, d.Steps, d.Err)
		}
		t.Logf("%s: %d steps", bc.name, d.Steps)
	}
}

// The worst-case review the schema admits (see docs/performance.md,
// "Worst-case review"): maximal PolicyExceptions that all target the rule and
// match the pod, whose entries all reach their image globs and cover nothing,
// on a pod with 256 containers of distinct maximum-length images, each with a
// violation of the entries' control.
const (
	worstContainers = 256
	worstEntries    = 16 // podSecurity entries per exception
	worstImages     = 16 // image globs per exception, all entries together
	worstNames      = 32 // containerNames per exception
	worstValues     = 64 // values per exception
	worstGlobLen    = 256
)

// pad makes s exactly n bytes long by repeating fill before its last byte.
func padGlob(head, fill, tail string, n int) string {
	var b strings.Builder
	b.WriteString(head)
	for b.Len()+len(fill)+len(tail) <= n {
		b.WriteString(fill)
	}
	b.WriteString(strings.Repeat("*", n-b.Len()-len(tail)))
	b.WriteString(tail)
	return b.String()
}

// worstImage is a distinct reference of the maximum length: a 255-byte name,
// a 128-byte tag and a sha512 digest (maxImageReference).
func worstImage(i int) string {
	name := fmt.Sprintf("registry-%03d.example.com/team", i)
	for len(name) < 255-9 {
		name += "/abcdefgh"
	}
	name += "/" + strings.Repeat("z", 255-len(name)-1)
	tag := strings.Repeat("v1.2.3-rc", 15)[:128]
	return name + ":" + tag + "@sha512:" + strings.Repeat("0123456789abcdef", 8)
}

func worstPolicy() *policyv1alpha1.SecurityPolicy {
	return &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: policyv1alpha1.SecurityPolicySpec{
		Action:     policyv1alpha1.ActionEnforce,
		Rules:      []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: "baseline"}}},
		Exceptions: &policyv1alpha1.ExceptionGuardrails{Allow: ptr.To(true)},
	}}
}

// worstException is a maximal exception whose entries all reach their image
// globs for every container of worstPod and cover nothing.
func worstException(i int) *policyv1alpha1.PolicyException {
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: fmt.Sprintf("e%03d", i)}}
	for t := range 8 {
		target := policyv1alpha1.ExceptionTarget{PolicyName: fmt.Sprintf("other-%d", t)}
		if t == 7 {
			target.PolicyName = "p"
		}
		for r := range 8 {
			g := padGlob("*", "r?", "x", 63)
			if t == 7 && r == 7 {
				g = padGlob("", "*", "r", 63) // matches "r", last
			}
			target.RuleNames = append(target.RuleNames, g)
		}
		pe.Spec.Exceptions = append(pe.Spec.Exceptions, target)
	}
	m := &policyv1alpha1.ExceptionMatch{}
	for n := range 16 {
		g := padGlob("*", "w?", "x", 253)
		if n == 15 {
			g = padGlob("", "*", "web", 253)
		}
		m.Names = append(m.Names, g)
	}
	pe.Spec.Match = m
	for e := range worstEntries {
		x := policyv1alpha1.PodSecurityExclusion{
			ControlName:     "Capabilities",
			RestrictedField: "spec.containers[*].securityContext.capabilities.add",
		}
		for k := range worstNames / worstEntries {
			g := padGlob("*", "c?", "x", 63)
			if k == worstNames/worstEntries-1 {
				g = padGlob("c", "*", "", 63) // matches every container, last
			}
			x.ContainerNames = append(x.ContainerNames, g)
		}
		for k := range worstValues / worstEntries {
			g := padGlob("*", "N?", "x", worstGlobLen)
			if k == worstValues/worstEntries-1 {
				g = padGlob("", "*", "NET_ADMIN", worstGlobLen) // matches, last
			}
			x.Values = append(x.Values, g)
		}
		for k := range worstImages / worstEntries {
			// Wildcards first, so that no literal prefix rejects; "**" so that
			// the automaton never dies; a star last, so that no literal suffix
			// rejects; never matches a worstImage.
			x.Images = append(x.Images, padGlob("**", fmt.Sprintf("/%c?", 'a'+(e+k)%26), "*", worstGlobLen))
		}
		pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, x)
	}
	return pe
}

func worstPod(containers int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "staging"}}
	for i := range containers {
		c := corev1.Container{Name: fmt.Sprintf("c-%03d", i), Image: worstImage(i),
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}
		// All regular containers: the entries name one field, and a finding
		// in an init container would stop at it, before the image globs.
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

func worstCase(tb testing.TB, exceptions int) (*Policy, []*Exception, *Object) {
	p, err := CompilePolicy(worstPolicy())
	if err != nil {
		tb.Fatal(err)
	}
	var excs []*Exception
	for i := range exceptions {
		e, err := CompileException(worstException(i), "podsieve-system")
		if err != nil {
			tb.Fatal(err)
		}
		excs = append(excs, e)
	}
	pod := worstPod(worstContainers)
	return p, excs, podObject("staging", pod)
}

// worstCaseDef is one of BenchmarkWorstCase's cases: what it decides, and
// whether the budget must stop it.
type worstCaseDef struct {
	name    string
	build   func(testing.TB) (*Policy, []*Exception, *Object)
	stopped bool
}

// worstCases are BenchmarkWorstCase's cases: the costliest review of
// exceptions (stopped by the budget), the largest that must still be
// decided, and the largest objects a pod-only user can send
// (largeObjectCases).
func worstCases(tb testing.TB) []worstCaseDef {
	exceptions := func(n int) func(testing.TB) (*Policy, []*Exception, *Object) {
		return func(tb testing.TB) (*Policy, []*Exception, *Object) { return worstCase(tb, n) }
	}
	return append([]worstCaseDef{
		{"100-maximal-exceptions", exceptions(100), true},
		{"largest-exception-largest-pod", exceptions(1), false},
	}, largeObjectCases(tb)...)
}

// BenchmarkWorstCase: the costliest reviews the schema and the API server's
// request limit admit. Target: <= 10 ms per decision, decided or stopped by
// the budget, and steps that track CPU time (ns/step).
//
//	go test ./internal/engine -run '^$' -bench BenchmarkWorstCase -benchtime 20x -count 3
func BenchmarkWorstCase(b *testing.B) {
	for _, c := range worstCases(b) {
		b.Run(c.name, func(b *testing.B) {
			p, excs, o := c.build(b)
			runtime.GC()
			b.ReportAllocs()
			var d Decision
			cpu := processCPU()
			for b.Loop() {
				d = Decide([]*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
			}
			cpu = processCPU() - cpu
			b.ReportMetric(float64(d.Steps), "steps/op")
			b.ReportMetric(float64(countContainers(o.Spec)), "containers")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(d.Steps), "cpu-ns/step")
			if d.Allowed || (d.Err != nil) != c.stopped {
				b.Fatalf("allowed %v, err %v; want refused, stopped %v", d.Allowed, d.Err, c.stopped)
			}
		})
	}
}

// processCPU is the CPU time the process has used, the collector's
// included: on a shared machine, what a decision costs is its CPU time, not
// the wall-clock time that other processes stretch.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWorstCase keeps BenchmarkWorstCase honest: every entry reaches its
// image globs for every container (names and values match, images do not),
// the 100 exceptions are stopped by the budget and refused, and the largest
// exception on the largest pod is decided, refused, within the budget.
func TestWorstCase(t *testing.T) {
	p, excs, o := worstCase(t, 1)
	if len(worstImage(7)) != maxImageReference || len(worstException(0).Spec.PodSecurity[0].Images[0]) != worstGlobLen {
		t.Fatalf("image %d bytes, glob %d", len(worstImage(7)), len(worstException(0).Spec.PodSecurity[0].Images[0]))
	}
	if sel, _ := SelectExceptions(p.Rules[0], excs, o, nil, benchNow, Admission); len(sel) != 1 {
		t.Fatalf("the exception is not selected")
	}
	res := p.Rules[0].Evaluate(o, nil)
	if len(res.Findings) != worstContainers {
		t.Fatalf("%d findings, want one per container:\n%s", len(res.Findings), dumpFindings(res.Findings))
	}
	for i := range res.Findings {
		for j := range excs[0].Exclusions {
			if why := excs[0].Exclusions[j].WhyNot(&res.Findings[i].Violation); !strings.HasPrefix(why, "its images") {
				t.Fatalf("entry %d on %s: %q, want an image mismatch", j, res.Findings[i].Container, why)
			}
		}
	}
	for _, c := range worstCases(t) {
		p, excs, o := c.build(t)
		d := Decide([]*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
		if d.Allowed || (d.Err != nil) != c.stopped {
			t.Errorf("%s: allowed %v, err %v; want refused, stopped %v", c.name, d.Allowed, d.Err, c.stopped)
		}
		t.Logf("%s: %d steps (%.0f%% of the budget), err %v", c.name, d.Steps, 100*float64(d.Steps)/DefaultMaxSteps, d.Err)
	}
}

// BenchmarkGlobBytes: what a byte of subject costs a glob automaton of one
// and of four words, against the steps a decision's budget is charged.
func BenchmarkGlobBytes(b *testing.B) {
	subject := worstImage(3)
	for _, pattern := range []string{padGlob("**", "/a?", "*", 60), padGlob("**", "/a?", "*", worstGlobLen)} {
		g, err := CompileGlob(pattern)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("words=%d", g.words()), func(b *testing.B) {
			var sc globScratch
			sc.keep = true
			var steps int64
			for b.Loop() {
				_, _, steps = g.match(subject, 255, &sc)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(subject)), "ns/byte")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(steps), "ns/step")
		})
	}
}

// TestMaximalExceptionHeap: a maximal PolicyException under the schema's
// limits (worstException: 16 entries, 16 image globs and 64 values of 256
// bytes, 32 container names of 63, 16 match names of 253, 8 targets of 8 rule
// names of 63) holds at most 64 KiB once compiled, its strings included.
func TestMaximalExceptionHeap(t *testing.T) {
	const n = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	excs := make([]*Exception, n)
	for i := range excs {
		e, err := CompileException(worstException(i), "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		excs[i] = e
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	runtime.KeepAlive(excs)
	t.Logf("a maximal exception holds %d bytes", per)
	if per > 64<<10 {
		t.Errorf("a maximal exception holds %d bytes, more than 64 KiB", per)
	}
}
