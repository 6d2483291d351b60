package webhooks_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
	"github.com/podsieve/podsieve/webhooks"
)

// These specs run the manager with its webhook server; the real API server
// calls it over TLS for every write, as in a cluster.

const exceptionsNamespace = "podsieve-system"

// exceptionsLimit is --max-exceptions-per-namespace for the suite: small, so
// that a spec reaches it quickly, and above what the other specs create in
// one namespace.
const exceptionsLimit = 5

var (
	env      *envtest.Environment
	suite    *testenv.Suite
	cfg      *rest.Config
	k8s      client.Client
	warnings *warningRecorder
	ix       *index.Index
	ctx      context.Context
)

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Webhooks suite")
}

// warningRecorder keeps the warnings the API server returns, as kubectl
// prints them.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns and forgets the warnings seen so far.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(15 * time.Second)
	var err error
	suite, err = testenv.StartSuite(testenv.SuiteOptions{Start: testenv.StartWithWebhooks, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, ctx = suite.Env, suite.Config, suite.Ctx

	// The specs write as a user, through a client that keeps the warnings
	// the API server returns.
	userCfg := rest.CopyConfig(cfg)
	warnings = &warningRecorder{}
	userCfg.WarningHandler = warnings
	k8s, err = client.New(userCfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())

	wo := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir}),
	})
	Expect(err).NotTo(HaveOccurred())
	ix, err = controllers.Setup(ctx, mgr, controllers.Options{ExceptionsNamespace: exceptionsNamespace})
	Expect(err).NotTo(HaveOccurred())
	Expect(webhooks.Setup(mgr, ix, webhooks.Options{ExceptionsNamespace: exceptionsNamespace, MaxExceptionsPerNamespace: exceptionsLimit})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(ix.Ready, time.Minute).Should(BeTrue())
	Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).Should(Succeed())
})

var _ = AfterSuite(func() {
	Expect(suite.Stop()).To(Succeed())
})
