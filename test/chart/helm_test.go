package chart

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/podsieve/podsieve/internal/testenv"
)

// chartDir is charts/podsieve; valueSets are its ci/*-values.yaml.
func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "podsieve") }

func valuesFile(set string) string {
	return filepath.Join(chartDir(), "ci", set+"-values.yaml")
}

func helmBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HELM")
	if p == "" {
		t.Fatal("HELM is not set: run the tests with `make test`, or export HELM=$(hack/setup-helm.sh)")
	}
	return p
}

// helm runs helm with args and returns its stdout, or an error with its
// stderr. HELM_* settings of the caller's environment are cut off, so that
// a user's repositories or plugins cannot change what the tests see.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(stderr.String() + "\n" + stdout.String()))
	}
	return stdout.String(), nil
}

// render is `helm template podsieve charts/podsieve` in namespace with the
// values files, decoded.
func render(t *testing.T, namespace string, values ...string) rendered {
	t.Helper()
	out, err := renderText(t, namespace, values...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return decode(t, out)
}

func renderText(t *testing.T, namespace string, values ...string) (string, error) {
	t.Helper()
	args := []string{"template", "podsieve", chartDir(), "--namespace", namespace}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	return helm(t, args...)
}

// writeValues writes values (YAML) to a file for --values.
func writeValues(t *testing.T, values string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rendered is a render's objects, in order.
type rendered []*unstructured.Unstructured

func decode(t *testing.T, text string) rendered {
	t.Helper()
	var objs rendered
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("read the rendered chart: %v", err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("decode the rendered chart: %v\n%s", err, doc)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "{}" {
			continue // a comment-only document
		}
		// Unstructured's JSON decoding keeps whole numbers int64, as the
		// typed conversion below wants them.
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(j); err != nil {
			t.Fatalf("decode the rendered chart: %v\n%s", err, doc)
		}
		objs = append(objs, o)
	}
}

// find returns the object of kind and name, or nil.
func (r rendered) find(kind, name string) *unstructured.Unstructured {
	for _, o := range r {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r rendered) ofKind(kind string) rendered {
	var out rendered
	for _, o := range r {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// typed decodes the object of kind and name into into, refusing fields the
// API type does not have (a misspelled field in a template fails here, not
// silently at the API server's pruning).
func typed(t *testing.T, r rendered, kind, name string, into any) {
	t.Helper()
	o := r.find(kind, name)
	if o == nil {
		t.Fatalf("the chart renders no %s %s", kind, name)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
}

func deployment(t *testing.T, r rendered) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	typed(t, r, "Deployment", "podsieve-manager", &d)
	return &d
}

func webhookConfiguration(t *testing.T, r rendered) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	var w admissionregistrationv1.ValidatingWebhookConfiguration
	typed(t, r, "ValidatingWebhookConfiguration", "podsieve", &w)
	return &w
}

func service(t *testing.T, r rendered, name string) *corev1.Service {
	t.Helper()
	var s corev1.Service
	typed(t, r, "Service", name, &s)
	return &s
}

func networkPolicy(t *testing.T, r rendered) *networkingv1.NetworkPolicy {
	t.Helper()
	var n networkingv1.NetworkPolicy
	typed(t, r, "NetworkPolicy", "podsieve-manager", &n)
	return &n
}

func pdb(t *testing.T, r rendered) *policyv1.PodDisruptionBudget {
	t.Helper()
	var p policyv1.PodDisruptionBudget
	typed(t, r, "PodDisruptionBudget", "podsieve-manager", &p)
	return &p
}

// managerContainer is the Deployment's one container.
func managerContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("the Deployment has %d containers, want 1 (manager)", n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}
