// Package index owns the compiled snapshot that every decision reads: the
// SecurityPolicies in force, the PolicyExceptions grouped by namespace and by
// policy, and the namespaces' labels. Readers (the webhook, the background
// scan, podsieve eval) take the current snapshot with one atomic load and
// never lock. Writers apply one changed object at a time and copy only the
// part it touches: the policy list, or one namespace's exceptions.
//
// The package imports the engine and no controller-runtime, so that the CLI
// builds the same index from files that the controllers build from the API.
package index

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/podsieve/podsieve/internal/engine"
)

// metadataNameLabel is set by the API server on every namespace; a namespace
// the index has not seen yet still carries it.
const metadataNameLabel = "kubernetes.io/metadata.name"

// Index publishes snapshots. The zero value is not usable; call New.
type Index struct {
	mu        sync.Mutex // serialises writers; readers never take it
	cur       atomic.Pointer[Snapshot]
	ready     atomic.Bool
	listeners []func(Change) // guarded by mu
}

// ChangeKind says what kind of object a Change is about.
type ChangeKind int

const (
	// ChangedAll: the whole content was replaced (Load).
	ChangedAll ChangeKind = iota
	// ChangedPolicy: a policy was set or deleted; Name is the policy.
	ChangedPolicy
	// ChangedException: an exception was set, made inactive or deleted;
	// Namespace and Name are the exception's.
	ChangedException
	// ChangedNamespace: a namespace's labels were set or forgotten; Name is
	// the namespace.
	ChangedNamespace
)

// Change is one published write to the index, with the snapshots before and
// after it, for listeners that keep state derived from decisions (the
// background scan re-decides what the change can affect).
type Change struct {
	Kind      ChangeKind
	Namespace string
	Name      string
	Old, New  *Snapshot
}

// OnChange registers f to be called after each published change, in the
// order of the changes. f runs under the writer lock: it must be quick, must
// not block and must not write to the index (enqueueing work is the intent).
func (ix *Index) OnChange(f func(Change)) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.listeners = append(ix.listeners, f)
}

// New returns an empty index. clusterNamespace is the cluster exceptions
// namespace, whose exceptions may reach other namespaces.
func New(clusterNamespace string) *Index {
	ix := &Index{}
	ix.cur.Store(&Snapshot{clusterNamespace: clusterNamespace})
	return ix
}

// Snapshot returns the current snapshot. It never changes; take a new one
// for each decision.
func (ix *Index) Snapshot() *Snapshot { return ix.cur.Load() }

// MarkReady records that the index holds everything the API server had when
// the caches synced; until then decisions would miss exceptions or policies.
func (ix *Index) MarkReady() { ix.ready.Store(true) }

// Ready reports whether MarkReady was called.
func (ix *Index) Ready() bool { return ix.ready.Load() }

// update applies one change under the writer lock, publishes the result
// with the next generation and tells the listeners.
func (ix *Index) update(c Change, f func(s *Snapshot) *Snapshot) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := ix.cur.Load()
	next := f(old)
	if next == old {
		return
	}
	next.generation = old.generation + 1
	next.byNamespace = &policiesByNamespace{}
	ix.cur.Store(next)
	c.Old, c.New = old, next
	for _, l := range ix.listeners {
		l(c)
	}
}

// Load replaces the whole content in one step: podsieve eval's input, or a
// rebuild. It builds each part once instead of copying per object. active
// are the exceptions judged Ready; inactive those that are not (expired, or
// refused by the guardrails), kept only to explain refusals, slim (see
// SetInactiveException).
func (ix *Index) Load(policies []*engine.Policy, active, inactive []*engine.Exception, namespaces map[string]map[string]string) {
	ix.update(Change{Kind: ChangedAll}, func(old *Snapshot) *Snapshot {
		s := &Snapshot{clusterNamespace: old.clusterNamespace, policies: make(map[string]*engine.Policy, len(policies))}
		for _, p := range policies {
			s.policies[p.Name] = p
		}
		s.ordered = orderPolicies(s.policies)
		slim := make([]*engine.Exception, len(inactive))
		for i, e := range inactive {
			slim[i] = e.Slim(s.Policy)
		}
		// Built from the compiled exceptions, then frozen
		// (engine.Exception.Freeze): the collector need not mark them.
		s.active, s.inactive = newExceptionSet(active).frozen(), newExceptionSet(slim)
		var labels [shards]map[string]map[string]string
		for ns, l := range namespaces {
			i := shardOf(ns)
			if labels[i] == nil {
				labels[i] = map[string]map[string]string{}
			}
			labels[i][ns] = l
		}
		s.namespaces = shardMap[map[string]string]{s: &labels, n: len(namespaces)}
		return s
	})
}

// SetPolicy puts a compiled policy in force, replacing any of the same name.
func (ix *Index) SetPolicy(p *engine.Policy) {
	ix.update(Change{Kind: ChangedPolicy, Name: p.Name}, func(old *Snapshot) *Snapshot {
		s := *old
		s.policies = maps1(old.policies, p.Name, p)
		s.ordered = orderPolicies(s.policies)
		return &s
	})
}

// DeletePolicy takes a policy out of force.
func (ix *Index) DeletePolicy(name string) {
	ix.update(Change{Kind: ChangedPolicy, Name: name}, func(old *Snapshot) *Snapshot {
		if _, ok := old.policies[name]; !ok {
			return old
		}
		s := *old
		s.policies = maps1(old.policies, name, nil)
		s.ordered = orderPolicies(s.policies)
		return &s
	})
}

// Place puts a judged exception where its state says: in force when Ready,
// held inactive otherwise (to name it in the refusals it would have
// prevented), and nowhere when it did not compile (e is nil). It is the one
// placement the PolicyException controller and the CLI share.
func (ix *Index) Place(namespace, name string, e *engine.Exception, st engine.ExceptionState) {
	switch placement(e, st) {
	case absent:
		ix.DeleteException(namespace, name)
	case inForce:
		ix.SetException(e)
	case heldInactive:
		ix.SetInactiveException(e)
	}
}

// Judged is a compiled exception with the state it was judged to be in.
type Judged struct {
	Exception *engine.Exception
	State     engine.ExceptionState
}

// LoadJudged is Load with each exception placed as Place places it, in one
// snapshot: for a caller that judged every exception at once (the CLI).
func (ix *Index) LoadJudged(policies []*engine.Policy, judged []Judged, namespaces map[string]map[string]string) {
	var active, inactive []*engine.Exception
	for _, j := range judged {
		switch placement(j.Exception, j.State) {
		case inForce:
			active = append(active, j.Exception)
		case heldInactive:
			inactive = append(inactive, j.Exception)
		}
	}
	ix.Load(policies, active, inactive, namespaces)
}

// where is where a judged exception goes.
type where uint8

const (
	absent where = iota
	inForce
	heldInactive
)

// placement is the one rule of Place and LoadJudged: a Ready exception is in
// force, another one that compiled is held inactive, and one that did not
// compile is not held.
func placement(e *engine.Exception, st engine.ExceptionState) where {
	switch {
	case e == nil:
		return absent
	case st.Ready:
		return inForce
	default:
		return heldInactive
	}
}

// SetException puts an exception judged Ready in force, replacing any of
// the same namespace and name (which may have moved between its namespace's
// group and the cross-namespace group, or been inactive). The same object at
// the same generation already in force changes nothing and publishes
// nothing: a status write re-reconciles an exception without changing it.
func (ix *Index) SetException(e *engine.Exception) {
	ix.update(Change{Kind: ChangedException, Namespace: e.Namespace, Name: e.Name}, func(old *Snapshot) *Snapshot {
		if sameObject(old.active.get(e.Namespace, e.Name, old.clusterNamespace), e) {
			return old
		}
		s := *old
		s.active = old.active.without(e.Namespace, e.Name, old.clusterNamespace).with(e.Freeze())
		s.inactive = old.inactive.without(e.Namespace, e.Name, old.clusterNamespace)
		return &s
	})
}

// SetInactiveException records an exception that is not Ready (expired, or
// refused by the guardrails). It waives nothing; decisions name it where it
// would have applied, with the reason it does not. The index holds it slim
// (engine.Exception.Slim, judged against the policies in force), without
// its podSecurity entries: they are most of its memory, and exceptions that
// cannot apply must not cost every replica as much as those that do.
func (ix *Index) SetInactiveException(e *engine.Exception) {
	ix.update(Change{Kind: ChangedException, Namespace: e.Namespace, Name: e.Name}, func(old *Snapshot) *Snapshot {
		e := e.Slim(old.Policy)
		// The same object, judged the same against the same policies.
		if held := old.inactive.get(e.Namespace, e.Name, old.clusterNamespace); sameObject(held, e) && e.SameJudgement(held) {
			return old
		}
		s := *old
		s.active = old.active.without(e.Namespace, e.Name, old.clusterNamespace)
		s.inactive = old.inactive.without(e.Namespace, e.Name, old.clusterNamespace).with(e)
		return &s
	})
}

// sameObject reports whether held and e were compiled from the same object
// at the same generation (so from the same spec).
func sameObject(held, e *engine.Exception) bool {
	return held != nil && e.UID != "" && held.UID == e.UID && held.Generation == e.Generation
}

// DeleteException removes an exception, active or not.
func (ix *Index) DeleteException(namespace, name string) {
	ix.update(Change{Kind: ChangedException, Namespace: namespace, Name: name}, func(old *Snapshot) *Snapshot {
		active := old.active.without(namespace, name, old.clusterNamespace)
		inactive := old.inactive.without(namespace, name, old.clusterNamespace)
		if active.n == old.active.n && inactive.n == old.inactive.n {
			return old
		}
		s := *old
		s.active, s.inactive = active, inactive
		return &s
	})
}

// SetNamespace records a namespace's labels, for namespaceSelectors.
func (ix *Index) SetNamespace(name string, labels map[string]string) {
	ix.update(Change{Kind: ChangedNamespace, Name: name}, func(old *Snapshot) *Snapshot {
		s := *old
		s.namespaces = old.namespaces.with(name, labels)
		return &s
	})
}

// DeleteNamespace forgets a namespace's labels.
func (ix *Index) DeleteNamespace(name string) {
	ix.update(Change{Kind: ChangedNamespace, Name: name}, func(old *Snapshot) *Snapshot {
		s := *old
		s.namespaces = old.namespaces.without(name)
		return &s
	})
}

// Snapshot is an immutable view of everything a decision needs.
type Snapshot struct {
	clusterNamespace string
	policies         map[string]*engine.Policy
	ordered          []*engine.Policy // by name, so decisions list rules in a stable order
	active           exceptionSet     // judged Ready: the only ones that waive anything
	inactive         exceptionSet     // not Ready: named in refusals, never applied
	namespaces       shardMap[map[string]string]
	generation       int64
	// byNamespace remembers, per namespace, the policies that may apply
	// there; filled as decisions ask, new with every snapshot.
	byNamespace *policiesByNamespace
}

// Generation counts the changes published since the index was created.
func (s *Snapshot) Generation() int64 { return s.generation }

// NamespaceCount is the number of namespaces whose labels the index holds.
func (s *Snapshot) NamespaceCount() int { return s.namespaces.n }

// Policies are the policies in force, by name.
func (s *Snapshot) Policies() []*engine.Policy { return s.ordered }

// Policy returns the policy in force by name, or nil.
func (s *Snapshot) Policy(name string) *engine.Policy { return s.policies[name] }

// ExceptionCount is the number of exceptions in force.
func (s *Snapshot) ExceptionCount() int { return s.active.n }

// KnowsNamespace reports whether the index holds the namespace's labels. A
// namespace created a moment ago may not be there yet: its informer event is
// still in flight.
func (s *Snapshot) KnowsNamespace(namespace string) bool {
	_, ok := s.namespaces.get(namespace)
	return ok
}

// Namespaces are the names of the namespaces whose labels the index holds,
// in no particular order.
func (s *Snapshot) Namespaces() []string {
	out := make([]string, 0, s.namespaces.n)
	if s.namespaces.s == nil {
		return out
	}
	for _, shard := range s.namespaces.s {
		for ns := range shard {
			out = append(out, ns)
		}
	}
	return out
}

// NamespaceLabels returns a namespace's labels. A namespace the index has not
// seen (its informer event is still in flight) carries only the label the
// API server sets on every namespace.
func (s *Snapshot) NamespaceLabels(namespace string) map[string]string {
	if l, ok := s.namespaces.get(namespace); ok {
		return l
	}
	return map[string]string{metadataNameLabel: namespace}
}

// CandidatesFor offers, for each policy, the exceptions in force that may
// apply to the object: among those of its namespace and the cluster
// exceptions namespace's cross-namespace ones, the ones whose spec.match pins the object's name (exactly, or by a glob's
// literal prefix) or pins no name, and, where match.kinds is all they pin,
// its kind. The cost depends on how many exceptions may match the object,
// not on how many its namespace holds. The lists are in a stable order (the
// namespace's, then the cross-namespace ones, each by namespace and name)
// and must not be modified.
func (s *Snapshot) CandidatesFor(o *engine.Object) engine.Candidates {
	return s.active.candidatesFor(o)
}

// ExceptionsIn is the number of PolicyExceptions of namespace that the index
// holds, in force or not (a limit on exceptions per namespace counts both):
// every one reconciled except those that do not compile or that the limit
// left out.
func (s *Snapshot) ExceptionsIn(namespace string) int {
	return s.active.count(namespace, s.clusterNamespace) + s.inactive.count(namespace, s.clusterNamespace)
}

// Decide is the decision for one object: every policy in force, the
// exceptions the object's namespace offers, its namespace's labels. A rule
// that does not pass also names the inactive exceptions that would have
// applied, with the reason they do not, so that the developer learns why
// their exception did not help.
func (s *Snapshot) Decide(o *engine.Object, now time.Time, mode engine.Mode) engine.Decision {
	return s.DecideIn(o, s.NamespaceLabels(o.Namespace), now, mode)
}

// DecideIn is Decide with the namespace's labels given, for a caller that
// read them elsewhere (a namespace the index does not know yet).
func (s *Snapshot) DecideIn(o *engine.Object, labels map[string]string, now time.Time, mode engine.Mode) engine.Decision {
	return s.DecideWithin(engine.DefaultLimits, o, labels, now, mode)
}

// DecideWithin is DecideIn within limits: a work budget and a channel that
// cancels (a context's Done). A decision that reaches them fails closed, and
// its Err says why (engine.DecideWithin). The inactive exceptions named in a
// rule that does not pass are looked up after the decision, within what it
// left of the budget (engine.RefusalsWithin): when that runs out, the
// remaining rules name none, and the decision stands. A decision that was
// stopped or cancelled names none.
func (s *Snapshot) DecideWithin(limits engine.Limits, o *engine.Object, labels map[string]string, now time.Time, mode engine.Mode) engine.Decision {
	d := engine.DecideWithin(limits, s.policiesFor(o.Namespace, labels), s.active.candidatesFor(o), o, labels, now, mode)
	if s.inactive.n == 0 {
		return d
	}
	if d.Err != nil {
		// Stopped or cancelled: nothing is left to explain it with.
		return d
	}
	inactive := s.inactive.candidatesFor(o)
	// Within what the decision left of its budget: naming them is an
	// explanation, and stops (the decision stands) when that runs out.
	left := limits
	if left.MaxSteps == 0 {
		left.MaxSteps = engine.DefaultMaxSteps
	}
	left.MaxSteps -= d.Steps
	for i := range d.Results {
		res := &d.Results[i]
		if res.Outcome == engine.Pass {
			continue
		}
		if left.MaxSteps <= 0 {
			break
		}
		refused, steps, ok := engine.RefusalsWithin(left, res.Rule, inactive(res.Rule.Policy.Name), o, labels, now, mode)
		res.Refused = append(res.Refused, refused...)
		left.MaxSteps -= steps
		if !ok {
			break
		}
	}
	return d
}

// policiesFor are the policies, in order, whose rules may apply in namespace
// with these labels (engine.Policy.MayMatchNamespace, which errs towards
// yes): a cluster with many policies that select namespaces does not test
// every rule of every policy on each object. The answer is remembered for a
// namespace whose labels are the snapshot's own; labels read elsewhere (a
// namespace the index does not know yet) are judged afresh.
func (s *Snapshot) policiesFor(namespace string, labels map[string]string) []*engine.Policy {
	if len(s.ordered) <= 1 || s.byNamespace == nil {
		return s.ordered
	}
	own, known := s.namespaces.get(namespace)
	cacheable := known && maps.Equal(own, labels)
	if cacheable {
		if ps, ok := s.byNamespace.m.Load(namespace); ok {
			return ps.([]*engine.Policy)
		}
	}
	var out []*engine.Policy
	for _, p := range s.ordered {
		if p.MayMatchNamespace(namespace, labels) {
			out = append(out, p)
		}
	}
	if cacheable && s.byNamespace.n.Add(1) <= maxRememberedNamespaces {
		s.byNamespace.m.Store(namespace, out)
	}
	return out
}

// maxRememberedNamespaces bounds policiesFor's record per snapshot.
const maxRememberedNamespaces = 20_000

// policiesByNamespace is policiesFor's record: namespace → []*engine.Policy.
type policiesByNamespace struct {
	m sync.Map
	n atomic.Int64
}

// Exception returns the exception in force by namespace and name, or nil.
func (s *Snapshot) Exception(namespace, name string) *engine.Exception {
	if e := s.active.get(namespace, name, s.clusterNamespace); e != nil {
		return e.Thaw()
	}
	return nil
}

// Held is the exception of that namespace and name that the index holds, in
// force or not, as it holds it: a frozen shell (engine.Exception.Freeze) or
// a compiled exception in force, a slim one (engine.Exception.Slim) if not.
// Only its identity is sure to be there (Namespace, Name, UID, Generation,
// Source, Background): use Exception, or Thaw, for the rest. Nil for one it
// does not hold (never compiled, or left out by the namespace's limit).
// Reading identities thaws nothing, so that a caller that walks every
// exception of the cluster (the status counters) does not compile them all.
func (s *Snapshot) Held(namespace, name string) *engine.Exception {
	if e := s.active.get(namespace, name, s.clusterNamespace); e != nil {
		return e
	}
	return s.inactive.get(namespace, name, s.clusterNamespace)
}

// exceptionSet is a set of exceptions grouped for lookup: by namespace, and
// the cluster exceptions namespace's cross-namespace ones apart.
type exceptionSet struct {
	byNS    shardMap[*group] // exceptions that apply in their own namespace
	crossNS *group           // cluster-namespace exceptions that reach other namespaces
	n       int
}

func newExceptionSet(excs []*engine.Exception) exceptionSet {
	byNS := map[string][]*engine.Exception{}
	var cross []*engine.Exception
	for _, e := range excs {
		if e.CrossNamespace() {
			cross = append(cross, e)
		} else {
			byNS[e.Namespace] = append(byNS[e.Namespace], e)
		}
	}
	var arr [shards]map[string]*group
	for ns, excs := range byNS {
		i := shardOf(ns)
		if arr[i] == nil {
			arr[i] = map[string]*group{}
		}
		arr[i][ns] = newGroup(excs)
	}
	return exceptionSet{byNS: shardMap[*group]{s: &arr, n: len(byNS)}, crossNS: newGroup(cross), n: len(excs)}
}

// frozen replaces, in a set just built (which no snapshot shares yet), each
// exception by its frozen shell: building from the compiled exceptions reads
// each once, where building from shells would thaw them to read them.
func (x exceptionSet) frozen() exceptionSet {
	shells := map[*engine.Exception]*engine.Exception{}
	freeze := func(e *engine.Exception) *engine.Exception {
		f, ok := shells[e]
		if !ok {
			f = e.Freeze()
			shells[e] = f
		}
		return f
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
	x.byNS.each(func(_ string, g *group) { g.freeze(freeze, intern) })
	x.crossNS.freeze(freeze, intern)
	return x
}

// with returns the set with e added; e must not be in it.
func (x exceptionSet) with(e *engine.Exception) exceptionSet {
	if e.CrossNamespace() {
		x.crossNS = x.crossNS.with(e)
	} else {
		g, _ := x.byNS.get(e.Namespace)
		x.byNS = x.byNS.with(e.Namespace, g.with(e))
	}
	x.n++
	return x
}

// without returns the set without the named exception, wherever it is.
func (x exceptionSet) without(namespace, name, clusterNamespace string) exceptionSet {
	if g, ok := x.byNS.get(namespace); ok && g.get(name) != nil {
		if g = g.without(name); g.byName.n == 0 {
			x.byNS = x.byNS.without(namespace)
		} else {
			x.byNS = x.byNS.with(namespace, g)
		}
		x.n--
	}
	if namespace == clusterNamespace && x.crossNS.get(name) != nil {
		x.crossNS = x.crossNS.without(name)
		x.n--
	}
	return x
}

func (x exceptionSet) get(namespace, name, clusterNamespace string) *engine.Exception {
	if g, ok := x.byNS.get(namespace); ok {
		if e := g.get(name); e != nil {
			return e
		}
	}
	if namespace == clusterNamespace {
		return x.crossNS.get(name)
	}
	return nil
}

// count is how many exceptions live in namespace, whether they reach other
// namespaces or not.
func (x exceptionSet) count(namespace, clusterNamespace string) int {
	n := 0
	if g, ok := x.byNS.get(namespace); ok {
		n += g.byName.n
	}
	if namespace == clusterNamespace && x.crossNS != nil {
		n += x.crossNS.byName.n
	}
	return n
}

// candidatesFor offers, for each policy, the exceptions that may match the
// object by the name and kind their spec.match pins: the cost depends on
// how many exceptions pin the object's name (or pin nothing), not on how
// many the namespace holds. A superset: SelectExceptions decides.
func (x exceptionSet) candidatesFor(o *engine.Object) engine.Candidates {
	own, _ := x.byNS.get(o.Namespace)
	return func(policy string) []*engine.Exception {
		return concat(own.forPolicy(policy).lookup(o.Name, o.Kind), x.crossNS.forPolicy(policy).lookup(o.Name, o.Kind))
	}
}

// concat is a's exceptions then b's, without copying when either is empty;
// the lists are read-only.
func concat(a, b []*engine.Exception) []*engine.Exception {
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
	byName pmap[*engine.Exception]
	// byPolicy is sorted by policy: a namespace's exceptions name a few
	// policies, and a list of them costs less than a map.
	byPolicy []policyKeyed
}

type policyKeyed struct {
	policy string
	k      *keyed
}

func newGroup(excs []*engine.Exception) *group {
	g := &group{}
	byName := make(map[string]*engine.Exception, len(excs))
	for _, e := range excs {
		byName[e.Name] = e
	}
	g.byName = newPmap(byName)
	perPolicy := map[string][]*engine.Exception{}
	for _, e := range byName {
		for _, p := range e.Policies() {
			perPolicy[p] = append(perPolicy[p], e)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(perPolicy)) {
		g.byPolicy = append(g.byPolicy, policyKeyed{p, newKeyed(perPolicy[p])})
	}
	return g
}

// freeze applies f to every list of a group just built, and keys its names
// by the shells' own strings (which are in their frozen form), not the API
// object's.
func (g *group) freeze(f func(*engine.Exception) *engine.Exception, intern func(string) string) {
	if g == nil {
		return
	}
	for i := range g.byName.small {
		e := f(g.byName.small[i].v)
		g.byName.small[i] = pmapEntry[*engine.Exception]{k: e.Name, v: e}
	}
	for i, shard := range g.byName.shards {
		next := make(map[string]*engine.Exception, len(shard))
		for _, e := range shard {
			e = f(e)
			next[e.Name] = e
		}
		g.byName.shards[i] = next
	}
	for i := range g.byPolicy {
		g.byPolicy[i].policy = intern(g.byPolicy[i].policy)
		g.byPolicy[i].k.freeze(f)
	}
}

func (g *group) get(name string) *engine.Exception {
	if g == nil {
		return nil
	}
	e, _ := g.byName.get(name)
	return e
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

// with returns a copy of g holding e in place of any of the same name; only
// the indexes of the policies that the old and new e target change.
func (g *group) with(e *engine.Exception) *group {
	old := g.get(e.Name)
	next := g.copyExcept(old)
	next.byName = next.byName.with(e.Name, e)
	for _, p := range e.Policies() {
		next.setPolicy(p, next.forPolicy(p).with(e))
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
// the indexes that change are new, the rest are shared.
func (g *group) copyExcept(old *engine.Exception) *group {
	next := &group{}
	if g == nil {
		return next
	}
	next.byName = g.byName
	next.byPolicy = slices.Clone(g.byPolicy)
	if old == nil {
		return next
	}
	for _, p := range old.Policies() {
		next.setPolicy(p, next.forPolicy(p).without(old))
	}
	return next
}

func insertSorted(l []*engine.Exception, e *engine.Exception) []*engine.Exception {
	i, _ := slices.BinarySearchFunc(l, e, compareExceptions)
	out := make([]*engine.Exception, 0, len(l)+1)
	out = append(out, l[:i]...)
	out = append(out, e)
	return append(out, l[i:]...)
}

// removeSorted returns a copy of l without the exception of e's namespace
// and name (whichever form of it l holds), or nil when nothing is left.
func removeSorted(l []*engine.Exception, e *engine.Exception) []*engine.Exception {
	i, found := slices.BinarySearchFunc(l, e, compareExceptions)
	if !found {
		return l
	}
	if len(l) == 1 {
		return nil
	}
	out := make([]*engine.Exception, 0, len(l)-1)
	out = append(out, l[:i]...)
	return append(out, l[i+1:]...)
}

func compareExceptions(a, b *engine.Exception) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// maps1 copies m with k set to v, or removed when v is nil.
func maps1(m map[string]*engine.Policy, k string, v *engine.Policy) map[string]*engine.Policy {
	out := make(map[string]*engine.Policy, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func orderPolicies(m map[string]*engine.Policy) []*engine.Policy {
	out := make([]*engine.Policy, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *engine.Policy) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// InForce returns the exceptions in force that may apply to objects in a
// namespace with the given labels: its own, and the cluster exceptions
// namespace's cross-namespace ones that reach it
// (engine.Exception.ReachesNamespace), sorted by namespace and name. They
// are what the API server's form of the policies reads as the namespace's
// parameters (internal/admissionpolicy).
func (s *Snapshot) InForce(namespace string, labels map[string]string) []*engine.Exception {
	return s.active.reaching(namespace, labels)
}

// InForceIn returns the exceptions in force that a namespace holds itself,
// sorted by name: not the cluster exceptions namespace's that reach it
// (InForce has those too). A refusal names those that come close
// (engine.Decision.NoteUnreached) from these.
func (s *Snapshot) InForceIn(namespace string) []*engine.Exception {
	var out []*engine.Exception
	if g, ok := s.active.byNS.get(namespace); ok && g != nil {
		g.byName.each(func(_ string, e *engine.Exception) { out = append(out, e) })
	}
	slices.SortFunc(out, func(a, b *engine.Exception) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Inactive returns the exceptions held but not in force (to name them in
// refusals) that reach a namespace, as InForce does.
func (s *Snapshot) Inactive(namespace string, labels map[string]string) []*engine.Exception {
	return s.inactive.reaching(namespace, labels)
}

func (x exceptionSet) reaching(namespace string, labels map[string]string) []*engine.Exception {
	var out []*engine.Exception
	if g, ok := x.byNS.get(namespace); ok && g != nil {
		g.byName.each(func(_ string, e *engine.Exception) { out = append(out, e) })
	}
	if g := x.crossNS; g != nil {
		g.byName.each(func(_ string, e *engine.Exception) {
			if e.ReachesNamespace(namespace, labels) {
				out = append(out, e)
			}
		})
	}
	slices.SortFunc(out, func(a, b *engine.Exception) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}
