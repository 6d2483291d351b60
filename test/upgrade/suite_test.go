// Package upgrade_test upgrades podsieve the way a user does, against a
// real kube-apiserver and etcd: the CRDs of an earlier version installed,
// objects stored through them, then this version's CRDs applied over them
// and this version's manager started. Its control plane is its own: the
// other suites install this version's CRDs from the start.
package upgrade_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podsieve/podsieve/internal/testenv"
)

// oldCRDs are the CRDs of podsieve a289960, as `git show
// a289960:config/crd/bases/<file>` prints them.
var oldCRDs = filepath.Join("testdata", "crd-a289960")

var (
	env   *envtest.Environment
	suite *testenv.Suite
	cfg   *rest.Config
	k8s   client.Client
	ctx   context.Context
)

func TestUpgrade(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Upgrade suite")
}

var _ = BeforeSuite(func() {
	var err error
	suite, err = testenv.StartSuite(testenv.SuiteOptions{
		Start: func() (*envtest.Environment, *rest.Config, error) { return testenv.StartWithCRDs(oldCRDs) },
		Log:   GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, k8s, ctx = suite.Env, suite.Config, suite.Client, suite.Ctx
	SetDefaultEventuallyTimeout(30 * time.Second)
})

var _ = AfterSuite(func() {
	Expect(suite.Stop()).To(Succeed())
})
