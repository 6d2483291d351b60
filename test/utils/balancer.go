package utils

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer stands in for the webhook Service: a TCP listener on 127.0.0.1
// that forwards each connection to one ready backend, as kube-proxy forwards
// to the endpoints an EndpointSlice lists. A backend is ready while its
// /readyz answers 200 (the Deployment's readinessProbe) and its process
// runs (a kubelet notices a dead container at once and the endpoint goes).
//
// It forwards bytes, never TLS: the API server's TLS session ends at the
// replica, which serves the certificate it issued itself, checked against
// the webhook configuration's caBundle.
//
// Why it exists: Endpoints and EndpointSlices may not point at loopback, and
// this machine may send traffic nowhere else, so the API server reaches the
// replicas by URL (https://localhost:<port>) through this listener instead
// of through the Service. A connection stays with its backend until either
// side closes it, as with kube-proxy: the API server's kept-alive
// connections to a replica that stops are cut, not moved.
type Balancer struct {
	// Period is how often each backend's /readyz is probed (default 1s).
	Period time.Duration

	ln       net.Listener
	mu       sync.Mutex
	backends []*Backend
	next     int
	refused  atomic.Int64
	failed   atomic.Int64
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

// Backend is one replica behind the balancer.
type Backend struct {
	Name     string
	Addr     string // host:port of its webhook server
	ReadyURL string // its /readyz

	ready   atomic.Bool
	stopped atomic.Bool
	conns   atomic.Int64
}

// Ready reports whether the balancer sends new connections to b.
func (b *Backend) Ready() bool { return b.ready.Load() && !b.stopped.Load() }

// Conns is how many connections the balancer has sent to b.
func (b *Backend) Conns() int64 { return b.conns.Load() }

// NewBalancer listens on a free port of 127.0.0.1.
func NewBalancer(period time.Duration) (*Balancer, error) {
	if period == 0 {
		period = time.Second
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Balancer{Period: period, ln: ln, cancel: cancel}
	b.wg.Add(2)
	go b.serve(ctx)
	go b.probe(ctx)
	return b, nil
}

// Port is the port the API server connects to.
func (b *Balancer) Port() int { return b.ln.Addr().(*net.TCPAddr).Port }

// Refused counts connections closed at once because no backend was ready:
// what a Service without ready endpoints does.
func (b *Balancer) Refused() int64 { return b.refused.Load() }

// DialFailures counts connections closed at once because the chosen
// backend, ready when chosen, did not accept the connection.
func (b *Balancer) DialFailures() int64 { return b.failed.Load() }

// Add puts a backend behind the balancer; it takes connections once its
// /readyz answers 200.
func (b *Balancer) Add(be *Backend) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, old := range b.backends {
		if old.Name == be.Name {
			b.backends[i] = be
			return
		}
	}
	b.backends = append(b.backends, be)
}

// Stopped tells the balancer that a backend's process has exited: it takes
// no new connection until it is Added again.
func (b *Balancer) Stopped(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, be := range b.backends {
		if be.Name == name {
			be.stopped.Store(true)
		}
	}
}

// Backends returns the backends, in order of Add.
func (b *Balancer) Backends() []*Backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*Backend(nil), b.backends...)
}

// ReadyCount is the number of backends that take connections.
func (b *Balancer) ReadyCount() int {
	n := 0
	for _, be := range b.Backends() {
		if be.Ready() {
			n++
		}
	}
	return n
}

// Close stops listening and waits for the probes; forwarded connections
// end when either side closes them.
func (b *Balancer) Close() error {
	b.cancel()
	err := b.ln.Close()
	b.wg.Wait()
	return err
}

func (b *Balancer) pick() *Backend {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range b.backends {
		be := b.backends[b.next%len(b.backends)]
		b.next++
		if be.Ready() {
			return be
		}
	}
	return nil
}

func (b *Balancer) serve(ctx context.Context) {
	defer b.wg.Done()
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go b.forward(conn)
	}
}

func (b *Balancer) forward(client net.Conn) {
	defer func() { _ = client.Close() }()
	be := b.pick()
	if be == nil {
		b.refused.Add(1)
		return
	}
	server, err := net.DialTimeout("tcp", be.Addr, 2*time.Second)
	if err != nil {
		b.failed.Add(1)
		return
	}
	be.conns.Add(1)
	defer func() { _ = server.Close() }()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(server, client)
		if tc, ok := server.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, server)
		if tc, ok := client.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// probe asks each backend's /readyz every Period, as a kubelet's
// readinessProbe does (failureThreshold 1: one failure takes it out).
func (b *Balancer) probe(ctx context.Context) {
	defer b.wg.Done()
	client := &http.Client{Timeout: time.Second}
	t := time.NewTicker(b.Period)
	defer t.Stop()
	for {
		for _, be := range b.Backends() {
			if be.stopped.Load() {
				continue
			}
			ok := false
			if resp, err := client.Get(be.ReadyURL); err == nil {
				_ = resp.Body.Close()
				ok = resp.StatusCode == http.StatusOK
			}
			be.ready.Store(ok)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
