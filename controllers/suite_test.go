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
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
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
	env    *envtest.Environment
	cfg    *rest.Config
	k8s    client.Client
	ix     *index.Index
	ctx    context.Context
	cancel context.CancelFunc
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, cfg, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())

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
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
