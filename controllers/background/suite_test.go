package background

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podsieve/podsieve/internal/testenv"
)

// These specs run the scan against a real kube-apiserver and etcd. Most call
// the scan directly, with an index they fill themselves (as podsieve eval
// does) and a fake clock, and read what users read: PolicyReports, status
// counters, kubectl get. One runs the scan's controller in a manager, to see
// that its sources feed it.

const exceptionsNamespace = "podsieve-system"

var (
	env   *envtest.Environment
	suite *testenv.Suite
	cfg   *rest.Config
	k8s   client.Client
	ctx   context.Context
)

func TestBackground(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Background scan suite")
}

var _ = BeforeSuite(func() {
	var err error
	suite, err = testenv.StartSuite(testenv.SuiteOptions{Log: GinkgoWriter, Configure: func(c *rest.Config) {
		// The specs scan through this client, not a cache: a scan lists
		// every scanned kind, more than client-go's default 5 requests a
		// second.
		c.QPS, c.Burst = 1000, 2000
	}})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, k8s, ctx = suite.Env, suite.Config, suite.Client, suite.Ctx
	// For the manager's round trips, in the one spec that runs it.
	SetDefaultEventuallyTimeout(15 * time.Second)
})

var _ = AfterSuite(func() {
	Expect(suite.Stop()).To(Succeed())
})
