package controllers

import (
	"context"
	"fmt"
	"sync"

	"github.com/podsieve/podsieve/internal/kube"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podsieve/podsieve/internal/index"
)

// syncTracker marks the index ready once every object that the caches held
// when they synced has been reconciled once. Until then a decision could miss
// a policy or an exception, so readiness stays false and no decision is served.
type syncTracker struct {
	ix        *index.Index
	mu        sync.Mutex
	processed map[string]bool
	pending   map[string]bool // nil until the caches have been listed
}

func newSyncTracker(ix *index.Index) *syncTracker {
	return &syncTracker{ix: ix, processed: map[string]bool{}}
}

func policyKey(name string) string        { return "SecurityPolicy/" + name }
func exceptionKey(ns, name string) string { return "PolicyException/" + ns + "/" + name }
func namespaceKey(name string) string     { return "Namespace/" + name }

// done records that key has been reconciled into the index.
func (t *syncTracker) done(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.processed[key] = true
	if t.pending != nil {
		delete(t.pending, key)
		t.checkReady()
	}
}

// isProcessed reports whether key has been reconciled at least once.
func (t *syncTracker) isProcessed(key string) bool {
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
	pending := map[string]bool{}
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
