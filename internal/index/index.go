// Package index owns the compiled snapshot that every decision reads: the
// SecurityPolicies in force, the PolicyExceptions grouped by namespace and by
// policy, and the namespaces' labels. Readers (the webhook, the background
// scan, podsieve eval) take the current snapshot with one atomic load and
// never lock. Writers apply one changed object at a time and copy only the
// part it touches: the policy list, or one namespace's exceptions.
//
// How exceptions are stored is the index's own business (held.go): most are
// held frozen, a form the garbage collector does not scan, and compiled
// again for the decisions that need them, charged to their budget. What the
// index hands out, to decisions and to every other reader, is compiled
// engine.Exceptions; only Held returns the index's own record, for callers
// that read identities.
//
// The package imports the engine and no controller-runtime, so that the CLI
// builds the same index from files that the controllers build from the API.
package index

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/podsieve/podsieve/internal/engine"
)

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
	// ChangedAll is a change of the whole content (Load).
	ChangedAll ChangeKind = iota
	// ChangedPolicy is a policy set or deleted; Name is the policy.
	ChangedPolicy
	// ChangedException is an exception set, made inactive or deleted;
	// Namespace and Name are the exception's.
	ChangedException
	// ChangedNamespace is a namespace's labels set or forgotten; Name is the
	// namespace.
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
	ix.cur.Store(&Snapshot{clusterNamespace: clusterNamespace, thawed: newThawCache()})
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
	next.byNamespace = newPoliciesByNamespace()
	ix.cur.Store(next)
	c.Old, c.New = old, next
	for _, l := range ix.listeners {
		l(c)
	}
}

// Load replaces the whole content in one step: podsieve eval's input, or a
// rebuild. It builds each part once instead of copying per object. active
// are the exceptions judged Ready; inactive those that are not (expired, or
// refused by the guardrails), kept only to explain refusals, without their
// entries (see SetInactiveException).
func (ix *Index) Load(policies []*engine.Policy, active, inactive []*engine.Exception, namespaces map[string]map[string]string) {
	ix.update(Change{Kind: ChangedAll}, func(old *Snapshot) *Snapshot {
		s := &Snapshot{clusterNamespace: old.clusterNamespace, thawed: old.thawed, policies: make(map[string]*engine.Policy, len(policies))}
		for _, p := range policies {
			s.policies[p.Name] = p
		}
		s.ordered = orderPolicies(s.policies)
		// Keyed by what the compiled exceptions say; held frozen where
		// they can be (held.go), so that the collector need not mark them.
		s.active = newExceptionSet(holdAllInForce(active))
		held := make([]heldAs, len(inactive))
		for i, e := range inactive {
			h := holdInactive(e, s.Policy)
			held[i] = heldAs{h, h.compiled}
		}
		s.inactive = newExceptionSet(held)
		s.namespaces = newPmap(namespaces)
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
		s.active = old.active.without(e.Namespace, e.Name, old.clusterNamespace).with(heldInForce(e))
		s.inactive = old.inactive.without(e.Namespace, e.Name, old.clusterNamespace)
		return &s
	})
}

// SetInactiveException records an exception that is not Ready (expired, or
// refused by the guardrails). It waives nothing; decisions name it where it
// would have applied, with the reason it does not. The index holds it
// without its podSecurity entries (engine.Exception.WithoutEntries, judged
// against the policies in force): they are most of its memory, and
// exceptions that cannot apply must not cost every replica as much as
// those that do.
func (ix *Index) SetInactiveException(e *engine.Exception) {
	ix.update(Change{Kind: ChangedException, Namespace: e.Namespace, Name: e.Name}, func(old *Snapshot) *Snapshot {
		h := holdInactive(e, old.Policy)
		// The same object, judged the same against the same policies.
		if held := old.inactive.get(e.Namespace, e.Name, old.clusterNamespace); sameObject(held, e) && h.compiled.SameJudgement(held.compiled) {
			return old
		}
		s := *old
		s.active = old.active.without(e.Namespace, e.Name, old.clusterNamespace)
		s.inactive = old.inactive.without(e.Namespace, e.Name, old.clusterNamespace).with(heldAs{h, h.compiled})
		return &s
	})
}

// sameObject reports whether held and e were compiled from the same object
// at the same generation (so from the same spec).
func sameObject(held *HeldException, e *engine.Exception) bool {
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

// heldInForce is e as the index holds it in force, with the compiled form
// its keys are read from: a frozen exception's own, compiled again, so that
// the index's keys are substrings of its frozen form and not the API
// object's strings.
func heldInForce(e *engine.Exception) heldAs {
	h := holdInForce(e)
	if h.compiled == nil {
		if c, err := h.compile(); err == nil {
			return heldAs{h, c}
		}
	}
	return heldAs{h, e}
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
