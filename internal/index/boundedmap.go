package index

import (
	"sync"
	"sync/atomic"
)

// boundedMap is a concurrent record of values worth remembering (thawed
// exceptions, the policies of a namespace), bounded by a number of entries
// and a total weight, and dropped whole when full: the next puts fill a new
// one. Readers never lock. The zero value is empty and holds nothing until
// its bounds are set.
type boundedMap[K comparable, V any] struct {
	m                     atomic.Pointer[sync.Map] // K → V
	entries, weight       atomic.Int64
	maxEntries, maxWeight int64
}

func (b *boundedMap[K, V]) get(k K) (V, bool) {
	if m := b.m.Load(); m != nil {
		if v, ok := m.Load(k); ok {
			return v.(V), true
		}
	}
	var zero V
	return zero, false
}

// put remembers v for k, with its weight, starting a new record when this
// one would pass a bound.
func (b *boundedMap[K, V]) put(k K, v V, weight int64) {
	m := b.m.Load()
	if m == nil || b.entries.Add(1) > b.maxEntries || b.weight.Add(weight) > b.maxWeight {
		m = &sync.Map{}
		b.m.Store(m)
		b.entries.Store(1)
		b.weight.Store(weight)
	}
	m.Store(k, v)
}
