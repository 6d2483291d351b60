package index

// shards is the fan-out of a shardMap: a write copies the array of shard
// pointers (2 KiB) and one shard, so with 10,000 namespaces a write copies
// about 40 map entries instead of 10,000.
const shards = 256

// shardMap is a persistent string-keyed map: with and without return a new
// map that shares every untouched shard with the old one, so readers of the
// old map are never disturbed.
type shardMap[V any] struct {
	s *[shards]map[string]V
	n int
}

func shardOf(k string) int {
	// FNV-1a, inline: hashing is on the request path.
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return int(h % shards)
}

func (m shardMap[V]) get(k string) (V, bool) {
	var zero V
	if m.s == nil {
		return zero, false
	}
	v, ok := m.s[shardOf(k)][k]
	return v, ok
}

// with returns a map where k holds v.
func (m shardMap[V]) with(k string, v V) shardMap[V] {
	i := shardOf(k)
	next := m.copyArray()
	old := next.s[i]
	_, existed := old[k]
	shard := make(map[string]V, len(old)+1)
	for kk, vv := range old {
		shard[kk] = vv
	}
	shard[k] = v
	next.s[i] = shard
	if !existed {
		next.n++
	}
	return next
}

// without returns a map where k is absent.
func (m shardMap[V]) without(k string) shardMap[V] {
	i := shardOf(k)
	if m.s == nil {
		return m
	}
	if _, ok := m.s[i][k]; !ok {
		return m
	}
	next := m.copyArray()
	old := next.s[i]
	shard := make(map[string]V, len(old))
	for kk, vv := range old {
		if kk != k {
			shard[kk] = vv
		}
	}
	next.s[i] = shard
	next.n--
	return next
}

func (m shardMap[V]) copyArray() shardMap[V] {
	var arr [shards]map[string]V
	if m.s != nil {
		arr = *m.s
	}
	return shardMap[V]{s: &arr, n: m.n}
}

// each calls f for every key and value.
func (m shardMap[V]) each(f func(string, V)) {
	if m.s == nil {
		return
	}
	for _, shard := range m.s {
		for k, v := range shard {
			f(k, v)
		}
	}
}
