package chart

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/podsieve/podsieve/internal/testenv"
)

// apiServer is an envtest control plane with no CRDs (the chart brings its
// own) and a cluster-admin kubeconfig for helm and kubectl.
type apiServer struct {
	kubeconfig, kubectlBin string
}

func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if _, err := env.Start(); err != nil {
		t.Fatalf("start envtest from %s: %v", assets, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &apiServer{kubeconfig: path, kubectlBin: filepath.Join(assets, "kubectl")}
}

// kubectl runs kubectl against the API server, with stdin.
func (s *apiServer) kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(s.kubectlBin, append([]string{"--kubeconfig", s.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (s *apiServer) mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := s.kubectl(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (s *apiServer) helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return helm(t, append(args, "--kubeconfig", s.kubeconfig)...)
}

// TestAgainstAPIServer installs and uninstalls the chart with helm, then
// applies every value set's render to a real API server: CRDs for real
// (a dry run of custom objects needs their CRDs), the rest as a server-side
// dry run, which validates each object against the API server's schemas
// and admission without creating it (the webhook configuration, with no
// manager behind it, would refuse every later write).
func TestAgainstAPIServer(t *testing.T) {
	s := startAPIServer(t)
	s.mustKubectl(t, "", "apply", "--server-side", "-f", filepath.Join("testdata", "third-party-crds.yaml"))

	// Helm refuses, then adopts, PolicyReport CRDs that a user applied with
	// kubectl first (README.md, "PolicyReport CRDs"), and leaves every CRD
	// on uninstall.
	t.Run("install, adopt the PolicyReport CRDs, uninstall", func(t *testing.T) {
		s.mustKubectl(t, "", "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "policyreport"))
		install := []string{"install", "podsieve", chartDir(), "--namespace", "podsieve-system", "--create-namespace", "--set", "crds.policyReports=true"}
		out, err := s.helm(t, install...)
		if err == nil || !strings.Contains(err.Error(), "invalid ownership metadata") {
			t.Fatalf("helm install over kubectl's PolicyReport CRDs: %v\n%s\nwant a refusal for their ownership metadata", err, out)
		}
		for _, crd := range []string{"policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io"} {
			s.mustKubectl(t, "", "label", "crd", crd, "app.kubernetes.io/managed-by=Helm")
			s.mustKubectl(t, "", "annotate", "crd", crd, "meta.helm.sh/release-name=podsieve", "meta.helm.sh/release-namespace=podsieve-system")
		}
		if out, err := s.helm(t, install...); err != nil {
			t.Fatalf("helm install after adopting the PolicyReport CRDs: %v\n%s", err, out)
		}
		s.mustKubectl(t, "", "get", "validatingwebhookconfiguration/podsieve", "-n", "podsieve-system",
			"deployment/podsieve-manager", "secret/podsieve-webhook-cert", "poddisruptionbudget/podsieve-manager")
		if out, err := s.helm(t, "uninstall", "podsieve", "--namespace", "podsieve-system"); err != nil {
			t.Fatalf("helm uninstall: %v\n%s", err, out)
		}
		out = s.mustKubectl(t, "", "get", "crd", "-o", "name")
		for _, crd := range []string{"securitypolicies.policy.podsieve.dev", "policyexceptions.policy.podsieve.dev",
			"policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io"} {
			if !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+crd+"\n") {
				t.Errorf("helm uninstall deleted CRD %s; CRDs left:\n%s", crd, out)
			}
		}
		if _, err := s.kubectl(t, "", "get", "validatingwebhookconfiguration/podsieve"); err == nil {
			t.Error("helm uninstall left the webhook configuration")
		}
	})

	// The CRDs kept by the uninstall above still name release podsieve in
	// podsieve-system: another release (another name, another namespace)
	// is refused until it takes them over with --take-ownership, as
	// docs/install.md says; then it installs, and uninstalls leaving the
	// CRDs again.
	t.Run("reinstall under another release name and namespace", func(t *testing.T) {
		install := []string{"install", "sieve", chartDir(), "--namespace", "policy-system", "--create-namespace"}
		out, err := s.helm(t, install...)
		if err == nil || !strings.Contains(err.Error(), "invalid ownership metadata") {
			t.Fatalf("helm install of another release over the kept CRDs: %v\n%s\nwant a refusal for their ownership metadata", err, out)
		}
		if out, err := s.helm(t, append(install, "--take-ownership")...); err != nil {
			t.Fatalf("helm install --take-ownership: %v\n%s", err, out)
		}
		got := s.mustKubectl(t, "", "get", "crd", "securitypolicies.policy.podsieve.dev", "-o", "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-name}/{.metadata.annotations.meta\\.helm\\.sh/release-namespace}")
		if got != "sieve/policy-system" {
			t.Errorf("the CRD belongs to %q after --take-ownership, want sieve/policy-system", got)
		}
		s.mustKubectl(t, "", "get", "validatingwebhookconfiguration/podsieve", "-n", "policy-system", "deployment/podsieve-manager")
		if out, err := s.helm(t, "uninstall", "sieve", "--namespace", "policy-system"); err != nil {
			t.Fatalf("helm uninstall: %v\n%s", err, out)
		}
		s.mustKubectl(t, "", "get", "crd", "securitypolicies.policy.podsieve.dev", "policyexceptions.policy.podsieve.dev")
	})

	// A release takes over what `kubectl apply -k config/default` installed
	// (README.md, "From a kustomize install").
	t.Run("take over a kustomize install", func(t *testing.T) {
		s.mustKubectl(t, "", "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "default"))
		// Whatever happens, no webhook with nothing behind it may stay to
		// refuse the dry runs below.
		t.Cleanup(func() {
			_, _ = s.kubectl(t, "", "delete", "validatingwebhookconfiguration", "podsieve", "--ignore-not-found")
		})
		// Helm applies server-side; kubectl's client-side apply owns the same
		// fields (as defaulted by the API server), hence --force-conflicts.
		if out, err := s.helm(t, "install", "podsieve", chartDir(), "--namespace", "podsieve-system", "--take-ownership", "--force-conflicts"); err != nil {
			t.Fatalf("helm install --take-ownership --force-conflicts over config/default: %v\n%s", err, out)
		}
		out := s.mustKubectl(t, "", "get", "deployment/podsieve-manager", "-n", "podsieve-system", "-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}")
		if out != "Helm" {
			t.Errorf("the Deployment's managed-by label is %q after the takeover, want Helm", out)
		}
		if out, err := s.helm(t, "uninstall", "podsieve", "--namespace", "podsieve-system"); err != nil {
			t.Fatalf("helm uninstall: %v\n%s", err, out)
		}
	})

	for _, set := range valueSets {
		t.Run("dry run "+set.name, func(t *testing.T) {
			text, err := renderText(t, set.namespace, set.files()...)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			var crds, rest []string
			objects := 0
			for _, o := range decode(t, text) {
				b, err := yaml.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, string(b))
				} else {
					rest = append(rest, string(b))
					objects++
				}
			}
			if len(crds) > 0 {
				s.mustKubectl(t, strings.Join(crds, "---\n"), "apply", "--server-side", "--force-conflicts", "-f", "-")
				s.mustKubectl(t, "", "wait", "--for", "condition=Established", "crd", "--all", "--timeout", "60s")
			}
			if _, err := s.kubectl(t, "", "create", "namespace", set.namespace); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
				t.Fatal(err)
			}
			out := s.mustKubectl(t, strings.Join(rest, "---\n"), "apply", "--dry-run=server", "-f", "-")
			if n := strings.Count(out, "(server dry run)"); n != objects {
				t.Errorf("the API server accepted %d of %d objects:\n%s", n, objects, out)
			}
		})
	}
}
