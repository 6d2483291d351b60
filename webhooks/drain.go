package webhooks

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// DefaultShutdownDrain is how long the webhook server keeps answering after
// the manager is asked to stop (--webhook-shutdown-drain).
const DefaultShutdownDrain = 5 * time.Second

// DrainingServer is controller-runtime's webhook server with a graceful
// stop, so that a rolling restart drops no review:
//
//   - When the manager stops, the server first drains for Drain: it keeps
//     answering, readiness fails (ReadyCheck) so that no new connection is
//     routed to it, and each answer carries "Connection: close", so that the
//     API server opens its next connection to another replica instead of
//     reusing this one. Only then does the server close its listener and
//     its idle connections, and it waits for the reviews in flight.
//   - A review's context is the server's: controller-runtime's server ends
//     it when the server stops. Stopping only after the drain means the
//     reviews in flight at the manager's stop are answered, not refused
//     for "the API server went away".
type DrainingServer struct {
	webhook.Server
	// Drain is how long the server answers after the stop began.
	Drain time.Duration
	// Clock times the drain; the real clock when nil.
	Clock    clock.WithTicker
	draining atomic.Bool
}

// Register serves hook at path, closing connections once draining.
func (s *DrainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// Start serves until ctx ends, then drains and stops.
func (s *DrainingServer) Start(ctx context.Context) error {
	serving, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	go func() { done <- s.Server.Start(serving) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	clk := s.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	drain := clk.NewTimer(s.Drain)
	defer drain.Stop()
	select {
	case err := <-done:
		return err
	case <-drain.C():
	}
	stop()
	return <-done
}

// ReadyCheck fails while the server drains, so that a kubelet (and the
// EndpointSlice behind the webhook's Service) stops routing to it.
func (s *DrainingServer) ReadyCheck(*http.Request) error {
	if s.draining.Load() {
		return errors.New("the webhook server is draining before it stops")
	}
	return nil
}
