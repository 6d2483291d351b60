package index

import (
	"maps"
	"slices"
)

// keyed is the exceptions of one namespace group that target one policy,
// indexed by what their spec.match pins (engine.Exception.MatchKeys), so
// that a lookup for an object reads only the exceptions that may match it:
// a namespace editor who creates thousands of exceptions slows down only
// the objects those exceptions name. A nil keyed is empty; a keyed is never
// modified once published.
type keyed struct {
	exact  pmap[[]*HeldException] // by a literal match.names entry
	prefix pmap[[]*HeldException] // by a name glob's literal prefix
	// lens are the lengths of the keys of prefix, ascending, each with the
	// number of keys of that length: a lookup tries the object name's
	// prefixes of these lengths only (at most 253 of them, the longest name).
	lens []prefixLen
	// byKind holds the exceptions that pin no name but match.kinds.
	byKind map[string][]*HeldException
	// rest pin neither: every object of the namespace is offered them. A
	// keyed of few exceptions is not indexed: rest holds them all.
	rest    []*HeldException
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

func newKeyed(excs []heldAs) *keyed {
	if len(excs) == 0 {
		return nil
	}
	k := &keyed{n: len(excs)}
	if len(excs) <= keyedFlat {
		excs = slices.SortedFunc(slices.Values(excs), func(a, b heldAs) int { return compareHeld(a.h, b.h) })
		k.rest = make([]*HeldException, len(excs))
		for i, x := range excs {
			k.rest[i] = x.h
			k.gates = appendGates(k.gates, x.e, i)
		}
		return k
	}
	k.indexed = true
	exact, prefix := map[string][]*HeldException{}, map[string][]*HeldException{}
	for _, x := range excs {
		e := x.h
		names, prefixes, kinds, pinned := x.e.MatchKeys()
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
				k.byKind = map[string][]*HeldException{}
			}
			for _, kind := range kinds {
				k.byKind[kind] = append(k.byKind[kind], e)
			}
		default:
			k.rest = append(k.rest, e)
		}
	}
	for _, m := range []map[string][]*HeldException{exact, prefix, k.byKind} {
		for key, l := range m {
			slices.SortFunc(l, compareHeld)
			m[key] = slices.Clip(l)
		}
	}
	slices.SortFunc(k.rest, compareHeld)
	k.rest = slices.Clip(k.rest)
	for p := range prefix {
		k.lens = addLen(k.lens, len(p))
	}
	k.exact, k.prefix = newPmap(exact), newPmap(prefix)
	return k
}

// lookup returns the exceptions that may match an object of this name and
// kind, in order, each once. It copies nothing when one list holds them all.
func (k *keyed) lookup(name, kind string) []*HeldException {
	if k == nil {
		return nil
	}
	if !k.indexed {
		return k.flatLookup(name, kind)
	}
	var buf [4][]*HeldException
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

// flatLookup is lookup for a keyed that is not indexed: the exceptions of
// rest that a gate admits, in order. It copies nothing when they are one
// run of rest (none, one, or all of them, most often).
func (k *keyed) flatLookup(name, kind string) []*HeldException {
	var out []*HeldException
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
				out = append(make([]*HeldException, 0, len(k.rest)), k.rest[first:last+1]...)
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
func (k *keyed) all() []*HeldException {
	if !k.indexed {
		return k.rest
	}
	var lists [][]*HeldException
	k.exact.each(func(_ string, l []*HeldException) { lists = append(lists, l) })
	k.prefix.each(func(_ string, l []*HeldException) { lists = append(lists, l) })
	for _, l := range k.byKind {
		lists = append(lists, l)
	}
	if len(k.rest) > 0 {
		lists = append(lists, k.rest)
	}
	return merge(lists)
}

// merge is the union of ordered lists, ordered, without duplicates.
func merge(lists [][]*HeldException) []*HeldException {
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
	out := make([]*HeldException, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortFunc(out, compareHeld)
	// Equal names in one group are the same exception.
	return slices.CompactFunc(out, func(a, b *HeldException) bool { return a == b })
}

// with returns a copy of k holding x, which it must not hold. Only the
// lists x is keyed by are copied, and one shard of each persistent map.
func (k *keyed) with(x heldAs) *keyed {
	e := x.h
	next := &keyed{}
	if k != nil {
		*next = *k
	}
	next.n++
	if !next.indexed {
		if next.n <= keyedFlat {
			i, _ := slices.BinarySearchFunc(next.rest, e, compareHeld)
			next.rest = insertSorted(next.rest, e)
			next.gates = gatesWith(next.gates, x.e, i)
			return next
		}
		return next.reindexed(x, nil)
	}
	names, prefixes, kinds, pinned := x.e.MatchKeys()
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
			next.byKind = map[string][]*HeldException{}
		}
		for _, kind := range kinds {
			next.byKind[kind] = insertSorted(next.byKind[kind], e)
		}
	default:
		next.rest = insertSorted(next.rest, e)
	}
	return next
}

// without returns a copy of k without x, or nil when k held only x.
func (k *keyed) without(x heldAs) *keyed {
	e := x.h
	if k == nil {
		return nil
	}
	if k.n <= 1 {
		return nil
	}
	if k.indexed && k.n-1 <= keyedFlat/2 {
		return k.reindexed(heldAs{}, e)
	}
	next := *k
	next.n--
	if !next.indexed {
		i, found := slices.BinarySearchFunc(next.rest, e, compareHeld)
		if !found {
			return k
		}
		next.rest = removeSorted(next.rest, e)
		next.gates = gatesWithout(next.gates, i)
		return &next
	}
	names, prefixes, kinds, pinned := x.e.MatchKeys()
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

// reindexed builds k again with add (when add.h is set) and without
// remove (when set): for a keyed that grew past keyedFlat or shrank below
// half of it. The keys of the exceptions it holds are read from them
// compiled again (HeldException.compile), once each; one that cannot be
// compiled (the frozen form is the index's own) is left out, as it would
// waive nothing.
func (k *keyed) reindexed(add heldAs, remove *HeldException) *keyed {
	var excs []heldAs
	for _, h := range k.all() {
		if remove != nil && compareHeld(h, remove) == 0 {
			continue
		}
		if e, err := h.compile(); err == nil {
			excs = append(excs, heldAs{h, e})
		}
	}
	if add.h != nil {
		excs = append(excs, add)
	}
	return newKeyed(excs)
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
