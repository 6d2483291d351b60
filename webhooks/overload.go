package webhooks

import (
	"context"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Overload protection for /validate-pods. An admission controller that falls
// behind does not get to allow: every review it cannot decide in time is
// refused with a reason the user can act on (retry), never allowed. Two
// bounds keep it answering in time:
//
//   - a deadline per review (reviewDeadline): the API server's own timeout,
//     which it sends as ?timeout= on the webhook URL, less a margin so that
//     the refusal reaches it before it gives up; the request's context, which
//     ends when the API server disconnects; and a cap;
//   - a limit on the reviews evaluated at once (admissionLimiter), with a
//     short wait for a slot, shared fairly between namespaces.

// DefaultMaxConcurrentReviews is the default of --max-concurrent-reviews:
// enough to keep every core busy while some reviews wait on the API server
// (a namespace the index does not know yet), few enough that a review that
// starts is not starved of CPU by hundreds of others.
func DefaultMaxConcurrentReviews() int { return 4 * runtime.GOMAXPROCS(0) }

const (
	// DefaultReviewQueueTimeout is how long a review may wait for a slot.
	DefaultReviewQueueTimeout = 500 * time.Millisecond
	// DefaultMaxReviewTime caps a review's deadline when the API server sends
	// none, or a longer one than this.
	DefaultMaxReviewTime = 10 * time.Second
	// answerMargin is kept from the API server's timeout to write the answer
	// and carry it back: a refusal that arrives after the API server gave up
	// is a timeout to the user, not a reason.
	answerMargin = 250 * time.Millisecond
)

// overloadMessage is the refusal for a review that found no slot in time.
const overloadMessage = "podsieve is overloaded and refused to decide on %s %s/%s without evaluating it: " +
	"%d reviews are being evaluated (at most %d at once, at most %d from one namespace); retry in a few seconds"

// timeoutKey carries the API server's ?timeout= and the arrival time from
// the HTTP request (admission.Webhook.WithContextFunc) to Handle, which sees
// only the decoded review.
type timeoutKey struct{}

type arrival struct {
	at      time.Time
	timeout time.Duration // 0: the API server sent none
}

// withRequestTimeout is the webhook's WithContextFunc: it records when the
// request arrived and the timeout the API server appends to webhook calls
// (?timeout=5s, from the webhook's timeoutSeconds).
func withRequestTimeout(ctx context.Context, r *http.Request) context.Context {
	a := arrival{at: time.Now()}
	if t, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && t > 0 {
		a.timeout = t
	}
	return context.WithValue(ctx, timeoutKey{}, a)
}

// reviewDeadline is when a review must be answered: its arrival plus the
// API server's timeout less answerMargin, at most maxReview after arrival.
// Reviews that did not come through withRequestTimeout (a direct call) count
// from now.
func reviewDeadline(ctx context.Context, maxReview time.Duration) time.Time {
	a, ok := ctx.Value(timeoutKey{}).(arrival)
	if !ok {
		a.at = time.Now()
	}
	if maxReview <= 0 {
		maxReview = DefaultMaxReviewTime
	}
	d := maxReview
	if a.timeout > 0 {
		// Keep at most a tenth of a short timeout as the margin.
		d = min(d, a.timeout-min(answerMargin, a.timeout/10))
	}
	return a.at.Add(d)
}

// admissionLimiter admits at most capacity reviews at once and at most
// perNamespace of them from one namespace. A review that finds no slot waits
// in a queue; when a slot frees, it goes to the waiting review whose
// namespace holds the fewest slots (first come among equals), so that a
// namespace that floods podsieve with expensive reviews waits behind every
// other namespace, and a cheap review from a quiet namespace waits at most
// for the next slot to free.
type admissionLimiter struct {
	capacity, perNamespace int

	mu       sync.Mutex
	inflight int
	held     map[string]int
	waiting  []*waiter
	// queueChanged is broadcast, under mu, whenever a review joins or
	// leaves the queue, for whoever waits for the queue to reach a length.
	queueChanged *sync.Cond
}

type waiter struct {
	namespace string
	granted   chan struct{} // closed when a slot is handed to this waiter
}

// newAdmissionLimiter allows capacity reviews at once, ⌈capacity/2⌉ of them
// from one namespace.
func newAdmissionLimiter(capacity int) *admissionLimiter {
	capacity = max(capacity, 1)
	l := &admissionLimiter{capacity: capacity, perNamespace: (capacity + 1) / 2, held: map[string]int{}}
	l.queueChanged = sync.NewCond(&l.mu)
	return l
}

// acquire waits until a slot is free for namespace, for at most wait or
// until ctx ends. It returns the release function, or false when no slot
// came in time. A review that finds a slot free starts no timer.
func (l *admissionLimiter) acquire(ctx context.Context, namespace string, wait time.Duration) (func(), bool) {
	l.mu.Lock()
	if l.inflight < l.capacity && l.held[namespace] < l.perNamespace {
		l.take(namespace)
		l.mu.Unlock()
		return l.releaser(namespace), true
	}
	w := &waiter{namespace: namespace, granted: make(chan struct{})}
	l.waiting = append(l.waiting, w)
	l.queueChanged.Broadcast()
	l.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.granted:
		return l.releaser(namespace), true
	case <-ctx.Done():
	case <-timer.C:
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-w.granted:
		// Granted while timing out: hand the slot on.
		l.give(namespace)
	default:
		l.waiting = slices.DeleteFunc(l.waiting, func(o *waiter) bool { return o == w })
		l.queueChanged.Broadcast()
	}
	return nil, false
}

func (l *admissionLimiter) releaser(namespace string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.give(namespace)
		})
	}
}

// take records a slot held by namespace; l.mu is held.
func (l *admissionLimiter) take(namespace string) {
	l.inflight++
	l.held[namespace]++
	admissionInflight.Inc()
}

// give frees namespace's slot and hands free slots to waiting reviews, the
// namespace holding the fewest first; l.mu is held.
func (l *admissionLimiter) give(namespace string) {
	l.inflight--
	if l.held[namespace]--; l.held[namespace] <= 0 {
		delete(l.held, namespace)
	}
	admissionInflight.Dec()
	for l.inflight < l.capacity {
		best := -1
		for i, w := range l.waiting {
			n := l.held[w.namespace]
			if n < l.perNamespace && (best < 0 || n < l.held[l.waiting[best].namespace]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := l.waiting[best]
		l.waiting = slices.Delete(l.waiting, best, best+1)
		l.queueChanged.Broadcast()
		l.take(w.namespace)
		close(w.granted)
	}
}

// load reports the reviews being evaluated, for the overload message.
func (l *admissionLimiter) load() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight
}
