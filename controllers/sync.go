package controllers

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/kube"
)

// syncTracker marks the index ready once every object that the caches held
// when they synced has been reconciled once. Until then a decision could miss
// a policy or an exception, so readiness stays false and no decision is served.
type syncTracker struct {
	ix        *index.Index
	mu        sync.Mutex
	processed map[objectKey]bool
	pending   map[objectKey]bool // nil until the caches have been listed
}

// objectKey names an object the tracker waits for: its kind, and its
// namespace (none for a cluster-scoped kind) and name.
type objectKey struct {
	kind string
	types.NamespacedName
}

func newSyncTracker(ix *index.Index) *syncTracker {
	return &syncTracker{ix: ix, processed: map[objectKey]bool{}}
}

func policyKey(name string) objectKey {
	return objectKey{kind: "SecurityPolicy", NamespacedName: types.NamespacedName{Name: name}}
}

func exceptionKey(ns, name string) objectKey {
	return objectKey{kind: "PolicyException", NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func namespaceKey(name string) objectKey {
	return objectKey{kind: "Namespace", NamespacedName: types.NamespacedName{Name: name}}
}

// done records that key has been reconciled into the index.
func (t *syncTracker) done(key objectKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.processed[key] = true
	if t.pending != nil {
		delete(t.pending, key)
		t.checkReady()
	}
}

// isProcessed reports whether key has been reconciled at least once.
func (t *syncTracker) isProcessed(key objectKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.processed[key]
}

// listInitial lists what the synced caches hold.
func (t *syncTracker) listInitial(ctx context.Context, c client.Reader) error {
	policies, exceptions, err := kube.ListPoliciesAndExceptions(ctx, c)
	if err != nil {
		return err
	}
	var namespaces corev1.NamespaceList
	if err := c.List(ctx, &namespaces); err != nil {
		return fmt.Errorf("list Namespaces: %w", err)
	}
	pending := map[objectKey]bool{}
	for _, p := range policies.Items {
		pending[policyKey(p.Name)] = true
	}
	for _, e := range exceptions.Items {
		pending[exceptionKey(e.Namespace, e.Name)] = true
	}
	for _, n := range namespaces.Items {
		pending[namespaceKey(n.Name)] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.processed {
		delete(pending, k)
	}
	t.pending = pending
	t.checkReady()
	return nil
}

func (t *syncTracker) checkReady() {
	if len(t.pending) == 0 && !t.ix.Ready() {
		t.ix.MarkReady()
	}
}
