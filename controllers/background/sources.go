package background

import (
	"context"
	"maps"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/podsieve/podsieve/internal/index"
)

// queue is the scan controller's work queue: one item per namespace.
type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// resyncRetry is how soon a resync whose namespace list failed tries again.
const resyncRetry = 10 * time.Second

// watchIndex queues, for each change to the index, the namespaces whose
// results it can affect. It is a source of the scan's controller, so it is
// registered on the leader only, once the scan is on: on other replicas the
// index has no listener and nothing queues.
func (s *Scanner) watchIndex(_ context.Context, q queue) error {
	s.index.OnChange(func(c index.Change) { s.indexChanged(q, c) })
	return nil
}

// indexChanged queues the namespaces whose results a change can affect. It
// runs under the index's writer lock: it only queues.
func (s *Scanner) indexChanged(q queue, c index.Change) {
	switch c.Kind {
	case index.ChangedNamespace:
		s.enqueue(q, c.Name)
	case index.ChangedException:
		if c.Namespace == s.opts.ExceptionsNamespace {
			// Its exceptions may reach any namespace.
			s.enqueueAll(q, c.New)
			return
		}
		s.enqueue(q, c.Namespace)
	case index.ChangedPolicy:
		old, cur := c.Old.Policy(c.Name), c.New.Policy(c.Name)
		for _, ns := range c.New.Namespaces() {
			labels := c.New.NamespaceLabels(ns)
			if (old != nil && old.MayMatchNamespace(ns, labels)) || (cur != nil && cur.MayMatchNamespace(ns, labels)) {
				s.enqueue(q, ns)
			}
		}
	default:
		s.enqueueAll(q, c.New)
	}
}

// enqueue queues a namespace after the batch delay, so that a burst of
// changes costs one scan. A namespace already waiting keeps its place.
func (s *Scanner) enqueue(q queue, namespace string) {
	q.AddAfter(request(namespace), s.opts.Batch)
}

func (s *Scanner) enqueueAll(q queue, snap *index.Snapshot) {
	for _, ns := range snap.Namespaces() {
		s.enqueue(q, ns)
	}
}

// objectHandler queues the namespace of a scanned object that was created,
// deleted, or changed in a way that can change its results (scannedChange).
func (s *Scanner) objectHandler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { s.enqueue(q, e.Object.GetNamespace()) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) { s.enqueue(q, e.Object.GetNamespace()) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if scannedChange(e.ObjectOld, e.ObjectNew) {
				s.enqueue(q, e.ObjectNew.GetNamespace())
			}
		},
	}
}

// scannedChange reports whether an update can change an object's results:
// its pod spec (a controller's generation; a pod's spec, which has no
// generation of its own to follow), its labels or its controller.
func scannedChange(o, n client.Object) bool {
	changed := o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetLabels(), n.GetLabels()) ||
		!reflect.DeepEqual(metav1.GetControllerOf(o), metav1.GetControllerOf(n))
	if op, ok := o.(*corev1.Pod); ok {
		changed = changed || !apiequality.Semantic.DeepEqual(op.Spec, n.(*corev1.Pod).Spec)
	}
	return changed
}

// resync queues every namespace now and each ResyncPeriod after the last
// resync, to catch anything an event missed; a failed list is retried
// every resyncRetry. The first resync's namespaces are the ones the status
// counters wait for (initialScanDone).
func (s *Scanner) resync(ctx context.Context, q queue) error {
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		_ = wait.PollUntilContextCancel(ctx, resyncRetry, true, func(ctx context.Context) (bool, error) {
			if err := s.queueEveryNamespace(ctx, q); err != nil {
				log.FromContext(ctx).Error(err, "background scan: list namespaces; retrying in 10s")
				return false, nil
			}
			return true, nil
		})
	}, s.opts.ResyncPeriod)
	return nil
}

// queueEveryNamespace queues every namespace at once, without the batch
// delay.
func (s *Scanner) queueEveryNamespace(ctx context.Context, q queue) error {
	var namespaces corev1.NamespaceList
	if err := s.client.List(ctx, &namespaces); err != nil {
		return err
	}
	s.mu.Lock()
	if s.initialPending == nil {
		s.initialPending = map[string]bool{}
		for i := range namespaces.Items {
			s.initialPending[namespaces.Items[i].Name] = true
		}
	}
	names := make([]string, len(namespaces.Items))
	for i := range namespaces.Items {
		names[i] = namespaces.Items[i].Name
	}
	s.startRound(names)
	s.mu.Unlock()
	for i := range namespaces.Items {
		q.Add(request(namespaces.Items[i].Name))
	}
	return nil
}
