package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/manifest"
)

const convertInputs = "../../internal/convert/testdata"

// kyvernoOptIn: two ClusterPolicies, and an exception that waives one of them
// entirely for a debugging pod.
const kyvernoOptIn = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: baseline}
spec:
  validationFailureAction: Enforce
  rules:
  - name: baseline
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {podSecurity: {level: baseline, version: latest}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: restricted}
spec:
  validationFailureAction: Enforce
  rules:
  - name: restricted
    match: {any: [{resources: {kinds: [Pod], namespaces: ["secure-*"]}}]}
    validate: {podSecurity: {level: restricted, version: latest}}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: node-debugger, namespace: ops}
spec:
  exceptions:
  - policyName: baseline
    ruleNames: [baseline]
  match:
    any:
    - resources: {kinds: [Pod], namespaces: [ops], names: ["node-debugger-*"]}
`

// TestConvertGolden runs podsieve convert on the realistic inputs in
// internal/convert/testdata and compares stdout, stderr and the exit status
// with testdata/convert/golden. Whatever it writes must load and compile as
// podsieve eval -f would load it. Regenerate with
// go test ./cmd/podsieve -run TestConvertGolden -update, then review the diff.
func TestConvertGolden(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdin    string
		cluster  []corev1.Namespace
		wantCode int
	}{
		{name: "kyverno-service-mesh", args: []string{"--from", "kyverno", "-f", convertInputs + "/kyverno/service-mesh.yaml"}, wantCode: exitOK},
		{name: "kyverno-untranslatable", args: []string{"--from", "kyverno", "-f", convertInputs + "/kyverno/untranslatable.yaml", "--exceptions-namespace", "platform-exceptions"}, wantCode: exitDenied},
		{
			// podsieve honours exceptions only for a policy that opts in:
			// the policy a converted exception targets gets spec.exceptions
			// ({} for a whole-rule waiver, which names no controls), with a
			// warning; the other policy honours none.
			name: "kyverno-opt-in", args: []string{"--from", "kyverno", "-f", "-"}, stdin: kyvernoOptIn, wantCode: exitOK,
		},
		{name: "kyverno-vpol-custom", args: []string{"--from", "kyverno", "-f", convertInputs + "/kyverno-vpol/custom.yaml"}, wantCode: exitDenied},
		{name: "kyverno-bad-input", args: []string{"--from", "kyverno", "-f", convertInputs + "/kyverno/bad.yaml"}, wantCode: exitBadInput},
		{name: "psa-labels", args: []string{"--from", "psa-labels", "-f", convertInputs + "/psa/namespaces.yaml"}, wantCode: exitOK},
		{name: "psa-labels-invalid", args: []string{"--from", "psa-labels", "-f", convertInputs + "/psa/invalid.yaml"}, wantCode: exitOK},
		{
			name: "psa-labels-cluster",
			args: []string{"--from", "psa-labels", "--cluster"},
			cluster: []corev1.Namespace{
				{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}},
			},
			wantCode: exitOK,
		},
		{name: "psp", args: []string{"--from", "psp", "-f", convertInputs + "/psp", "--every-policy-applies"}, wantCode: exitDenied},
		// Several PSPs: convert refuses to guess which workloads each was for.
		{name: "psp-several", args: []string{"--from", "psp", "-f", convertInputs + "/psp"}, wantCode: exitBadInput},
		{name: "psp-stdin", args: []string{"--from", "psp", "-f", "-"}, stdin: "apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata: {name: host-ports}\nspec:\n  allowPrivilegeEscalation: false\n  requiredDropCapabilities: [ALL]\n  volumes: [configMap, secret, emptyDir, projected, downwardAPI, persistentVolumeClaim, csi, ephemeral]\n  hostPorts: [{min: 30000, max: 30099}]\n  runAsUser: {rule: MustRunAsNonRoot}\n  seLinux: {rule: MustRunAs}\n  supplementalGroups: {rule: RunAsAny}\n  fsGroup: {rule: RunAsAny}\n", wantCode: exitDenied},
		{name: "bad-flags", args: []string{"--from", "gatekeeper", "-f", "x.yaml"}, wantCode: exitBadInput},
		{name: "cluster-needs-psa-labels", args: []string{"--from", "kyverno", "--cluster"}, wantCode: exitBadInput},
		{name: "no-input", args: []string{"--from", "psp"}, wantCode: exitBadInput},
		{name: "empty-input", args: []string{"--from", "psp", "-f", "-"}, stdin: "# nothing here\n", wantCode: exitBadInput},
		{name: "wrong-kind", args: []string{"--from", "kyverno", "-f", "-"}, stdin: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n", wantCode: exitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			listed := false
			old := listClusterNamespaces
			listClusterNamespaces = func(context.Context, string) ([]corev1.Namespace, error) {
				listed = true
				if tt.cluster == nil {
					return nil, errors.New("no cluster in this test")
				}
				return tt.cluster, nil
			}
			defer func() { listClusterNamespaces = old }()

			var stdout, stderr bytes.Buffer
			code := run(append([]string{"convert"}, tt.args...), strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if listed != (tt.cluster != nil) {
				t.Errorf("cluster listed: %v", listed)
			}
			got := fmt.Sprintf("# exit %d\n# stdout\n%s# stderr\n%s", code, stdout.String(), stderr.String())
			compareGolden(t, filepath.Join("testdata", "convert", "golden", tt.name+".txt"), got)
			if code != exitBadInput {
				checkLoads(t, stdout.Bytes())
			} else if stdout.Len() > 0 {
				t.Errorf("bad input, yet stdout holds:\n%s", stdout.String())
			}
		})
	}
}

// checkLoads feeds convert's output through what podsieve eval -f uses: the
// strict manifest loader and the engine's compilers. Every exception must
// name a policy and rules of the output or be noted as naming one outside it,
// and a policy of the output must honour the exceptions that name it (it opts
// in with spec.exceptions) and opt in for no other.
func checkLoads(t *testing.T, out []byte) {
	t.Helper()
	if len(out) == 0 {
		return
	}
	set, err := manifest.Load([]string{"-"}, bytes.NewReader(out))
	if err != nil {
		t.Fatalf("the output does not load: %v", err)
	}
	if len(set.Ignored) > 0 || len(set.Workloads) > 0 || len(set.Namespaces) > 0 {
		t.Errorf("the output holds other kinds: %v", set.Ignored)
	}
	policies := map[string]*engine.Policy{}
	for _, d := range set.Policies {
		sp := d.Object.(*policyv1alpha1.SecurityPolicy)
		p, err := engine.CompilePolicy(sp)
		if err != nil {
			t.Errorf("%s: SecurityPolicy %s: %v", d.Where(), sp.Name, err)
			continue
		}
		policies[p.Name] = p
	}
	targeted := map[string]bool{}
	for _, d := range set.Exceptions {
		pe := d.Object.(*policyv1alpha1.PolicyException)
		e, err := engine.CompileException(pe, pe.Namespace) // its own namespace may reach out
		if err != nil {
			t.Errorf("%s: PolicyException %s/%s: %v", d.Where(), pe.Namespace, pe.Name, err)
			continue
		}
		for _, target := range pe.Spec.Exceptions {
			p := policies[target.PolicyName]
			if p == nil {
				continue // named outside the input; the warning says so
			}
			targeted[p.Name] = true
			if err := p.Permits(e, time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)); err != nil {
				t.Errorf("%s: PolicyException %s/%s is not permitted by the converted policy %s: %v", d.Where(), pe.Namespace, pe.Name, p.Name, err)
			}
			for _, r := range target.RuleNames {
				if !e.Targets(p.Name, r) || !containsRule(p, r) {
					t.Errorf("%s: PolicyException %s/%s names rule %q, which policy %s does not have (%v)", d.Where(), pe.Namespace, pe.Name, r, p.Name, p.RuleNames())
				}
			}
		}
	}
	for name, p := range policies {
		if p.PermitsAny() != targeted[name] {
			t.Errorf("SecurityPolicy %s: honours exceptions: %v; named by a converted exception: %v", name, p.PermitsAny(), targeted[name])
		}
	}
}

func containsRule(p *engine.Policy, name string) bool {
	for _, r := range p.Rules {
		if r.Name == name {
			return true
		}
	}
	return false
}
