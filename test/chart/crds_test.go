package chart

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/podsieve/podsieve/internal/testenv"
)

// TestCRDsAreConfigs checks that the chart's CRDs are config/crd/bases',
// config/policyreport/bases' and those of the OpenReports module podsieve
// imports the types of (copied by `make manifests`), kept on uninstall.
func TestCRDsAreConfigs(t *testing.T) {
	r := render(t, "podsieve-system", valuesFile("everything"))
	openReports, err := testenv.OpenReportsCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"), filepath.Join(testenv.RepoRoot(), "config", "policyreport", "bases"), openReports} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRDs in %s: %v", dir, err)
		}
		for _, f := range files {
			want := readObjects(t, f)[0]
			got := r.find("CustomResourceDefinition", want.GetName())
			if got == nil {
				t.Errorf("the chart does not render %s (%s): run `make manifests`", want.GetName(), f)
				continue
			}
			if !reflect.DeepEqual(got.Object["spec"], want.Object["spec"]) {
				t.Errorf("CRD %s differs from %s: run `make manifests`", want.GetName(), f)
			}
			if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD %s lacks helm.sh/resource-policy: keep", want.GetName())
			}
		}
	}
}

// crdsAre checks that the chart renders exactly these CRDs, each kept on
// uninstall.
func crdsAre(t *testing.T, r rendered, names ...string) {
	t.Helper()
	var got []string
	for _, c := range r.ofKind("CustomResourceDefinition") {
		got = append(got, c.GetName())
		if c.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s lacks helm.sh/resource-policy: keep", c.GetName())
		}
	}
	slices.Sort(got)
	names = slices.Clone(names)
	slices.Sort(names)
	if !slices.Equal(got, names) {
		t.Errorf("CRDs %v, want %v", got, names)
	}
}
