package controllers

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/synthetic"
	"github.com/podsieve/podsieve/internal/testenv"
)

// exceptionTransform is the transform that CacheOptions, the manager's cache
// settings, gives PolicyExceptions.
func exceptionTransform(tb testing.TB) toolscache.TransformFunc {
	tb.Helper()
	for obj, by := range CacheOptions().ByObject {
		if _, ok := obj.(*policyv1alpha1.PolicyException); ok && by.Transform != nil {
			return by.Transform
		}
	}
	tb.Fatal("CacheOptions has no transform for PolicyExceptions: the cache keeps the labels, annotations and managed fields a namespace editor writes")
	return nil
}

// TestCacheStripsException: the cache keeps of a PolicyException what
// podsieve reads, and nothing of the metadata its namespace's editors write.
func TestCacheStripsException(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	deleted := metav1.NewTime(created.Add(time.Hour))
	identity := metav1.ObjectMeta{Namespace: "team-a", Name: "e", UID: "u-1", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: created, DeletionTimestamp: &deleted}
	spec := synthetic.MaximalException(0).Spec
	status := policyv1alpha1.PolicyExceptionStatus{ObservedGeneration: 3, Policies: "p",
		Conditions: []metav1.Condition{{Type: policyv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: policyv1alpha1.ReasonActive}}}

	tests := []struct {
		name string
		meta func(*metav1.ObjectMeta)
	}{
		{"identity only", func(*metav1.ObjectMeta) {}},
		{"a tenant's maximal labels, annotations and managed fields", func(m *metav1.ObjectMeta) {
			synthetic.TenantMetadata(m, synthetic.TenantEntries)
		}},
		{"last-applied-configuration", func(m *metav1.ObjectMeta) {
			m.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`}
		}},
		{"finalizers, owners, generateName, grace period", func(m *metav1.ObjectMeta) {
			m.Finalizers = []string{"example.com/keep"}
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u-2"}}
			m.GenerateName = "e-"
			m.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}},
	}
	transform := exceptionTransform(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := &policyv1alpha1.PolicyException{ObjectMeta: *identity.DeepCopy(), Spec: *spec.DeepCopy(), Status: *status.DeepCopy()}
			tt.meta(&pe.ObjectMeta)
			out, err := transform(pe)
			if err != nil {
				t.Fatal(err)
			}
			got := out.(*policyv1alpha1.PolicyException)
			want := &policyv1alpha1.PolicyException{ObjectMeta: identity, Spec: spec, Status: status}
			if !apiequality.Semantic.DeepEqual(want.ObjectMeta, got.ObjectMeta) {
				t.Errorf("cached metadata: %d labels, %d annotations, %d managed fields, finalizers %v, owners %v, generateName %q, grace %v;\nwant %+v",
					len(got.Labels), len(got.Annotations), len(got.ManagedFields), got.Finalizers, got.OwnerReferences, got.GenerateName,
					got.DeletionGracePeriodSeconds, want.ObjectMeta)
			}
			if !apiequality.Semantic.DeepEqual(want.Spec, got.Spec) || !apiequality.Semantic.DeepEqual(want.Status, got.Status) {
				t.Errorf("the cache changed the spec or status: %+v", got)
			}
		})
	}

	t.Run("a tombstone passes unchanged", func(t *testing.T) {
		tomb := toolscache.DeletedFinalStateUnknown{Key: "team-a/e"}
		if out, err := transform(tomb); err != nil || out != tomb {
			t.Errorf("got %v, %v", out, err)
		}
	})
}

// replicaHeap is the live heap, in KiB per exception, that n maximal
// PolicyExceptions cost a replica, each as a namespace editor can write it
// (synthetic.MaximalException's spec, synthetic.TenantMetadata's labels,
// annotations and managed fields) and decoded from JSON as the informer
// decodes it: held as decoded, with managed fields stripped (the cache's
// default transform), with the cache's transform for PolicyExceptions, and
// that plus an index holding each compiled, in force.
type replicaHeap struct {
	untransformed, managedFieldsStripped, cache, cacheAndIndex float64
}

func measureReplicaHeap(tb testing.TB, n int) replicaHeap {
	tb.Helper()
	decoder := serializer.NewCodecFactory(testenv.Scheme()).UniversalDeserializer()
	raw := make([][]byte, n)
	for i := range raw {
		pe := synthetic.MaximalException(i)
		pe.APIVersion, pe.Kind = policyv1alpha1.GroupVersion.String(), "PolicyException"
		synthetic.TenantMetadata(&pe.ObjectMeta, synthetic.TenantEntries)
		b, err := json.Marshal(pe)
		if err != nil {
			tb.Fatal(err)
		}
		raw[i] = b
	}
	decode := func(transform toolscache.TransformFunc) []*policyv1alpha1.PolicyException {
		out := make([]*policyv1alpha1.PolicyException, n)
		for i, b := range raw {
			pe := &policyv1alpha1.PolicyException{}
			if _, _, err := decoder.Decode(b, nil, pe); err != nil {
				tb.Fatal(err)
			}
			obj, err := transform(pe)
			if err != nil {
				tb.Fatal(err)
			}
			out[i] = obj.(*policyv1alpha1.PolicyException)
		}
		return out
	}
	// Two collections: the first moves sync.Pools' contents (the decoder's
	// buffers among them) to their victim caches, the second frees them.
	gc := func() { runtime.GC(); runtime.GC() }
	kib := func(build func() any) float64 {
		var before, after runtime.MemStats
		gc()
		runtime.ReadMemStats(&before)
		held := build()
		gc()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(held)
		return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n) / 1024
	}
	identity := func(obj any) (any, error) { return obj, nil }
	var h replicaHeap
	h.untransformed = kib(func() any { return decode(identity) })
	h.managedFieldsStripped = kib(func() any { return decode(cache.TransformStripManagedFields()) })
	h.cache = kib(func() any { return decode(exceptionTransform(tb)) })
	// The index, over the cache it is built from: compiled exceptions share
	// the strings of the cached specs.
	cached := decode(exceptionTransform(tb))
	indexed := kib(func() any {
		ix := index.New(synthetic.ClusterNamespace)
		for _, pe := range cached {
			e, err := engine.CompileException(pe, synthetic.ClusterNamespace)
			if err != nil {
				tb.Fatal(err)
			}
			ix.SetException(e)
		}
		return ix
	})
	h.cacheAndIndex = h.cache + indexed
	// The JSON and the cache stay live through every measurement, not
	// freed during the last one.
	runtime.KeepAlive(raw)
	runtime.KeepAlive(cached)
	return h
}

// TestReplicaHeapPerException: a maximal exception with a tenant's maximal
// metadata costs a replica at most 128 KiB, cache and index, and one the
// index does not hold (beyond the namespace's limit) at most 64 KiB.
func TestReplicaHeapPerException(t *testing.T) {
	h := measureReplicaHeap(t, 5)
	t.Logf("KiB per exception: decoded %.1f, managed fields stripped %.1f, cache %.1f, cache and index %.1f",
		h.untransformed, h.managedFieldsStripped, h.cache, h.cacheAndIndex)
	if h.cacheAndIndex > 128 {
		t.Errorf("a maximal exception costs a replica %.1f KiB, cache and index; want at most 128 KiB", h.cacheAndIndex)
	}
	if h.cache > 64 {
		t.Errorf("a maximal exception costs the cache %.1f KiB; want at most 64 KiB", h.cache)
	}
}

// BenchmarkReplicaHeapPerException: the heap one maximal PolicyException,
// with the largest metadata a namespace editor can give it, costs every
// replica: decoded with nothing stripped, with only managed fields stripped
// (the cache's default), with the cache's transform for PolicyExceptions,
// and that plus the index holding it compiled in force. Run it with
// -benchtime 1x (one iteration decodes 80 exceptions of 1.5 MB of JSON).
func BenchmarkReplicaHeapPerException(b *testing.B) {
	var h replicaHeap
	for b.Loop() {
		h = measureReplicaHeap(b, 20)
	}
	b.ReportMetric(h.untransformed, "decoded-KiB/exception")
	b.ReportMetric(h.managedFieldsStripped, "no-managed-fields-KiB/exception")
	b.ReportMetric(h.cache, "cache-KiB/exception")
	b.ReportMetric(h.cacheAndIndex, "cache+index-KiB/exception")
}

// TestCacheStripsWorkloads: the cache drops a pod-bearing controller's own
// labels, annotations and managed fields, and what a decision reads of it,
// its pod template's, is unchanged.
func TestCacheStripsWorkloads(t *testing.T) {
	scheme := testenv.Scheme()
	opts := CacheOptions()
	for _, k := range engine.PodBearingKinds {
		if k.Kind == policyv1alpha1.KindPod || k.Kind == policyv1alpha1.KindPodTemplate {
			continue // a pod's own metadata is what decisions read; templates are not scanned
		}
		t.Run(string(k.Kind), func(t *testing.T) {
			u := map[string]any{
				"apiVersion": k.GroupVersion.String(), "kind": string(k.Kind),
				"metadata": map[string]any{"namespace": "team-a", "name": "web", "generation": int64(2),
					"labels":          map[string]any{"team": "a"},
					"annotations":     map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"big":"copy"}`},
					"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u", "controller": true}},
					"managedFields":   []any{map[string]any{"manager": "kubectl", "operation": "Update"}}},
			}
			path := append(strings.Split(strings.TrimSuffix(k.FieldPrefix, "."), "."), "metadata")
			tmpl := map[string]any{"labels": map[string]any{"app": "web"},
				"annotations": map[string]any{"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}}
			if err := unstructured.SetNestedField(u, tmpl, path...); err != nil {
				t.Fatal(err)
			}
			obj, err := scheme.New(k.GroupVersionKind())
			if err != nil {
				t.Fatal(err)
			}
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
				t.Fatal(err)
			}
			before, err := engine.NewObject(obj.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			var transform toolscache.TransformFunc
			for o, by := range opts.ByObject {
				if reflect.TypeOf(o) == reflect.TypeOf(obj) {
					transform = by.Transform
				}
			}
			if transform == nil {
				t.Fatalf("CacheOptions has no transform for %T", obj)
			}
			out, err := transform(obj)
			if err != nil {
				t.Fatal(err)
			}
			m := out.(metav1.Object)
			if len(m.GetLabels()) > 0 || len(m.GetAnnotations()) > 0 || len(m.GetManagedFields()) > 0 {
				t.Errorf("cached with labels %v, annotations %v, managed fields %v", m.GetLabels(), m.GetAnnotations(), m.GetManagedFields())
			}
			if m.GetGeneration() != 2 || metav1.GetControllerOf(m) == nil {
				t.Errorf("the cache dropped the generation or the controller the scan reads: %d, %v", m.GetGeneration(), metav1.GetControllerOf(m))
			}
			after, err := engine.NewObject(out.(k8sruntime.Object))
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(before.Meta, after.Meta) || !apiequality.Semantic.DeepEqual(before.Labels, after.Labels) || after.Labels["app"] != "web" {
				t.Errorf("what a decision reads changed: %+v, was %+v", after.Meta, before.Meta)
			}
		})
	}
}
