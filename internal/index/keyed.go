package index

import (
	"maps"
	"slices"
	"strings"

	"github.com/podsieve/podsieve/internal/engine"
)

// keyed is the exceptions of one namespace group that target one policy,
// indexed by what their spec.match pins (engine.Exception.MatchKeys), so
// that a lookup for an object reads only the exceptions that may match it:
// a namespace editor who creates thousands of exceptions slows down only
// the objects those exceptions name. A nil keyed is empty; a keyed is never
// modified once published.
type keyed struct {
	exact  pmap[[]*engine.Exception] // by a literal match.names entry
	prefix pmap[[]*engine.Exception] // by a name glob's literal prefix
	// lens are the lengths of the keys of prefix, ascending, each with the
	// number of keys of that length: a lookup tries the object name's
	// prefixes of these lengths only (at most 253 of them, the longest name).
	lens []prefixLen
	// byKind holds the exceptions that pin no name but match.kinds.
	byKind map[string][]*engine.Exception
	// rest pin neither: every object of the namespace is offered them. A
	// keyed of few exceptions is not indexed: rest holds them all.
	rest    []*engine.Exception
	indexed bool
	n       int
	// gates hold, for a keyed that is not indexed, what each exception of
	// rest pins (flatGates), in the keyed itself.
	gates []gate
}

type prefixLen struct{ len, keys int }

// keyedFlat is how many exceptions a keyed holds in one list before it
// indexes them: offering a few more candidates costs less than the maps,
// which would cost about 1 KiB per policy an exception names (an exception
// may name 8) in every namespace. It un-indexes below half as many.
var keyedFlat = 16

// Every list in a keyed is ordered by namespace and name and holds an
// exception once; an exception is in as many lists as it has keys.

func newKeyed(excs []*engine.Exception) *keyed {
	if len(excs) == 0 {
		return nil
	}
	k := &keyed{n: len(excs)}
	if len(excs) <= keyedFlat {
		k.rest = slices.SortedFunc(slices.Values(excs), compareExceptions)
		k.gates = flatGates(k.rest)
		return k
	}
	k.indexed = true
	exact, prefix := map[string][]*engine.Exception{}, map[string][]*engine.Exception{}
	for _, e := range excs {
		names, prefixes, kinds, pinned := e.MatchKeys()
		switch {
		case pinned:
			for _, n := range names {
				exact[n] = append(exact[n], e)
			}
			for _, p := range prefixes {
				prefix[p] = append(prefix[p], e)
			}
		case len(kinds) > 0:
			if k.byKind == nil {
				k.byKind = map[string][]*engine.Exception{}
			}
			for _, kind := range kinds {
				k.byKind[kind] = append(k.byKind[kind], e)
			}
		default:
			k.rest = append(k.rest, e)
		}
	}
	for _, m := range []map[string][]*engine.Exception{exact, prefix, k.byKind} {
		for key, l := range m {
			slices.SortFunc(l, compareExceptions)
			m[key] = slices.Clip(l)
		}
	}
	slices.SortFunc(k.rest, compareExceptions)
	k.rest = slices.Clip(k.rest)
	for p := range prefix {
		k.lens = addLen(k.lens, len(p))
	}
	k.exact, k.prefix = newPmap(exact), newPmap(prefix)
	return k
}

// freeze applies f to every list of a keyed just built.
func (k *keyed) freeze(f func(*engine.Exception) *engine.Exception) {
	if k == nil {
		return
	}
	each := func(l []*engine.Exception) {
		for i := range l {
			l[i] = f(l[i])
		}
	}
	each(k.rest)
	k.exact.each(func(_ string, l []*engine.Exception) { each(l) })
	k.prefix.each(func(_ string, l []*engine.Exception) { each(l) })
	for _, l := range k.byKind {
		each(l)
	}
}

// lookup returns the exceptions that may match an object of this name and
// kind, in order, each once. It copies nothing when one list holds them all.
func (k *keyed) lookup(name, kind string) []*engine.Exception {
	if k == nil {
		return nil
	}
	if !k.indexed {
		return k.flatLookup(name, kind)
	}
	var buf [4][]*engine.Exception
	hits := buf[:0]
	if l, _ := k.exact.get(name); len(l) > 0 {
		hits = append(hits, l)
	}
	for _, pl := range k.lens {
		if pl.len > len(name) {
			break
		}
		if l, _ := k.prefix.get(name[:pl.len]); len(l) > 0 {
			hits = append(hits, l)
		}
	}
	if l := k.byKind[kind]; len(l) > 0 {
		hits = append(hits, l)
	}
	if len(k.rest) > 0 {
		hits = append(hits, k.rest)
	}
	return merge(hits)
}

// gate is one key of an exception of a flat keyed (not indexed), held in
// the keyed itself: a lookup passes over an exception none of whose gates
// admits the object without loading it. An exception is cold memory among
// thousands, and reading a namespace's dozen to find the one that matches
// costs a cache miss or more each. A gate errs towards admitting (only its
// first bytes are compared); SelectExceptions decides.
type gate struct {
	// lit is the first bytes of a name the exception's match.names pins
	// exactly (exact) or of a glob's literal prefix; n is its whole length.
	lit   [gateBytes]byte
	n     uint16
	exact bool
	open  bool // pins no name: kinds says which kinds it admits
	kinds uint16
	// i is the exception's place in rest.
	i int32
}

const gateBytes = 20

// maxGates bounds the gates of one exception in one list (32 bytes each;
// an exception may pin 16 names, in each of the 8 policies it names): most
// pin one or two.
const maxGates = 4

// allKinds admits every kind, including kinds podsieve does not evaluate.
const allKinds = ^uint16(0)

// flatGates are the gates of rest: one per name or prefix a pinned
// exception keys on (engine.Exception.MatchKeys), else one open gate that
// admits the kinds match.kinds names (every kind without it).
func flatGates(rest []*engine.Exception) []gate {
	var gates []gate
	for i, e := range rest {
		gates = appendGates(gates, e, i)
	}
	return gates
}

// appendGates appends the gates of e, the i-th exception of rest.
func appendGates(gates []gate, e *engine.Exception, i int) []gate {
	names, prefixes, kinds, pinned := e.MatchKeys()
	if pinned && len(names)+len(prefixes) > maxGates {
		// Many keys: one open gate, and Matches judges the name.
		pinned, kinds = false, nil
	}
	if !pinned {
		g := gate{open: true, kinds: allKinds, i: int32(i)}
		if len(kinds) > 0 {
			g.kinds = 0
			for _, k := range kinds {
				g.kinds |= kindBit(k)
			}
		}
		return append(gates, g)
	}
	for _, lit := range names {
		gates = append(gates, litGate(lit, true, i))
	}
	for _, lit := range prefixes {
		gates = append(gates, litGate(lit, false, i))
	}
	return gates
}

// gatesWith are gates (of rest) with e's inserted as the i-th exception of
// rest: the other exceptions' gates are kept, not read again from them
// (a frozen exception is thawed to be read).
func gatesWith(gates []gate, e *engine.Exception, i int) []gate {
	at := len(gates)
	for j := range gates {
		if int(gates[j].i) >= i {
			at = j
			break
		}
	}
	out := make([]gate, 0, len(gates)+1)
	out = append(out, gates[:at]...)
	out = appendGates(out, e, i)
	for _, g := range gates[at:] {
		g.i++
		out = append(out, g)
	}
	return out
}

// gatesWithout are gates (of rest) without those of the i-th exception of
// rest, which leaves it.
func gatesWithout(gates []gate, i int) []gate {
	out := make([]gate, 0, len(gates))
	for _, g := range gates {
		switch {
		case int(g.i) == i:
			continue
		case int(g.i) > i:
			g.i--
		}
		out = append(out, g)
	}
	return out
}

func litGate(lit string, exact bool, i int) gate {
	if len(lit) >= 1<<16 {
		return gate{open: true, kinds: allKinds, i: int32(i)} // longer than any name
	}
	g := gate{n: uint16(len(lit)), exact: exact, i: int32(i)}
	copy(g.lit[:], lit)
	return g
}

// kindBit is a kind's bit in gate.kinds: one per pod-bearing kind, and the
// rest for any other.
func kindBit(kind string) uint16 {
	for i, k := range engine.PodBearingKinds {
		if string(k.Kind) == kind {
			return 1 << i
		}
	}
	return 1 << 15
}

// admits reports whether the gate lets an object of this name and kind
// (kindBit) by.
func (g *gate) admits(name string, kind uint16) bool {
	if g.open {
		return g.kinds&kind != 0
	}
	n := int(g.n)
	if n > len(name) || g.exact && n != len(name) {
		return false
	}
	m := min(n, gateBytes)
	return string(g.lit[:m]) == name[:m]
}

// flatLookup is lookup for a keyed that is not indexed: the exceptions of
// rest that a gate admits, in order. It copies nothing when they are one
// run of rest (none, one, or all of them, most often).
func (k *keyed) flatLookup(name, kind string) []*engine.Exception {
	var out []*engine.Exception
	first, last, contiguous := -1, -1, true
	kb := kindBit(kind)
	for j := range k.gates {
		g := &k.gates[j]
		i := int(g.i)
		if i == last || !g.admits(name, kb) {
			continue
		}
		if first < 0 {
			first = i
		} else if i != last+1 {
			if contiguous {
				out = append(make([]*engine.Exception, 0, len(k.rest)), k.rest[first:last+1]...)
				contiguous = false
			}
		}
		if !contiguous {
			out = append(out, k.rest[i])
		}
		last = i
	}
	switch {
	case first < 0:
		return nil
	case contiguous:
		return slices.Clip(k.rest[first : last+1])
	}
	return out
}

// all returns every exception of k, in order, for un-indexing a keyed that
// shrank.
func (k *keyed) all() []*engine.Exception {
	if !k.indexed {
		return k.rest
	}
	var lists [][]*engine.Exception
	k.exact.each(func(_ string, l []*engine.Exception) { lists = append(lists, l) })
	k.prefix.each(func(_ string, l []*engine.Exception) { lists = append(lists, l) })
	for _, l := range k.byKind {
		lists = append(lists, l)
	}
	if len(k.rest) > 0 {
		lists = append(lists, k.rest)
	}
	return merge(lists)
}

// merge is the union of ordered lists, ordered, without duplicates.
func merge(lists [][]*engine.Exception) []*engine.Exception {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]*engine.Exception, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortFunc(out, compareExceptions)
	// Equal names in one group are the same exception.
	return slices.CompactFunc(out, func(a, b *engine.Exception) bool { return a == b })
}

// with returns a copy of k holding e, which it must not hold. Only the
// lists e is keyed by are copied, and one shard of each persistent map.
func (k *keyed) with(e *engine.Exception) *keyed {
	next := &keyed{}
	if k != nil {
		*next = *k
	}
	next.n++
	if !next.indexed {
		if next.n <= keyedFlat {
			i, _ := slices.BinarySearchFunc(next.rest, e, compareExceptions)
			next.rest = insertSorted(next.rest, e)
			next.gates = gatesWith(next.gates, e, i)
			return next
		}
		return newKeyed(append(slices.Clone(next.rest), e))
	}
	names, prefixes, kinds, pinned := e.MatchKeys()
	switch {
	case pinned:
		for _, n := range names {
			l, _ := next.exact.get(n)
			next.exact = next.exact.with(n, insertSorted(l, e))
		}
		for _, p := range prefixes {
			l, ok := next.prefix.get(p)
			if !ok {
				next.lens = addLen(slices.Clone(next.lens), len(p))
			}
			next.prefix = next.prefix.with(p, insertSorted(l, e))
		}
	case len(kinds) > 0:
		next.byKind = maps.Clone(next.byKind)
		if next.byKind == nil {
			next.byKind = map[string][]*engine.Exception{}
		}
		for _, kind := range kinds {
			next.byKind[kind] = insertSorted(next.byKind[kind], e)
		}
	default:
		next.rest = insertSorted(next.rest, e)
	}
	return next
}

// without returns a copy of k without e, or nil when k held only e.
func (k *keyed) without(e *engine.Exception) *keyed {
	if k == nil {
		return nil
	}
	if k.n <= 1 {
		return nil
	}
	if k.indexed && k.n-1 <= keyedFlat/2 {
		return newKeyed(removeSorted(k.all(), e))
	}
	next := *k
	next.n--
	if !next.indexed {
		i, found := slices.BinarySearchFunc(next.rest, e, compareExceptions)
		if !found {
			return k
		}
		next.rest = removeSorted(next.rest, e)
		next.gates = gatesWithout(next.gates, i)
		return &next
	}
	names, prefixes, kinds, pinned := e.MatchKeys()
	switch {
	case pinned:
		for _, n := range names {
			l, _ := next.exact.get(n)
			if l = removeSorted(l, e); l == nil {
				next.exact = next.exact.without(n)
			} else {
				next.exact = next.exact.with(n, l)
			}
		}
		for _, p := range prefixes {
			l, _ := next.prefix.get(p)
			if l = removeSorted(l, e); l == nil {
				next.prefix = next.prefix.without(p)
				next.lens = removeLen(next.lens, len(p))
			} else {
				next.prefix = next.prefix.with(p, l)
			}
		}
	case len(kinds) > 0:
		next.byKind = maps.Clone(next.byKind)
		for _, kind := range kinds {
			if l := removeSorted(next.byKind[kind], e); l == nil {
				delete(next.byKind, kind)
			} else {
				next.byKind[kind] = l
			}
		}
	default:
		next.rest = removeSorted(next.rest, e)
	}
	return &next
}

// addLen counts one more prefix of length n in lens, which it may modify.
func addLen(lens []prefixLen, n int) []prefixLen {
	i, found := slices.BinarySearchFunc(lens, n, func(pl prefixLen, n int) int { return pl.len - n })
	if found {
		lens[i].keys++
		return lens
	}
	return slices.Insert(lens, i, prefixLen{len: n, keys: 1})
}

// removeLen returns a copy of lens with one prefix of length n fewer.
func removeLen(lens []prefixLen, n int) []prefixLen {
	i, found := slices.BinarySearchFunc(lens, n, func(pl prefixLen, n int) int { return pl.len - n })
	if !found {
		return lens
	}
	out := slices.Clone(lens)
	if out[i].keys--; out[i].keys == 0 {
		out = slices.Delete(out, i, i+1)
	}
	return slices.Clip(out)
}

// pmapShardKeys bounds the shards of a pmap: a pmap of n keys has the
// smallest power of two s of shards with n ≤ pmapShardKeys·s². A write
// then copies s shard pointers and a shard of about n/s keys, both about
// √n: 32 shards of about 300 keys for 10,000.
const pmapShardKeys = 16

// pmapSmall is the most keys a pmap holds in one sorted list instead of
// maps: most namespaces hold a few exceptions, and a list of them is a
// third of a map's memory, in one object the collector marks.
const pmapSmall = 16

// pmap is a persistent string-keyed map whose shards grow with it: with and
// without return a new map sharing every untouched shard with the old one.
// It is the index's shardMap for maps that are usually small (a sorted
// list, no hashing) and sometimes huge (a namespace crowded with
// exceptions). The zero value is empty.
type pmap[V any] struct {
	small  []pmapEntry[V] // sorted by key, when n ≤ pmapSmall
	shards []map[string]V
	n      int
}

type pmapEntry[V any] struct {
	k string
	v V
}

func newPmap[V any](m map[string]V) pmap[V] {
	if len(m) == 0 {
		return pmap[V]{}
	}
	if len(m) <= pmapSmall {
		small := make([]pmapEntry[V], 0, len(m))
		for k, v := range m {
			small = append(small, pmapEntry[V]{k, v})
		}
		slices.SortFunc(small, func(a, b pmapEntry[V]) int { return strings.Compare(a.k, b.k) })
		return pmap[V]{small: small, n: len(m)}
	}
	s := shardsFor(len(m))
	if s == 1 {
		return pmap[V]{shards: []map[string]V{m}, n: len(m)}
	}
	shards := make([]map[string]V, s)
	for k, v := range m {
		i := hashKey(k) & uint32(s-1)
		if shards[i] == nil {
			shards[i] = map[string]V{}
		}
		shards[i][k] = v
	}
	return pmap[V]{shards: shards, n: len(m)}
}

func shardsFor(n int) int {
	s := 1
	for n > pmapShardKeys*s*s {
		s *= 2
	}
	return s
}

func hashKey(k string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return h
}

func (m pmap[V]) shard(k string) int {
	if len(m.shards) == 1 {
		return 0
	}
	return int(hashKey(k) & uint32(len(m.shards)-1))
}

// find is where k is, or would be, in small.
func (m pmap[V]) find(k string) (int, bool) {
	return slices.BinarySearchFunc(m.small, k, func(e pmapEntry[V], k string) int { return strings.Compare(e.k, k) })
}

func (m pmap[V]) get(k string) (V, bool) {
	if m.n == 0 {
		var zero V
		return zero, false
	}
	if m.shards == nil {
		if i, ok := m.find(k); ok {
			return m.small[i].v, true
		}
		var zero V
		return zero, false
	}
	v, ok := m.shards[m.shard(k)][k]
	return v, ok
}

func (m pmap[V]) each(f func(string, V)) {
	for _, e := range m.small {
		f(e.k, e.v)
	}
	for _, s := range m.shards {
		for k, v := range s {
			f(k, v)
		}
	}
}

// all is the map's content as one map, for rebuilding it.
func (m pmap[V]) all(extra int) map[string]V {
	all := make(map[string]V, m.n+extra)
	m.each(func(k string, v V) { all[k] = v })
	return all
}

// with returns a map where k holds v.
func (m pmap[V]) with(k string, v V) pmap[V] {
	_, existed := m.get(k)
	if m.shards == nil && (existed || m.n < pmapSmall) {
		i, _ := m.find(k)
		next := pmap[V]{small: make([]pmapEntry[V], 0, m.n+1), n: m.n}
		next.small = append(next.small, m.small[:i]...)
		next.small = append(next.small, pmapEntry[V]{k, v})
		if existed {
			i++
		} else {
			next.n++
		}
		next.small = append(next.small, m.small[i:]...)
		return next
	}
	if !existed && (m.shards == nil || shardsFor(m.n+1) != len(m.shards)) {
		// Grow: rehash everything, once per doubling of the shards.
		all := m.all(1)
		all[k] = v
		return newPmap(all)
	}
	i := m.shard(k)
	next := pmap[V]{shards: slices.Clone(m.shards), n: m.n}
	shard := make(map[string]V, len(m.shards[i])+1)
	maps.Copy(shard, m.shards[i])
	shard[k] = v
	next.shards[i] = shard
	if !existed {
		next.n++
	}
	return next
}

// without returns a map where k is absent. Shards never shrink, but a map
// that falls to half of pmapSmall keys becomes a list again.
func (m pmap[V]) without(k string) pmap[V] {
	if _, ok := m.get(k); !ok {
		return m
	}
	if m.n == 1 {
		return pmap[V]{}
	}
	if m.shards == nil {
		i, _ := m.find(k)
		next := pmap[V]{small: make([]pmapEntry[V], 0, m.n-1), n: m.n - 1}
		next.small = append(next.small, m.small[:i]...)
		next.small = append(next.small, m.small[i+1:]...)
		return next
	}
	if m.n-1 <= pmapSmall/2 {
		all := m.all(0)
		delete(all, k)
		return newPmap(all)
	}
	i := m.shard(k)
	next := pmap[V]{shards: slices.Clone(m.shards), n: m.n - 1}
	shard := maps.Clone(m.shards[i])
	delete(shard, k)
	next.shards[i] = shard
	return next
}
