package chart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/podsieve/podsieve/internal/testenv"
)

// chartOnly are the differences between the chart with its default values
// and config/default that are meant: each object path (kind/name: field
// path) with the reason. Every other difference fails the test.
var chartOnly = map[string]string{
	"Deployment/podsieve-manager: spec.template.spec.containers[0].imagePullPolicy": "image.pullPolicy; IfNotPresent, the API server's default for a tagged image, as config/default gets",
	"Certificate/podsieve-webhook-cert: spec.issuerRef.group":                       "issuerRef.group, which external issuers need; cert-manager.io, cert-manager's default, as config/certmanager gets",
	"Deployment/podsieve-manager: spec.template.spec.nodeSelector":                  "nodeSelector: kubernetes.io/os: linux, so that a replica never lands on a Windows node of a mixed cluster",
	"Deployment/podsieve-manager: spec.template.spec.priorityClassName":             "priorityClassName: system-cluster-critical, which a cluster may admit only in namespaces with a ResourceQuota for it (GKE); the chart documents it, config/default leaves it out",
	"Deployment/podsieve-manager: spec.template.spec.containers[0].env":             "GOMEMLIMIT, 90% of resources.limits.memory, which the chart computes from the value",
}

// chartOnlyObjects are the objects the chart renders with its default
// values that config/default does not, with the reason.
var chartOnlyObjects = map[string]string{
	"ResourceQuota podsieve-system/podsieve-critical-pods": "admits pods of priorityClassName system-cluster-critical where the cluster requires a quota for it (GKE); config/default sets no PriorityClass",
}

// TestSameAsKustomize checks that the chart with its default values, in
// podsieve-system, renders the objects of `kubectl kustomize config/default`:
// the same kinds, names and namespaces, and the same fields, except labels
// and annotations the chart adds (those config/default sets must be there
// with the same values) and the differences in chartOnly. The one object
// the chart leaves out is the Namespace: Helm installs into a namespace
// that exists or that it creates (--create-namespace); README.md says how
// to label it restricted, as config/default's is.
//
// The same holds for config/certmanager and the chart with
// certificates.provider=cert-manager, and for config/prometheus's objects
// and the chart's ServiceMonitor and PrometheusRule.
func TestSameAsKustomize(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)")
	}
	used := map[string]bool{}
	for _, tc := range []struct {
		overlay, values string
		// only: kustomize renders only some of the chart's objects (an
		// overlay applied next to config/default).
		only bool
	}{
		{"default", "", false},
		{"certmanager", "cert-manager-self-signed", false},
		{"prometheus", "metrics: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}", true},
	} {
		t.Run(tc.overlay, func(t *testing.T) {
			out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(testenv.RepoRoot(), "config", tc.overlay)).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize config/%s: %v", tc.overlay, err)
			}
			var values []string
			switch {
			case strings.Contains(tc.values, ":"):
				values = append(values, writeValues(t, tc.values))
			case tc.values != "":
				values = append(values, valuesFile(tc.values))
			}
			sameObjects(t, decode(t, string(out)), render(t, "podsieve-system", values...), tc.only, used)
		})
	}
	for k := range chartOnly {
		if !used[k] {
			t.Errorf("chartOnly lists %q, which no longer differs: remove it", k)
		}
	}
	for k := range chartOnlyObjects {
		if !used[k] {
			t.Errorf("chartOnlyObjects lists %q, which config/default has or the chart no longer renders: remove it", k)
		}
	}
}

func sameObjects(t *testing.T, kustomized, chart rendered, only bool, used map[string]bool) {
	t.Helper()

	key := func(o *unstructured.Unstructured) string {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	var missing, extra []string
	for _, want := range kustomized {
		if want.GetKind() == "Namespace" {
			continue
		}
		got := findExact(chart, want)
		if got == nil {
			missing = append(missing, key(want))
			continue
		}
		t.Run(want.GetKind()+"/"+want.GetName(), func(t *testing.T) {
			for _, field := range []string{"labels", "annotations"} {
				w, _, _ := unstructured.NestedStringMap(want.Object, "metadata", field)
				g, _, _ := unstructured.NestedStringMap(got.Object, "metadata", field)
				for k, v := range w {
					if g[k] != v {
						t.Errorf("metadata.%s[%s] = %q, kustomize has %q", field, k, g[k], v)
					}
				}
			}
			prefix := want.GetKind() + "/" + want.GetName() + ": "
			for _, d := range diff("", withoutMetadata(got.Object), withoutMetadata(want.Object)) {
				if _, ok := chartOnly[prefix+d.path]; ok {
					used[prefix+d.path] = true
					continue
				}
				t.Errorf("%s: the chart has %s, kustomize has %s", d.path, d.got, d.want)
			}
		})
	}
	for _, got := range chart {
		if findExact(kustomized, got) == nil {
			if _, ok := chartOnlyObjects[key(got)]; ok && !only {
				used[key(got)] = true
				continue
			}
			extra = append(extra, key(got))
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("kustomize renders objects the chart does not:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 && !only {
		t.Errorf("the chart renders objects kustomize does not:\n  %s", strings.Join(extra, "\n  "))
	}
}

func findExact(r rendered, o *unstructured.Unstructured) *unstructured.Unstructured {
	for _, c := range r {
		if c.GetKind() == o.GetKind() && c.GetName() == o.GetName() && c.GetNamespace() == o.GetNamespace() {
			return c
		}
	}
	return nil
}

// withoutMetadata is the object without labels and annotations, compared
// apart.
func withoutMetadata(o map[string]any) map[string]any {
	c := make(map[string]any, len(o))
	for k, v := range o {
		if k != "metadata" {
			c[k] = v
		}
	}
	if m, ok := o["metadata"].(map[string]any); ok {
		c["metadata"] = map[string]any{"name": m["name"], "namespace": m["namespace"]}
	}
	return c
}

type difference struct{ path, got, want string }

// diff lists where got and want differ, by field path
// (spec.template.spec.containers[0].args).
func diff(path string, got, want any) []difference {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []difference
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, diff(join(k), g[k], w[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []difference
		for i := range w {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return out
	}
	if reflect.DeepEqual(got, want) {
		return nil
	}
	return []difference{{path: path, got: show(got), want: show(want)}}
}

func show(v any) string {
	if v == nil {
		return "nothing"
	}
	s := strings.TrimSpace(fmt.Sprint(v))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
