package background

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/podsieve/podsieve/internal/testenv"
)

// These specs run the scan against a real kube-apiserver and etcd. Most call
// the scan directly, with an index they fill themselves (as podsieve eval
// does) and a fake clock, and read what users read: PolicyReports, status
// counters, kubectl get. One runs the scan's controller in a manager, to see
// that its sources feed it.

const exceptionsNamespace = "podsieve-system"

var (
	env    *envtest.Environment
	cfg    *rest.Config
	k8s    client.Client
	ctx    context.Context
	cancel context.CancelFunc
)

func TestBackground(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Background scan suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, cfg, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	// The specs scan through this client, not a cache: a scan lists every
	// scanned kind, more than client-go's default 5 requests a second.
	cfg.QPS, cfg.Burst = 1000, 2000
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	// For the manager's round trips, in the one spec that runs it.
	SetDefaultEventuallyTimeout(15 * time.Second)
})

var _ = AfterSuite(func() {
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
