package index

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/podsieve/podsieve/internal/engine"
)

// exceptionSet is a set of held exceptions grouped for lookup: by
// namespace, and the cluster exceptions namespace's cross-namespace ones
// apart.
type exceptionSet struct {
	byNS    pmap[*group] // exceptions that apply in their own namespace
	crossNS *group       // cluster-namespace exceptions that reach other namespaces
	n       int
}

// heldAs is a held exception with the compiled exception its keys (the
// policies it names, what its match pins) are read from: a writer has it at
// hand, or compiles it once.
type heldAs struct {
	h *HeldException
	e *engine.Exception
}

// newExceptionSet builds a set at once. Names are interned: the policy names
// by which groups list their exceptions are kept once per set, not once per
// exception that names them.
func newExceptionSet(excs []heldAs) exceptionSet {
	byNS := map[string][]heldAs{}
	var cross []heldAs
	for _, x := range excs {
		if x.h.crossNS {
			cross = append(cross, x)
		} else {
			byNS[x.h.Namespace] = append(byNS[x.h.Namespace], x)
		}
	}
	names := map[string]string{}
	intern := func(s string) string {
		if c, ok := names[s]; ok {
			return c
		}
		s = strings.Clone(s)
		names[s] = s
		return s
	}
	groups := make(map[string]*group, len(byNS))
	for _, excs := range byNS {
		// Keyed by a held exception's own string (a frozen one's is in its
		// frozen form), not the API object's.
		groups[excs[0].h.Namespace] = newGroup(excs, intern)
	}
	return exceptionSet{byNS: newPmap(groups), crossNS: newGroup(cross, intern), n: len(excs)}
}

// with returns the set with x added; it must not be in it.
func (s exceptionSet) with(x heldAs) exceptionSet {
	if x.h.crossNS {
		s.crossNS = s.crossNS.with(x)
	} else {
		g, _ := s.byNS.get(x.h.Namespace)
		s.byNS = s.byNS.with(x.h.Namespace, g.with(x))
	}
	s.n++
	return s
}

// without returns the set without the named exception, wherever it is.
func (s exceptionSet) without(namespace, name, clusterNamespace string) exceptionSet {
	if g, ok := s.byNS.get(namespace); ok && g.get(name) != nil {
		if g = g.without(name); g.byName.n == 0 {
			s.byNS = s.byNS.without(namespace)
		} else {
			s.byNS = s.byNS.with(namespace, g)
		}
		s.n--
	}
	if namespace == clusterNamespace && s.crossNS.get(name) != nil {
		s.crossNS = s.crossNS.without(name)
		s.n--
	}
	return s
}

func (s exceptionSet) get(namespace, name, clusterNamespace string) *HeldException {
	if g, ok := s.byNS.get(namespace); ok {
		if h := g.get(name); h != nil {
			return h
		}
	}
	if namespace == clusterNamespace {
		return s.crossNS.get(name)
	}
	return nil
}

// count is how many exceptions live in namespace, whether they reach other
// namespaces or not.
func (s exceptionSet) count(namespace, clusterNamespace string) int {
	n := 0
	if g, ok := s.byNS.get(namespace); ok {
		n += g.byName.n
	}
	if namespace == clusterNamespace && s.crossNS != nil {
		n += s.crossNS.byName.n
	}
	return n
}

// candidatesFor offers, for each policy, the exceptions that may match the
// object by the name and kind their spec.match pins, compiled for the
// decision within what its budget has left (thawCache.handOver): the cost
// depends on how many exceptions pin the object's name (or pin nothing),
// not on how many the namespace holds. A superset: SelectExceptions
// decides.
func (s exceptionSet) candidatesFor(o *engine.Object, thawed *thawCache) engine.Candidates {
	own, _ := s.byNS.get(o.Namespace)
	cross := s.crossNS // not the whole set: the closure is made per decision
	return func(policy string, left int64) ([]*engine.Exception, int64, int) {
		return thawed.handOver(concat(own.forPolicy(policy).lookup(o.Name, o.Kind), cross.forPolicy(policy).lookup(o.Name, o.Kind)), left)
	}
}

// reaching is the exceptions that may apply in a namespace with labels:
// its own and the cross-namespace ones that reach it, sorted by namespace
// and name.
func (s exceptionSet) reaching(namespace string, labels map[string]string, thawed *thawCache) []*engine.Exception {
	var held []*HeldException
	if g, ok := s.byNS.get(namespace); ok && g != nil {
		g.byName.each(func(_ string, h *HeldException) { held = append(held, h) })
	}
	var cross []*engine.Exception
	if g := s.crossNS; g != nil {
		g.byName.each(func(_ string, h *HeldException) {
			if e := thawed.thaw(h); e != nil && e.ReachesNamespace(namespace, labels) {
				cross = append(cross, e)
			}
		})
	}
	out := append(thawed.thawAll(held), cross...)
	slices.SortFunc(out, func(a, b *engine.Exception) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// concat is a's exceptions then b's, without copying when either is empty;
// the lists are read-only.
func concat(a, b []*HeldException) []*HeldException {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	return append(slices.Clip(a), b...)
}

// group is the exceptions of one namespace (or the cross-namespace ones),
// by name and, for each policy they target, by what their match pins. A nil
// group is empty. Its maps are persistent (pmap): a write copies one shard
// of each map it changes, so that loading many exceptions into one
// namespace one by one is not quadratic.
type group struct {
	byName pmap[*HeldException]
	// byPolicy is sorted by policy: a namespace's exceptions name a few
	// policies, and a list of them costs less than a map.
	byPolicy []policyKeyed
}

type policyKeyed struct {
	policy string
	k      *keyed
}

func newGroup(excs []heldAs, intern func(string) string) *group {
	g := &group{}
	byName := make(map[string]*HeldException, len(excs))
	perPolicy := map[string][]heldAs{}
	for _, x := range excs {
		byName[x.h.Name] = x.h
		for _, p := range x.e.Policies() {
			perPolicy[p] = append(perPolicy[p], x)
		}
	}
	g.byName = newPmap(byName)
	for _, p := range slices.Sorted(maps.Keys(perPolicy)) {
		g.byPolicy = append(g.byPolicy, policyKeyed{intern(p), newKeyed(perPolicy[p])})
	}
	return g
}

func (g *group) get(name string) *HeldException {
	if g == nil {
		return nil
	}
	h, _ := g.byName.get(name)
	return h
}

func (g *group) forPolicy(policy string) *keyed {
	if g == nil {
		return nil
	}
	if i, ok := g.findPolicy(policy); ok {
		return g.byPolicy[i].k
	}
	return nil
}

func (g *group) findPolicy(policy string) (int, bool) {
	return slices.BinarySearchFunc(g.byPolicy, policy, func(pk policyKeyed, p string) int { return strings.Compare(pk.policy, p) })
}

// setPolicy makes k the exceptions of g for policy, removing the policy
// when k is nil. g must be a fresh copy (copyExcept).
func (g *group) setPolicy(policy string, k *keyed) {
	i, ok := g.findPolicy(policy)
	switch {
	case ok && k == nil:
		g.byPolicy = slices.Delete(g.byPolicy, i, i+1)
	case ok:
		g.byPolicy[i].k = k
	case k != nil:
		g.byPolicy = slices.Insert(g.byPolicy, i, policyKeyed{policy, k})
	}
}

// with returns a copy of g holding x in place of any of the same name; only
// the indexes of the policies that the old and new exception target change.
func (g *group) with(x heldAs) *group {
	next := g.copyExcept(g.get(x.h.Name))
	next.byName = next.byName.with(x.h.Name, x.h)
	for _, p := range x.e.Policies() {
		next.setPolicy(p, next.forPolicy(p).with(x))
	}
	return next
}

// without returns a copy of g without the named exception.
func (g *group) without(name string) *group {
	next := g.copyExcept(g.get(name))
	next.byName = next.byName.without(name)
	return next
}

// copyExcept copies g, leaving out old from the policy indexes it was in;
// the indexes that change are new, the rest are shared. The keys of a
// frozen old are read from it compiled again; should that fail (the frozen
// form is the index's own), it stays in the policy indexes, where a
// decision cannot compile it either and so it waives nothing.
func (g *group) copyExcept(old *HeldException) *group {
	next := &group{}
	if g == nil {
		return next
	}
	next.byName = g.byName
	next.byPolicy = slices.Clone(g.byPolicy)
	if old == nil {
		return next
	}
	e, err := old.compile()
	if err != nil {
		return next
	}
	x := heldAs{old, e}
	for _, p := range e.Policies() {
		next.setPolicy(p, next.forPolicy(p).without(x))
	}
	return next
}

func insertSorted(l []*HeldException, h *HeldException) []*HeldException {
	i, _ := slices.BinarySearchFunc(l, h, compareHeld)
	out := make([]*HeldException, 0, len(l)+1)
	out = append(out, l[:i]...)
	out = append(out, h)
	return append(out, l[i:]...)
}

// removeSorted returns a copy of l without the exception of h's namespace
// and name, or nil when nothing is left.
func removeSorted(l []*HeldException, h *HeldException) []*HeldException {
	i, found := slices.BinarySearchFunc(l, h, compareHeld)
	if !found {
		return l
	}
	if len(l) == 1 {
		return nil
	}
	out := make([]*HeldException, 0, len(l)-1)
	out = append(out, l[:i]...)
	return append(out, l[i+1:]...)
}

func compareHeld(a, b *HeldException) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
