// Package enginetest compiles policies and exceptions written as YAML, for
// the tests of the packages that call the engine. Test support only:
// production code must not import it. (The engine's own tests keep their
// copy: they cannot import a package that imports the engine.)
package enginetest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// ClusterNamespace is the cluster exceptions namespace the exceptions are
// compiled for.
const ClusterNamespace = "podsieve-system"

// BaselineRule is the rules list most tests need: one rule "r" that
// enforces the baseline level at the latest version. Prefix it with
// other spec fields ("exceptions: {}\n" + BaselineRule).
const BaselineRule = "rules:\n- name: r\n  podSecurity: {level: baseline}"

// MustPolicy compiles a SecurityPolicy named name whose spec is the YAML
// spec; its UID is "uid-<name>".
func MustPolicy(tb testing.TB, name, spec string) *engine.Policy {
	tb.Helper()
	sp := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if err := yaml.UnmarshalStrict([]byte(spec), &sp.Spec); err != nil {
		tb.Fatalf("SecurityPolicy %s: %v", name, err)
	}
	p, err := engine.CompilePolicy(sp)
	if err != nil {
		tb.Fatalf("SecurityPolicy %s: %v", name, err)
	}
	return p
}

// MustException compiles a PolicyException in namespace ns whose spec is
// the YAML spec.
func MustException(tb testing.TB, ns, name, spec string) *engine.Exception {
	tb.Helper()
	pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := yaml.UnmarshalStrict([]byte(spec), &pe.Spec); err != nil {
		tb.Fatalf("PolicyException %s/%s: %v", ns, name, err)
	}
	e, err := engine.CompileException(pe, ClusterNamespace)
	if err != nil {
		tb.Fatalf("PolicyException %s/%s: %v", ns, name, err)
	}
	return e
}
