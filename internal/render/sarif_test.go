package render

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// cmd/podsieve's tests run eval -o sarif and validate the log against the
// vendored schema; these check the parts of the log that are not per input.

func TestSARIFRulesCoverEveryControl(t *testing.T) {
	id := regexp.MustCompile(`^pss/[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]policyv1alpha1.ControlName{}
	for _, c := range policyv1alpha1.Controls {
		r := newSARIFRule(c)
		if !id.MatchString(r.ID) {
			t.Errorf("%s: id %q", c, r.ID)
		}
		if other, ok := seen[r.ID]; ok {
			t.Errorf("%s and %s share the id %s", c, other, r.ID)
		}
		seen[r.ID] = c
		if controlHelp[c] == "" {
			t.Errorf("%s has no description in controlHelp", c)
		}
		if !strings.HasPrefix(r.HelpURI, pssDocsURI+"#") {
			t.Errorf("%s: helpUri %s", c, r.HelpURI)
		}
	}
	if len(controlHelp) != len(policyv1alpha1.Controls) {
		t.Errorf("controlHelp describes %d controls, policyv1alpha1.Controls has %d", len(controlHelp), len(policyv1alpha1.Controls))
	}
	for control, want := range map[policyv1alpha1.ControlName]string{
		policyv1alpha1.ControlHostProbesLifecycle: "pss/host-probes-lifecycle-hooks",
		policyv1alpha1.ControlProcMountType:       "pss/proc-mount-type",
		policyv1alpha1.ControlRunningAsNonRoot:    "pss/running-as-non-root",
		policyv1alpha1.ControlHostProcess:         "pss/hostprocess",
	} {
		if got := sarifRuleID(control); got != want {
			t.Errorf("sarifRuleID(%q) = %q, want %q", control, got, want)
		}
	}
	if got := newSARIFRule(policyv1alpha1.ControlVolumeTypes).HelpURI; !strings.HasSuffix(got, "#restricted") {
		t.Errorf("Volume Types links to %s", got)
	}
	if got := newSARIFRule(policyv1alpha1.ControlSeccomp).HelpURI; !strings.HasSuffix(got, "#baseline") {
		t.Errorf("Seccomp links to %s", got)
	}
}

// TestSARIFRuleIDsDocumented keeps docs/ci.md's table of rule ids, which
// users filter dashboards on, in step with sarifRuleID.
func TestSARIFRuleIDsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/ci.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range policyv1alpha1.Controls {
		if row := "| " + string(c) + " | `" + sarifRuleID(c) + "` |"; !strings.Contains(string(doc), row) {
			t.Errorf("docs/ci.md lacks the row %s", row)
		}
	}
}

func TestSARIFURI(t *testing.T) {
	abs, err := filepath.Abs("deploy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, source, want string }{
		{"stdin", "-", "stdin"},
		{"relative", "deploy/app.yaml", "deploy/app.yaml"},
		{"dot prefix is cleaned", "./deploy//app.yaml", "deploy/app.yaml"},
		{"parent directories stay", "../charts/app.yaml", "../charts/app.yaml"},
		{"spaces are escaped", "my app/deploy.yaml", "my%20app/deploy.yaml"},
		{"a colon is no scheme", "a:b.yaml", "./a:b.yaml"},
		{"absolute is a file URI", abs, "file://" + filepath.ToSlash(abs)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sarifURI(tt.source); got != tt.want {
				t.Errorf("sarifURI(%q) = %q, want %q", tt.source, got, tt.want)
			}
		})
	}
}

// TestSARIFSeverity: a result's level and a rule's security-severity from
// the violation's severity; at the defaults (high, medium) the level is the
// action's alone, as before severities could be set.
func TestSARIFSeverity(t *testing.T) {
	for _, tt := range []struct {
		name        string
		action      policyv1alpha1.PolicyAction
		severity    policyv1alpha1.Severity
		level       string
		securitySev string
	}{
		{"Enforce, critical", policyv1alpha1.ActionEnforce, policyv1alpha1.SeverityCritical, "error", "9.5"},
		{"Enforce, high (baseline default)", policyv1alpha1.ActionEnforce, policyv1alpha1.SeverityHigh, "error", "8.0"},
		{"Enforce, info: still refused", policyv1alpha1.ActionEnforce, policyv1alpha1.SeverityInfo, "error", ""},
		{"Audit, critical", policyv1alpha1.ActionAudit, policyv1alpha1.SeverityCritical, "error", "9.5"},
		{"Audit, high (baseline default)", policyv1alpha1.ActionAudit, policyv1alpha1.SeverityHigh, "warning", "8.0"},
		{"Warn, medium (restricted default)", policyv1alpha1.ActionWarn, policyv1alpha1.SeverityMedium, "warning", "5.5"},
		{"Audit, low", policyv1alpha1.ActionAudit, policyv1alpha1.SeverityLow, "note", "2.0"},
		{"Warn, info", policyv1alpha1.ActionWarn, policyv1alpha1.SeverityInfo, "note", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sarifLevel(tt.action, tt.severity); got != tt.level {
				t.Errorf("level %q, want %q", got, tt.level)
			}
			if got := securitySeverity(tt.severity); got != tt.securitySev {
				t.Errorf("security-severity %q, want %q", got, tt.securitySev)
			}
		})
	}
	// Each severity's score is within GitHub's band for it.
	bands := map[policyv1alpha1.Severity][2]float64{"critical": {9.0, 10}, "high": {7.0, 8.9}, "medium": {4.0, 6.9}, "low": {0.1, 3.9}}
	for _, s := range policyv1alpha1.Severities {
		b, ok := bands[s]
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(securitySeverity(s), 64)
		if err != nil || v < b[0] || v > b[1] {
			t.Errorf("%s scores %q, not within %v", s, securitySeverity(s), b)
		}
	}
}
