package webhooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

// TestDrainingServer: when the manager stops, the server keeps answering
// for the drain, not ready and closing each connection after its answer,
// and only then stops the server it wraps.
func TestDrainingServer(t *testing.T) {
	inner := newStubServer(errors.New("listener closed"))
	s := &DrainingServer{Server: inner, Drain: time.Hour}
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
	deadline := time.Now().Add(10 * time.Second)
	for s.ReadyCheck(nil) == nil {
		if time.Now().After(deadline) {
			t.Fatal("still ready after the manager stopped")
		}
		time.Sleep(time.Millisecond)
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
	inner2 := newStubServer(nil)
	s2 := &DrainingServer{Server: inner2, Drain: 20 * time.Millisecond}
	ctx2, stop2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- s2.Start(ctx2) }()
	serving2 := <-inner2.started
	stop2()
	if err := <-done2; err != nil {
		t.Errorf("Start returned %v", err)
	}
	if serving2.Err() == nil {
		t.Error("the server was not stopped after the drain")
	}
}
