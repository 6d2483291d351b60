package index

import (
	"maps"
	"slices"
	"strings"
)

// pmapShardKeys bounds the shards of a pmap: a pmap of n keys has the
// smallest power of two s of shards with n ≤ pmapShardKeys·s². A write
// then copies s shard pointers and a shard of about n/s keys, both about
// √n: 128 shards of about 80 keys for 10,000 (the namespaces of a large
// cluster, whose labels and exceptions are written one namespace at a
// time).
const pmapShardKeys = 2

// pmapSmall is the most keys a pmap holds in one sorted list instead of
// maps: most namespaces hold a few exceptions, and a list of them is a
// third of a map's memory, in one object the collector marks.
const pmapSmall = 16

// pmap is the index's persistent string-keyed map, whose shards grow with
// it: with and without return a new map sharing every untouched shard with
// the old one, so readers of the old map are never disturbed. It serves
// maps that are usually small (a sorted list, no hashing) and sometimes
// huge (the namespaces of a cluster, a namespace crowded with exceptions).
// The zero value is empty.
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
