// Package testenv starts the envtest control plane (a real etcd and
// kube-apiserver) with podsieve's CRDs installed, for the envtest suites of
// every package and for `make demo`. It is test and demo support only;
// production code must not import it.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	reportv1alpha2 "github.com/podsieve/podsieve/api/wgpolicyk8s/v1alpha2"
)

// RepoRoot is the root of the podsieve repository, found from this file.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Scheme knows the built-in kinds and podsieve's.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := policyv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := openreportsv1alpha1.Install(s); err != nil {
		panic(err)
	}
	if err := reportv1alpha2.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Start starts a control plane with the CRDs of config/crd/bases and
// config/policyreport/bases installed.
// KUBEBUILDER_ASSETS must point at the binaries that hack/setup-envtest.sh
// builds; `make test` sets it.
func Start() (*envtest.Environment, *rest.Config, error) {
	return start(false, "")
}

// StartWithoutPolicyReports is Start without the PolicyReport CRDs, as in a
// cluster that has not installed config/policyreport.
func StartWithoutPolicyReports() (*envtest.Environment, *rest.Config, error) {
	return startEnv(false, "", false)
}

// PolicyReportCRDs is the directory of the PolicyReport CRDs.
func PolicyReportCRDs() string { return filepath.Join(RepoRoot(), "config", "policyreport", "bases") }

// OpenReportsCRDs is the directory of the OpenReports CRDs
// (openreports.io/v1alpha1) in the module podsieve imports their types
// from, so that the tests install exactly the schema of those types.
func OpenReportsCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openreports/reports-api").Output()
	if err != nil {
		return "", fmt.Errorf("find the OpenReports module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd"), nil
}

// StartWithWebhooks is Start with the webhook configurations of
// config/webhook installed, pointed at a local port with a generated CA:
// env.WebhookInstallOptions has the host, port and certificate directory the
// manager's webhook server must use. The API server calls it over TLS.
func StartWithWebhooks() (*envtest.Environment, *rest.Config, error) {
	return start(true, "")
}

// StartWithWebhooksAt is StartWithWebhooks with the API server calling the
// webhooks at host (a DNS name such as "localhost", which a certificate can
// name) instead of 127.0.0.1.
func StartWithWebhooksAt(host string) (*envtest.Environment, *rest.Config, error) {
	return start(true, host)
}

func start(webhooks bool, host string) (*envtest.Environment, *rest.Config, error) {
	return startEnv(webhooks, host, true)
}

// StartWithCRDs starts a control plane with only the CRDs of dirs
// installed: an upgrade test installs an earlier version's.
func StartWithCRDs(dirs ...string) (*envtest.Environment, *rest.Config, error) {
	return startWith(dirs, false, "")
}

func startEnv(webhooks bool, host string, policyReports bool) (*envtest.Environment, *rest.Config, error) {
	dirs := []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}
	if policyReports {
		dirs = append(dirs, PolicyReportCRDs())
	}
	return startWith(dirs, webhooks, host)
}

func startWith(crds []string, webhooks bool, host string) (*envtest.Environment, *rest.Config, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, " +
			"or export KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                Scheme(),
	}
	if webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(RepoRoot(), "config", "webhook")}, LocalServingHostExternalName: host}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("start envtest control plane from %s: %w", assets, err)
	}
	return env, cfg, nil
}
