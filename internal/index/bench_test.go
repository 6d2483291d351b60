package index_test

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/synthetic"
)

var benchNow = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// candidates is what s offers o for policy, with no budget to run out.
func candidates(s *index.Snapshot, o *engine.Object, policy string) []*engine.Exception {
	l, _, _ := s.CandidatesFor(o)(policy, math.MaxInt64)
	return l
}

func build(tb testing.TB, c *synthetic.Cluster) *index.Index {
	ix, err := c.Index()
	if err != nil {
		tb.Fatal(err)
	}
	return ix
}

// BenchmarkBuild: 1,000 policies and 100,000 exceptions over 10,000
// namespaces, compiled and indexed. heap-MB is the live heap the index holds.
func BenchmarkBuild(b *testing.B) {
	c := synthetic.New(1000, 100000, 10000)
	var ix *index.Index
	for b.Loop() {
		ix = build(b, c)
	}
	b.StopTimer()
	// c is not used below, so the collector does not count it as live.
	b.ReportMetric(float64(heapReleasedBy(func() { runtime.KeepAlive(ix); ix = nil }))/(1<<20), "heap-MB")
}

// BenchmarkUpdate: one exception changed in the full-size index, until the
// next snapshot shows it.
func BenchmarkUpdate(b *testing.B) {
	c := synthetic.New(1000, 100000, 10000)
	ix := build(b, c)
	changed := make([]*engine.Exception, 2)
	for i := range changed {
		pe := c.Exceptions[4242].DeepCopy()
		pe.Spec.PodSecurity[0].Values = pe.Spec.PodSecurity[0].Values[:1+i]
		pe.UID, pe.Generation = "uid-4242", int64(2+i)
		e, err := engine.CompileException(pe, synthetic.ClusterNamespace)
		if err != nil {
			b.Fatal(err)
		}
		changed[i] = e
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := changed[i%2]
		ix.SetException(e)
		if got := ix.Snapshot().Exception(e.Namespace, e.Name); got == nil || got.Source != e.Source || got.Generation != e.Generation || got.UID != e.UID {
			b.Fatal("the change is not visible")
		}
		i++
	}
}

// BenchmarkLookup: choosing the exceptions that apply to a pod, with 100 or
// 100,000 exceptions in the cluster. Both clusters put 10 exceptions in the
// pod's namespace; what differs is how many the rest of the cluster holds.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{100, 100000} {
		c := synthetic.New(1000, n, n/10)
		ix := build(b, c)
		o, err := engine.NewObject(c.Pod(synthetic.Exempted, 7))
		if err != nil {
			b.Fatal(err)
		}
		s := ix.Snapshot()
		labels := s.NamespaceLabels(o.Namespace)
		p := s.Policy("policy-7")
		r := p.Rules[0]
		if !r.Matches(o, labels) {
			b.Fatal("the rule does not match the pod")
		}
		if sel, _ := engine.SelectExceptions(r, candidates(s, o, p.Name), o, labels, benchNow, engine.Admission); len(sel) != 1 {
			b.Fatalf("selected %d exceptions, want 1", len(sel))
		}
		b.Run(fmt.Sprintf("exceptions=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := ix.Snapshot()
				engine.SelectExceptions(r, candidates(s, o, p.Name), o, s.NamespaceLabels(o.Namespace), benchNow, engine.Admission)
			}
		})
	}
}

// BenchmarkLookupCrowdedNamespace: the decision for a pod that no exception
// of its namespace matches (it adds NET_ADMIN: refused), in a namespace
// holding 10 or 10,000 exceptions that pin names (synthetic.Crowded). The
// lookup reads only the exceptions that may match the pod's name, so a
// namespace editor who creates thousands of exceptions does not slow down
// the other pods of the namespace.
func BenchmarkLookupCrowdedNamespace(b *testing.B) {
	for _, n := range []int{10, 10000} {
		ix := build(b, synthetic.Crowded(n))
		pod := synthetic.New(1, 1, 1).Pod(synthetic.Refused, 0)
		pod.Namespace, pod.Name = synthetic.CrowdedNamespace, "web-0"
		o, err := engine.NewObject(pod)
		if err != nil {
			b.Fatal(err)
		}
		if d := ix.Snapshot().Decide(o, benchNow, engine.Admission); d.Allowed || len(d.Results) != 1 {
			b.Fatalf("the pod is not refused by the one rule: %+v", d)
		}
		for _, e := range candidates(ix.Snapshot(), o, "policy-0") {
			if e.Matches(o, nil) {
				b.Fatalf("%s matches the pod", e.Source)
			}
		}
		b.Run(fmt.Sprintf("exceptions=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ix.Snapshot().Decide(o, benchNow, engine.Admission)
			}
		})
	}
}

// BenchmarkSetExceptionCrowded: loading 10,000 exceptions one by one into
// one namespace with SetException, as the controller does at start. ns/exc
// is the cost of one write; quadratic growth would show as ns/exc growing
// with the namespace.
func BenchmarkSetExceptionCrowded(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		c := synthetic.Crowded(n)
		excs := make([]*engine.Exception, len(c.Exceptions))
		for i, pe := range c.Exceptions {
			e, err := engine.CompileException(pe, synthetic.ClusterNamespace)
			if err != nil {
				b.Fatal(err)
			}
			excs[i] = e
		}
		b.Run(fmt.Sprintf("exceptions=%d", n), func(b *testing.B) {
			for b.Loop() {
				ix := index.New(synthetic.ClusterNamespace)
				for _, e := range excs {
					ix.SetException(e)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/exc")
		})
	}
}

// BenchmarkCollection: a full garbage collection with the index of 1,000
// policies and 100,000 exceptions over 10,000 namespaces live, and what the
// collector finds live: it marks all of it on every cycle, and a busy
// webhook runs a cycle every few thousand reviews (docs/performance.md).
func BenchmarkCollection(b *testing.B) {
	ix := build(b, synthetic.New(1000, 100000, 10000))
	runtime.GC()
	for b.Loop() {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
	b.ReportMetric(float64(ms.HeapObjects), "objects")
	runtime.KeepAlive(ix)
}

// BenchmarkHeapPerException: the heap the index holds per maximal
// PolicyException (synthetic.MaximalException), in force and not: 1,000 of
// them are compiled and set, their API objects dropped, and the live heap
// measured with the index and after releasing it (as BenchmarkBuild does).
// Run it with -benchtime 1x: one iteration compiles 2,000 exceptions.
func BenchmarkHeapPerException(b *testing.B) {
	const n = 1000
	heapOf := func(set func(ix *index.Index, e *engine.Exception)) float64 {
		ix := index.New(synthetic.ClusterNamespace)
		for i := range n {
			e, err := engine.CompileException(synthetic.MaximalException(i), synthetic.ClusterNamespace)
			if err != nil {
				b.Fatal(err)
			}
			set(ix, e)
		}
		return float64(heapReleasedBy(func() { runtime.KeepAlive(ix); ix = nil })) / n / 1024
	}
	var active, inactive float64
	for b.Loop() {
		active = heapOf((*index.Index).SetException)
		inactive = heapOf((*index.Index).SetInactiveException)
	}
	b.ReportMetric(active, "heap-KiB/exception")
	b.ReportMetric(inactive, "heap-KiB/inactive-exception")
}

// heapReleasedBy is the live heap that release lets go of (it drops the last
// reference to what is measured), between two garbage collections.
func heapReleasedBy(release func()) int64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	release()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(before.HeapAlloc) - int64(after.HeapAlloc)
}
