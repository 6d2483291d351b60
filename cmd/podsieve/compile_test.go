package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/admissionpolicy"
)

// compileNow is the time the compile tests judge exceptions at: the
// samples' exceptions are in force, small.yaml's team-b/old has expired.
const compileNow = "2026-11-22T00:00:00Z"

// runCompile runs podsieve compile at compileNow.
func runCompile(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"compile", "--now", compileNow}, args...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCompileGolden runs podsieve compile on the repository's samples and on
// the inputs in testdata/compile, and compares stdout, stderr and the exit
// status with testdata/compile/golden. Regenerate with
// go test ./cmd/podsieve -run TestCompileGolden -update, then review the diff.
func TestCompileGolden(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		// The samples carry no expiry: mesh-init is compiled; the
		// time-boxed one, without the expiry its policy requires, is noted
		// as not in force.
		{name: "samples", args: []string{"-f", samples}, wantCode: exitOK},
		// An exception in force that expires: compiled only with the flag,
		// with no expiry, and a warning that says so.
		{name: "expiring-included", args: []string{"-f", "../../config/samples/policy_v1alpha1_securitypolicy_baseline_mesh.yaml",
			"-f", "testdata/compile/expiring.yaml", "--include-expiring"}, wantCode: exitOK},
		// A cluster exception reaching a namespace by its labels, exceptions
		// not in force left out, objects compile does not read noted.
		{name: "small-json", args: []string{"-f", "testdata/compile/small.yaml", "--cluster-state", "testdata/compile/cluster.yaml", "-o", "json"}, wantCode: exitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCompile(t, "", tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			got := fmt.Sprintf("# exit %d\n# stdout\n%s# stderr\n%s", code, stdout, stderr)
			compareGolden(t, filepath.Join("testdata", "compile", "golden", tt.name+".txt"), got)
		})
	}
}

// TestCompileBadInput: input that cannot be compiled exits 2, prints nothing
// on stdout (a pipe into kubectl apply applies nothing), and names the
// object and the field.
func TestCompileBadInput(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  []string // in stderr
	}{
		{
			name:  "unsupported",
			args:  []string{"-f", "-"},
			stdin: "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: " + long + "}\nspec: {rules: [{name: b, podSecurity: {level: baseline}}]}\n",
			want:  []string{"<stdin>, document 1: SecurityPolicy " + long + ": metadata.name: cannot be compiled into a ValidatingAdmissionPolicy exactly"},
		},
		{
			name: "expiring-without-flag",
			args: []string{"-f", "../../config/samples/policy_v1alpha1_securitypolicy_baseline_mesh.yaml", "-f", "testdata/compile/expiring.yaml"},
			want: []string{
				"expiring.yaml, document 1: PolicyException staging/node-debug-hostport: spec.expiresAt: 2026-12-15T00:00:00Z: a ValidatingAdmissionPolicy has no clock",
				"or pass --include-expiring",
			},
		},
		{
			name:  "unknown-field",
			args:  []string{"-f", "-"},
			stdin: "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: x}\nspec: {rulez: []}\n",
			want:  []string{`<stdin>, document 1: SecurityPolicy x: strict decoding error: unknown field "spec.rulez"`},
		},
		{
			name:  "not-yaml",
			args:  []string{"-f", "-"},
			stdin: "apiVersion: v1\nkind: Namespace\nmetadata: {name: [x}\n",
			want:  []string{"<stdin>, document 1: not valid YAML"},
		},
		{
			name:  "exception-without-policy",
			args:  []string{"-f", "-"},
			stdin: "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e, namespace: a}\nspec: {exceptions: [{policyName: gone, ruleNames: ['*']}]}\n",
			want:  []string{"<stdin>, document 1: PolicyException a/e: spec.exceptions[0].policyName: SecurityPolicy \"gone\""},
		},
		{name: "bad-output", args: []string{"-f", samples, "-o", "table"}, want: []string{"-o table: use yaml or json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCompile(t, tt.stdin, tt.args...)
			if code != exitBadInput {
				t.Errorf("exit %d, want %d", code, exitBadInput)
			}
			if stdout != "" {
				t.Errorf("stdout is not empty:\n%s", stdout)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestCompileOutputParses reads the YAML output back into the typed objects,
// strictly (no unknown or duplicate field), in the order kubectl applies
// them: the CRD, the policies each with its bindings, the parameters.
func TestCompileOutputParses(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantKinds string
	}{
		{name: "samples", args: []string{"-f", samples},
			wantKinds: "CRD VAP VAPB VAPB VAP VAPB VAPB Params"},
		{name: "expiring-included", args: []string{"-f", "../../config/samples/policy_v1alpha1_securitypolicy_baseline_mesh.yaml", "-f", "testdata/compile/expiring.yaml", "--include-expiring"},
			wantKinds: "CRD VAP VAPB VAPB Params"},
		{name: "small", args: []string{"-f", "testdata/compile/small.yaml", "--cluster-state", "testdata/compile/cluster.yaml"},
			wantKinds: "CRD VAP VAPB VAPB Params Params Params Params"},
		{name: "no-exceptions", args: []string{"-f", "-"},
			wantKinds: "VAP VAPB VAPB"},
	}
	stdin := "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: base}\nspec: {rules: [{name: b, podSecurity: {level: baseline}}]}\n" +
		"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCompile(t, stdin, tt.args...)
			if code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}
			var kinds []string
			for i, doc := range strings.Split(stdout, "\n---\n") {
				var tm metav1.TypeMeta
				if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
					t.Fatalf("document %d: %v", i+1, err)
				}
				var into any
				var short string
				switch tm.Kind {
				case "CustomResourceDefinition":
					into, short = &apiextensionsv1.CustomResourceDefinition{}, "CRD"
				case "ValidatingAdmissionPolicy":
					into, short = &admissionregistrationv1.ValidatingAdmissionPolicy{}, "VAP"
				case "ValidatingAdmissionPolicyBinding":
					into, short = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, "VAPB"
				case admissionpolicy.ParamsKind:
					into, short = &policyv1alpha1.PodSecurityParams{}, "Params"
				default:
					t.Fatalf("document %d: unexpected kind %q", i+1, tm.Kind)
				}
				if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
					t.Errorf("document %d (%s): %v", i+1, tm.Kind, err)
				}
				var m struct {
					Metadata map[string]any `json:"metadata"`
					Status   any            `json:"status"`
				}
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatal(err)
				}
				if _, ok := m.Metadata["creationTimestamp"]; ok || m.Status != nil {
					t.Errorf("document %d (%s) holds a creationTimestamp or status", i+1, tm.Kind)
				}
				kinds = append(kinds, short)
			}
			if got := strings.Join(kinds, " "); got != tt.wantKinds {
				t.Errorf("kinds %s, want %s", got, tt.wantKinds)
			}
		})
	}
}
