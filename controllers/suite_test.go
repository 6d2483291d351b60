package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// These specs run the controllers in a manager against a real kube-apiserver
// and etcd, and read what users read: status, events, kubectl get.

const exceptionsNamespace = "podsieve-system"

var (
	env   *envtest.Environment
	suite *testenv.Suite
	cfg   *rest.Config
	k8s   client.Client
	ix    *index.Index
	ctx   context.Context
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers suite")
}

var _ = BeforeSuite(func() {
	var err error
	suite, err = testenv.StartSuite(testenv.SuiteOptions{Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, k8s, ctx = suite.Env, suite.Config, suite.Client, suite.Ctx

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		// Other tests of this package start managers too.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	ix, err = controllers.Setup(ctx, mgr, controllers.Options{
		ExceptionsNamespace: exceptionsNamespace,
		// Quick enough to watch: the defaults batch for a second and write
		// counters every ten.
		Background: background.Options{Batch: 100 * time.Millisecond, StatusInterval: 500 * time.Millisecond,
			Events: mgr.GetEventRecorder(controllers.ReportingController)},
	})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	SetDefaultEventuallyTimeout(15 * time.Second)
	Eventually(ix.Ready, time.Minute).Should(BeTrue(), "the index never became ready")
})

var _ = AfterSuite(func() {
	Expect(suite.Stop()).To(Succeed())
})
