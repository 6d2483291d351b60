// Package samples reads the SecurityPolicies and PolicyExceptions of
// config/samples, for the tests of the packages that compile them (the
// engine, the index, the compiler of ValidatingAdmissionPolicies). Test
// support only: production code must not import it. It depends on the API
// types alone, so that the engine's own tests may use it.
package samples

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Read returns the SecurityPolicies and PolicyExceptions of config/samples
// (its policy_v1alpha1_*.yaml files, one object each), decoded strictly,
// each at generation 1, as the API server would store them. It fails the
// test on a file it cannot read, an object of another kind, or samples
// without a policy or an exception.
func Read(tb testing.TB) ([]*policyv1alpha1.SecurityPolicy, []*policyv1alpha1.PolicyException) {
	tb.Helper()
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("samples: no caller information")
	}
	files, err := filepath.Glob(filepath.Join(filepath.Dir(here), "..", "..", "config", "samples", "policy_v1alpha1_*.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	var sps []*policyv1alpha1.SecurityPolicy
	var pes []*policyv1alpha1.PolicyException
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(data, &tm); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		switch tm.Kind {
		case "SecurityPolicy":
			sp := &policyv1alpha1.SecurityPolicy{}
			if err := yaml.UnmarshalStrict(data, sp); err != nil {
				tb.Fatalf("%s: %v", file, err)
			}
			sp.Generation = 1
			sps = append(sps, sp)
		case "PolicyException":
			pe := &policyv1alpha1.PolicyException{}
			if err := yaml.UnmarshalStrict(data, pe); err != nil {
				tb.Fatalf("%s: %v", file, err)
			}
			pe.Generation = 1
			pes = append(pes, pe)
		default:
			tb.Fatalf("%s: unexpected kind %q", file, tm.Kind)
		}
	}
	if len(sps) == 0 || len(pes) == 0 {
		tb.Fatalf("config/samples has %d SecurityPolicies and %d PolicyExceptions", len(sps), len(pes))
	}
	return sps, pes
}

// Exceptions returns Read's PolicyExceptions.
func Exceptions(tb testing.TB) []*policyv1alpha1.PolicyException {
	tb.Helper()
	_, pes := Read(tb)
	return pes
}
