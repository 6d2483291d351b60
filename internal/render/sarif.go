package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/buildinfo"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/offline"
)

// podsieve eval -o sarif: a SARIF 2.1.0 log for code-scanning dashboards
// (GitHub code scanning, the SARIF viewers). One run; one rule per Pod
// Security Standards control that appears; one result per uncovered
// violation. Violations that a policy exclusion or a PolicyException covers
// are left out: they need no action, and eval -o text lists them.
// A result's level and severity follow the violation's severity
// (engine.Rule.ControlSeverity: spec.rules[].controlSeverities, severity,
// or the default), as the PolicyReport results do (sarifLevel,
// securitySeverity).
// Only the standard's properties are used, with the types below kept to what
// podsieve writes.

const (
	sarifVersion = "2.1.0"
	// sarifSchemaURI is the $schema of the log: the OASIS schema that
	// cmd/podsieve/testdata/sarif vendors and its tests validate against.
	sarifSchemaURI  = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	podsieveHomeURI = "https://github.com/podsieve/podsieve"
	pssDocsURI      = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"
	// sarifStdinURI is the artifact of documents read from standard input.
	sarifStdinURI = "stdin"
	// fingerprintKey names podsieve's partial fingerprint; bump the version
	// when what it hashes changes, as dashboards then see new alerts.
	fingerprintKey = "podsieveFinding/v1"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Version        string      `json:"version"`
	Rules          []sarifRule `json:"rules"`
}

// sarifRule is a reportingDescriptor: one PSS control.
type sarifRule struct {
	ID               string              `json:"id"`
	Name             string              `json:"name"`
	ShortDescription sarifText           `json:"shortDescription"`
	HelpURI          string              `json:"helpUri"`
	Help             sarifText           `json:"help"`
	Properties       sarifRuleProperties `json:"properties"`
}

type sarifRuleProperties struct {
	Tags []string `json:"tags"`
	// SecuritySeverity is GitHub code scanning's score of the rule, a
	// number as a string (securitySeverity): the highest severity among
	// the rule's results in the log.
	SecuritySeverity string `json:"security-severity,omitempty"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifResult struct {
	RuleID              string                `json:"ruleId"`
	RuleIndex           int                   `json:"ruleIndex"`
	Level               string                `json:"level"`
	Message             sarifText             `json:"message"`
	Locations           []sarifLocation       `json:"locations"`
	PartialFingerprints map[string]string     `json:"partialFingerprints"`
	Properties          sarifResultProperties `json:"properties"`
}

// sarifResultProperties repeats, for tools, what the message says in words.
type sarifResultProperties struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	Action string `json:"action"`
	Level  string `json:"level"`
	Check  string `json:"check"`
	Field  string `json:"field,omitempty"`
	// Severity and Category are the violation's, in the words of the
	// PolicyReport results (critical, high, medium, low, info).
	Severity string `json:"severity"`
	Category string `json:"category"`
}

// sarifLevel is a result's level: error when the policy refuses the object
// (Enforce) or the violation is critical; otherwise warning, or note for a
// low or info one. At the default severities (high, medium) it is the
// action's alone.
func sarifLevel(action policyv1alpha1.PolicyAction, severity policyv1alpha1.Severity) string {
	switch {
	case action == policyv1alpha1.ActionEnforce || severity == policyv1alpha1.SeverityCritical:
		return "error"
	case severity == policyv1alpha1.SeverityLow || severity == policyv1alpha1.SeverityInfo:
		return "note"
	default:
		return "warning"
	}
}

// securitySeverity is a severity as GitHub code scanning scores it
// (properties.security-severity: over 9.0 critical, 7.0 to 8.9 high, 4.0
// to 6.9 medium, 0.1 to 3.9 low), "" for info, which has no score: code
// scanning then shows the result's level.
func securitySeverity(s policyv1alpha1.Severity) string {
	switch s {
	case policyv1alpha1.SeverityCritical:
		return "9.5"
	case policyv1alpha1.SeverityHigh:
		return "8.0"
	case policyv1alpha1.SeverityMedium:
		return "5.5"
	case policyv1alpha1.SeverityLow:
		return "2.0"
	default:
		return ""
	}
}

type sarifLocation struct {
	PhysicalLocation sarifPhysicalLocation  `json:"physicalLocation"`
	LogicalLocations []sarifLogicalLocation `json:"logicalLocations"`
}

type sarifPhysicalLocation struct {
	ArtifactLocation sarifArtifactLocation `json:"artifactLocation"`
	Region           *sarifRegion          `json:"region,omitempty"`
}

type sarifArtifactLocation struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

// sarifLogicalLocation names the object: "Deployment staging/web".
type sarifLogicalLocation struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// controlHelp says in one sentence what each control requires, for a
// rule's shortDescription. TestSARIFRulesCoverEveryControl keeps it in step
// with policyv1alpha1.Controls.
var controlHelp = map[policyv1alpha1.ControlName]string{
	policyv1alpha1.ControlHostProcess:          "Windows pods must not run HostProcess containers.",
	policyv1alpha1.ControlHostNamespaces:       "Pods must not share the host's network, PID or IPC namespace.",
	policyv1alpha1.ControlPrivilegedContainers: "Containers must not run privileged.",
	policyv1alpha1.ControlCapabilities:         "Containers may add only the capabilities the level allows; restricted also requires dropping ALL.",
	policyv1alpha1.ControlHostPathVolumes:      "Pods must not mount hostPath volumes.",
	policyv1alpha1.ControlHostPorts:            "Containers must not bind ports of the host.",
	policyv1alpha1.ControlHostProbesLifecycle:  "Probes and lifecycle handlers must not name a host.",
	policyv1alpha1.ControlAppArmor:             "AppArmor must not be set to unconfined or to a profile type the standard does not know.",
	policyv1alpha1.ControlSELinux:              "SELinux type must be a container type, and user and role must not be set.",
	policyv1alpha1.ControlProcMountType:        "The /proc mount type must be Default.",
	policyv1alpha1.ControlSeccomp:              "Seccomp must not be Unconfined; restricted requires RuntimeDefault or Localhost.",
	policyv1alpha1.ControlSysctls:              "Only the sysctls the standard lists as safe may be set.",
	policyv1alpha1.ControlVolumeTypes:          "Only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected and secret volumes may be used.",
	policyv1alpha1.ControlPrivilegeEscalation:  "Containers must set allowPrivilegeEscalation to false.",
	policyv1alpha1.ControlRunningAsNonRoot:     "Containers must set runAsNonRoot to true.",
	policyv1alpha1.ControlRunningAsNonRootUser: "Containers must not set runAsUser to 0.",
}

// sarifRuleID is a control's stable rule id: "pss/" and the control name
// in lower case with every run of other characters a dash
// ("pss/host-probes-lifecycle-hooks").
func sarifRuleID(control policyv1alpha1.ControlName) string {
	var b strings.Builder
	b.WriteString("pss/")
	dash := false
	for _, r := range strings.ToLower(string(control)) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > len("pss/") {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

func newSARIFRule(control policyv1alpha1.ControlName) sarifRule {
	// Controls lists the baseline controls first; the standard's page has
	// one section per level.
	anchor := "#baseline"
	if slices.Index(policyv1alpha1.Controls, control) >= slices.Index(policyv1alpha1.Controls, policyv1alpha1.ControlVolumeTypes) {
		anchor = "#restricted"
	}
	desc := controlHelp[control]
	if desc == "" {
		desc = "A Pod Security Standards control."
	}
	return sarifRule{
		ID:               sarifRuleID(control),
		Name:             string(control),
		ShortDescription: sarifText{Text: string(control) + ": " + desc},
		HelpURI:          pssDocsURI + anchor,
		Help: sarifText{Text: desc + " Change the workload, or ask for a PolicyException that waives this " +
			"control for this workload, if the policy's guardrails allow one (podsieve eval -o text says whether they do)."},
		Properties: sarifRuleProperties{Tags: []string{"security", "kubernetes", "pod-security-standards"}},
	}
}

// SARIF writes podsieve eval -o sarif: the decisions as one SARIF 2.1.0 log.
// The i-th decision is the i-th workload's.
func SARIF(w io.Writer, decisions []engine.Decision, in *offline.Input) error {
	run := sarifRun{
		Tool: sarifTool{Driver: sarifDriver{
			Name: "podsieve", InformationURI: podsieveHomeURI, Version: buildinfo.Release(), Rules: []sarifRule{},
		}},
		Results: []sarifResult{},
	}
	seen := map[policyv1alpha1.ControlName]bool{}
	// highest is each rule's most serious severity among its results.
	highest := map[policyv1alpha1.ControlName]policyv1alpha1.Severity{}
	for i := range decisions {
		d := &decisions[i]
		o := d.Object
		doc := in.Workloads[i].Doc
		loc := sarifLocation{
			PhysicalLocation: sarifPhysicalLocation{ArtifactLocation: sarifArtifactLocation{URI: sarifURI(doc.Source)}},
			LogicalLocations: []sarifLogicalLocation{{
				Name: o.Name, FullyQualifiedName: objectName(o), Kind: "resource",
			}},
		}
		if doc.Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: doc.Line}
		}
		for j := range d.Results {
			res := &d.Results[j]
			r := res.Rule
			for k := range res.Findings {
				f := &res.Findings[k]
				if f.Covered() {
					continue
				}
				if !seen[f.Control] {
					seen[f.Control] = true
					run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, newSARIFRule(f.Control))
				}
				severity := r.ControlSeverity(f.Control)
				if h, ok := highest[f.Control]; !ok || engine.SeverityRank(severity) < engine.SeverityRank(h) {
					highest[f.Control] = severity
				}
				result := sarifResult{
					RuleID: sarifRuleID(f.Control), Level: sarifLevel(r.Policy.Action, severity),
					Message:             sarifText{Text: sarifMessage(res, f, o)},
					Locations:           []sarifLocation{loc},
					PartialFingerprints: map[string]string{fingerprintKey: fingerprint(res, f, o)},
					Properties: sarifResultProperties{
						Policy: r.Policy.Name, Rule: r.Name, Action: string(r.Policy.Action),
						Level: r.LevelVersion(), Check: f.CheckID, Field: f.FieldPath(o),
						Severity: string(severity), Category: r.ControlCategory(f.Control),
					},
				}
				run.Results = append(run.Results, result)
			}
		}
	}
	// Rules in the standard's order, whatever order the input found them in,
	// so that adding a workload does not renumber the others' rules.
	slices.SortStableFunc(run.Tool.Driver.Rules, func(a, b sarifRule) int {
		return slices.Index(policyv1alpha1.Controls, policyv1alpha1.ControlName(a.Name)) - slices.Index(policyv1alpha1.Controls, policyv1alpha1.ControlName(b.Name))
	})
	ruleIndex := map[string]int{}
	for i, rule := range run.Tool.Driver.Rules {
		ruleIndex[rule.ID] = i
		run.Tool.Driver.Rules[i].Properties.SecuritySeverity = securitySeverity(highest[policyv1alpha1.ControlName(rule.Name)])
	}
	for i := range run.Results {
		run.Results[i].RuleIndex = ruleIndex[run.Results[i].RuleID]
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: sarifSchemaURI, Version: sarifVersion, Runs: []sarifRun{run}})
}

// sarifMessage is the result's text: the object, the violation as
// Finding.Describe words it, and the rule; also any exception that matched but does not apply (expired, or refused by the
// guardrails) and whether a PolicyException could waive it.
func sarifMessage(res *engine.RuleResult, f *engine.Finding, o *engine.Object) string {
	r := res.Rule
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s. SecurityPolicy %q rule %q (%s, %s).", objectName(o), f.Describe(o), r.Policy.Name, r.Name, r.LevelVersion(), r.Policy.Action)
	if fix := f.PodLevelFix(o); fix != "" {
		fmt.Fprintf(&b, " Or %s.", fix)
	}
	for _, rf := range res.Refused {
		fmt.Fprintf(&b, " %s does not apply: %s.", rf.Source, strings.TrimSuffix(rf.Message, "."))
	}
	b.WriteString(" ")
	b.WriteString(res.Hint(o))
	return b.String()
}

// fingerprint identifies a violation across runs, whatever line the object
// moves to: the object, the policy rule, and what is violated where.
func fingerprint(res *engine.RuleResult, f *engine.Finding, o *engine.Object) string {
	h := sha256.New()
	for _, s := range []string{o.Kind, o.Namespace, o.Name, res.Rule.Policy.Name, res.Rule.Name, string(f.Control), f.CheckID,
		string(f.ContainerType), f.Container, f.Field, strings.Join(f.Values, ",")} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// sarifURI is a source as a URI reference: "stdin", a relative path as it
// was given (cleaned, slash-separated, escaped), or a file: URI for an
// absolute path. Code scanning resolves relative URIs against the
// repository root, so CI should run eval from there with relative paths.
func sarifURI(source string) string {
	if source == manifest.Stdin {
		return sarifStdinURI
	}
	p := path.Clean(filepath.ToSlash(source))
	if filepath.IsAbs(source) {
		if !strings.HasPrefix(p, "/") {
			p = "/" + p // C:/x on Windows
		}
		return (&url.URL{Scheme: "file", Path: p}).String()
	}
	return (&url.URL{Path: p}).String()
}
