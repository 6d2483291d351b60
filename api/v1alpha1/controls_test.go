package v1alpha1_test

import (
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// TestControlsMatchTheSchema keeps the one list of control names
// (policyv1alpha1.Controls) and the enum the CRDs validate controlName with
// in step: the enum comes from a marker, the list is code.
func TestControlsMatchTheSchema(t *testing.T) {
	want := make([]string, len(policyv1alpha1.Controls))
	for i, c := range policyv1alpha1.Controls {
		want[i] = string(c)
	}
	slices.Sort(want)
	for _, crd := range []string{"policy.podsieve.dev_securitypolicies.yaml", "policy.podsieve.dev_policyexceptions.yaml"} {
		raw, err := os.ReadFile("../../config/crd/bases/" + crd)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		enums := 0
		walk(doc, func(key string, v map[string]any) {
			if key != "controlName" && key != "allowedControls" {
				return
			}
			if items, ok := v["items"].(map[string]any); ok {
				v = items
			}
			var got []string
			for _, e := range v["enum"].([]any) {
				got = append(got, e.(string))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: %s enum %v, policyv1alpha1.Controls %v", crd, key, got, want)
			}
			enums++
		})
		if enums == 0 {
			t.Errorf("%s: no controlName enum found", crd)
		}
	}
}

// TestPodBearingKindsMatchTheSchema keeps the CRD's enum of match.kinds and
// the engine's one table of kinds (engine.PodBearingKinds, built on this
// package's PodBearingKind constants) in step.
func TestPodBearingKindsMatchTheSchema(t *testing.T) {
	var want []string
	for _, k := range engine.PodBearingKinds {
		want = append(want, string(k.Kind))
	}
	slices.Sort(want)
	raw, err := os.ReadFile("../../config/crd/bases/policy.podsieve.dev_policyexceptions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	found := 0
	walk(doc, func(key string, v map[string]any) {
		if key != "kinds" {
			return
		}
		var got []string
		for _, e := range v["items"].(map[string]any)["enum"].([]any) {
			got = append(got, e.(string))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("kinds enum %v, engine.PodBearingKinds %v", got, want)
		}
		found++
	})
	if found == 0 {
		t.Error("no kinds enum found")
	}
}

// walk calls f for every property schema under a "properties" map, with the
// property's name.
func walk(n any, f func(string, map[string]any)) {
	switch n := n.(type) {
	case map[string]any:
		if props, ok := n["properties"].(map[string]any); ok {
			for k, v := range props {
				if m, ok := v.(map[string]any); ok {
					f(k, m)
				}
			}
		}
		for _, v := range n {
			walk(v, f)
		}
	case []any:
		for _, v := range n {
			walk(v, f)
		}
	}
}
