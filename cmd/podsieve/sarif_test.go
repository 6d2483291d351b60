package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const (
	sarifSchemaFile = "testdata/sarif/sarif-schema-2.1.0.json"
	// sarifSchemaID is the vendored schema's id, which eval writes as the
	// log's $schema.
	sarifSchemaID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	// sarifFingerprintKey names podsieve's partial fingerprint, which
	// dashboards track alerts by.
	sarifFingerprintKey = "podsieveFinding/v1"
)

// sarifLog is the SARIF log as a reader sees it: only what the tests check,
// declared apart from internal/render's writer types (as junit_test.go's
// are) so that the tests read the JSON, not the writer's structs. Its field
// names match the log's keys as encoding/json matches them, ignoring case.
type sarifLog struct {
	Runs []struct {
		Tool struct {
			Driver struct {
				Name, Version, InformationURI string
				Rules                         []struct {
					ID         string
					Properties struct {
						SecuritySeverity string `json:"security-severity"`
					}
				}
			}
		}
		Results []struct {
			RuleID              string
			RuleIndex           int
			Level               string
			Message             struct{ Text string }
			PartialFingerprints map[string]string
			Properties          struct{ Action, Severity, Category string }
			Locations           []struct {
				PhysicalLocation struct {
					ArtifactLocation struct{ URI string }
					Region           *struct{ StartLine int }
				}
				LogicalLocations []struct{ FullyQualifiedName string }
			}
		}
	}
}

var (
	sarifSchemaOnce     sync.Once
	sarifSchemaCompiled *jsonschema.Schema
	sarifSchemaErr      error
)

// sarifSchema compiles the vendored OASIS schema once. Only the file is
// read: the compiler has no loader for http(s) URLs.
func sarifSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	sarifSchemaOnce.Do(func() {
		f, err := os.Open(sarifSchemaFile)
		if err != nil {
			sarifSchemaErr = err
			return
		}
		defer func() { _ = f.Close() }()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			sarifSchemaErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if err := c.AddResource(sarifSchemaID, doc); err != nil {
			sarifSchemaErr = err
			return
		}
		sarifSchemaCompiled, sarifSchemaErr = c.Compile(sarifSchemaID)
	})
	if sarifSchemaErr != nil {
		t.Fatalf("compile %s: %v", sarifSchemaFile, sarifSchemaErr)
	}
	return sarifSchemaCompiled
}

// sarifValidate reports why data is not a SARIF 2.1.0 log, or nil.
func sarifValidate(t testing.TB, data []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return sarifSchema(t).Validate(inst)
}

// validateSARIF fails the test unless data is a SARIF 2.1.0 log.
func validateSARIF(t testing.TB, data []byte) {
	t.Helper()
	if err := sarifValidate(t, data); err != nil {
		t.Fatalf("not valid SARIF 2.1.0: %v\n%s", err, data)
	}
}

// goldenStdout is the stdout section of a TestEvalGolden file.
func goldenStdout(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "# stdout\n")
	if !ok {
		t.Fatalf("%s has no # stdout section", path)
	}
	stdout, _, ok := strings.Cut(rest, "# stderr\n")
	if !ok {
		t.Fatalf("%s has no # stderr section", path)
	}
	return []byte(stdout)
}

// TestSARIFGoldenValid validates the committed SARIF golden files against
// the vendored SARIF 2.1.0 schema: what reviewers read is what GitHub takes.
// A golden of bad input (exit 2) must have no stdout at all.
func TestSARIFGoldenValid(t *testing.T) {
	files, err := filepath.Glob("testdata/eval/golden/*-sarif.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no *-sarif.txt golden file")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			stdout := goldenStdout(t, f)
			if b, err := os.ReadFile(f); err != nil {
				t.Fatal(err)
			} else if bytes.HasPrefix(b, []byte("# exit 2\n")) {
				if len(stdout) != 0 {
					t.Fatalf("bad input with a log on stdout:\n%s", stdout)
				}
				return
			}
			if len(stdout) == 0 {
				t.Fatal("empty stdout")
			}
			validateSARIF(t, stdout)
		})
	}
}

// TestSARIFSchemaRejects shows that the validation can fail: logs that
// break the schema in ways a careless change to internal/render/sarif.go could.
func TestSARIFSchemaRejects(t *testing.T) {
	const valid = `{"$schema": "` + sarifSchemaID + `", "version": "2.1.0", "runs": [{"tool": {"driver": {"name": "podsieve"}},
  "results": [{"ruleId": "pss/x", "level": "%s", "message": {"text": "m"},
    "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.yaml"}, "region": {"startLine": %s}}}],
    "suppressions": [{"kind": "%s"}]}]}]}`
	fill := func(level, line, kind string) string { return fmt.Sprintf(valid, level, line, kind) }
	if err := sarifValidate(t, []byte(fill("error", "1", "external"))); err != nil {
		t.Fatalf("the reference log is refused: %v", err)
	}
	tests := []struct {
		name, log string
	}{
		{"unknown level", fill("fatal", "1", "external")},
		{"line 0", fill("error", "0", "external")},
		{"unknown suppression kind", fill("error", "1", "waived")},
		{"wrong version", strings.Replace(fill("error", "1", "external"), `"2.1.0"`, `"2.0.0"`, 1)},
		{"no tool", `{"version": "2.1.0", "runs": [{"results": []}]}`},
		{"unknown top-level property", `{"version": "2.1.0", "runs": [], "extra": 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := sarifValidate(t, []byte(tt.log)); err == nil {
				t.Errorf("accepted:\n%s", tt.log)
			}
		})
	}
}

// TestSARIFContent runs eval -o sarif and checks what the schema cannot:
// one result per uncovered violation and none for covered ones, the level
// from the action and the severity, the rules, their indexes and
// security-severity, and the locations.
func TestSARIFContent(t *testing.T) {
	type want struct {
		// results counts results by level.
		errors, warnings, notes int
		// severities are the results' severity and category properties,
		// "severity category" by count; nil checks nothing.
		severities map[string]int
		// securitySeverity is each rule's security-severity; nil checks
		// nothing.
		securitySeverity map[string]string
		// lines maps "uri object" to the region's startLine.
		lines map[string]int
		// messages must each be in some result's message.
		messages []string
	}
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		want     want
	}{
		{
			name:     "mesh workloads: an Enforce refusal, Audit violations, covered ones left out",
			args:     []string{"-f", samples, "-f", "testdata/eval/mesh-workloads.yaml", "--cluster-state", "testdata/eval/cluster/staging.yaml"},
			wantCode: exitDenied,
			want: want{
				errors: 1, warnings: 5,
				// web-frontend's violations are all covered: no result.
				lines: map[string]int{"testdata/eval/mesh-workloads.yaml Pod staging/net-tool": 37},
				messages: []string{
					`Pod staging/net-tool: Capabilities: container "app" (image registry.example/tools/net:2) sets spec.containers[*].securityContext.capabilities.add to NET_ADMIN. SecurityPolicy "pod-security-standards" rule "baseline-service-mesh" (baseline:latest, Enforce).`,
					// The sample baseline policy lets exceptions waive
					// capabilities only for init containers of the meshes'
					// registries: not an app container's.
					`Policy "pod-security-standards" allows PolicyExceptions for "Capabilities" only for containers of kind Init: change the workload.`,
					// The sample restricted policy lets exceptions waive only
					// what a mesh's init container needs.
					`Policy "restricted-workloads" does not allow PolicyExceptions for "Privilege Escalation", "Seccomp", and allows them for "Capabilities" only for containers of kind Init and for "Running as Non-root" only for containers of kind Init: change the workload.`,
				},
			},
		},
		{
			name:     "an expired exception is named in the message",
			args:     []string{"-f", samples, "-f", "testdata/eval/expired-exception.yaml"},
			wantCode: exitDenied,
			want: want{
				errors:   1,
				lines:    map[string]int{"testdata/eval/expired-exception.yaml Pod staging/node-exporter": 20},
				messages: []string{"exception/staging/old-debug does not apply: expired at 2026-11-01T00:00:00Z."},
			},
		},
		{
			name:     "stdin is the artifact stdin; an Audit policy gives warnings and exit 0",
			args:     []string{"-f", filepath.Join(samples, "policy_v1alpha1_securitypolicy_restricted.yaml"), "-f", "-", "-n", "lab", "--cluster-state", "testdata/eval/cluster/lab.yaml"},
			stdin:    "---\n# the pod\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
			wantCode: exitOK,
			want: want{
				warnings: 4,
				lines:    map[string]int{"stdin Pod lab/a": 3},
			},
		},
		{
			name:     "severities an admin set: a critical Audit violation is an error, low and info ones notes",
			args:     []string{"-f", "testdata/eval/severities.yaml"},
			wantCode: exitOK,
			want: want{
				errors: 1, notes: 7,
				lines: map[string]int{"testdata/eval/severities.yaml Pod lab/root": 18},
				severities: map[string]int{
					"critical Privilege": 1, "low Host Isolation": 1,
					// The restricted rule's: its baseline checks (privileged,
					// hostPID) and escalation, capabilities, runAsNonRoot and
					// seccomp.
					"info Pod Security Standards (Restricted)": 6,
				},
				securitySeverity: map[string]string{
					// A rule's is its results' highest: the baseline rule's
					// critical and low over the restricted rule's info.
					"pss/privileged-containers": "9.5", "pss/host-namespaces": "2.0",
					// info has no score.
					"pss/privilege-escalation": "", "pss/capabilities": "", "pss/running-as-non-root": "", "pss/seccomp": "",
				},
			},
		},
		{
			name:     "no policy: no rule and no result",
			args:     []string{"-f", "-"},
			stdin:    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {hostNetwork: true, containers: [{name: a, image: x}]}\n",
			wantCode: exitOK,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"eval", "--now", "2026-11-22T00:00:00Z", "-o", "sarif"}, tt.args...)
			if code := run(args, strings.NewReader(tt.stdin), &stdout, &stderr); code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			validateSARIF(t, stdout.Bytes())
			var log sarifLog
			if err := json.Unmarshal(stdout.Bytes(), &log); err != nil {
				t.Fatal(err)
			}
			if len(log.Runs) != 1 {
				t.Fatalf("%d runs, want 1", len(log.Runs))
			}
			r := log.Runs[0]
			if d := r.Tool.Driver; d.Name != "podsieve" || d.Version == "" || d.InformationURI == "" {
				t.Errorf("driver %+v", d)
			}
			var got want
			got.lines = map[string]int{}
			used := map[string]bool{}
			for _, res := range r.Results {
				if res.RuleIndex < 0 || res.RuleIndex >= len(r.Tool.Driver.Rules) || r.Tool.Driver.Rules[res.RuleIndex].ID != res.RuleID {
					t.Errorf("result %s has ruleIndex %d", res.RuleID, res.RuleIndex)
				}
				used[res.RuleID] = true
				switch res.Level {
				case "error":
					got.errors++
				case "warning":
					got.warnings++
				case "note":
					got.notes++
				default:
					t.Errorf("level %q", res.Level)
				}
				if (res.Level == "error") != (res.Properties.Action == "Enforce" || res.Properties.Severity == "critical") {
					t.Errorf("level %s for action %s, severity %s", res.Level, res.Properties.Action, res.Properties.Severity)
				}
				if got.severities == nil {
					got.severities = map[string]int{}
				}
				got.severities[res.Properties.Severity+" "+res.Properties.Category]++
				if strings.Contains(res.Message.Text, "waived by") {
					t.Errorf("a covered violation has a result: %s", res.Message.Text)
				}
				if len(res.PartialFingerprints[sarifFingerprintKey]) != 32 {
					t.Errorf("fingerprint %v", res.PartialFingerprints)
				}
				if len(res.Locations) != 1 || len(res.Locations[0].LogicalLocations) != 1 {
					t.Fatalf("locations %+v", res.Locations)
				}
				loc := res.Locations[0]
				key := loc.PhysicalLocation.ArtifactLocation.URI + " " + loc.LogicalLocations[0].FullyQualifiedName
				if loc.PhysicalLocation.Region == nil {
					t.Errorf("%s: no region", key)
					continue
				}
				got.lines[key] = loc.PhysicalLocation.Region.StartLine
			}
			for _, rule := range r.Tool.Driver.Rules {
				if !used[rule.ID] {
					t.Errorf("rule %s has no result", rule.ID)
				}
			}
			if len(used) != len(r.Tool.Driver.Rules) {
				t.Errorf("%d rules for %d rule ids", len(r.Tool.Driver.Rules), len(used))
			}
			if got.errors != tt.want.errors || got.warnings != tt.want.warnings || got.notes != tt.want.notes {
				t.Errorf("results: %d errors, %d warnings, %d notes; want %d, %d, %d", got.errors, got.warnings, got.notes, tt.want.errors, tt.want.warnings, tt.want.notes)
			}
			if tt.want.severities != nil && !maps.Equal(got.severities, tt.want.severities) {
				t.Errorf("severities %v, want %v", got.severities, tt.want.severities)
			}
			if tt.want.securitySeverity != nil {
				rules := map[string]string{}
				for _, rule := range r.Tool.Driver.Rules {
					rules[rule.ID] = rule.Properties.SecuritySeverity
				}
				if !maps.Equal(rules, tt.want.securitySeverity) {
					t.Errorf("rules' security-severity %v, want %v", rules, tt.want.securitySeverity)
				}
			}
			for k, line := range tt.want.lines {
				if got.lines[k] != line {
					t.Errorf("%s: startLine %d, want %d", k, got.lines[k], line)
				}
			}
			if len(got.lines) != len(tt.want.lines) {
				t.Errorf("locations %v, want %v", got.lines, tt.want.lines)
			}
			for _, m := range tt.want.messages {
				if !strings.Contains(stdout.String(), strings.ReplaceAll(m, `"`, `\"`)) {
					t.Errorf("no message holds %s", m)
				}
			}
		})
	}
}

// TestSARIFLinesPointAtObjects: on every eval input, each result's startLine
// is the line of its document's apiVersion, which these files write first.
func TestSARIFLinesPointAtObjects(t *testing.T) {
	inputs, err := filepath.Glob("testdata/eval/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, in := range inputs {
		var stdout, stderr bytes.Buffer
		code := run([]string{"eval", "--now", "2026-11-22T00:00:00Z", "-o", "sarif", "-f", samples, "-f", in, "-n", "team-a"}, nil, &stdout, &stderr)
		if code == exitBadInput {
			continue // bad-input.yaml
		}
		var log sarifLog
		if err := json.Unmarshal(stdout.Bytes(), &log); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		src, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		for _, res := range log.Runs[0].Results {
			pl := res.Locations[0].PhysicalLocation
			if pl.ArtifactLocation.URI != filepath.ToSlash(in) {
				t.Errorf("%s: uri %s", in, pl.ArtifactLocation.URI)
				continue
			}
			if n := pl.Region.StartLine; n < 1 || n > len(lines) || !strings.HasPrefix(lines[n-1], "apiVersion:") {
				t.Errorf("%s: startLine %d is not an object's first line", in, n)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no result checked")
	}
}

// FuzzEvalSARIF: whatever arrives on stdin, -o sarif either writes a valid
// SARIF 2.1.0 log (exit 0 or 1) or nothing (exit 2), so that an upload never
// takes a partial log for an all-clear.
func FuzzEvalSARIF(f *testing.F) {
	policy := "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: p}\nspec: {exceptions: {}, rules: [{name: r, podSecurity: {level: restricted}}]}\n---\n"
	for _, seed := range []string{
		policy + "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
		policy + "apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e}\nspec: {exceptions: [{policyName: p, ruleNames: ['*']}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {hostPID: true}\n",
		policy + "apiVersion: v1\nkind: Pod\nmetadata: {name: \"<a&b>\\u0001\"}\nspec: {containers: [{name: \"\\u00e9\", image: \"x\\\"y\"}]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {bogus: 1}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"eval", "-o", "sarif", "-f", "-", "--now", "2026-11-22T00:00:00Z"}, strings.NewReader(in), &stdout, &stderr)
		switch code {
		case exitOK, exitDenied:
			validateSARIF(t, stdout.Bytes())
		case exitBadInput:
			if stdout.Len() != 0 {
				t.Fatalf("exit 2 with output:\n%s", stdout.String())
			}
		default:
			t.Fatalf("exit %d", code)
		}
	})
}
