package index

import (
	"cmp"
	"iter"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/podsieve/podsieve/internal/engine"
)

// metadataNameLabel is set by the API server on every namespace; a namespace
// the index has not seen yet still carries it.
const metadataNameLabel = "kubernetes.io/metadata.name"

// Snapshot is an immutable view of everything a decision needs.
type Snapshot struct {
	clusterNamespace string
	policies         map[string]*engine.Policy
	ordered          []*engine.Policy // by name, so decisions list rules in a stable order
	active           exceptionSet     // judged Ready: the only ones that waive anything
	inactive         exceptionSet     // not Ready: named in refusals, never applied
	namespaces       pmap[map[string]string]
	generation       int64
	// thawed is the index's, shared by its snapshots.
	thawed *thawCache
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
	s.namespaces.each(func(ns string, _ map[string]string) { out = append(out, ns) })
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
// namespace's, then the cross-namespace ones, each by namespace and name).
// Exceptions the index holds frozen are compiled for the decision and
// charged to it (held.go).
func (s *Snapshot) CandidatesFor(o *engine.Object) engine.Candidates {
	return s.active.candidatesFor(o, s.thawed)
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
	d := engine.DecideWithin(limits, s.policiesFor(o.Namespace, labels), s.active.candidatesFor(o, s.thawed), o, labels, now, mode)
	if s.inactive.n == 0 {
		return d
	}
	if d.Err != nil {
		// Stopped or cancelled: nothing is left to explain it with.
		return d
	}
	inactive := s.inactive.candidatesFor(o, s.thawed)
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
		// Held compiled (holdInactive): handing them over costs nothing,
		// but what it would cost is charged all the same.
		offered, spent, _ := inactive(res.Rule.Policy.Name, left.MaxSteps)
		if left.MaxSteps -= spent; left.MaxSteps <= 0 {
			break
		}
		refused, steps, ok := engine.RefusalsWithin(left, res.Rule, offered, o, labels, now, mode)
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
		if ps, ok := s.byNamespace.get(namespace); ok {
			return ps
		}
	}
	var out []*engine.Policy
	for _, p := range s.ordered {
		if p.MayMatchNamespace(namespace, labels) {
			out = append(out, p)
		}
	}
	if cacheable {
		s.byNamespace.put(namespace, out, 0)
	}
	return out
}

// maxRememberedNamespaces bounds policiesFor's record per snapshot.
const maxRememberedNamespaces = 20_000

// policiesByNamespace is policiesFor's record.
type policiesByNamespace = boundedMap[string, []*engine.Policy]

func newPoliciesByNamespace() *policiesByNamespace {
	return &policiesByNamespace{maxEntries: maxRememberedNamespaces, maxWeight: math.MaxInt64}
}

// Exception returns the exception in force by namespace and name, compiled,
// or nil.
func (s *Snapshot) Exception(namespace, name string) *engine.Exception {
	if h := s.active.get(namespace, name, s.clusterNamespace); h != nil {
		return s.thawed.thaw(h)
	}
	return nil
}

// Held is the identity of the exception of that namespace and name that the
// index holds, in force or not; nil for one it does not hold (never
// compiled, or left out by the namespace's limit). Reading identities
// compiles nothing, so that a caller that walks every exception of the
// cluster (the status counters) does not compile them all.
func (s *Snapshot) Held(namespace, name string) *HeldException {
	if h := s.active.get(namespace, name, s.clusterNamespace); h != nil {
		return h
	}
	return s.inactive.get(namespace, name, s.clusterNamespace)
}

// HeldInactive is the exception of that namespace and name that the index
// holds but not in force, as it holds it: without its entries
// (engine.Exception.WithoutEntries, see SetInactiveException); nil when it
// holds none.
func (s *Snapshot) HeldInactive(namespace, name string) *engine.Exception {
	if h := s.inactive.get(namespace, name, s.clusterNamespace); h != nil {
		return h.compiled
	}
	return nil
}

// InForce returns the exceptions in force that may apply to objects in a
// namespace with the given labels: its own, and the cluster exceptions
// namespace's cross-namespace ones that reach it
// (engine.Exception.ReachesNamespace), sorted by namespace and name. They
// are what the API server's form of the policies reads as the namespace's
// parameters (internal/admissionpolicy).
func (s *Snapshot) InForce(namespace string, labels map[string]string) []*engine.Exception {
	return s.active.reaching(namespace, labels, s.thawed)
}

// InForceIn returns the exceptions in force that a namespace holds itself,
// sorted by name: not the cluster exceptions namespace's that reach it
// (InForce has those too). A refusal names those that come close
// (engine.Decision.NoteUnreached) from these, and looks at no more than
// the first engine.MaxUnreachedExamined: only those are handed over, each
// compiled when the refusal comes to it and yielded with what that costs
// (thawSteps, charged whether or not it was remembered, as a decision is
// charged), so that a refusal's work does not grow with the namespace, nor
// with the exceptions it does not look at, and stays within its budget.
func (s *Snapshot) InForceIn(namespace string) iter.Seq2[*engine.Exception, int64] {
	var held []*HeldException
	if g, ok := s.active.byNS.get(namespace); ok && g != nil {
		g.byName.each(func(_ string, h *HeldException) { held = append(held, h) })
	}
	slices.SortFunc(held, func(a, b *HeldException) int { return cmp.Compare(a.Name, b.Name) })
	held = held[:min(len(held), engine.MaxUnreachedExamined)]
	return func(yield func(*engine.Exception, int64) bool) {
		var cost int64
		for _, h := range held {
			// Each is charged what handing it over costs (thawSteps, as a
			// decision is charged); one that cannot be compiled is not
			// handed over, and its cost goes with the next.
			cost += thawSteps(h)
			if e := s.thawed.thaw(h); e != nil {
				if !yield(e, cost) {
					return
				}
				cost = 0
			}
		}
	}
}

// Inactive returns the exceptions held but not in force (to name them in
// refusals) that reach a namespace, as InForce does.
func (s *Snapshot) Inactive(namespace string, labels map[string]string) []*engine.Exception {
	return s.inactive.reaching(namespace, labels, s.thawed)
}
