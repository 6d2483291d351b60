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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/podsieve/podsieve/internal/testenv"
)

// oldCRDs are the CRDs of podsieve a289960, as `git show
// a289960:config/crd/bases/<file>` prints them.
var oldCRDs = filepath.Join("testdata", "crd-a289960")

var (
	env    *envtest.Environment
	cfg    *rest.Config
	k8s    client.Client
	ctx    context.Context
	cancel context.CancelFunc
)

func TestUpgrade(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Upgrade suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, cfg, err = testenv.StartWithCRDs(oldCRDs)
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	SetDefaultEventuallyTimeout(30 * time.Second)
})

var _ = AfterSuite(func() {
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
