package render

import (
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/manifest"
	"github.com/podsieve/podsieve/internal/offline"
	"github.com/podsieve/podsieve/internal/words"
)

// podsieve eval -o junit: a JUnit XML report for CI test views (GitLab's
// junit report, Jenkins, test-reporter actions). One testsuite per policy
// rule, in the order the input first matches them; one testcase per object
// the rule matches. The report agrees with the exit status: a testcase
// fails only when an Enforce rule refuses the object, so a report with
// failures comes with exit 1 and one without with exit 0. Audit and Warn
// failures pass, with their violations in <system-out>; a rule waived whole
// by an exception is <skipped>. When the input cannot be read (exit 2) the
// report holds one testcase with an <error> that says why.

// junitReportName names the report, the suite of an input error and its
// testcase's class.
const junitReportName = "podsieve eval"

type junitTestSuites struct {
	XMLName  xml.Name         `xml:"testsuites"`
	Name     string           `xml:"name,attr"`
	Tests    int              `xml:"tests,attr"`
	Failures int              `xml:"failures,attr"`
	Errors   int              `xml:"errors,attr"`
	Skipped  int              `xml:"skipped,attr"`
	Suites   []junitTestSuite `xml:"testsuite"`
}

type junitTestSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitTestCase  `xml:"testcase"`
}

type junitProperties struct {
	Property []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitTestCase struct {
	Name      string `xml:"name,attr"`
	Classname string `xml:"classname,attr"`
	// File and Line are not in the Ant schema, but GitLab and pytest's
	// readers take them: the object's source file and its first line.
	File      string        `xml:"file,attr,omitempty"`
	Line      int           `xml:"line,attr,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

// junitProblem is a <failure> or an <error>: a one-line message, a type,
// and the full text.
type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// junitText is multi-line text, kept readable in a CDATA section.
type junitText struct {
	Text string `xml:",cdata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// JUnit writes podsieve eval -o junit: the decisions as a JUnit report. The
// i-th decision is the i-th workload's.
func JUnit(w io.Writer, decisions []engine.Decision, in *offline.Input) error {
	report := junitTestSuites{Name: junitReportName, Suites: []junitTestSuite{}}
	suiteOf := map[string]int{} // by policy/rule
	for i := range decisions {
		d := &decisions[i]
		o := d.Object
		doc := in.Workloads[i].Doc
		for j := range d.Results {
			res := &d.Results[j]
			r := res.Rule
			name := r.Policy.Name + "/" + r.Name
			si, ok := suiteOf[name]
			if !ok {
				si = len(report.Suites)
				suiteOf[name] = si
				report.Suites = append(report.Suites, junitTestSuite{
					Name: name,
					Properties: &junitProperties{Property: []junitProperty{
						{Name: "policy", Value: r.Policy.Name}, {Name: "rule", Value: r.Name},
						{Name: "action", Value: string(r.Policy.Action)}, {Name: "level", Value: r.LevelVersion()},
					}},
				})
			}
			s := &report.Suites[si]
			tc := junitTestCase{
				Name: objectName(o), Classname: s.Name, Line: doc.Line,
				SystemOut: &junitText{Text: xmlText(ruleReport(res, o))},
			}
			if doc.Source != manifest.Stdin {
				tc.File = doc.Source
			}
			switch {
			case res.Enforced():
				tc.Failure = &junitProblem{
					Message: fmt.Sprintf("refused: %s", uncoveredSummary(res)),
					Type:    string(r.Policy.Action), Text: xmlText(res.DenyMessage(o)),
				}
				s.Failures++
			case res.Outcome == engine.Skip:
				tc.Skipped = &junitSkipped{Message: "waived whole by " + engine.JoinSources(res.Exceptions, ", ")}
				s.Skipped++
			}
			s.Tests++
			s.Cases = append(s.Cases, tc)
		}
	}
	for _, s := range report.Suites {
		report.Tests += s.Tests
		report.Failures += s.Failures
		report.Skipped += s.Skipped
	}
	return encodeJUnit(w, report)
}

// JUnitError writes a report whose one testcase is the input's problems,
// err, so that a CI test view shows why nothing was decided.
func JUnitError(w io.Writer, err error) error {
	return encodeJUnit(w, junitTestSuites{
		Name: junitReportName, Tests: 1, Errors: 1,
		Suites: []junitTestSuite{{
			Name: junitReportName, Tests: 1, Errors: 1,
			Cases: []junitTestCase{{
				Name: "read the input", Classname: junitReportName,
				Error: &junitProblem{
					Message: "bad input: nothing was decided; fix the files and documents named below",
					Type:    "BadInput", Text: xmlText(err.Error()),
				},
			}},
		}},
	})
}

func encodeJUnit(w io.Writer, report junitTestSuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(report); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// ruleReport is what the text output says under a rule, for <system-out>:
// every violation, covered or not, the exceptions that did not apply, and
// for a failure whether an exception could waive it. An Audit or Warn
// failure says first that it is reported, not refused.
func ruleReport(res *engine.RuleResult, o *engine.Object) string {
	var b strings.Builder
	r := res.Rule
	fmt.Fprintf(&b, "%s (%s, %s): %s\n", r.Policy.Name+"/"+r.Name, r.LevelVersion(), r.Policy.Action, res.Outcome)
	if res.Outcome == engine.Fail && !res.Enforced() {
		fmt.Fprintf(&b, "%s policy: these violations are reported, not refused.\n", r.Policy.Action)
	}
	for i := range res.Findings {
		f := &res.Findings[i]
		if f.Covered() {
			fmt.Fprintf(&b, "exempt: %s [by %s]\n", f.Describe(o), engine.JoinSources(f.ExemptingSources(), ", "))
		} else {
			fmt.Fprintf(&b, "VIOLATION: %s\n", f.Describe(o))
		}
	}
	for _, fix := range res.PodLevelFixes(o) {
		fmt.Fprintf(&b, "%s\n", fix)
	}
	for _, rf := range res.Refused {
		fmt.Fprintf(&b, "not applied: %s: %s\n", rf.Source, rf.Message)
	}
	if res.Outcome == engine.Fail {
		fmt.Fprintf(&b, "%s\n", res.Hint(o))
	}
	return b.String()
}

// uncoveredSummary is a failure's one-line message: how many violations
// and of which controls.
func uncoveredSummary(res *engine.RuleResult) string {
	var controls []string
	n := 0
	for i := range res.Findings {
		f := &res.Findings[i]
		if f.Covered() {
			continue
		}
		n++
		if !slices.Contains(controls, string(f.Control)) {
			controls = append(controls, string(f.Control))
		}
	}
	return fmt.Sprintf("%s of %s", words.Count(n, "violation"), strings.Join(controls, ", "))
}

// xmlText makes s safe for a CDATA section, which, unlike attributes and
// character data, encoding/xml writes as it is: invalid UTF-8 and the
// characters XML 1.0 forbids (most C0 controls) become U+FFFD.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r',
			r >= 0x20 && r <= 0xD7FF,
			r >= 0xE000 && r <= 0xFFFD,
			r >= 0x10000 && r <= 0x10FFFF:
			return r
		}
		return '\uFFFD'
	}, strings.ToValidUTF8(s, "\uFFFD"))
}
