package webhooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// stubServer stands for controller-runtime's server: it serves its mux and
// runs until its context ends.
type stubServer struct {
	mux     *http.ServeMux
	started chan context.Context
	quit    chan struct{} // closed: the server stops by itself, with err
	err     error
}

func newStubServer(err error) *stubServer {
	return &stubServer{mux: http.NewServeMux(), started: make(chan context.Context, 1), quit: make(chan struct{}), err: err}
}

var _ webhook.Server = (*stubServer)(nil)

func (s *stubServer) NeedLeaderElection() bool                { return false }
func (s *stubServer) Register(path string, hook http.Handler) { s.mux.Handle(path, hook) }
func (s *stubServer) StartedChecker() healthz.Checker         { return healthz.Ping }
func (s *stubServer) WebhookMux() *http.ServeMux              { return s.mux }
func (s *stubServer) Start(ctx context.Context) error {
	s.started <- ctx
	select {
	case <-ctx.Done():
		return nil
	case <-s.quit:
		return s.err
	}
}

// awaitLimit bounds, in real time, each wait of these tests for another
// goroutine to get somewhere: a wait that never ends fails the test instead
// of hanging it until go test's own timeout.
const awaitLimit = 5 * time.Second

// awaitTimer reports whether something waits on clk (the drain's timer)
// within limit, in real time.
func awaitTimer(clk *clocktesting.FakeClock, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// TestAwaitsGiveUp: the tests' waits for another goroutine end when what
// they wait for never comes.
func TestAwaitsGiveUp(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	if awaitTimer(clk, 10*time.Millisecond) {
		t.Error("awaitTimer: a timer on a clock nothing waits on")
	}
	clk.NewTimer(time.Minute)
	if !awaitTimer(clk, 10*time.Millisecond) {
		t.Error("awaitTimer: no timer on a clock a timer waits on")
	}
	l := newAdmissionLimiter(1)
	if l.awaitQueued(1, 10*time.Millisecond) {
		t.Error("awaitQueued: a queued review where none is")
	}
	if !l.awaitQueued(0, 10*time.Millisecond) {
		t.Error("awaitQueued: fewer than no reviews queued")
	}
}

// TestDrainingServer: when the manager stops, the server keeps answering
// for the drain, not ready and closing each connection after its answer,
// and only then stops the server it wraps.
func TestDrainingServer(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	inner := newStubServer(errors.New("listener closed"))
	s := &DrainingServer{Server: inner, Drain: time.Minute, Clock: clk}
	s.Register("/validate-pods", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	ask := func() *http.Response {
		rec := httptest.NewRecorder()
		inner.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate-pods", nil))
		return rec.Result()
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	serving := <-inner.started
	if s.ReadyCheck(nil) != nil || ask().Header.Get("Connection") == "close" {
		t.Fatal("serving: not ready, or closing connections")
	}

	stop()
	if !awaitTimer(clk, awaitLimit) { // the drain timer starts once the server is draining
		t.Fatalf("no drain timer within %v of the stop", awaitLimit)
	}
	if s.ReadyCheck(nil) == nil {
		t.Fatal("still ready after the manager stopped")
	}
	clk.Step(time.Minute - time.Nanosecond)
	// Step fires a timer that is due before it returns; the server's stop
	// that follows runs on Start's goroutine, later.
	if !clk.HasWaiters() {
		t.Fatal("the drain timer fired before the drain was over")
	}
	if serving.Err() != nil {
		t.Fatal("the server stopped before its drain")
	}
	if r := ask(); r.StatusCode != http.StatusOK || r.Header.Get("Connection") != "close" {
		t.Errorf("draining: status %d, Connection %q; want answered, and the connection closed after", r.StatusCode, r.Header.Get("Connection"))
	}

	// The drain ends early if the server stops by itself, with its error.
	close(inner.quit)
	if err := <-done; err == nil || err.Error() != "listener closed" {
		t.Errorf("Start returned %v, want the server's own error", err)
	}

	// Otherwise the server is stopped once the drain is over.
	clk2 := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	inner2 := newStubServer(nil)
	s2 := &DrainingServer{Server: inner2, Drain: time.Minute, Clock: clk2}
	ctx2, stop2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- s2.Start(ctx2) }()
	serving2 := <-inner2.started
	stop2()
	if !awaitTimer(clk2, awaitLimit) {
		t.Fatalf("no drain timer within %v of the stop", awaitLimit)
	}
	if serving2.Err() != nil {
		t.Fatal("the server was stopped before the drain was over")
	}
	clk2.Step(time.Minute)
	if err := <-done2; err != nil {
		t.Errorf("Start returned %v", err)
	}
	if serving2.Err() == nil {
		t.Error("the server was not stopped after the drain")
	}
}
