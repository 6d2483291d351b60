package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsieve/podsieve/internal/render"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// compareGolden compares a command's output with a golden file, or rewrites
// the file with -update.
func compareGolden(t *testing.T, golden, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update and review the diff):\n%s", golden, got)
	}
}

const samples = "../../config/samples"

// TestEvalGolden runs podsieve eval on the inputs in testdata/eval, with the
// repository's sample policies and exceptions, and compares stdout, stderr
// and the exit status with testdata/eval/golden. Regenerate with
// go test ./cmd/podsieve -run TestEvalGolden -update, then review the diff.
func TestEvalGolden(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
	}{
		{name: "mesh-text", args: []string{"-f", samples, "-f", "testdata/eval/mesh-workloads.yaml", "--cluster-state", "testdata/eval/cluster/staging.yaml"}, wantCode: exitDenied},
		{name: "mesh-json", args: []string{"-f", samples, "-f", "testdata/eval/mesh-workloads.yaml", "--cluster-state", "testdata/eval/cluster/staging.yaml", "-o", "json"}, wantCode: exitDenied},
		{name: "expired-exception", args: []string{"-f", samples, "-f", "testdata/eval/expired-exception.yaml"}, wantCode: exitDenied},
		{name: "expired-exception-before-expiry", args: []string{"-f", samples, "-f", "testdata/eval/expired-exception.yaml", "--now", "2026-10-30T00:00:00Z"}, wantCode: exitOK},
		{name: "guardrail-refused", args: []string{"-f", samples, "-f", "testdata/eval/guardrail-refused.yaml", "-n", "team-a"}, wantCode: exitDenied},
		{name: "cluster-exception-json", args: []string{"-f", samples, "-f", "testdata/eval/cluster-exception.yaml", "--cluster-state", "testdata/eval/cluster/acme-cni.yaml", "-o", "json"}, wantCode: exitDenied},
		{name: "bad-input", args: []string{"-f", samples, "-f", "testdata/eval/bad-input.yaml"}, wantCode: exitBadInput},
		{
			name: "stdin-without-policies",
			args: []string{"-f", "-"},
			stdin: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {hostNetwork: true, containers: [{name: a, image: x}]}\n" +
				"---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n",
			wantCode: exitOK,
		},
		{name: "audit-only-from-stdin", args: []string{"-f", filepath.Join(samples, "policy_v1alpha1_securitypolicy_restricted.yaml"), "-f", "-", "-n", "lab", "--cluster-state", "testdata/eval/cluster/lab.yaml"},
			stdin:    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
			wantCode: exitOK},
		{
			// The API server defaults hostPort to containerPort with
			// hostNetwork; the pods a DaemonSet creates get it too.
			name: "hostnetwork-ports",
			args: []string{"-f", "-", "-n", "mon"},
			stdin: `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: base}
spec:
  rules: [{name: baseline, podSecurity: {level: baseline}}]
  exceptions: {}
---
apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: hostnet}
spec:
  exceptions: [{policyName: base, ruleNames: ["*"]}]
  podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostNetwork, values: ["true"]}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: exporter}
spec:
  selector: {matchLabels: {app: exporter}}
  template:
    metadata: {labels: {app: exporter}}
    spec:
      hostNetwork: true
      containers: [{name: e, image: node-exporter:1, ports: [{containerPort: 9100}]}]
`,
			wantCode: exitDenied,
		},
		{
			// podsieve enforces what it practises: its own pod passes restricted.
			name:     "manager-is-restricted",
			args:     []string{"-f", "-", "-f", "../../config/manager"},
			stdin:    "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: restricted}\nspec: {rules: [{name: latest, podSecurity: {level: restricted}}]}\n",
			wantCode: exitOK,
		},
		{
			// Named by the API server (kubectl create, Kuma's injector): the
			// exception on the prefix applies, the one on a generated name
			// cannot be known offline and does not.
			name: "generate-name",
			args: []string{"-f", "-", "-n", "team-a"},
			stdin: "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: base}\nspec: {exceptions: {}, rules: [{name: baseline, podSecurity: {level: baseline}}]}\n" +
				"---\napiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: web-hostnet, namespace: team-a}\n" +
				"spec: {exceptions: [{policyName: base, ruleNames: [baseline]}], match: {names: [\"web-*\"]}, podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostNetwork, values: [\"true\"]}]}\n" +
				"---\napiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: one-job, namespace: team-a}\n" +
				"spec: {exceptions: [{policyName: base, ruleNames: [baseline]}], match: {names: [\"job-x7k2p\"]}, podSecurity: [{controlName: Host Namespaces, restrictedField: spec.hostNetwork, values: [\"true\"]}]}\n" +
				"---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: web-}\nspec: {hostNetwork: true, containers: [{name: a, image: x}]}\n" +
				"---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: job-}\nspec: {hostNetwork: true, containers: [{name: a, image: x}]}\n",
			wantCode: exitDenied,
		},
		{name: "bad-flags", args: []string{"-f", samples, "-o", "yaml", "--now", "tomorrow"}, wantCode: exitBadInput},
		{
			// What a change (-f) holds is taken only as the cluster would
			// take it (docs/ci.md): its Namespace labels nothing, its
			// exception in the cluster exceptions namespace is not
			// honoured, its exception's creationTimestamp is the time of
			// the decision, so the 90-day guardrail refuses it.
			name: "change-not-trusted",
			args: []string{"-f", samples, "-f", "-", "-n", "staging"},
			stdin: "apiVersion: v1\nkind: Namespace\nmetadata: {name: staging, labels: {pod-security.kubernetes.io/enforce: privileged}}\n---\n" +
				"apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: exporter-everywhere, namespace: podsieve-system}\n" +
				"spec: {exceptions: [{policyName: pod-security-standards, ruleNames: ['*']}], match: {namespaces: ['*']}, justification: OPS-7, expiresAt: '2027-01-01T00:00:00Z'," +
				" podSecurity: [{controlName: Host Ports, containerNames: [exporter], images: [quay.io/prometheus/node-exporter], restrictedField: 'spec.containers[*].ports[*].hostPort', values: ['9100']}]}\n---\n" +
				"apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: exporter, creationTimestamp: '2027-03-01T00:00:00Z'}\n" +
				"spec: {exceptions: [{policyName: pod-security-standards, ruleNames: ['*']}], justification: OPS-7, expiresAt: '2027-05-01T00:00:00Z'," +
				" podSecurity: [{controlName: Host Ports, containerNames: [exporter], containerKinds: [App], images: [quay.io/prometheus/node-exporter], restrictedField: 'spec.containers[*].ports[*].hostPort', values: ['9100']}]}\n---\n" +
				"apiVersion: v1\nkind: Pod\nmetadata: {name: node-exporter}\nspec: {containers: [{name: exporter, image: quay.io/prometheus/node-exporter:v1.8.0, ports: [{containerPort: 9100, hostPort: 9100}]}]}\n",
			wantCode: exitDenied,
		},
		{
			// An Enforce rule that selects namespaces by label, and a
			// namespace the cluster state does not hold: exit 2, saying
			// what to give.
			name: "namespace-labels-unknown",
			args: []string{"-f", "-", "-n", "payments"},
			stdin: "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: restricted}\n" +
				"spec: {rules: [{name: opted-in, match: {namespaceSelector: {matchLabels: {security.podsieve.dev/profile: restricted}}}, podSecurity: {level: restricted}}]}\n---\n" +
				"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
			wantCode: exitBadInput,
		},
		// CI formats (docs/ci.md); TestSARIFGoldenValid validates the SARIF
		// goldens against the schema, TestJUnitGoldenParses the JUnit ones.
		{name: "mesh-sarif", args: []string{"-f", samples, "-f", "testdata/eval/mesh-workloads.yaml", "--cluster-state", "testdata/eval/cluster/staging.yaml", "-o", "sarif"}, wantCode: exitDenied},
		{name: "severities-json", args: []string{"-f", "testdata/eval/severities.yaml", "-o", "json"}, wantCode: exitOK},
		{name: "severities-sarif", args: []string{"-f", "testdata/eval/severities.yaml", "-o", "sarif"}, wantCode: exitOK},
		{name: "expired-exception-sarif", args: []string{"-f", samples, "-f", "testdata/eval/expired-exception.yaml", "-o", "sarif"}, wantCode: exitDenied},
		{name: "cluster-exception-sarif", args: []string{"-f", samples, "-f", "testdata/eval/cluster-exception.yaml", "--cluster-state", "testdata/eval/cluster/acme-cni.yaml", "-o", "sarif"}, wantCode: exitDenied},
		{name: "audit-only-from-stdin-sarif", args: []string{"-f", filepath.Join(samples, "policy_v1alpha1_securitypolicy_restricted.yaml"), "-f", "-", "-n", "lab", "-o", "sarif", "--cluster-state", "testdata/eval/cluster/lab.yaml"},
			stdin:    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
			wantCode: exitOK},
		{name: "bad-input-sarif", args: []string{"-f", samples, "-f", "testdata/eval/bad-input.yaml", "-o", "sarif"}, wantCode: exitBadInput},
		{name: "mesh-junit", args: []string{"-f", samples, "-f", "testdata/eval/mesh-workloads.yaml", "--cluster-state", "testdata/eval/cluster/staging.yaml", "-o", "junit"}, wantCode: exitDenied},
		{name: "guardrail-refused-junit", args: []string{"-f", samples, "-f", "testdata/eval/guardrail-refused.yaml", "-n", "team-a", "-o", "junit"}, wantCode: exitDenied},
		{name: "expired-exception-before-expiry-junit", args: []string{"-f", samples, "-f", "testdata/eval/expired-exception.yaml", "--now", "2026-10-30T00:00:00Z", "-o", "junit"}, wantCode: exitOK},
		{name: "bad-input-junit", args: []string{"-f", samples, "-f", "testdata/eval/bad-input.yaml", "-o", "junit"}, wantCode: exitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"eval", "--now", "2026-11-22T00:00:00Z"}, tt.args...)
			code := run(args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			got := "# exit " + string(rune('0'+code)) + "\n# stdout\n" + stdout.String() + "# stderr\n" + stderr.String()
			compareGolden(t, filepath.Join("testdata", "eval", "golden", tt.name+".txt"), got)
			if strings.HasSuffix(tt.name, "-sarif") && code != exitBadInput {
				validateSARIF(t, stdout.Bytes())
			}
			if strings.HasSuffix(tt.name, "-junit") {
				parseJUnit(t, stdout.Bytes())
			}
			if strings.Contains(tt.name, "json") {
				var out render.JSONReport
				if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
					t.Fatalf("stdout is not one JSON document: %v", err)
				}
			}
		})
	}
}

// TestEvalJSONContract pins the keys issue 3 names, which tools parse.
func TestEvalJSONContract(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"eval", "--now", "2026-11-22T00:00:00Z", "-o", "json", "-f", samples, "-f", "testdata/eval/mesh-workloads.yaml", "--cluster-state", "testdata/eval/cluster/staging.yaml"}, nil, &stdout, &stderr)
	if code != exitDenied {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var doc struct {
		Results []map[string]json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 2 {
		t.Fatalf("%d results, want 2", len(doc.Results))
	}
	var policies []map[string]json.RawMessage
	for _, k := range []string{"apiVersion", "kind", "namespace", "name", "allowed", "policies"} {
		if _, ok := doc.Results[1][k]; !ok {
			t.Errorf("result lacks %q", k)
		}
	}
	if err := json.Unmarshal(doc.Results[1]["policies"], &policies); err != nil || len(policies) == 0 {
		t.Fatalf("policies: %v", err)
	}
	for _, k := range []string{"policy", "rule", "action", "level", "version", "result", "violations"} {
		if _, ok := policies[0][k]; !ok {
			t.Errorf("policy result lacks %q", k)
		}
	}
	var violations []map[string]json.RawMessage
	if err := json.Unmarshal(policies[0]["violations"], &violations); err != nil || len(violations) == 0 {
		t.Fatalf("violations: %v", err)
	}
	for _, k := range []string{"control", "check", "scope", "container", "containerType", "image", "field", "values", "exemptedBy"} {
		if _, ok := violations[0][k]; !ok {
			t.Errorf("violation lacks %q", k)
		}
	}
}

// FuzzEval: whatever arrives on stdin, eval answers with exit 0, 1 or 2 and
// never panics; a refusal always comes with a message on stdout.
func FuzzEval(f *testing.F) {
	policy := "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: p}\nspec: {exceptions: {}, rules: [{name: r, podSecurity: {level: restricted, exclude: [{controlName: Capabilities, containerNames: [init], restrictedField: 'spec.initContainers[*].securityContext.capabilities.add', values: [NET_ADMIN]}]}}]}\n---\n"
	for _, seed := range []string{
		policy + "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
		policy + "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {selector: {}, template: {spec: {initContainers: [{name: init, image: i, securityContext: {capabilities: {add: [NET_ADMIN]}}}], containers: []}}}\n",
		policy + "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e}\nspec: {exceptions: [{policyName: p, ruleNames: ['*']}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {hostPID: true}\n",
		policy + "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e}\nspec: {exceptions: [{policyName: q, ruleNames: ['*']}], expiresAt: '2020-01-01T00:00:00Z'}\n",
		"apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {template: {spec: {volumes: [{name: v}], containers: [{name: a, image: x, ports: [{containerPort: 1, hostPort: 1}]}]}}}}}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"eval", "-f", "-", "--now", "2026-11-22T00:00:00Z"}, strings.NewReader(in), &stdout, &stderr)
		switch code {
		case exitOK:
		case exitDenied:
			if !strings.Contains(stdout.String(), "REFUSED") {
				t.Fatalf("exit 1 without a refusal:\n%s", stdout.String())
			}
		case exitBadInput:
			if stderr.Len() == 0 {
				t.Fatal("exit 2 without a message")
			}
		default:
			t.Fatalf("exit %d", code)
		}
	})
}
