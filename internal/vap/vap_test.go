package vap

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// TestParamScope: the scope of a paramKind follows the objects given, as
// the API server's RESTMapper would say for the kinds they are.
func TestParamScope(t *testing.T) {
	cases := []struct {
		name, objs string
		want       string
	}{
		{"no objects: namespaced", "", "namespace"},
		{"objects without namespace: cluster", "apiVersion: example.com/v1\nkind: Limits\nmetadata: {name: a}\n", "root"},
		{"objects with namespace: namespaced", "apiVersion: example.com/v1\nkind: Limits\nmetadata: {name: a, namespace: team}\n", "namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			if tc.objs != "" {
				m := map[string]any{}
				if err := yaml.UnmarshalStrict([]byte(tc.objs), &m); err != nil {
					t.Fatal(err)
				}
				objs = []*unstructured.Unstructured{{Object: m}}
			}
			_, scope := newParamInformer(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Limits"}, objs)
			if string(scope.Name()) != tc.want {
				t.Errorf("scope = %s, want %s", scope.Name(), tc.want)
			}
		})
	}
}
