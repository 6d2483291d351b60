package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// The largest objects a tenant who may only create pods can send: the API
// server refuses a request body over maxRequestBytes, so these fill it with
// the shortest distinct entries of one list, or with the shortest
// containers. Each comes in two sizes: the whole request ("3MiB"), which
// the budget must stop before doing the work it prices, and the largest that
// the budget decides ("decided"), whose steps must track its CPU time.

// maxRequestBytes is the API server's limit on a request body (3 MiB).
const maxRequestBytes = 3 << 20

// shortName is the i-th of the shortest distinct lower-case names: a..z,
// aa..zz, and so on, so that a list holds as many entries as its bytes allow.
func shortName(i int) string {
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

// longList is a pod with one list of n distinct entries: what a pod-only user
// can make of a field whose values attribution reports one by one.
type longList struct {
	name string
	// entry is the list's i-th entry, as pod(n) holds it for every n > i.
	entry func(i int) any
	pod   func(n int) *corev1.Pod
	// str: pod(n) holds one string of n bytes rather than n entries.
	str bool
	// whole: the budget decides the whole request, cheaply.
	whole bool
}

var longLists = []longList{
	{name: "capabilities", entry: func(i int) any { return shortName(i) }, pod: func(n int) *corev1.Pod {
		caps := make([]corev1.Capability, n)
		for i := range caps {
			caps[i] = corev1.Capability(shortName(i))
		}
		return listPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities = &corev1.Capabilities{Add: caps, Drop: []corev1.Capability{"ALL"}}
		})
	}},
	{name: "hostPath", entry: func(i int) any { return hostPathVolume(i) }, pod: func(n int) *corev1.Pod {
		return listPod(func(p *corev1.Pod) {
			p.Spec.Volumes = make([]corev1.Volume, n)
			for i := range p.Spec.Volumes {
				p.Spec.Volumes[i] = hostPathVolume(i)
			}
		})
	}},
	{name: "sysctls", entry: func(i int) any { return corev1.Sysctl{Name: shortName(i)} }, pod: func(n int) *corev1.Pod {
		return listPod(func(p *corev1.Pod) {
			p.Spec.SecurityContext.Sysctls = make([]corev1.Sysctl, n)
			for i := range p.Spec.SecurityContext.Sysctls {
				p.Spec.SecurityContext.Sysctls[i] = corev1.Sysctl{Name: shortName(i)}
			}
		})
	}},
	{name: "hostPorts", entry: func(i int) any { return hostPort(i) }, pod: func(n int) *corev1.Pod {
		return listPod(func(p *corev1.Pod) {
			ports := make([]corev1.ContainerPort, n)
			for i := range ports {
				ports[i] = hostPort(i)
			}
			p.Spec.Containers[0].Ports = ports
		})
	}},
}

func hostPathVolume(i int) corev1.Volume {
	s := shortName(i)
	return corev1.Volume{Name: s, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: s}}}
}

// hostPort is distinct up to the 65,535 ports there are; the API server
// would ask for distinct protocols or host IPs past that, which only adds
// bytes.
func hostPort(i int) corev1.ContainerPort {
	return corev1.ContainerPort{ContainerPort: 1, HostPort: int32(1 + i%65535)}
}

// longStrings are pods with one string as long as a request holds, in the
// fields the checks quote into their messages and attribution copies into
// findings, and in the image that every finding of a container names.
var longStrings = []longList{
	{name: "seLinuxType", str: true, pod: func(n int) *corev1.Pod {
		return listPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: strings.Repeat("a", n)}
		})
	}},
	{name: "probeHost", str: true, pod: func(n int) *corev1.Pod {
		return listPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Host: strings.Repeat("a", n)}}}
		})
	}},
	{name: "annotationValue", str: true, pod: func(n int) *corev1.Pod {
		return listPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/app": strings.Repeat("a", n)}
		})
	}},
	{name: "image", str: true, whole: true, pod: func(n int) *corev1.Pod {
		// A violation to name it in: the image is printed with each. An
		// image longer than any reference is neither parsed nor matched, so
		// it costs the checks little; what it cost was the messages that
		// printed it whole (TestLongStringsAreClipped).
		return listPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = strings.Repeat("a", n)
			p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
		})
	}},
}

// listPod is a pod that passes restricted but for what edit adds.
func listPod(edit func(*corev1.Pod)) *corev1.Pod {
	p := restrictedPod(withContainers(ctr("app", restrictedSC())))
	p.Name = "web"
	edit(p)
	return p
}

// manyContainers is a pod of as many of the shortest containers as fit.
var manyContainers = longList{name: "", entry: func(i int) any { return shortContainer(i) }, pod: manyContainersPod}

func shortContainer(i int) corev1.Container { return corev1.Container{Name: shortName(i), Image: "i"} }

// manyContainersPod is a pod of n of the shortest containers there are: a
// distinct name and a one-byte image, nothing else, so that each fails
// every restricted check that reads a container's security context.
func manyContainersPod(n int) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "staging"}}
	p.Spec.Containers = make([]corev1.Container, n)
	for i := range p.Spec.Containers {
		p.Spec.Containers[i] = shortContainer(i)
	}
	return p
}

// fill is the largest n whose pod, as JSON, fits maxRequestBytes: a pod of
// one entry, plus each further entry and its comma. Entries are marshalled
// one by one rather than whole pods, which would take seconds under -race.
func fill(l longList) int {
	filledMu.Lock()
	defer filledMu.Unlock()
	if n, ok := filled[l.name]; ok {
		return n
	}
	n := fillUncached(l)
	filled[l.name] = n
	return n
}

var (
	filledMu sync.Mutex
	filled   = map[string]int{}
)

func fillUncached(l longList) int {
	if l.str {
		// One byte of JSON per byte of string: plain letters.
		raw, err := json.Marshal(l.pod(0))
		if err != nil {
			panic(err)
		}
		return maxRequestBytes - len(raw)
	}
	raw, err := json.Marshal(l.pod(1))
	if err != nil {
		panic(err)
	}
	size := len(raw)
	for n := 1; ; n++ {
		e, err := json.Marshal(l.entry(n))
		if err != nil {
			panic(err)
		}
		if size += len(e) + 1; size > maxRequestBytes {
			return n
		}
	}
}

// decided is the largest n whose pod the default budget decides without
// stopping, under p.
func decided(p *Policy, pod func(n int) *corev1.Pod, hi int) int {
	return sort.Search(hi, func(n int) bool {
		d := Decide([]*Policy{p}, AllExceptions(nil), podObject("staging", pod(n+1)), nil, benchNow, Admission)
		return d.Err != nil
	})
}

func restrictedEnforce(tb testing.TB) *Policy {
	p, err := CompilePolicy(&policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: policyv1alpha1.SecurityPolicySpec{
		Action:     policyv1alpha1.ActionEnforce,
		Rules:      []policyv1alpha1.PolicyRule{{Name: "r", PodSecurity: policyv1alpha1.PodSecurity{Level: "restricted"}}},
		Exceptions: &policyv1alpha1.ExceptionGuardrails{Allow: ptr.To(true)},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// sizedCase is a worst case built from a pod of some size.
type sizedCase struct {
	name    string
	stopped bool
}

// largeObjectCases are BenchmarkWorstCase's long-lists and many-containers
// cases: each list and the containers at the request's limit (stopped) and
// at the most the budget decides.
func largeObjectCases(tb testing.TB) []worstCaseDef {
	p := restrictedEnforce(tb)
	var cases []worstCaseDef
	add := func(group, name string, l longList) {
		// Built when run, so that a benchmark's heap holds one case's
		// objects at a time.
		sizes := []sizedCase{{name: "3MiB", stopped: true}, {name: "decided"}}
		if l.whole {
			sizes = []sizedCase{{name: "3MiB"}}
		}
		for _, c := range sizes {
			cases = append(cases, worstCaseDef{
				name:    group + "/" + name + c.name,
				stopped: c.stopped,
				build: func(testing.TB) (*Policy, []*Exception, *Object) {
					n := fill(l)
					if !c.stopped && !l.whole {
						n = decided(p, l.pod, n)
					}
					return p, nil, podObject("staging", l.pod(n))
				},
			})
		}
	}
	for _, l := range longLists {
		add("long-lists", l.name+"/", l)
	}
	for _, l := range longStrings {
		add("long-strings", l.name+"/", l)
	}
	add("many-containers", "", manyContainers)
	return cases
}

// sanity: the builders make what they say.
func TestLargeObjectsFillTheRequest(t *testing.T) {
	for _, l := range append(longLists, manyContainers) {
		n := fill(l)
		raw, _ := json.Marshal(l.pod(n))
		next, _ := json.Marshal(l.entry(n))
		more := len(raw) + 1 + len(next) // one entry more, and its comma
		t.Logf("%q: %d entries in %d bytes", l.name, n, len(raw))
		if len(raw) > maxRequestBytes || more <= maxRequestBytes || n < 10_000 {
			t.Errorf("%q: %d entries in %d bytes, %d entries in %d", l.name, n, len(raw), n+1, more)
		}
	}
	seen := map[string]bool{}
	for i := range 100_000 {
		s := shortName(i)
		if seen[s] || len(s) > 4 {
			t.Fatalf("shortName(%d) = %q: repeated or long", i, s)
		}
		seen[s] = true
	}
}

// TestUniqueValues: the set that takes over past uniqueScan values keeps
// what the scan kept: every value once, in spec order, whether it is sized
// for the list or grows.
func TestUniqueValues(t *testing.T) {
	naive := func(in []string) []string {
		var out []string
		for _, s := range in {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n, distinct int) []string {
		in := make([]string, n)
		for i := range in {
			in[i] = shortName(rng.IntN(distinct))
		}
		return in
	}
	for _, tc := range []struct {
		name string
		in   []string
	}{
		{"none", nil},
		{"one", []string{"NET_ADMIN"}},
		{"repeats below the scan", []string{"a", "b", "a", "c", "b"}},
		{"exactly the scan", random(uniqueScan, 1000)},
		{"repeat at the switch", append(random(uniqueScan, 10_000), "a", "a")},
		{"long, few distinct", random(5_000, 20)},
		{"long, all distinct", random(5_000, 1<<30)},
		{"long, some repeats", random(5_000, 2_000)},
	} {
		// Unsized, and sized for the list as the attributions size it.
		for _, most := range []int{0, len(tc.in)} {
			t.Run(fmt.Sprintf("%s/most=%d", tc.name, most), func(t *testing.T) {
				u := uniqueValues{most: most}
				for _, s := range tc.in {
					u.add(s)
				}
				if want := naive(tc.in); !slices.Equal(u.values, want) {
					t.Errorf("got %d values, want %d: %v", len(u.values), len(want), u.values[:min(len(u.values), 20)])
				}
			})
		}
	}
}

// TestLargeObjectsStopBeforeTheChecks: a pod whose lists or containers cost
// more than the budget is refused with the price of checking it, before any
// check runs (no finding but the stopped one), at every level; one within
// the budget is decided with every value attributed once.
func TestLargeObjectsStopBeforeTheChecks(t *testing.T) {
	for _, level := range []string{"baseline", "restricted"} {
		p := mustPolicy(t, "p", "rules:\n- name: r\n  podSecurity: {level: "+level+"}")
		for _, l := range slices.Concat(longLists, longStrings, []longList{manyContainers}) {
			if l.whole {
				continue
			}
			t.Run(level+"/"+l.name, func(t *testing.T) {
				o := podObject("staging", l.pod(fill(l)))
				d := Decide([]*Policy{p}, AllExceptions(nil), o, nil, benchNow, Admission)
				var stopped *StoppedError
				if !errors.As(d.Err, &stopped) || stopped.CheckSteps == 0 || d.Allowed {
					t.Fatalf("allowed %v, err %v; want refused before the checks", d.Allowed, d.Err)
				}
				if fs := d.Results[0].Findings; len(fs) != 1 || fs[0].CheckID != StoppedCheckID {
					t.Fatalf("findings %s, want only the stopped one", dumpFindings(fs))
				}
				for _, want := range []string{"before checking the object, which costs", fmt.Sprintf("(%d containers", countContainers(o.Spec))} {
					if !strings.Contains(d.Err.Error(), want) {
						t.Errorf("message %q lacks %q", d.Err, want)
					}
				}
			})
		}
	}
	// Within the budget: 2,000 made-up capabilities, each reported once
	// even when repeated.
	p := mustPolicy(t, "p", baselineRule)
	pod := longLists[0].pod(2_000)
	c := &pod.Spec.Containers[0]
	c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, c.SecurityContext.Capabilities.Add...)
	d := Decide([]*Policy{p}, AllExceptions(nil), podObject("staging", pod), nil, benchNow, Admission)
	if d.Err != nil || d.Allowed || len(d.Results[0].Findings) != 1 || len(d.Results[0].Findings[0].Values) != 2_000 {
		t.Fatalf("err %v, allowed %v, findings %s", d.Err, d.Allowed, dumpFindings(d.Results[0].Findings))
	}
	msg := d.Results[0].DenyMessage(podObject("staging", pod))
	if !strings.Contains(msg, " and 1968 more") || len(msg) > 2_000 {
		t.Errorf("the message lists more than %d values (%d bytes):\n%.600s", maxDescribedValues, len(msg), msg)
	}
}

// TestCheckStepsPriceEveryList: each list the checks walk adds to the
// price of checking the object, by its length and its bytes.
func TestCheckStepsPriceEveryList(t *testing.T) {
	base := checkSteps(podObject("staging", listPod(func(*corev1.Pod) {})))
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want int64
	}{
		{"a container", func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "b"}) }, stepsPerContainer},
		{"an init container", func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "b"})
		}, stepsPerContainer},
		{"an ephemeral container", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{})
		}, stepsPerContainer},
		{"a capability", func(p *corev1.Pod) {
			caps := p.Spec.Containers[0].SecurityContext.Capabilities
			caps.Add = append(caps.Add, "NET_ADMIN")
		}, stepsPerCapability + 9*stepsPerByte},
		{"a port", func(p *corev1.Pod) { p.Spec.Containers[0].Ports = []corev1.ContainerPort{{HostPort: 80}} }, stepsPerPort},
		{"a volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}, stepsPerVolume + 5*stepsPerByte},
		{"a sysctl", func(p *corev1.Pod) { p.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax"}} }, stepsPerSysctl + 13*stepsPerByte},
		{"an annotation", func(p *corev1.Pod) { p.Annotations = map[string]string{"a/b": "c"} }, stepsPerAnnotation + 3*stepsPerByte + stepsPerAnnotationByte},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkSteps(podObject("staging", listPod(tc.edit))) - base; got != tc.want {
				t.Errorf("adds %d steps, want %d", got, tc.want)
			}
		})
	}
}

// BenchmarkDeadlineOvershoot: how long a decision runs on after its caller
// closes Limits.Done (the webhook passes the review's deadline), on the
// worst cases the budget decides. The decision polls Done as it spends, but
// a rule's checks run whole once paid for, so the overshoot is at most the
// longest such stretch, which the budget bounds. Reported: the mean and the
// largest overshoot, with Done closed 1 ms into each decision.
//
//	go test ./internal/engine -run '^$' -bench BenchmarkDeadlineOvershoot -benchtime 20x
func BenchmarkDeadlineOvershoot(b *testing.B) {
	for _, c := range worstCases(b) {
		if c.stopped {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			p, excs, o := c.build(b)
			runtime.GC()
			var worst, total time.Duration
			for b.Loop() {
				done := make(chan struct{})
				var closed time.Time
				timer := time.AfterFunc(time.Millisecond, func() { closed = time.Now(); close(done) })
				d := DecideWithin(Limits{MaxSteps: DefaultMaxSteps, Done: done}, []*Policy{p}, AllExceptions(excs), o, nil, benchNow, Admission)
				end := time.Now()
				if !timer.Stop() {
					<-done
					if over := end.Sub(closed); d.Err != nil || over > 0 {
						worst, total = max(worst, over), total+max(over, 0)
					}
				}
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "overshoot-ns/op")
			b.ReportMetric(float64(worst.Nanoseconds()), "max-overshoot-ns")
		})
	}
}

// TestLongStringsAreClipped: an image of megabytes, which the checks do not
// parse and the budget lets through, is printed clipped in each finding of
// each rule, and so are long values and upstream's reasons.
func TestLongStringsAreClipped(t *testing.T) {
	var spec strings.Builder
	spec.WriteString("rules:\n")
	for i := range 10 {
		fmt.Fprintf(&spec, "- name: r%d\n  podSecurity: {level: restricted}\n", i)
	}
	p := mustPolicy(t, "p", spec.String())
	// 256 KiB: the ten rules' checks fit the budget.
	o := podObject("staging", longStrings[len(longStrings)-1].pod(256<<10))
	d := Decide([]*Policy{p}, AllExceptions(nil), o, nil, benchNow, Admission)
	if d.Err != nil || d.Allowed || len(d.Results) != 10 {
		t.Fatalf("err %v, allowed %v, %d results", d.Err, d.Allowed, len(d.Results))
	}
	for i := range d.Results {
		msg := d.Results[i].DenyMessage(o)
		if len(msg) > 4_000 || !strings.Contains(msg, fmt.Sprintf("…(%d bytes)", len(o.Spec.Containers[0].Image))) {
			t.Fatalf("rule %d: %d bytes:\n%.1000s", i, len(msg), msg)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("a", 300), strings.Repeat("a", 256) + "…(300 bytes)"},
		{strings.Repeat("a", 255) + "é", strings.Repeat("a", 255) + "…(257 bytes)"}, // not cut inside é
	} {
		if got := Clip(tc.in, 256); got != tc.want {
			t.Errorf("Clip(%d bytes) = %q", len(tc.in), got)
		}
	}
	short := []string{"NET_ADMIN", "NET_RAW"}
	if got := ClipValues(short); &got[0] != &short[0] {
		t.Error("ClipValues copied values it did not cut")
	}
	many := make([]string, 40)
	for i := range many {
		many[i] = strings.Repeat("v", 10+i*10)
	}
	got := ClipValues(many)
	if len(got) != maxDescribedValues || got[0] != many[0] || got[31] != strings.Repeat("v", 256)+"…(320 bytes)" {
		t.Errorf("ClipValues: %d values, last %q", len(got), got[len(got)-1])
	}
}
