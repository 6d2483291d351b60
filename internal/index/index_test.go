package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

const clusterNS = "podsieve-system"

var now = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func policy(tb testing.TB, name string, sel map[string]string) *engine.Policy {
	tb.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: policyv1alpha1.SecurityPolicySpec{
		Action: policyv1alpha1.ActionEnforce,
		// Opted in to PolicyExceptions, without guardrails.
		Exceptions: &policyv1alpha1.ExceptionGuardrails{},
		Rules: []policyv1alpha1.PolicyRule{{
			Name:        "baseline",
			PodSecurity: policyv1alpha1.PodSecurity{Level: policyv1alpha1.LevelBaseline, Version: "latest"},
		}},
	}}
	if sel != nil {
		sp.Spec.Rules[0].Match = &policyv1alpha1.ResourceFilter{NamespaceSelector: &metav1.LabelSelector{MatchLabels: sel}}
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// exception waives Capabilities NET_ADMIN for containers named container.
func exception(tb testing.TB, ns, name, policyName, container string, match *policyv1alpha1.ExceptionMatch) *engine.Exception {
	tb.Helper()
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: policyv1alpha1.PolicyExceptionSpec{
		Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: policyName, RuleNames: []string{"*"}}},
		Match:      match,
		PodSecurity: []policyv1alpha1.PodSecurityExclusion{{
			ControlName:     policyv1alpha1.ControlCapabilities,
			ContainerNames:  []string{container},
			RestrictedField: "spec.containers[*].securityContext.capabilities.add",
			Values:          []string{"NET_ADMIN"},
		}},
	}}
	e, err := engine.CompileException(pe, clusterNS)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// netAdminPod has one container per name, each adding NET_ADMIN.
func netAdminPod(ns string, containers ...string) *engine.Object {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "app:1", SecurityContext: &corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}},
		}})
	}
	return &engine.Object{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod.Name, Meta: &pod.ObjectMeta, Spec: &pod.Spec}
}

func sources(d engine.Decision) []string {
	var out []string
	for _, r := range d.Results {
		for _, s := range r.Exceptions {
			out = append(out, s.String())
		}
	}
	slices.Sort(out)
	return out
}

func TestIndexUpdates(t *testing.T) {
	type step struct {
		do          func(ix *Index)
		ns          string
		containers  []string
		wantAllowed bool
		wantUsed    []string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "an exception added, changed and removed is seen by the next snapshot",
			steps: []step{
				{do: func(ix *Index) { ix.SetPolicy(policy(t, "p", nil)) }, ns: "a", containers: []string{"x"}, wantAllowed: false},
				{do: func(ix *Index) { ix.SetException(exception(t, "a", "e", "p", "x", nil)) }, ns: "a", containers: []string{"x"}, wantAllowed: true, wantUsed: []string{"exception/a/e"}},
				{do: func(ix *Index) { ix.SetException(exception(t, "a", "e", "p", "y", nil)) }, ns: "a", containers: []string{"x"}, wantAllowed: false},
				{do: func(ix *Index) { ix.DeleteException("a", "e") }, ns: "a", containers: []string{"y"}, wantAllowed: false},
			},
		},
		{
			name: "exceptions stay in their namespace",
			steps: []step{
				{do: func(ix *Index) {
					ix.SetPolicy(policy(t, "p", nil))
					ix.SetException(exception(t, "a", "e", "p", "x", nil))
				}, ns: "b", containers: []string{"x"}, wantAllowed: false},
			},
		},
		{
			name: "exceptions of one namespace combine per container",
			steps: []step{
				{do: func(ix *Index) {
					ix.SetPolicy(policy(t, "p", nil))
					ix.SetException(exception(t, "a", "ex", "p", "x", nil))
					ix.SetException(exception(t, "a", "ey", "p", "y", nil))
				}, ns: "a", containers: []string{"x", "y"}, wantAllowed: true, wantUsed: []string{"exception/a/ex", "exception/a/ey"}},
			},
		},
		{
			name: "a cluster exception reaches the namespaces its selector picks, and moves back when the selector goes",
			steps: []step{
				{do: func(ix *Index) {
					ix.SetPolicy(policy(t, "p", nil))
					ix.SetNamespace("mesh", map[string]string{"mesh": "istio"})
					ix.SetException(exception(t, clusterNS, "mesh", "p", "x", &policyv1alpha1.ExceptionMatch{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mesh": "istio"}}}))
				}, ns: "mesh", containers: []string{"x"}, wantAllowed: true, wantUsed: []string{"exception/podsieve-system/mesh"}},
				{ns: "plain", containers: []string{"x"}, wantAllowed: false},
				{do: func(ix *Index) { ix.SetException(exception(t, clusterNS, "mesh", "p", "x", nil)) }, ns: "mesh", containers: []string{"x"}, wantAllowed: false},
				{ns: clusterNS, containers: []string{"x"}, wantAllowed: true, wantUsed: []string{"exception/podsieve-system/mesh"}},
			},
		},
		{
			name: "namespace labels select policies; an unseen namespace has its name label",
			steps: []step{
				{do: func(ix *Index) {
					ix.SetPolicy(policy(t, "p", map[string]string{"kubernetes.io/metadata.name": "a"}))
				}, ns: "a", containers: []string{"x"}, wantAllowed: false},
				{do: func(ix *Index) {
					ix.SetNamespace("a", map[string]string{"kubernetes.io/metadata.name": "a", "team": "x"})
				}, ns: "a", containers: []string{"x"}, wantAllowed: false},
				{do: func(ix *Index) { ix.SetNamespace("a", map[string]string{"team": "x"}) }, ns: "a", containers: []string{"x"}, wantAllowed: true},
				{do: func(ix *Index) { ix.DeleteNamespace("a") }, ns: "a", containers: []string{"x"}, wantAllowed: false},
			},
		},
		{
			name: "a deleted policy is no longer enforced",
			steps: []step{
				{do: func(ix *Index) { ix.SetPolicy(policy(t, "p", nil)) }, ns: "a", containers: []string{"x"}, wantAllowed: false},
				{do: func(ix *Index) { ix.DeletePolicy("p") }, ns: "a", containers: []string{"x"}, wantAllowed: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := New(clusterNS)
			for i, st := range tt.steps {
				before := ix.Snapshot()
				beforeCount := before.ExceptionCount()
				if st.do != nil {
					st.do(ix)
				}
				if before.ExceptionCount() != beforeCount {
					t.Fatalf("step %d: a write changed an older snapshot", i)
				}
				d := ix.Snapshot().Decide(netAdminPod(st.ns, st.containers...), now, engine.Admission)
				if d.Allowed != st.wantAllowed || !slices.Equal(sources(d), st.wantUsed) {
					t.Errorf("step %d: allowed=%v used=%v, want allowed=%v used=%v", i, d.Allowed, sources(d), st.wantAllowed, st.wantUsed)
				}
			}
		})
	}
}

// TestIndexAgreesWithFlatSelection: after any sequence of writes, deciding
// from the index gives what the engine decides when offered every exception,
// so grouping by namespace and policy loses nothing.
func TestIndexAgreesWithFlatSelection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	namespaces := []string{"a", "b", "c", clusterNS}
	containers := []string{"x", "y", "z"}
	policies := []*engine.Policy{policy(t, "p0", nil), policy(t, "p1", map[string]string{"team": "blue"})}
	ix := New(clusterNS)
	for _, p := range policies {
		ix.SetPolicy(p)
	}
	live := map[string]*engine.Exception{}
	for step := range 2000 {
		ns := namespaces[rng.IntN(len(namespaces))]
		name := fmt.Sprintf("e%d", rng.IntN(6))
		switch rng.IntN(4) {
		case 0:
			ix.DeleteException(ns, name)
			delete(live, ns+"/"+name)
		case 1:
			labels := map[string]string{}
			if rng.IntN(2) == 0 {
				labels["team"] = "blue"
			}
			ix.SetNamespace(namespaces[rng.IntN(len(namespaces))], labels)
		default:
			var match *policyv1alpha1.ExceptionMatch
			if ns == clusterNS && rng.IntN(2) == 0 {
				match = &policyv1alpha1.ExceptionMatch{Namespaces: []string{namespaces[rng.IntN(3)]}}
			}
			e := exception(t, ns, name, policies[rng.IntN(2)].Name, containers[rng.IntN(3)], match)
			ix.SetException(e)
			live[ns+"/"+name] = e
		}
		s := ix.Snapshot()
		if s.ExceptionCount() != len(live) {
			t.Fatalf("step %d: index counts %d exceptions, want %d", step, s.ExceptionCount(), len(live))
		}
		var all []*engine.Exception
		for _, e := range live {
			all = append(all, e)
		}
		for _, ns := range namespaces {
			o := netAdminPod(ns, containers[:1+rng.IntN(3)]...)
			got := s.Decide(o, now, engine.Admission)
			want := engine.Decide(s.Policies(), engine.AllExceptions(all), o, s.NamespaceLabels(ns), now, engine.Admission)
			if got.Allowed != want.Allowed || !slices.Equal(sources(got), sources(want)) {
				t.Fatalf("step %d ns %s: index allowed=%v used=%v, flat allowed=%v used=%v", step, ns, got.Allowed, sources(got), want.Allowed, sources(want))
			}
		}
	}
}

// TestConcurrentReadersAndWriters runs under -race: readers never lock and
// never see a torn snapshot.
func TestConcurrentReadersAndWriters(t *testing.T) {
	ix := New(clusterNS)
	ix.SetPolicy(policy(t, "p", nil))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := ix.Snapshot()
				d := s.Decide(netAdminPod("a", "x"), now, engine.Admission)
				if used := sources(d); d.Allowed != (len(used) == 1) {
					t.Errorf("allowed=%v with exceptions %v", d.Allowed, used)
					return
				}
			}
		})
	}
	for i := range 500 {
		if i%2 == 0 {
			ix.SetException(exception(t, "a", "e", "p", "x", nil))
		} else {
			ix.DeleteException("a", "e")
		}
	}
	close(stop)
	wg.Wait()
}

func TestLoadEqualsIncrementalWrites(t *testing.T) {
	p := policy(t, "p", nil)
	excs := []*engine.Exception{
		exception(t, "a", "e1", "p", "x", nil),
		exception(t, "a", "e2", "p", "y", nil),
		exception(t, clusterNS, "c", "p", "z", &policyv1alpha1.ExceptionMatch{Namespaces: []string{"a"}}),
	}
	loaded, incremental := New(clusterNS), New(clusterNS)
	loaded.Load([]*engine.Policy{p}, excs, nil, map[string]map[string]string{"a": {"team": "x"}})
	incremental.SetPolicy(p)
	for _, e := range excs {
		incremental.SetException(e)
	}
	incremental.SetNamespace("a", map[string]string{"team": "x"})
	o := netAdminPod("a", "x", "y", "z")
	l, i := loaded.Snapshot().Decide(o, now, engine.Admission), incremental.Snapshot().Decide(o, now, engine.Admission)
	if !l.Allowed || !i.Allowed || !slices.Equal(sources(l), sources(i)) || loaded.Snapshot().ExceptionCount() != 3 {
		t.Fatalf("load: allowed=%v used=%v; incremental: allowed=%v used=%v", l.Allowed, sources(l), i.Allowed, sources(i))
	}
}

func TestGenerationCountsChanges(t *testing.T) {
	ix := New(clusterNS)
	g0 := ix.Snapshot().Generation()
	ix.SetPolicy(policy(t, "p", nil))
	ix.DeletePolicy("absent") // no change, no new generation
	ix.SetNamespace("a", nil)
	if got := ix.Snapshot().Generation() - g0; got != 2 {
		t.Fatalf("generation moved by %d, want 2", got)
	}
	if ix.Snapshot().NamespaceCount() != 1 {
		t.Fatalf("namespaces: %d", ix.Snapshot().NamespaceCount())
	}
}

// TestInactiveExceptionsOnlyExplain: an exception that is not Ready waives
// nothing; a refusal it would have prevented names it with the reason, and
// it becomes effective only when set Ready.
func TestInactiveExceptionsOnlyExplain(t *testing.T) {
	ix := New(clusterNS)
	ix.SetPolicy(policy(t, "p", nil))
	expired := exception(t, "a", "e", "p", "x", nil)
	past := now.Add(-time.Hour)
	expired.ExpiresAt = &past
	ix.SetInactiveException(expired)

	d := ix.Snapshot().Decide(netAdminPod("a", "x"), now, engine.Admission)
	if d.Allowed || len(d.Results) != 1 || len(d.Results[0].Refused) != 1 || d.Results[0].Refused[0].Source != engine.ExceptionSource("a", "e") {
		t.Fatalf("allowed=%v, results %+v: want a refusal naming exception/a/e", d.Allowed, d.Results)
	}
	if ix.Snapshot().ExceptionCount() != 0 || ix.Snapshot().Exception("a", "e") != nil {
		t.Fatal("an inactive exception is counted as in force")
	}
	ix.SetException(exception(t, "a", "e", "p", "x", nil))
	if d := ix.Snapshot().Decide(netAdminPod("a", "x"), now, engine.Admission); !d.Allowed || len(d.Results[0].Refused) != 0 {
		t.Fatalf("once Ready: allowed=%v refused=%v", d.Allowed, d.Results[0].Refused)
	}
	ix.SetInactiveException(expired)
	ix.DeleteException("a", "e")
	if d := ix.Snapshot().Decide(netAdminPod("a", "x"), now, engine.Admission); d.Allowed || len(d.Results[0].Refused) != 0 {
		t.Fatalf("after delete: allowed=%v refused=%v", d.Allowed, d.Results[0].Refused)
	}
}

// TestChangeListeners: listeners hear each published change with the
// snapshots around it, and nothing for a write that changes nothing, such
// as the same exception object at the same generation after a status write.
func TestChangeListeners(t *testing.T) {
	ix := New(clusterNS)
	var heard []string
	ix.OnChange(func(c Change) {
		if c.New != ix.Snapshot() || c.Old.Generation()+1 != c.New.Generation() {
			t.Errorf("change %v: not between the published snapshots", c)
		}
		heard = append(heard, fmt.Sprintf("%d %s/%s", c.Kind, c.Namespace, c.Name))
	})
	compiled := func(generation int64) *engine.Exception {
		e := exception(t, "team-a", "net", "p", "app", nil)
		e.UID, e.Generation = "uid-1", generation
		return e
	}
	ix.SetPolicy(policy(t, "p", nil))
	ix.SetException(compiled(1))
	ix.SetException(compiled(1))         // a status write: nothing changed
	ix.SetException(compiled(2))         // an edit
	ix.SetInactiveException(compiled(2)) // it expired
	ix.SetInactiveException(compiled(2)) // its status says so: nothing changed
	ix.DeleteException("team-a", "net")
	ix.SetNamespace("team-a", map[string]string{"x": "y"})
	ix.DeletePolicy("p")
	want := []string{
		fmt.Sprintf("%d /p", ChangedPolicy),
		fmt.Sprintf("%d team-a/net", ChangedException),
		fmt.Sprintf("%d team-a/net", ChangedException),
		fmt.Sprintf("%d team-a/net", ChangedException),
		fmt.Sprintf("%d team-a/net", ChangedException),
		fmt.Sprintf("%d /team-a", ChangedNamespace),
		fmt.Sprintf("%d /p", ChangedPolicy),
	}
	if !slices.Equal(heard, want) {
		t.Errorf("heard\n%v\nwant\n%v", heard, want)
	}
	if got := ix.Snapshot().Namespaces(); !slices.Equal(got, []string{"team-a"}) {
		t.Errorf("Namespaces() = %v", got)
	}
}

// TestPoliciesForNamespace: a decision tests only the policies that may
// apply in the object's namespace; the record follows relabelling, and
// labels read elsewhere are judged as given.
func TestPoliciesForNamespace(t *testing.T) {
	ix := New(clusterNS)
	ix.SetPolicy(policy(t, "everywhere", nil))
	ix.SetPolicy(policy(t, "restricted-only", map[string]string{"profile": "restricted"}))
	ix.SetNamespace("team-a", map[string]string{"profile": "restricted"})
	ix.SetNamespace("team-b", nil)
	names := func(ps []*engine.Policy) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	for range 2 { // the second answer comes from the record
		s := ix.Snapshot()
		if got := names(s.policiesFor("team-a", s.NamespaceLabels("team-a"))); !slices.Equal(got, []string{"everywhere", "restricted-only"}) {
			t.Fatalf("team-a: %v", got)
		}
		if got := names(s.policiesFor("team-b", s.NamespaceLabels("team-b"))); !slices.Equal(got, []string{"everywhere"}) {
			t.Fatalf("team-b: %v", got)
		}
	}
	s := ix.Snapshot()
	if got := names(s.policiesFor("team-b", map[string]string{"profile": "restricted"})); !slices.Equal(got, []string{"everywhere", "restricted-only"}) {
		t.Fatalf("team-b with labels read elsewhere: %v", got)
	}
	ix.SetNamespace("team-b", map[string]string{"profile": "restricted"})
	s = ix.Snapshot()
	if got := names(s.policiesFor("team-b", s.NamespaceLabels("team-b"))); !slices.Equal(got, []string{"everywhere", "restricted-only"}) {
		t.Fatalf("team-b relabelled: %v", got)
	}
}

// TestHeld: Held finds an exception in force and one held inactive (without
// its entries, its background flag kept), and nothing for one the index
// does not hold.
func TestHeld(t *testing.T) {
	ix := New(clusterNS)
	ix.Load(nil, nil, nil, nil)
	active := exception(t, "a", "on", "p", "c", nil)
	inactive := exception(t, "a", "off", "p", "c", nil)
	inactive.Background = false
	ix.Place("a", "on", active, engine.ExceptionState{Ready: true})
	ix.Place("a", "off", inactive, engine.ExceptionState{})
	snap := ix.Snapshot()
	// Held as held: frozen, with its identity, compiled by nothing.
	if e := snap.Held("a", "on"); e == nil || e.Source() != active.Source || e.compiled != nil || e.Background != active.Background {
		t.Errorf("Held(a/on) = %v, want the exception in force", e)
	}
	if e := snap.Held("a", "off"); e == nil || e.Source() != inactive.Source || e.Background {
		t.Errorf("Held(a/off) = %+v, want the inactive exception with background: false", e)
	}
	if snap.Exception("a", "off") != nil {
		t.Error("Exception(a/off) finds an exception not in force")
	}
	if e := snap.Held("a", "none"); e != nil {
		t.Errorf("Held(a/none) = %v", e)
	}
}

// TestLoadJudgedPlacesAsPlace: loading judged exceptions at once puts each
// where Place would.
func TestLoadJudgedPlacesAsPlace(t *testing.T) {
	on, off := exception(t, "a", "on", "p", "c", nil), exception(t, "a", "off", "p", "c", nil)
	judged := []Judged{{Exception: on, State: engine.ExceptionState{Ready: true}}, {Exception: off}}
	bulk, one := New(clusterNS), New(clusterNS)
	bulk.LoadJudged(nil, judged, nil)
	one.Load(nil, nil, nil, nil)
	for _, j := range judged {
		one.Place(j.Exception.Namespace, j.Exception.Name, j.Exception, j.State)
	}
	for _, ix := range []*Index{bulk, one} {
		s := ix.Snapshot()
		if e := s.Exception("a", "on"); e == nil || e.Source != on.Source || s.Exception("a", "off") != nil || s.Held("a", "off") == nil || s.ExceptionsIn("a") != 2 {
			t.Errorf("in force %v, a/off in force %v, held %v, %d in a", s.Exception("a", "on"), s.Exception("a", "off"), s.Held("a", "off"), s.ExceptionsIn("a"))
		}
	}
}

// TestIndexHoldsExceptionsFrozen: the index holds exceptions in force
// frozen (held.go), whether loaded or set one by one, and larger ones
// compiled; what it hands out is compiled, and decides as the compiled
// exception does.
func TestIndexHoldsExceptionsFrozen(t *testing.T) {
	small := exception(t, "a", "small", "p", "app", nil)
	// More than MaxFrozenBytes: 16 entries of 8 image globs.
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "large"}, Spec: policyv1alpha1.PolicyExceptionSpec{
		Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "p", RuleNames: []string{"*"}}},
	}}
	for i := range 16 {
		x := policyv1alpha1.PodSecurityExclusion{ControlName: policyv1alpha1.ControlCapabilities, RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: []string{"SYS_TIME"}}
		for j := range 8 {
			x.Images = append(x.Images, fmt.Sprintf("registry.example/team-%d/image-%d-%s:*", i, j, strings.Repeat("x", 40)))
		}
		pe.Spec.PodSecurity = append(pe.Spec.PodSecurity, x)
	}
	large, err := engine.CompileException(pe, clusterNS)
	if err != nil {
		t.Fatal(err)
	}
	loaded, one := New(clusterNS), New(clusterNS)
	loaded.Load([]*engine.Policy{policy(t, "p", nil)}, []*engine.Exception{small, large}, nil, nil)
	one.Load(nil, nil, nil, nil)
	one.SetPolicy(policy(t, "p", nil))
	one.SetException(small)
	one.SetException(large)
	for name, ix := range map[string]*Index{"loaded": loaded, "set": one} {
		s := ix.Snapshot()
		if held := s.active.get("a", "small", clusterNS); held == nil || held.compiled != nil {
			t.Errorf("%s: the small exception is held compiled", name)
		}
		if held := s.active.get("a", pe.Name, clusterNS); held == nil || held.compiled == nil {
			t.Errorf("%s: the maximal exception is held frozen", name)
		}
		if e := s.Exception("a", "small"); e == nil || len(e.Exclusions) != 1 {
			t.Errorf("%s: Exception hands out %+v", name, e)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}}}
		o, err := engine.NewObject(pod)
		if err != nil {
			t.Fatal(err)
		}
		d := s.DecideIn(o, nil, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), engine.Admission)
		if !d.Allowed || len(d.Applied()) != 1 || d.Applied()[0] != small.Source {
			t.Errorf("%s: allowed %v under %v, want allowed under %s", name, d.Allowed, d.Applied(), small.Source)
		}
	}
}

// TestInactiveRefusalsWithinBudget: naming the inactive exceptions that
// would have applied spends what the decision left of its budget, and stops
// naming them when that runs out; the decision stands either way.
func TestInactiveRefusalsWithinBudget(t *testing.T) {
	ix := New(clusterNS)
	ix.Load([]*engine.Policy{policy(t, "p", nil)}, nil, nil, nil)
	expired := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 50 {
		e := exception(t, "a", fmt.Sprintf("e-%02d", i), "p", "app", nil)
		e.ExpiresAt = &expired
		ix.SetInactiveException(e)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "nginx", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_TIME"}}}}}}}
	o, err := engine.NewObject(pod)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	s := ix.Snapshot()
	full := s.DecideWithin(engine.DefaultLimits, o, nil, now, engine.Admission)
	if full.Allowed || full.Err != nil || len(full.Results[0].Refused) != 50 {
		t.Fatalf("allowed %v, err %v, %d refusals named; want refused with all 50", full.Allowed, full.Err, len(full.Results[0].Refused))
	}
	if r := full.Results[0].Refused[0]; r.Source.Name != "e-00" || r.Message != "expired at 2026-01-01T00:00:00Z" {
		t.Fatalf("first refusal %+v, want e-00 expired at 2026-01-01T00:00:00Z", r)
	}
	// The decision's own steps, and about half of what naming them costs.
	tight := engine.Limits{MaxSteps: full.Steps + 25*30}
	d := s.DecideWithin(tight, o, nil, now, engine.Admission)
	if d.Allowed || d.Err != nil || len(d.Results[0].Refused) == 0 || len(d.Results[0].Refused) >= 50 {
		t.Fatalf("allowed %v, err %v, %d refusals named; want refused, naming some of the 50", d.Allowed, d.Err, len(d.Results[0].Refused))
	}
}

// TestInactiveExceptionsHeldCompiled: the index holds an inactive exception
// compiled (without its entries), whether loaded or set one by one, even
// one it would freeze in force: HeldInactive hands out what it holds, and
// naming inactive exceptions in a refusal thaws nothing.
func TestInactiveExceptionsHeldCompiled(t *testing.T) {
	e := exception(t, "a", "x", "p", "app", nil)
	if h := holdInForce(e); h.compiled != nil {
		t.Fatal("the exception is not one the index freezes in force")
	}
	loaded, one := New(clusterNS), New(clusterNS)
	loaded.Load([]*engine.Policy{policy(t, "p", nil)}, nil, []*engine.Exception{e}, nil)
	one.Load([]*engine.Policy{policy(t, "p", nil)}, nil, nil, nil)
	one.SetInactiveException(e)
	for name, ix := range map[string]*Index{"loaded": loaded, "set": one} {
		s := ix.Snapshot()
		h := s.inactive.get("a", "x", clusterNS)
		if h == nil || h.compiled == nil || h.frozen != "" || thawSteps(h) != 0 {
			t.Errorf("%s: held %+v, want compiled", name, h)
		}
		if s.HeldInactive("a", "x") == nil {
			t.Errorf("%s: HeldInactive hands out nothing", name)
		}
	}
}
