package v1alpha1_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/podsieve/podsieve/internal/testenv"
)

// These specs run against a real kube-apiserver: the CRD schema, including
// every CEL rule, is what they test.

var (
	env   *envtest.Environment
	suite *testenv.Suite
	cfg   *rest.Config
	k8s   client.Client
	ctx   context.Context
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "API schema suite")
}

var _ = BeforeSuite(func() {
	var err error
	suite, err = testenv.StartSuite(testenv.SuiteOptions{})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, k8s, ctx = suite.Env, suite.Config, suite.Client, suite.Ctx
})

var _ = AfterSuite(func() {
	Expect(suite.Stop()).To(Succeed())
})
