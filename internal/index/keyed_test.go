package index

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

func named(tb testing.TB, ns, name string, names []string, kinds ...policyv1alpha1.PodBearingKind) *engine.Exception {
	tb.Helper()
	var m *policyv1alpha1.ExceptionMatch
	if names != nil || kinds != nil {
		m = &policyv1alpha1.ExceptionMatch{Names: names, Kinds: kinds}
	}
	return exception(tb, ns, name, "p", "x", m)
}

func heldSources(l []*HeldException) []string {
	out := make([]string, len(l))
	for i, h := range l {
		out[i] = h.Source().String()
	}
	return out
}

// gatesOf are the gates of a flat list, read from its exceptions compiled.
func gatesOf(t *testing.T, rest []*HeldException) []gate {
	var gates []gate
	for i, h := range rest {
		e, err := h.compile()
		if err != nil {
			t.Fatal(err)
		}
		gates = appendGates(gates, e, i)
	}
	return gates
}

// offered is what s offers o for policy, with no budget to run out.
func offered(s *Snapshot, o *engine.Object, policy string) []*engine.Exception {
	l, _, _ := s.CandidatesFor(o)(policy, math.MaxInt64)
	return l
}

func sourcesOf(l []*engine.Exception) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.Source.String()
	}
	return out
}

// TestCandidatesFor: an object is offered the exceptions whose match pins
// its name (exactly or by a glob's literal prefix), those that pin only its
// kind, and those that pin nothing; each once, by namespace and name.
func TestCandidatesFor(t *testing.T) {
	excs := []*engine.Exception{
		named(t, "a", "exact", []string{"web-1"}),
		named(t, "a", "prefix", []string{"web-*"}),
		named(t, "a", "prefix2", []string{"web-*", "web-1*", "web-1"}), // three keys that all hit web-1
		named(t, "a", "middle", []string{"we?-1"}),                     // literal prefix "we"
		named(t, "a", "leading", []string{"*-1"}),                      // pins nothing
		named(t, "a", "deploy", nil, "Deployment"),
		named(t, "a", "pod-only", []string{"web-1"}, "Pod"),
		named(t, "a", "any", nil),
		named(t, "a", "other", []string{"db-0", "db-*"}),
		named(t, "b", "elsewhere", []string{"web-1"}),
		// Longer than a flat list's gates hold: the rest is Matches' to judge.
		named(t, "a", "long", []string{"payments-frontend-canary-*"}),
		named(t, "a", "long-exact", []string{"payments-frontend-canary-7"}),
	}
	tests := []struct {
		name, ns, object, kind string
		want                   []string
	}{
		{"a Pod named web-1", "a", "web-1", "Pod", []string{"exception/a/any", "exception/a/exact", "exception/a/leading", "exception/a/middle", "exception/a/pod-only", "exception/a/prefix", "exception/a/prefix2"}},
		{"a Deployment named web-1", "a", "web-1", "Deployment", []string{"exception/a/any", "exception/a/deploy", "exception/a/exact", "exception/a/leading", "exception/a/middle", "exception/a/pod-only", "exception/a/prefix", "exception/a/prefix2"}},
		{"a name no exception pins", "a", "cache-0", "Pod", []string{"exception/a/any", "exception/a/leading"}},
		{"a name shorter than the prefixes", "a", "w", "Pod", []string{"exception/a/any", "exception/a/leading"}},
		{"a prefix alone", "a", "web-", "Pod", []string{"exception/a/any", "exception/a/leading", "exception/a/middle", "exception/a/prefix", "exception/a/prefix2"}},
		{"another namespace", "b", "web-1", "Pod", []string{"exception/b/elsewhere"}},
		{"an empty namespace", "c", "web-1", "Pod", nil},
		{"a long name", "a", "payments-frontend-canary-7", "Pod", []string{"exception/a/any", "exception/a/leading", "exception/a/long", "exception/a/long-exact"}},
		{"a long name's first bytes", "a", "payments-frontend-canary", "Pod", []string{"exception/a/any", "exception/a/leading"}},
	}
	// Index every list, however short, to test the keys; and hold every
	// list flat, to test the gates, which say the same for names of up to
	// gateBytes bytes.
	defer func(n int) { keyedFlat = n }(keyedFlat)
	for _, flat := range []int{0, 1000} {
		keyedFlat = flat
		for _, load := range []bool{true, false} {
			ix := New(clusterNS)
			ix.SetPolicy(policy(t, "p", nil))
			if load {
				ix.Load([]*engine.Policy{policy(t, "p", nil)}, excs, nil, nil)
			} else {
				for _, e := range excs {
					ix.SetException(e)
				}
			}
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%s/load=%v/flat=%d", tt.name, load, flat), func(t *testing.T) {
					o := &engine.Object{Kind: tt.kind, Namespace: tt.ns, Name: tt.object}
					got := sourcesOf(offered(ix.Snapshot(), o, "p"))
					if !slices.Equal(got, tt.want) {
						t.Errorf("got %v\nwant %v", got, tt.want)
					}
					if got := offered(ix.Snapshot(), o, "other-policy"); got != nil {
						t.Errorf("another policy is offered %v", sourcesOf(got))
					}
				})
			}
		}
	}
}

// TestFlatGatesErrTowardsOffering: a flat list's gates compare the first
// gateBytes bytes of a key, so names that share them with a longer key are
// offered it (and Matches turns them down); an exception with more keys than
// maxGates is offered to every name.
func TestFlatGatesErrTowardsOffering(t *testing.T) {
	e := named(t, "a", "long", []string{"payments-frontend-canary-7"})
	k := newKeyed([]heldAs{{holdCompiled(e), e}})
	o := &engine.Object{Kind: "Pod", Namespace: "a", Name: "payments-frontend-canaryX7"}
	if got := k.lookup(o.Name, o.Kind); len(got) != 1 {
		t.Fatalf("a name sharing the gate's %d bytes is not offered the exception: %v", gateBytes, heldSources(got))
	}
	if e.Matches(o, nil) {
		t.Fatal("Matches accepts a name the exception does not pin")
	}
	// More keys than maxGates: one open gate, offered to every name.
	many := named(t, "a", "many", []string{"c-1", "c-2", "c-3", "c-4", "c-5"})
	k = newKeyed([]heldAs{{holdCompiled(many), many}})
	if len(k.gates) != 1 || !k.gates[0].open {
		t.Fatalf("gates %+v, want one open gate", k.gates)
	}
	if got := k.lookup("zzz", "Pod"); len(got) != 1 {
		t.Fatalf("an exception with an open gate is not offered: %v", heldSources(got))
	}
}

// TestCandidatesForAgreesWithMatches: whatever the exceptions and writes,
// CandidatesFor offers every exception of the namespace that matches the
// object (it may offer more: SelectExceptions decides), in order, each
// once; and Candidates offers them all.
func TestCandidatesForAgreesWithMatches(t *testing.T) {
	defer func(n int) { keyedFlat = n }(keyedFlat)
	for _, flat := range []int{keyedFlat, 1000} {
		keyedFlat = flat
		t.Run(fmt.Sprintf("flat=%d", flat), testCandidatesForAgreesWithMatches)
	}
}

func testCandidatesForAgreesWithMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	globs := []string{"app-1", "app-12", "app-1*", "app-*", "app-1?", "a*", "*", "*-1", "app-?2", "db-0", "db-**", "app-12-x",
		"app-12-x-long-enough-to-pass-the-gates", "app-12-x-long-enough-to-*"}
	kinds := []policyv1alpha1.PodBearingKind{"Pod", "Deployment", "Job"}
	objects := []string{"app-1", "app-12", "app-12-x", "app-2", "db-0", "db-01", "a", "zzz", "app-",
		"app-12-x-long-enough-to-pass-the-gates", "app-12-x-long-enough-to-", "app-12-x-long-enough"}
	ix := New(clusterNS)
	ix.SetPolicy(policy(t, "p", nil))
	held := map[string]*engine.Exception{}
	// Enough writes to one namespace to grow (and shrink) the maps' shards.
	for step := range 3000 {
		name := fmt.Sprintf("e-%d", rng.IntN(400))
		if rng.IntN(4) == 0 {
			ix.DeleteException("a", name)
			delete(held, name)
			continue
		}
		var names []string
		for range rng.IntN(3) {
			names = append(names, globs[rng.IntN(len(globs))])
		}
		var ks []policyv1alpha1.PodBearingKind
		if rng.IntN(3) == 0 {
			ks = []policyv1alpha1.PodBearingKind{kinds[rng.IntN(len(kinds))]}
		}
		e := named(t, "a", name, names, ks...)
		if rng.IntN(5) == 0 {
			ix.SetInactiveException(e)
			delete(held, name)
		} else {
			ix.SetException(e)
			held[name] = e
		}
		if step%300 != 299 {
			continue
		}
		s := ix.Snapshot()
		if s.ExceptionCount() != len(held) {
			t.Fatalf("step %d: %d exceptions in force, want %d", step, s.ExceptionCount(), len(held))
		}
		// Gates kept across writes are the gates of the list as it is.
		if g, _ := s.active.byNS.get("a"); g.forPolicy("p") != nil && !g.forPolicy("p").indexed {
			k := g.forPolicy("p")
			if want := gatesOf(t, k.rest); !slices.Equal(k.gates, want) {
				t.Fatalf("step %d: gates %v, want %v", step, k.gates, want)
			}
		}
		for _, name := range objects {
			for _, kind := range kinds {
				o := &engine.Object{Kind: string(kind), Namespace: "a", Name: name}
				got := offered(s, o, "p")
				if !slices.IsSortedFunc(got, func(a, b *engine.Exception) int { return compareHeld(holdCompiled(a), holdCompiled(b)) }) || len(slices.Compact(slices.Clone(got))) != len(got) {
					t.Fatalf("step %d, %s %s: not ordered or not unique: %v", step, kind, name, sourcesOf(got))
				}
				for _, e := range held {
					// The index holds it frozen: the same exception, not the same pointer.
					if e.Matches(o, nil) && !slices.ContainsFunc(got, func(g *engine.Exception) bool { return g.Source == e.Source }) {
						t.Fatalf("step %d, %s %s: %s matches and is not offered", step, kind, name, e.Source)
					}
				}
			}
		}
	}
}

// TestInactiveExceptionsWithoutEntries: the index holds an exception that is not
// Ready without its entries, and still names it in a refusal with the
// reason its compiled form would have had.
func TestInactiveExceptionsWithoutEntries(t *testing.T) {
	guarded := func() *engine.Policy {
		sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", Generation: 1}, Spec: policyv1alpha1.SecurityPolicySpec{
			Action: policyv1alpha1.ActionEnforce,
			Exceptions: &policyv1alpha1.ExceptionGuardrails{Controls: []policyv1alpha1.ControlGuardrail{{
				ControlName: policyv1alpha1.ControlCapabilities, AllowedValues: []string{"NET_RAW"}}}},
			Rules: []policyv1alpha1.PolicyRule{{Name: "baseline", PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest"}}},
		}}
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ix := New(clusterNS)
	ix.SetPolicy(guarded())
	e := exception(t, "a", "e", "p", "x", nil)
	e.UID, e.Generation = "uid-e", 1
	want := ix.Snapshot().Policy("p").Permits(e, now)
	if want == nil {
		t.Fatal("the guardrails permit the exception; the test needs one they refuse")
	}
	ix.SetInactiveException(e)
	if held := ix.Snapshot().inactive.get("a", "e", clusterNS); held == nil || held.compiled == nil || held.compiled.Exclusions != nil {
		t.Fatalf("the index holds %+v, want an exception without entries", held)
	}
	refusal := func() string {
		d := ix.Snapshot().Decide(netAdminPod("a", "x"), now, engine.Admission)
		if d.Allowed || len(d.Results) != 1 || len(d.Results[0].Refused) != 1 {
			t.Fatalf("allowed=%v results %+v: want one refusal", d.Allowed, d.Results)
		}
		return d.Results[0].Refused[0].Message
	}
	if got := refusal(); got != want.Error() {
		t.Fatalf("refusal %q, want %q", got, want)
	}
	// The policy is compiled again (a new pointer); the exception, judged
	// again, is published again, and refused with the same message.
	ix.SetPolicy(guarded())
	g := ix.Snapshot().Generation()
	ix.SetInactiveException(e)
	if ix.Snapshot().Generation() == g {
		t.Fatal("the exception judged against the new policy was not published")
	}
	if got := refusal(); got != want.Error() {
		t.Fatalf("after the policy changed: refusal %q, want %q", got, want)
	}
	g = ix.Snapshot().Generation()
	ix.SetInactiveException(e)
	if ix.Snapshot().Generation() != g {
		t.Fatal("the same exception judged the same was published again")
	}
}

// TestExceptionsIn counts a namespace's exceptions in force and not, and a
// cluster exceptions namespace's cross-namespace ones.
func TestExceptionsIn(t *testing.T) {
	cross := &policyv1alpha1.ExceptionMatch{Namespaces: []string{"*"}}
	tests := []struct {
		name  string
		setup func(ix *Index)
		want  map[string]int
	}{
		{"empty", func(*Index) {}, map[string]int{"a": 0}},
		{"active and inactive", func(ix *Index) {
			ix.SetException(exception(t, "a", "e1", "p", "x", nil))
			ix.SetInactiveException(exception(t, "a", "e2", "p", "x", nil))
			ix.SetException(exception(t, "b", "e1", "p", "x", nil))
		}, map[string]int{"a": 2, "b": 1, "c": 0}},
		{"moved from active to inactive counts once", func(ix *Index) {
			ix.SetException(exception(t, "a", "e1", "p", "x", nil))
			ix.SetInactiveException(exception(t, "a", "e1", "p", "x", nil))
		}, map[string]int{"a": 1}},
		{"deleted", func(ix *Index) {
			ix.SetException(exception(t, "a", "e1", "p", "x", nil))
			ix.DeleteException("a", "e1")
		}, map[string]int{"a": 0}},
		{"cross-namespace exceptions count in their own namespace", func(ix *Index) {
			ix.SetException(exception(t, clusterNS, "mesh", "p", "x", cross))
			ix.SetException(exception(t, clusterNS, "local", "p", "x", nil))
		}, map[string]int{clusterNS: 2, "a": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := New(clusterNS)
			ix.SetPolicy(policy(t, "p", nil))
			tt.setup(ix)
			for ns, want := range tt.want {
				if got := ix.Snapshot().ExceptionsIn(ns); got != want {
					t.Errorf("ExceptionsIn(%q) = %d, want %d", ns, got, want)
				}
			}
		})
	}
}

// TestGateKindBits: every pod-bearing kind has a bit of its own in a gate's
// kinds, apart from the bit of every other kind.
func TestGateKindBits(t *testing.T) {
	seen := map[uint16]bool{kindBit("NotAKind"): true}
	for _, k := range engine.PodBearingKinds {
		b := kindBit(string(k.Kind))
		if b == 0 || seen[b] {
			t.Fatalf("kind %s has bit %#x, shared or none: gate.kinds needs more bits", k.Kind, b)
		}
		seen[b] = true
	}
}

// TestPmapAgreesWithMap: a pmap written at random, through its small list,
// its growth into shards and its shrinking back, holds what a map holds, and
// every earlier version still holds what it held.
func TestPmapAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	type version struct {
		m    pmap[int]
		want map[string]int
	}
	var versions []version
	var m pmap[int]
	want := map[string]int{}
	for step := range 20000 {
		// Keys from a pool that drifts, so that the map grows past
		// pmapSmall, to hundreds of keys, and shrinks again.
		pool := 4 + (step/2000%5)*60
		k := fmt.Sprintf("k-%d", rng.IntN(pool))
		if rng.IntN(3) == 0 {
			m = m.without(k)
			delete(want, k)
		} else {
			m = m.with(k, step)
			want[k] = step
		}
		if step%97 == 0 {
			versions = append(versions, version{m, maps.Clone(want)})
		}
	}
	for i, v := range versions {
		if v.m.n != len(v.want) || v.m.n > pmapSmall && v.m.shards == nil {
			t.Fatalf("version %d: n %d, small %v, want %d keys", i, v.m.n, v.m.shards == nil, len(v.want))
		}
		got := map[string]int{}
		v.m.each(func(k string, x int) { got[k] = x })
		if !maps.Equal(got, v.want) {
			t.Fatalf("version %d: holds %v, want %v", i, got, v.want)
		}
		for k, x := range v.want {
			if y, ok := v.m.get(k); !ok || y != x {
				t.Fatalf("version %d: get(%s) = %d, %v, want %d", i, k, y, ok, x)
			}
		}
		if _, ok := v.m.get("absent"); ok {
			t.Fatalf("version %d: holds an absent key", i)
		}
	}
}

// TestInForceIn: a namespace's own exceptions in force, by name; not the
// cluster exceptions namespace's that reach it (InForce has those), nor
// inactive ones, nor another namespace's.
func TestInForceIn(t *testing.T) {
	ix := New(clusterNS)
	ix.SetNamespace("team-a", map[string]string{"kubernetes.io/metadata.name": "team-a"})
	ix.SetException(named(t, "team-a", "b", nil))
	ix.SetException(named(t, "team-a", "a", nil))
	ix.SetException(named(t, "team-b", "c", nil))
	ix.SetException(exception(t, clusterNS, "cluster", "p", "x", &policyv1alpha1.ExceptionMatch{Namespaces: []string{"team-a"}}))
	ix.SetInactiveException(named(t, "team-a", "off", nil))
	snap := ix.Snapshot()
	var got []*engine.Exception
	for e, cost := range snap.InForceIn("team-a") {
		got = append(got, e)
		h := snap.Held(e.Namespace, e.Name)
		if h == nil || h.compiled != nil || cost != thawSteps(h) || cost == 0 {
			t.Errorf("InForceIn yields %s at %d steps; want it held frozen and charged its thaw", e.Source, cost)
		}
	}
	if got, want := sourcesOf(got), []string{"exception/team-a/a", "exception/team-a/b"}; !slices.Equal(got, want) {
		t.Errorf("InForceIn = %q, want %q", got, want)
	}
	if got := sourcesOf(snap.InForce("team-a", snap.NamespaceLabels("team-a"))); !slices.Contains(got, "exception/"+clusterNS+"/cluster") {
		t.Errorf("InForce = %q, want the cluster exception too", got)
	}
}

// TestInForceInThawsOnlyWhatIsExamined: a refusal that names exceptions of
// a crowded namespace that do not reach the object compiles only those it
// looks at, as it looks at them: here the first four, which are all it
// names, not the first engine.MaxUnreachedExamined.
func TestInForceInThawsOnlyWhatIsExamined(t *testing.T) {
	ix := New(clusterNS)
	ix.Load([]*engine.Policy{policy(t, "p", nil)}, nil, nil, nil)
	for i := range 100 {
		ix.SetException(named(t, "a", fmt.Sprintf("x-%03d", i), []string{"other"}))
	}
	s := ix.Snapshot()
	o := netAdminPod("a", "x")
	d := s.DecideIn(o, nil, now, engine.Admission)
	if d.Allowed || thawedCount(s.thawed) != 0 {
		t.Fatalf("allowed %v, %d thawed; want refused, none thawed (no exception pins the pod's name)", d.Allowed, thawedCount(s.thawed))
	}
	d.NoteUnreached(s.InForceIn("a"), nil, now)
	if n := len(d.Results[0].Unreached); n != 4 {
		t.Fatalf("%d named as out of reach, want 4", n)
	}
	if n := thawedCount(s.thawed); n != 4 {
		t.Errorf("%d exceptions thawed, want the 4 looked at", n)
	}
}

// thawedCount is how many thawed exceptions c remembers.
func thawedCount(c *thawCache) int {
	n := 0
	for i := range c.shards {
		if m := c.shards[i].m.Load(); m != nil {
			m.Range(func(any, any) bool { n++; return true })
		}
	}
	return n
}
