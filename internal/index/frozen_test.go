package index

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/randfill"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
	"github.com/podsieve/podsieve/internal/samples"
)

// TestFreezeKeepsEveryField: what freezeException writes reads back as the
// API object it was written from, for objects with every field filled at
// random, so that a field added to PolicyExceptionSpec and not to the
// frozen form fails here rather than being dropped by a thaw.
func TestFreezeKeepsEveryField(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.3).NumElements(0, 3).Funcs(
		func(tm *metav1.Time, c randfill.Continue) {
			// The API serves seconds; freezing keeps nanoseconds too.
			*tm = metav1.NewTime(time.Unix(c.Int63n(1<<34), c.Int63n(1e9)))
		},
	)
	for i := range 2000 {
		var pe policyv1alpha1.PolicyException
		f.Fill(&pe)
		want := policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{
			Namespace: pe.Namespace, Name: pe.Name, UID: pe.UID, Generation: pe.Generation, CreationTimestamp: pe.CreationTimestamp,
		}, Spec: pe.Spec}
		ns := fmt.Sprintf("cluster-%d", i)
		got, gotNS, err := unfreezeException(freezeException(&pe, ns))
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		sameInstants(t, &want, got)
		if !reflect.DeepEqual(got, &want) || gotNS != ns {
			t.Fatalf("%d: read back\n%+v\nwant\n%+v", i, got, &want)
		}
	}
}

// sameInstants makes got's times want's where they are the same instant:
// a time read back is in the local zone.
func sameInstants(t *testing.T, want, got *policyv1alpha1.PolicyException) {
	t.Helper()
	if !got.CreationTimestamp.Equal(&want.CreationTimestamp) {
		t.Fatalf("creationTimestamp %v, want %v", got.CreationTimestamp, want.CreationTimestamp)
	}
	got.CreationTimestamp = want.CreationTimestamp
	if (got.Spec.ExpiresAt == nil) != (want.Spec.ExpiresAt == nil) || got.Spec.ExpiresAt != nil && !got.Spec.ExpiresAt.Equal(want.Spec.ExpiresAt) {
		t.Fatalf("expiresAt %v, want %v", got.Spec.ExpiresAt, want.Spec.ExpiresAt)
	}
	if got.Spec.ExpiresAt != nil {
		got.Spec.ExpiresAt = want.Spec.ExpiresAt
	}
}

// TestThawCompilesTheSame: an exception the index holds frozen compiles
// again to the exception it was given, whole (reflect.DeepEqual), for the
// shipped samples and for exceptions drawn from every kind of field and
// value; one it cannot freeze (label selectors, too large) is held
// compiled.
func TestThawCompilesTheSame(t *testing.T) {
	excs := samples.Exceptions(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		excs = append(excs, randomException(rng, i))
	}
	compiled, frozen := 0, 0
	for _, pe := range excs {
		e, err := engine.CompileException(pe, clusterNS)
		if err != nil {
			continue // the generator draws some that do not compile
		}
		compiled++
		h := holdInForce(e)
		hasSelector := pe.Spec.Match != nil && (pe.Spec.Match.Selector != nil || pe.Spec.Match.NamespaceSelector != nil)
		if (h.compiled == nil) == hasSelector {
			t.Fatalf("%s: frozen %v with selectors %v", e.Source, h.compiled == nil, hasSelector)
		}
		if h.compiled != nil {
			continue
		}
		frozen++
		if h.Namespace != e.Namespace || h.Name != e.Name || h.UID != e.UID || h.Generation != e.Generation || h.Background != e.Background || h.crossNS != e.CrossNamespace() {
			t.Fatalf("%s: held as %+v", e.Source, h)
		}
		got, err := h.compile()
		if err != nil {
			t.Fatalf("%s: %v", e.Source, err)
		}
		// Times read back are the same instants, in the local zone: the
		// exception given, compiled from its object with its times there.
		want, err := engine.CompileException(inLocalZone(pe), clusterNS)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: thawed\n%+v\nwant\n%+v", e.Source, got, want)
		}
	}
	if compiled < 1000 || frozen < 500 {
		t.Fatalf("only %d of %d exceptions compiled, %d frozen: the generator is too wild", compiled, len(excs), frozen)
	}
}

// inLocalZone is pe with its times the same instants in the local zone, as
// a frozen form reads them back; a zero time stays zero.
func inLocalZone(pe *policyv1alpha1.PolicyException) *policyv1alpha1.PolicyException {
	pe = pe.DeepCopy()
	if !pe.CreationTimestamp.IsZero() {
		pe.CreationTimestamp = metav1.NewTime(pe.CreationTimestamp.Local())
	}
	if pe.Spec.ExpiresAt != nil {
		t := metav1.NewTime(pe.Spec.ExpiresAt.Local())
		pe.Spec.ExpiresAt = &t
	}
	return pe
}

// randomException draws a PolicyException from the values each field takes
// in practice, and some it should not.
func randomException(rng *rand.Rand, i int) *policyv1alpha1.PolicyException {
	pick := func(pool ...string) []string {
		if rng.IntN(4) == 0 {
			return nil
		}
		out := make([]string, 1+rng.IntN(3))
		for j := range out {
			out[j] = pool[rng.IntN(len(pool))]
		}
		return out
	}
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{
		Namespace: []string{"team-a", "podsieve-system"}[rng.IntN(2)], Name: fmt.Sprintf("exc-%d", i),
		UID: types.UID(fmt.Sprintf("uid-%d", i)), Generation: int64(rng.IntN(5)),
	}}
	if rng.IntN(2) == 0 {
		pe.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1+rng.IntN(300), 0, 0, 0, 0, time.UTC))
	}
	s := &pe.Spec
	for range 1 + rng.IntN(3) {
		s.Exceptions = append(s.Exceptions, policyv1alpha1.ExceptionTarget{
			PolicyName: []string{"p", "mesh", "restricted"}[rng.IntN(3)], RuleNames: pick("*", "baseline", "rule-?", "r"),
		})
		if s.Exceptions[len(s.Exceptions)-1].RuleNames == nil {
			s.Exceptions[len(s.Exceptions)-1].RuleNames = []string{"*"}
		}
	}
	if rng.IntN(4) != 0 {
		m := &policyv1alpha1.ExceptionMatch{Names: pick("app-1", "app-*", "*-web", "db-??", "x")}
		for _, k := range pick("Pod", "Deployment", "Job", "CronJob") {
			m.Kinds = append(m.Kinds, policyv1alpha1.PodBearingKind(k))
		}
		if rng.IntN(3) == 0 {
			m.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": fmt.Sprint(i % 3)}}
		}
		if pe.Namespace == "podsieve-system" && rng.IntN(2) == 0 {
			m.Namespaces = pick("team-*", "prod")
			if rng.IntN(2) == 0 {
				m.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}},
					{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
				}}
			}
		}
		s.Match = m
	}
	type entry struct {
		control policyv1alpha1.ControlName
		field   string
		values  []string
	}
	entries := []entry{
		{policyv1alpha1.ControlCapabilities, "spec.initContainers[*].securityContext.capabilities.add", []string{"NET_ADMIN", "NET_RAW"}},
		{policyv1alpha1.ControlCapabilities, "", nil},
		{policyv1alpha1.ControlRunningAsNonRoot, "spec.initContainers[*].securityContext.runAsNonRoot", nil},
		{policyv1alpha1.ControlHostPorts, "", []string{"9100"}},
		{policyv1alpha1.ControlHostPathVolumes, "spec.volumes[*].hostPath", []string{"/var/log/**"}},
		{policyv1alpha1.ControlHostNamespaces, "", nil},
	}
	if rng.IntN(5) != 0 {
		for range 1 + rng.IntN(3) {
			en := entries[rng.IntN(len(entries))]
			x := policyv1alpha1.PodSecurityExclusion{ControlName: en.control, RestrictedField: en.field, Values: en.values}
			if !engine.PodLevelOnly(en.control) {
				x.Images = pick("docker.io/istio/proxyv2:*", "cr.l5d.io/linkerd/proxy:*", "registry.example/**")
				x.ContainerNames = pick("istio-init", "linkerd-init", "app")
				if rng.IntN(3) == 0 {
					x.ContainerKinds = []policyv1alpha1.ContainerKind{"Init"}
				}
			}
			s.PodSecurity = append(s.PodSecurity, x)
		}
	}
	s.Justification = []string{"", "istio-init needs NET_ADMIN", "  "}[rng.IntN(3)]
	if rng.IntN(2) == 0 {
		exp := metav1.NewTime(time.Date(2027, 1, 1+rng.IntN(300), 12, 0, 0, 0, time.UTC))
		s.ExpiresAt = &exp
	}
	if rng.IntN(3) == 0 {
		b := rng.IntN(2) == 0
		s.Background = &b
	}
	return pe
}

// TestUnfreezeRefusesDamage: a frozen form cut short or with bytes added is
// refused, never read as another exception.
func TestUnfreezeRefusesDamage(t *testing.T) {
	pe := randomException(rand.New(rand.NewPCG(5, 6)), 1)
	src := freezeException(pe, "podsieve-system")
	if _, _, err := unfreezeException(src); err != nil {
		t.Fatal(err)
	}
	for n := range len(src) {
		if _, _, err := unfreezeException(src[:n]); err == nil {
			t.Fatalf("cut to %d bytes of %d: read", n, len(src))
		}
	}
	if _, _, err := unfreezeException(src + "x"); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("a byte added: %v", err)
	}
}

// FuzzUnfreeze: no input makes reading a frozen form panic, and what it
// reads freezes to a form that reads back the same. (Frozen forms are only
// ever podsieve's own; a list's length is checked against the bytes left
// before it is allocated.)
func FuzzUnfreeze(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 4 {
		f.Add(freezeException(randomException(rng, i), "podsieve-system"))
	}
	f.Fuzz(func(t *testing.T, src string) {
		pe, ns, err := unfreezeException(src)
		if err != nil {
			return
		}
		// What it read freezes to a form that reads back the same.
		again, againNS, err := unfreezeException(freezeException(pe, ns))
		if err != nil {
			t.Fatalf("read %q, whose frozen form does not read: %v", src, err)
		}
		if !reflect.DeepEqual(again.Spec, pe.Spec) || again.ObjectMeta.String() != pe.ObjectMeta.String() || againNS != ns {
			t.Fatalf("read %q as\n%+v\nwhich reads back as\n%+v", src, pe, again)
		}
	})
}

// TestFrozenWaivesOnlyThawed: a decision offered a frozen exception is
// handed it compiled and charged the thaw; one whose budget runs out while
// thawing refuses; and one whose frozen form does not read (which the
// index never makes) waives nothing.
func TestFrozenWaivesOnlyThawed(t *testing.T) {
	p := mustBaselinePolicy(t, "p")
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "net"}, Spec: policyv1alpha1.PolicyExceptionSpec{
		Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"*"}}},
		PodSecurity: []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities,
			RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}},
	}}
	e, err := engine.CompileException(pe, clusterNS)
	if err != nil {
		t.Fatal(err)
	}
	h := holdInForce(e)
	if h.compiled != nil || h.Namespace != "team-a" || h.Name != "net" || h.Source() != e.Source {
		t.Fatalf("held %+v, want frozen with its identity", h)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "nginx", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}}}
	o, err := engine.NewObject(pod)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	full := engine.Decide([]*engine.Policy{p}, engine.AllExceptions([]*engine.Exception{e}), o, nil, now, engine.Admission)
	if !full.Allowed {
		t.Fatalf("the compiled exception does not admit the pod: %+v", full.Results)
	}
	// What the decision spent before it asked for the exceptions.
	var leftAtOffer int64
	engine.DecideWithin(engine.DefaultLimits, []*engine.Policy{p}, func(_ string, left int64) ([]*engine.Exception, int64, int) {
		leftAtOffer = left
		return nil, 0, 0
	}, o, nil, now, engine.Admission)
	before := engine.DefaultMaxSteps - leftAtOffer
	broken := *h
	broken.frozen = h.frozen[:len(h.frozen)/2]
	for _, tt := range []struct {
		name        string
		held        *HeldException
		limit       int64 // 0: DefaultLimits
		wantAllowed bool
		wantSteps   int64  // 0: not checked
		wantErr     string // "": no error; else in its message
	}{
		{name: "thawed and charged", held: h, wantAllowed: true, wantSteps: full.Steps + thawSteps(h)},
		{name: "budget enough for the thaw", held: h, limit: full.Steps + thawSteps(h), wantAllowed: true, wantSteps: full.Steps + thawSteps(h)},
		{name: "budget short of the thaw", held: h, limit: full.Steps + thawSteps(h) - 1, wantAllowed: false, wantErr: "of 1 PolicyExceptions"},
		// The stop counts the exception it could not pay to hand over.
		{name: "budget runs out during the thaw", held: h, limit: before + thawSteps(h) - 1, wantAllowed: false, wantErr: "of 1 PolicyExceptions"},
		{name: "a frozen form that does not read", held: &broken, wantAllowed: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			thawed := newThawCache()
			candidates := func(_ string, left int64) ([]*engine.Exception, int64, int) {
				return thawed.handOver([]*HeldException{tt.held}, left)
			}
			d := engine.DecideWithin(engine.Limits{MaxSteps: tt.limit}, []*engine.Policy{p}, candidates, o, nil, now, engine.Admission)
			if d.Allowed != tt.wantAllowed {
				t.Fatalf("allowed %v, err %v; want allowed %v", d.Allowed, d.Err, tt.wantAllowed)
			}
			if tt.wantSteps != 0 && d.Steps != tt.wantSteps {
				t.Errorf("%d steps, want %d (the decision's %d and the thaw's %d)", d.Steps, tt.wantSteps, full.Steps, thawSteps(tt.held))
			}
			if (d.Err != nil) != (tt.wantErr != "") || d.Err != nil && !strings.Contains(d.Err.Error(), tt.wantErr) {
				t.Errorf("err %v, want one saying %q", d.Err, tt.wantErr)
			}
			// Remembered or not, a thaw costs the same.
			if again := engine.DecideWithin(engine.Limits{MaxSteps: tt.limit}, []*engine.Policy{p}, candidates, o, nil, now, engine.Admission); again.Steps != d.Steps || again.Allowed != d.Allowed {
				t.Errorf("again: %d steps, allowed %v; first %d, %v", again.Steps, again.Allowed, d.Steps, d.Allowed)
			}
		})
	}
}

// mustBaselinePolicy enforces baseline in rule "baseline" and honours
// exceptions for Capabilities.
func mustBaselinePolicy(tb testing.TB, name string) *engine.Policy {
	tb.Helper()
	return enginetest.MustPolicy(tb, name, "action: Enforce\nexceptions: {allowedControls: [Capabilities]}\nrules: [{name: baseline, podSecurity: {level: baseline, version: latest}}]")
}

// BenchmarkThaw: what thawing costs, uncached, against what a decision is
// charged for it (steps/op, about a nanosecond each): the load test's
// exception, a large random one, and frozen forms of nearly MaxFrozenBytes
// made of the shortest strings, which cost the most per byte.
//
//	go test ./internal/index -run '^$' -bench BenchmarkThaw -benchmem
func BenchmarkThaw(b *testing.B) {
	for _, c := range thawCases(b) {
		h := holdInForce(c.e)
		if h.compiled != nil {
			b.Fatalf("%s: not frozen", c.name)
		}
		b.Run(fmt.Sprintf("%s/bytes=%d", c.name, len(h.frozen)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.compile(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(thawSteps(h)), "steps/op")
		})
	}
}

type thawCase struct {
	name string
	e    *engine.Exception
}

// thawCases are BenchmarkThaw's exceptions, compiled.
func thawCases(tb testing.TB) []thawCase {
	base := func() *policyv1alpha1.PolicyException {
		return &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: "exc-1"}, Spec: policyv1alpha1.PolicyExceptionSpec{
			Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "policy-1", RuleNames: []string{"baseline"}}},
			Match:      &policyv1alpha1.ExceptionMatch{Names: []string{"app-1-*"}},
			PodSecurity: []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities, ContainerNames: []string{"istio-init"},
				RestrictedField: "spec.initContainers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN", "NET_RAW"}}},
		}}
	}
	// fill adds strings until the frozen form nearly reaches MaxFrozenBytes.
	fill := func(pe *policyv1alpha1.PolicyException, add func(i int)) {
		for i := 0; len(freezeException(pe, "podsieve-system")) < MaxFrozenBytes-16; i++ {
			add(i)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	var large *policyv1alpha1.PolicyException
	for i := 0; large == nil || len(freezeException(large, "podsieve-system")) < MaxFrozenBytes/2; i++ {
		pe := randomException(rng, i)
		if pe.Spec.Match != nil {
			pe.Spec.Match.Selector, pe.Spec.Match.NamespaceSelector = nil, nil
		}
		for len(pe.Spec.PodSecurity) > 0 && len(pe.Spec.PodSecurity) < 16 && len(freezeException(pe, "podsieve-system")) < MaxFrozenBytes-300 {
			pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, pe.Spec.PodSecurity[0])
		}
		if _, err := engine.CompileException(pe, "podsieve-system"); err == nil && (large == nil || len(freezeException(pe, "podsieve-system")) > len(freezeException(large, "podsieve-system"))) {
			large = pe
		}
	}
	tinyValues := base()
	fill(tinyValues, func(i int) {
		x := &tinyValues.Spec.PodSecurity[0]
		x.Values = append(x.Values, string(rune('a'+i%26)))
	})
	tinyRules := base()
	fill(tinyRules, func(i int) {
		t := &tinyRules.Spec.Exceptions[0]
		t.RuleNames = append(t.RuleNames, string(rune('a'+i%26))+"*")
	})
	// The most entries an exception may hold (MaxExceptionEntries), of the
	// control with the longest field list, filled with one-letter values.
	entries := base()
	entries.Spec.PodSecurity = nil
	for range engine.MaxExceptionEntries {
		entries.Spec.PodSecurity = append(entries.Spec.PodSecurity, policyv1alpha1.PodSecurityExclusion{
			ControlName: policyv1alpha1.ControlVolumeTypes, RestrictedField: "spec.volumes[*]"})
	}
	fill(entries, func(i int) {
		x := &entries.Spec.PodSecurity[i%engine.MaxExceptionEntries]
		x.Values = append(x.Values, string(rune('a'+i/engine.MaxExceptionEntries%26)))
	})
	var out []thawCase
	for _, c := range []struct {
		name string
		pe   *policyv1alpha1.PolicyException
	}{{"load-test", base()}, {"random", large}, {"tiny-values", tinyValues}, {"tiny-rules", tinyRules}, {"entries", entries}} {
		e, err := engine.CompileException(c.pe, "podsieve-system")
		if err != nil {
			tb.Fatalf("%s: %v", c.name, err)
		}
		out = append(out, thawCase{c.name, e})
	}
	return out
}

// BenchmarkWorstCaseFrozen: a namespace's 100 exceptions (the default
// --max-exceptions-per-namespace), each frozen at nearly MaxFrozenBytes in
// the shape that costs the most to thaw per byte, all offered to a pod with
// a violation, and nothing remembered between decisions. Target, as for
// BenchmarkWorstCase: <= 10 ms per decision, stopped by the budget.
//
//	go test ./internal/index -run '^$' -bench BenchmarkWorstCaseFrozen -benchtime 20x -count 3
func BenchmarkWorstCaseFrozen(b *testing.B) {
	p, held, o := worstCaseFrozen(b)
	b.ReportAllocs()
	var d engine.Decision
	for b.Loop() {
		d = engine.Decide([]*engine.Policy{p}, offerFrozen(newThawCache(), held), o, nil, now, engine.Admission)
	}
	b.ReportMetric(float64(d.Steps), "steps/op")
	if d.Allowed || d.Err == nil {
		b.Fatalf("allowed %v, err %v; want refused, stopped by the budget", d.Allowed, d.Err)
	}
}

// TestWorstCaseFrozen keeps BenchmarkWorstCaseFrozen honest: its exceptions
// are frozen, apply to the pod, and run the decision out of its budget.
func TestWorstCaseFrozen(t *testing.T) {
	p, held, o := worstCaseFrozen(t)
	for _, h := range held {
		if h.compiled != nil || len(h.frozen) < MaxFrozenBytes-64 {
			t.Fatalf("%s: frozen %v, %d bytes", h.Source(), h.compiled == nil, len(h.frozen))
		}
	}
	first, err := held[0].compile()
	if err != nil {
		t.Fatal(err)
	}
	if sel, _ := engine.SelectExceptions(p.Rules[0], []*engine.Exception{first}, o, nil, now, engine.Admission); len(sel) != 1 {
		t.Fatal("the exceptions do not apply to the pod")
	}
	d := engine.Decide([]*engine.Policy{p}, offerFrozen(newThawCache(), held), o, nil, now, engine.Admission)
	if d.Allowed || d.Err == nil {
		t.Fatalf("allowed %v, err %v; want refused, stopped by the budget", d.Allowed, d.Err)
	}
	t.Logf("%d steps, %v", d.Steps, d.Err)
}

// offerFrozen offers held to every policy, compiled by thawed.
func offerFrozen(thawed *thawCache, held []*HeldException) engine.Candidates {
	return func(_ string, left int64) ([]*engine.Exception, int64, int) { return thawed.handOver(held, left) }
}

func worstCaseFrozen(tb testing.TB) (*engine.Policy, []*HeldException, *engine.Object) {
	tb.Helper()
	p := mustBaselinePolicy(tb, "policy-1")
	var held []*HeldException
	for i := range 100 {
		pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: fmt.Sprintf("exc-%03d", i)}, Spec: policyv1alpha1.PolicyExceptionSpec{
			Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "policy-1", RuleNames: []string{"baseline"}}},
			PodSecurity: []policyv1alpha1.PodSecurityExclusion{{ControlName: policyv1alpha1.ControlCapabilities,
				RestrictedField: "spec.initContainers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}},
		}}
		for j := 0; len(freezeException(pe, "podsieve-system")) < MaxFrozenBytes-16; j++ {
			pe.Spec.PodSecurity[0].Values = append(pe.Spec.PodSecurity[0].Values, string(rune('A'+j%26)))
		}
		e, err := engine.CompileException(pe, "podsieve-system")
		if err != nil {
			tb.Fatal(err)
		}
		held = append(held, holdInForce(e))
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-1", Name: "app"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox", SecurityContext: &corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "SYS_TIME"}}}}},
		Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
	}}
	o, err := engine.NewObject(pod)
	if err != nil {
		tb.Fatal(err)
	}
	return p, held, o
}
