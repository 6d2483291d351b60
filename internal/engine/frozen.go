package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Frozen exceptions. An index of 100,000 compiled exceptions is about a
// million small objects and several million pointers, which the garbage
// collector marks on every cycle, and a busy webhook runs a cycle every few
// thousand reviews: marking them was the largest cost podsieve added to a
// review in the load test (docs/performance.md). An index therefore holds
// most exceptions frozen: a shell that keeps the exception's identity and,
// in one string the collector does not look into, what CompileException
// read from the API object. Thaw compiles the exception again from it, by
// the same CompileException, so a thawed exception is the compiled one.
//
// A shell waives nothing: it targets no rule, so that one reaching
// selectExceptions without being thawed fails closed. Decisions thaw the
// exceptions they are offered (DecideWithin, within its budget;
// SelectExceptions and Rule.Evaluate, which have none) and charge each thaw
// to the budget whether or not it was remembered, so that a decision stops
// at the same point whatever was remembered. Thawed exceptions are
// remembered, up to a bound, by namespace (thawed).

// MaxFrozenBytes bounds the exceptions Freeze freezes: a larger one stays
// compiled, so that no decision thaws an exception larger than this. Real
// exceptions are a few hundred bytes frozen; the largest the schema admits
// is about 30 KiB. A thaw costs in proportion to the frozen bytes and the
// strings among them (thawSteps); exceptions with label selectors stay
// compiled, since compiling a selector costs up to 17 times more per byte
// than the rest (BenchmarkThaw has no selector shape to charge it by).
const MaxFrozenBytes = 4096

// thawStepsPerString is what thawing costs per string in a list, besides
// its bytes: a glob compiled and appended (BenchmarkThaw/tiny-values and
// tiny-rules).
const thawStepsPerString = 100

// frozenVersion is the first byte of a frozen exception.
const frozenVersion = 1

// Freeze returns the exception's frozen shell, or e itself when it cannot be
// frozen: it is a shell already, it was not made by CompileException (Slim),
// or its frozen form is larger than MaxFrozenBytes. The shell's strings are
// substrings of the frozen form, so that it holds one object besides itself.
func (e *Exception) Freeze() *Exception {
	if e.frozen || e.src == "" || len(e.src) > MaxFrozenBytes || e.match != nil && (e.match.selector != nil || e.match.nsSelector != nil) {
		return e
	}
	r := frozenReader{s: e.src}
	_ = r.byte()
	_ = r.str() // the cluster exceptions namespace
	ns, name, uid := r.str(), r.str(), r.str()
	if r.err != nil || ns != e.Namespace || name != e.Name {
		return e
	}
	if uid != e.UID {
		uid = e.UID // set after compiling (tests)
	}
	return &Exception{
		Namespace:  ns,
		Name:       name,
		UID:        uid,
		Generation: e.Generation,
		Source:     ExceptionSource(ns, name),
		Background: e.Background,
		crossNS:    e.crossNS,
		src:        e.src,
		frozen:     true,
		strings:    int32(e.countStrings()),
	}
}

// countStrings is the number of strings the exception was compiled from,
// in lists, with each podSecurity entry counted as eight more (it is checked
// and compiled apart, with its field list: BenchmarkThaw/entries): what a
// thaw costs besides its bytes.
func (e *Exception) countStrings() int {
	n := len(e.targets)
	for _, t := range e.targets {
		n += len(t.rules)
	}
	if m := e.match; m != nil {
		n += len(m.names) + len(m.kinds) + len(m.namespaces)
	}
	for i := range e.Exclusions {
		x := &e.Exclusions[i]
		n += 8 + len(x.images) + len(x.names) + len(x.values) + len(x.kinds)
	}
	return n
}

// Frozen reports whether e is a shell that Thaw compiles.
func (e *Exception) Frozen() bool { return e.frozen }

// Thaw returns the compiled exception of a shell, e itself for an exception
// that is not frozen. It cannot fail for a shell that Freeze made; should it
// fail all the same, it returns an exception with the shell's identity that
// targets no rule and so waives nothing.
func (e *Exception) Thaw() *Exception {
	if !e.frozen {
		return e
	}
	if t := thawed.get(e); t != nil {
		return t
	}
	t := e.thawOnce()
	if t != e {
		thawed.put(e, t)
	}
	return t
}

// thawOnce is Thaw without remembering: for an index that reads each
// exception once while it builds, which would only push out the exceptions
// decisions use.
func (e *Exception) thawOnce() *Exception {
	if !e.frozen {
		return e
	}
	if t := thawed.get(e); t != nil {
		return t
	}
	t, err := thawException(e.src)
	if err != nil {
		dead := *e
		dead.frozen, dead.exceptionBody = false, &exceptionBody{}
		return &dead
	}
	return t
}

// thawed remembers thawed exceptions by shell, for decisions that follow:
// a cluster's reviews use few of its exceptions. Each namespace's go to one
// of thawShards shards, and the cross-namespace exceptions of the cluster
// exceptions namespace, which every namespace may use, to a shard of their
// own. A shard holds at most maxThawed/thawShards exceptions, of at most
// maxThawedBytes/thawShards of frozen forms in all (a compiled exception is
// up to about twenty times its frozen form), four times that for the
// cross-namespace one, and is dropped whole when full: a namespace whose
// decisions thaw many exceptions pushes out those of the namespaces that
// share its shard, not all of them.
var thawed thawCache

const (
	thawShards     = 16
	maxThawed      = 2048
	maxThawedBytes = 512 << 10
)

type thawCache struct {
	shards [thawShards + 1]thawShard // the last for cross-namespace exceptions
}

type thawShard struct {
	m     atomic.Pointer[sync.Map] // *Exception (shell) → *Exception
	n     atomic.Int64
	bytes atomic.Int64
}

var thawSeed = maphash.MakeSeed()

func (c *thawCache) shard(shell *Exception) (sh *thawShard, scale int64) {
	if shell.crossNS {
		return &c.shards[thawShards], 4
	}
	return &c.shards[maphash.String(thawSeed, shell.Namespace)%thawShards], 1
}

func (c *thawCache) get(shell *Exception) *Exception {
	sh, _ := c.shard(shell)
	m := sh.m.Load()
	if m == nil {
		return nil
	}
	if t, ok := m.Load(shell); ok {
		return t.(*Exception)
	}
	return nil
}

func (c *thawCache) put(shell, t *Exception) {
	sh, scale := c.shard(shell)
	m := sh.m.Load()
	if m == nil || sh.n.Add(1) > scale*maxThawed/thawShards || sh.bytes.Add(int64(len(shell.src))) > scale*maxThawedBytes/thawShards {
		m = &sync.Map{}
		sh.m.Store(m)
		sh.n.Store(1)
		sh.bytes.Store(int64(len(shell.src)))
	}
	m.Store(shell, t)
}

// thawSteps is what thawing a shell costs a decision's budget, charged
// whether the thawed exception was remembered or not: at least a
// nanosecond of one core per step for any shape of exception
// (BenchmarkThaw), by its frozen bytes and the strings in its lists.
func thawSteps(e *Exception) int64 {
	return 1000 + 6*int64(len(e.src)) + thawStepsPerString*int64(e.strings)
}

// thawAll returns candidates with every shell thawed, within the budget: it
// copies the list only when it holds a shell. When the budget runs out, the
// rest stay shells, which waive nothing, and st.stopped says why.
func thawAll(candidates []*Exception, st *decideState) []*Exception {
	i := slices.IndexFunc(candidates, (*Exception).Frozen)
	if i < 0 {
		return candidates
	}
	out := slices.Clone(candidates)
	for ; i < len(out); i++ {
		if !out[i].frozen {
			continue
		}
		if st != nil && !st.spend(thawSteps(out[i])) {
			break
		}
		out[i] = out[i].Thaw()
	}
	return out
}

// freezeException is the frozen form of what CompileException reads from
// pe, with the cluster exceptions namespace it was compiled with.
func freezeException(pe *policyv1alpha1.PolicyException, clusterNamespace string) string {
	w := frozenWriter{b: make([]byte, 0, 256)}
	w.b = append(w.b, frozenVersion)
	w.str(clusterNamespace)
	w.str(pe.Namespace)
	w.str(pe.Name)
	w.str(string(pe.UID))
	w.varint(pe.Generation)
	w.time(&pe.CreationTimestamp)
	s := &pe.Spec
	w.count(s.Exceptions == nil, len(s.Exceptions))
	for _, t := range s.Exceptions {
		w.str(t.PolicyName)
		strs(&w, t.RuleNames)
	}
	w.present(s.Match != nil)
	if m := s.Match; m != nil {
		strs(&w, m.Names)
		w.selector(m.Selector)
		strs(&w, m.Kinds)
		strs(&w, m.Namespaces)
		w.selector(m.NamespaceSelector)
	}
	w.count(s.PodSecurity == nil, len(s.PodSecurity))
	for _, x := range s.PodSecurity {
		w.str(string(x.ControlName))
		strs(&w, x.Images)
		strs(&w, x.ContainerNames)
		strs(&w, x.ContainerKinds)
		w.str(x.RestrictedField)
		strs(&w, x.Values)
	}
	w.str(s.Justification)
	w.present(s.ExpiresAt != nil)
	if s.ExpiresAt != nil {
		w.time(s.ExpiresAt)
	}
	switch {
	case s.Background == nil:
		w.b = append(w.b, 0)
	case *s.Background:
		w.b = append(w.b, 2)
	default:
		w.b = append(w.b, 1)
	}
	return string(w.b)
}

// unfreezeException reads what freezeException wrote: the API object, whose
// strings are substrings of src, and the cluster exceptions namespace.
func unfreezeException(src string) (*policyv1alpha1.PolicyException, string, error) {
	r := frozenReader{s: src}
	if r.byte() != frozenVersion {
		return nil, "", fmt.Errorf("frozen exception: unknown version")
	}
	clusterNamespace := r.str()
	pe := &policyv1alpha1.PolicyException{}
	pe.Namespace = r.str()
	pe.Name = r.str()
	pe.UID = types.UID(r.str())
	pe.Generation = r.varint()
	pe.CreationTimestamp = r.time()
	s := &pe.Spec
	if n, ok := r.count(); ok {
		s.Exceptions = make([]policyv1alpha1.ExceptionTarget, n)
		for i := range s.Exceptions {
			s.Exceptions[i].PolicyName = r.str()
			s.Exceptions[i].RuleNames = readStrs[string](&r)
		}
	}
	if r.present() {
		m := &policyv1alpha1.ExceptionMatch{}
		m.Names = readStrs[string](&r)
		m.Selector = r.selector()
		m.Kinds = readStrs[policyv1alpha1.PodBearingKind](&r)
		m.Namespaces = readStrs[string](&r)
		m.NamespaceSelector = r.selector()
		s.Match = m
	}
	if n, ok := r.count(); ok {
		s.PodSecurity = make([]policyv1alpha1.PodSecurityExclusion, n)
		for i := range s.PodSecurity {
			x := &s.PodSecurity[i]
			x.ControlName = policyv1alpha1.ControlName(r.str())
			x.Images = readStrs[string](&r)
			x.ContainerNames = readStrs[string](&r)
			x.ContainerKinds = readStrs[policyv1alpha1.ContainerKind](&r)
			x.RestrictedField = r.str()
			x.Values = readStrs[string](&r)
		}
	}
	s.Justification = r.str()
	if r.present() {
		t := r.time()
		s.ExpiresAt = &t
	}
	switch r.byte() {
	case 0:
	case 1:
		s.Background = new(bool)
	case 2:
		yes := true
		s.Background = &yes
	default:
		r.fail(errors.New("background: not 0, 1 or 2"))
	}
	if r.err == nil && r.i != len(r.s) {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return nil, "", fmt.Errorf("frozen exception: %w", r.err)
	}
	return pe, clusterNamespace, nil
}

// thawException compiles a frozen exception again.
func thawException(src string) (*Exception, error) {
	pe, clusterNamespace, err := unfreezeException(src)
	if err != nil {
		return nil, err
	}
	return compileException(pe, clusterNamespace, src, nil)
}

type frozenWriter struct{ b []byte }

func (w *frozenWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *frozenWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }

func (w *frozenWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// count writes a list's length, telling nil (0) from empty (1).
func (w *frozenWriter) count(isNil bool, n int) {
	if isNil {
		w.uvarint(0)
		return
	}
	w.uvarint(uint64(n) + 1)
}

func (w *frozenWriter) present(ok bool) {
	if ok {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// time writes an instant: a zero time stays zero.
func (w *frozenWriter) time(t *metav1.Time) {
	w.present(!t.IsZero())
	if !t.IsZero() {
		w.varint(t.Unix())
		w.uvarint(uint64(t.Nanosecond()))
	}
}

func (w *frozenWriter) selector(s *metav1.LabelSelector) {
	w.present(s != nil)
	if s == nil {
		return
	}
	w.count(s.MatchLabels == nil, len(s.MatchLabels))
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		w.str(k)
		w.str(s.MatchLabels[k])
	}
	w.count(s.MatchExpressions == nil, len(s.MatchExpressions))
	for _, e := range s.MatchExpressions {
		w.str(e.Key)
		w.str(string(e.Operator))
		strs(w, e.Values)
	}
}

func strs[T ~string](w *frozenWriter, ss []T) {
	w.count(ss == nil, len(ss))
	for _, s := range ss {
		w.str(string(s))
	}
}

type frozenReader struct {
	s   string
	i   int
	err error
}

var errTruncated = errors.New("truncated")

func (r *frozenReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.i = len(r.s)
}

func (r *frozenReader) byte() byte {
	if r.i >= len(r.s) {
		r.fail(errTruncated)
		return 0
	}
	b := r.s[r.i]
	r.i++
	return b
}

func (r *frozenReader) uvarint() uint64 {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b := r.byte()
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v
		}
	}
	r.fail(errors.New("varint overflows"))
	return 0
}

func (r *frozenReader) varint() int64 {
	u := r.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (r *frozenReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.s)-r.i) {
		r.fail(errTruncated)
		return ""
	}
	s := r.s[r.i : r.i+int(n)]
	r.i += int(n)
	return s
}

// count reads a list's length; ok is false for nil. A length longer than
// the bytes left is refused before anything is allocated.
func (r *frozenReader) count() (int, bool) {
	n := r.uvarint()
	if n == 0 {
		return 0, false
	}
	if n-1 > uint64(len(r.s)-r.i) {
		r.fail(errTruncated)
		return 0, false
	}
	return int(n - 1), true
}

func (r *frozenReader) present() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail(errors.New("a presence byte not 0 or 1"))
	return false
}

func (r *frozenReader) time() metav1.Time {
	if !r.present() {
		return metav1.Time{}
	}
	sec := r.varint()
	nsec := r.uvarint()
	return metav1.NewTime(time.Unix(sec, int64(nsec)))
}

func (r *frozenReader) selector() *metav1.LabelSelector {
	if !r.present() {
		return nil
	}
	s := &metav1.LabelSelector{}
	if n, ok := r.count(); ok {
		s.MatchLabels = make(map[string]string, n)
		for range n {
			k := r.str()
			s.MatchLabels[k] = r.str()
		}
	}
	if n, ok := r.count(); ok {
		s.MatchExpressions = make([]metav1.LabelSelectorRequirement, n)
		for i := range s.MatchExpressions {
			e := &s.MatchExpressions[i]
			e.Key = r.str()
			e.Operator = metav1.LabelSelectorOperator(r.str())
			e.Values = readStrs[string](r)
		}
	}
	return s
}

func readStrs[T ~string](r *frozenReader) []T {
	n, ok := r.count()
	if !ok {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = T(r.str())
	}
	return out
}
