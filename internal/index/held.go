package index

import (
	"hash/maphash"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// Frozen exceptions. An index of 100,000 compiled exceptions is about a
// million small objects and several million pointers, which the garbage
// collector marks on every cycle, and a busy webhook runs a cycle every few
// thousand reviews: marking them was the largest cost podsieve added to a
// review in the load test (docs/performance.md). The index therefore holds
// most exceptions in force frozen: their identity and, in one string the
// collector does not look into, what engine.CompileException read from the
// API object (frozen.go). A decision is handed them compiled again
// (thawed), by the same CompileException, so that the engine only ever sees
// compiled exceptions; each thaw is charged to the decision's budget
// (engine.Candidates), whether or not it was remembered, so that a decision
// stops at the same point whatever was remembered. Thawed exceptions are
// remembered, up to a bound, by namespace (thawCache).
//
// An exception that cannot be thawed (the frozen form is the index's own,
// so this does not happen) is not handed over: it waives nothing.

// MaxFrozenBytes bounds the exceptions the index freezes: a larger one stays
// compiled, so that no decision thaws an exception larger than this. Real
// exceptions are a few hundred bytes frozen; the largest the schema admits
// is about 30 KiB. A thaw costs in proportion to the frozen bytes and the
// strings among them (thawSteps); exceptions with label selectors stay
// compiled, since compiling a selector costs up to 17 times more per byte
// than the rest (BenchmarkThaw has no selector shape to charge it by), and
// engine.Exception.APIObject cannot give them back.
const MaxFrozenBytes = 4096

// thawStepsPerString is what thawing costs per string in a list, besides
// its bytes: a glob compiled and appended (BenchmarkThaw/tiny-values and
// tiny-rules).
const thawStepsPerString = 100

// HeldException is an exception as the index holds it: its identity, and
// either the compiled exception or its frozen form. Only the identity is
// read without compiling; Snapshot.Exception and the lists of a snapshot
// hand over compiled exceptions.
type HeldException struct {
	Namespace, Name string
	// UID and Generation are engine.Exception's.
	UID        string
	Generation int64
	Background bool
	crossNS    bool
	// strings is, when frozen, the number of strings in its lists
	// (thawSteps).
	strings int32
	// frozen is the frozen form (frozen.go), or "" when compiled is set.
	frozen   string
	compiled *engine.Exception
}

// Source is exception/<namespace>/<name>.
func (h *HeldException) Source() engine.Source { return engine.ExceptionSource(h.Namespace, h.Name) }

// holdCompiled holds e as it is.
func holdCompiled(e *engine.Exception) *HeldException {
	return &HeldException{Namespace: e.Namespace, Name: e.Name, UID: e.UID, Generation: e.Generation,
		Background: e.Background, crossNS: e.CrossNamespace(), compiled: e}
}

// holdInForce holds an exception in force: frozen when it can be
// (MaxFrozenBytes), compiled otherwise. The identity's strings are
// substrings of the frozen form, so that a frozen exception is two
// objects.
func holdInForce(e *engine.Exception) *HeldException {
	f, ok := freezeForHold(e)
	if !ok {
		return holdCompiled(e)
	}
	return f.held(e)
}

// holdAllInForce is holdInForce for many exceptions at once (Load). The
// frozen forms are made first and the records after, in one run: the
// collector scans a span of records densely packed much faster than one
// whose records are scattered among the garbage freezing leaves.
func holdAllInForce(excs []*engine.Exception) []heldAs {
	frozen := make([]frozenHold, len(excs))
	ok := make([]bool, len(excs))
	for i, e := range excs {
		frozen[i], ok[i] = freezeForHold(e)
	}
	out := make([]heldAs, len(excs))
	for i, e := range excs {
		if ok[i] {
			out[i] = heldAs{frozen[i].held(e), e}
		} else {
			out[i] = heldAs{holdCompiled(e), e}
		}
	}
	return out
}

// frozenHold is an exception's frozen form and what its record reads from
// it.
type frozenHold struct {
	frozen, namespace, name, uid string
	strings                      int32
}

// freezeForHold freezes e; ok is false when it stays compiled (it cannot
// say what it was compiled from, or its frozen form is too large).
func freezeForHold(e *engine.Exception) (f frozenHold, ok bool) {
	pe, clusterNamespace, ok := e.APIObject()
	if !ok {
		return f, false
	}
	f.frozen = freezeException(pe, clusterNamespace)
	if len(f.frozen) > MaxFrozenBytes {
		return f, false
	}
	r := frozenReader{s: f.frozen}
	_ = r.byte()
	_ = r.str() // the cluster exceptions namespace
	f.namespace, f.name, f.uid = r.str(), r.str(), r.str()
	f.strings = int32(countStrings(pe))
	return f, r.err == nil
}

func (f *frozenHold) held(e *engine.Exception) *HeldException {
	return &HeldException{Namespace: f.namespace, Name: f.name, UID: f.uid, Generation: e.Generation,
		Background: e.Background, crossNS: e.CrossNamespace(), frozen: f.frozen, strings: f.strings}
}

// holdInactive holds an exception that is not in force without its
// entries (engine.Exception.WithoutEntries), judged against the policies
// in force.
func holdInactive(e *engine.Exception, policy func(string) *engine.Policy) *HeldException {
	return holdCompiled(e.WithoutEntries(policy))
}

// countStrings is the number of strings in the exception's lists, with
// each podSecurity entry counted as eight more (it is checked and compiled
// apart, with its field list: BenchmarkThaw/entries): what a thaw costs
// besides its bytes.
func countStrings(pe *policyv1alpha1.PolicyException) int {
	s := &pe.Spec
	n := len(s.Exceptions)
	for _, t := range s.Exceptions {
		n += len(t.RuleNames)
	}
	if m := s.Match; m != nil {
		n += len(m.Names) + len(m.Kinds) + len(m.Namespaces)
	}
	for _, x := range s.PodSecurity {
		n += 8 + len(x.Images) + len(x.ContainerNames) + len(x.Values) + len(x.ContainerKinds)
	}
	return n
}

// thawSteps is what compiling a held exception costs a decision's budget:
// at least a nanosecond of one core per step for any shape of exception
// (BenchmarkThaw), by its frozen bytes and the strings in its lists.
// Handing over a compiled one costs nothing.
func thawSteps(h *HeldException) int64 {
	if h.compiled != nil {
		return 0
	}
	return 1000 + 6*int64(len(h.frozen)) + thawStepsPerString*int64(h.strings)
}

// compile returns the compiled exception, compiling the frozen form again
// without remembering it: for writers, which read each exception once.
func (h *HeldException) compile() (*engine.Exception, error) {
	if h.compiled != nil {
		return h.compiled, nil
	}
	pe, clusterNamespace, err := unfreezeException(h.frozen)
	if err != nil {
		return nil, err
	}
	return engine.CompileException(pe, clusterNamespace)
}

// thawCache remembers thawed exceptions by held exception, for decisions
// that follow: a cluster's reviews use few of its exceptions. Each
// namespace's go to one of thawShards shards, and the cross-namespace
// exceptions of the cluster exceptions namespace, which every namespace may
// use, to a shard of their own. A shard holds at most maxThawed/thawShards
// exceptions, of at most maxThawedBytes/thawShards of frozen forms in all
// (a compiled exception is up to about twenty times its frozen form), four
// times that for the cross-namespace one, and is dropped whole when full: a
// namespace whose decisions thaw many exceptions pushes out those of the
// namespaces that share its shard, not all of them. One cache serves every
// snapshot of an index: a held exception is never modified.
type thawCache struct {
	shards [thawShards + 1]boundedMap[*HeldException, *engine.Exception] // the last for cross-namespace exceptions
	seed   maphash.Seed
}

const (
	thawShards     = 16
	maxThawed      = 2048
	maxThawedBytes = 512 << 10
)

func newThawCache() *thawCache {
	c := &thawCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		scale := int64(1)
		if i == thawShards {
			scale = 4
		}
		c.shards[i].maxEntries, c.shards[i].maxWeight = scale*maxThawed/thawShards, scale*maxThawedBytes/thawShards
	}
	return c
}

func (c *thawCache) shard(h *HeldException) *boundedMap[*HeldException, *engine.Exception] {
	if h.crossNS {
		return &c.shards[thawShards]
	}
	return &c.shards[maphash.String(c.seed, h.Namespace)%thawShards]
}

// thaw returns the compiled exception, remembered or compiled and
// remembered; nil when it cannot be compiled.
func (c *thawCache) thaw(h *HeldException) *engine.Exception {
	if h.compiled != nil {
		return h.compiled
	}
	sh := c.shard(h)
	if e, ok := sh.get(h); ok {
		return e
	}
	e, err := h.compile()
	if err != nil {
		return nil
	}
	sh.put(h, e, int64(len(h.frozen)))
	return e
}

// handOver is held compiled for a decision that has left steps of its
// budget, what that cost (thawSteps), and how many it was to hand over
// (engine.Candidates), all of held. It stops at the first exception it
// cannot pay for, with spent past left, so that the decision stops and
// fails closed; one that cannot be compiled is left out and waives
// nothing.
func (c *thawCache) handOver(held []*HeldException, left int64) (out []*engine.Exception, spent int64, considered int) {
	if len(held) == 0 {
		return nil, 0, 0
	}
	out = make([]*engine.Exception, 0, len(held))
	for _, h := range held {
		if spent += thawSteps(h); spent > left {
			return out, spent, len(held)
		}
		if e := c.thaw(h); e != nil {
			out = append(out, e)
		}
	}
	return out, spent, len(held)
}

// thawAll is every exception of held compiled, without a budget: for the
// callers that read a namespace's exceptions outside a decision.
func (c *thawCache) thawAll(held []*HeldException) []*engine.Exception {
	out := make([]*engine.Exception, 0, len(held))
	for _, h := range held {
		if e := c.thaw(h); e != nil {
			out = append(out, e)
		}
	}
	return out
}
