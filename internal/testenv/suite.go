package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Suite is what every envtest suite starts from: a control plane, a client
// of it that knows podsieve's kinds, and a context that ends when the suite
// stops. A suite keeps its own extras (a manager, a warning recorder) beside
// it.
type Suite struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
	// Ctx ends when Stop is called.
	Ctx    context.Context
	cancel context.CancelFunc
}

// SuiteOptions say how a suite differs from the default: Start's control
// plane, no log, the client at client-go's default rate.
type SuiteOptions struct {
	// Start starts the control plane; Start when nil.
	Start func() (*envtest.Environment, *rest.Config, error)
	// Log, when set, receives controller-runtime's log (a Ginkgo suite
	// passes GinkgoWriter, which prints it for the specs that fail).
	Log io.Writer
	// Configure, when set, adjusts the control plane's config before the
	// client is made from it (its rate limits, say).
	Configure func(*rest.Config)
}

// StartSuite starts a suite's control plane and client. On an error,
// whatever it started is stopped again.
func StartSuite(o SuiteOptions) (*Suite, error) {
	if o.Log != nil {
		ctrl.SetLogger(zap.New(zap.WriteTo(o.Log), zap.UseDevMode(true)))
	}
	start := o.Start
	if start == nil {
		start = Start
	}
	env, cfg, err := start()
	if err != nil {
		return nil, err
	}
	if o.Configure != nil {
		o.Configure(cfg)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("client of the control plane: %w", err), env.Stop())
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Suite{Env: env, Config: cfg, Client: c, Ctx: ctx, cancel: cancel}, nil
}

// Stop ends the suite's context and stops its control plane. A nil suite
// (its start failed) has nothing to stop.
func (s *Suite) Stop() error {
	if s == nil {
		return nil
	}
	s.cancel()
	return s.Env.Stop()
}
