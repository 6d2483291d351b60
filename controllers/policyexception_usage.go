package controllers

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/kube"
)

// lastAppliedGranularity is how much later an exception must have been
// applied than its status says before status.lastAppliedTime is written
// again: an exception in use would otherwise be written on every scan.
const lastAppliedGranularity = time.Minute

// ExceptionUsage remembers when each exception last waived a violation, at
// admission (on every replica) and in the background scan (on the leader),
// until a flusher writes it to status.lastAppliedTime. Recording is a map
// write; nothing is written to the API server on the request path.
type ExceptionUsage struct {
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// NewExceptionUsage returns an empty record.
func NewExceptionUsage() *ExceptionUsage {
	return &ExceptionUsage{last: map[types.NamespacedName]time.Time{}}
}

// Applied records that the exceptions named by sources waived a violation
// at t. The webhook and the background scan call it.
func (u *ExceptionUsage) Applied(sources []engine.Source, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, src := range sources {
		if src.IsException() {
			u.record(types.NamespacedName{Namespace: src.Namespace, Name: src.Name}, t)
		}
	}
}

// applied records one exception: it takes back a time that could not be
// written, unless a newer one was recorded meanwhile.
func (u *ExceptionUsage) applied(key types.NamespacedName, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.record(key, t)
}

func (u *ExceptionUsage) record(key types.NamespacedName, t time.Time) {
	if t.After(u.last[key]) {
		u.last[key] = t
	}
}

// take returns what was recorded and forgets it.
func (u *ExceptionUsage) take() map[types.NamespacedName]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.last
	u.last = map[types.NamespacedName]time.Time{}
	return out
}

// usageFlusher writes status.lastAppliedTime from a replica's record every
// interval. It runs on every replica: each replica's webhook sees its own
// share of the requests.
type usageFlusher struct {
	client   client.Client
	usage    *ExceptionUsage
	interval time.Duration
}

func (f *usageFlusher) NeedLeaderElection() bool { return false }

func (f *usageFlusher) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, f.flush, f.interval)
	return nil
}

func (f *usageFlusher) flush(ctx context.Context) {
	for key, at := range f.usage.take() {
		var pe policyv1alpha1.PolicyException
		if err := f.client.Get(ctx, key, &pe); err != nil {
			if client.IgnoreNotFound(err) != nil {
				f.usage.applied(key, at) // tried again next flush
			}
			continue
		}
		status := pe.Status.DeepCopy()
		setLastApplied(status, at)
		// Every replica writes this field: the lock keeps one whose cache
		// is behind from moving it back. On a conflict the time is kept
		// and tried again, against a fresher copy, next flush.
		_, err := kube.ExceptionUsage.Apply(ctx, f.client, &pe, status)
		switch {
		case err == nil:
		case apierrors.IsConflict(err):
			f.usage.applied(key, at) // tried again next flush
		default:
			log.FromContext(ctx).Error(err, "write lastAppliedTime", "exception", key)
			f.usage.applied(key, at) // tried again next flush
		}
	}
}

// setLastApplied moves status.lastAppliedTime to at when at is a
// granularity later than it; never back.
func setLastApplied(st *policyv1alpha1.PolicyExceptionStatus, at time.Time) {
	if st.LastAppliedTime == nil || at.Sub(st.LastAppliedTime.Time) >= lastAppliedGranularity {
		t := metav1.NewTime(at.Truncate(time.Second))
		st.LastAppliedTime = &t
	}
}
