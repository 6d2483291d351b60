package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// TestManagerWritesOnlyItsOwnWebhookObjects: the manager's generated roles
// (config/rbac/role.yaml, from the +kubebuilder:rbac markers in manager.go)
// let it write only its own ValidatingWebhookConfiguration and certificate
// Secret, by name, never every one of them.
func TestManagerWritesOnlyItsOwnWebhookObjects(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]string{"validatingwebhookconfigurations": "podsieve", "secrets": "podsieve-webhook-cert"}
	writes := []string{"create", "update", "patch", "delete", "deletecollection", "*"}
	seen := map[string]bool{}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var role rbacv1.ClusterRole // a Role's rules decode the same
		if err := dec.Decode(&role); err != nil {
			break
		}
		for _, rule := range role.Rules {
			for _, res := range rule.Resources {
				name, ok := own[res]
				if !ok && res != "*" {
					continue
				}
				for _, verb := range rule.Verbs {
					if !slices.Contains(writes, verb) {
						continue
					}
					if !ok || !slices.Equal(rule.ResourceNames, []string{name}) {
						t.Errorf("%s %q may %s %s %v: want resourceNames [%s]", role.Kind, role.Name, verb, res, rule.ResourceNames, name)
					}
					seen[res+"/"+verb] = true
				}
			}
		}
	}
	// cert-controller writes both with Update.
	for _, want := range []string{"validatingwebhookconfigurations/update", "secrets/update"} {
		if !seen[want] {
			t.Errorf("the manager may not %s: certificate rotation needs it", want)
		}
	}
}
