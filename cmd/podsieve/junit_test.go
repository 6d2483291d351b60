package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// The JUnit report as a reader sees it, declared apart from junit.go's
// writer types so that the tests read the XML, not the writer's structs.
type parsedSuites struct {
	XMLName  xml.Name      `xml:"testsuites"`
	Name     string        `xml:"name,attr"`
	Tests    int           `xml:"tests,attr"`
	Failures int           `xml:"failures,attr"`
	Errors   int           `xml:"errors,attr"`
	Skipped  int           `xml:"skipped,attr"`
	Suites   []parsedSuite `xml:"testsuite"`
}

type parsedSuite struct {
	Name       string `xml:"name,attr"`
	Tests      int    `xml:"tests,attr"`
	Failures   int    `xml:"failures,attr"`
	Errors     int    `xml:"errors,attr"`
	Skipped    int    `xml:"skipped,attr"`
	Properties []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"properties>property"`
	Cases []parsedCase `xml:"testcase"`
}

type parsedCase struct {
	Name      string `xml:"name,attr"`
	Classname string `xml:"classname,attr"`
	File      string `xml:"file,attr"`
	Line      int    `xml:"line,attr"`
	Failure   *struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	SystemOut string `xml:"system-out"`
}

// status is what a CI test view shows for the case.
func (c parsedCase) status() string {
	switch {
	case c.Failure != nil:
		return "failure"
	case c.Error != nil:
		return "error"
	case c.Skipped != nil:
		return "skipped"
	}
	return "pass"
}

// parseJUnit parses a report with encoding/xml, strictly and as one
// document, and checks that every count agrees with the testcases.
func parseJUnit(t testing.TB, data []byte) parsedSuites {
	t.Helper()
	if !bytes.HasPrefix(data, []byte(xml.Header)) {
		t.Fatalf("no XML declaration:\n%s", data)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var r parsedSuites
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("not a JUnit report: %v\n%s", err, data)
	}
	// Nothing but white space may follow the root element.
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after the report: %v", err)
		}
		if cd, ok := tok.(xml.CharData); !ok || len(bytes.TrimSpace(cd)) > 0 {
			t.Fatalf("after the report: %#v", tok)
		}
	}
	var total [4]int
	for _, s := range r.Suites {
		var n [4]int
		for _, c := range s.Cases {
			n[0]++
			switch c.status() {
			case "failure":
				n[1]++
			case "error":
				n[2]++
			case "skipped":
				n[3]++
			}
			if c.Name == "" || c.Classname == "" {
				t.Errorf("suite %s: a testcase without name or classname: %+v", s.Name, c)
			}
		}
		if got := [4]int{s.Tests, s.Failures, s.Errors, s.Skipped}; got != n {
			t.Errorf("suite %s counts tests/failures/errors/skipped %v, its testcases %v", s.Name, got, n)
		}
		for i := range total {
			total[i] += n[i]
		}
	}
	if got := [4]int{r.Tests, r.Failures, r.Errors, r.Skipped}; got != total {
		t.Errorf("testsuites counts %v, the testcases %v", got, total)
	}
	return r
}

// TestJUnitGoldenParses parses the committed JUnit golden files back with
// encoding/xml.
func TestJUnitGoldenParses(t *testing.T) {
	files, err := filepath.Glob("testdata/eval/golden/*-junit.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no *-junit.txt golden file")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := parseJUnit(t, goldenStdout(t, f))
			if len(r.Suites) == 0 {
				t.Error("no testsuite")
			}
		})
	}
}

// TestJUnitReport checks the report's shape: a suite per policy rule, a
// case per object the rule matches, failures only for Enforce refusals (so
// that failures and exit 1 go together), Audit and Warn failures passing
// with their violations in system-out, whole-rule waivers skipped, and bad
// input as one error.
func TestJUnitReport(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		// want lists "suite | case | status" in order.
		want []string
		// out maps "suite | case" to text its system-out or failure holds.
		out map[string]string
	}{
		{
			name:     "mesh workloads",
			args:     []string{"-f", samples, "-f", "testdata/eval/mesh-workloads.yaml", "--cluster-state", "testdata/eval/cluster/staging.yaml"},
			wantCode: exitDenied,
			want: []string{
				"pod-security-standards/baseline-service-mesh | Deployment staging/web-frontend | pass",
				"pod-security-standards/baseline-service-mesh | Pod staging/net-tool | failure",
				"restricted-workloads/restricted | Deployment staging/web-frontend | pass",
				"restricted-workloads/restricted | Pod staging/net-tool | pass",
			},
			out: map[string]string{
				"pod-security-standards/baseline-service-mesh | Pod staging/net-tool":            "Pod staging/net-tool is refused by SecurityPolicy",
				"restricted-workloads/restricted | Pod staging/net-tool":                         "Audit policy: these violations are reported, not refused.\nVIOLATION: Privilege Escalation",
				"restricted-workloads/restricted | Deployment staging/web-frontend":              "exempt: Capabilities: init container \"istio-init\"",
				"pod-security-standards/baseline-service-mesh | Deployment staging/web-frontend": "[by policy/pod-security-standards/baseline-service-mesh]",
			},
		},
		{
			name: "a whole-rule waiver is skipped; names are escaped",
			args: []string{"-f", "-", "-n", "a&b"},
			stdin: `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: p}
spec:
  rules: [{name: r, podSecurity: {level: baseline}}]
  exceptions: {}
---
apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: all}
spec:
  exceptions: [{policyName: p, ruleNames: [r]}]
  match: {names: ["<waived>"]}
---
apiVersion: v1
kind: Pod
metadata: {name: "<waived>"}
spec: {hostPID: true, containers: [{name: a, image: x}]}
---
apiVersion: v1
kind: Pod
metadata: {name: "x]]>\"'y"}
spec: {hostIPC: true, containers: [{name: a, image: "i<&>"}]}
`,
			wantCode: exitDenied,
			want: []string{
				"p/r | Pod a&b/<waived> | skipped",
				`p/r | Pod a&b/x]]>"'y | failure`,
			},
			out: map[string]string{
				"p/r | Pod a&b/<waived>": "skip",
				`p/r | Pod a&b/x]]>"'y`:  `VIOLATION: Host Namespaces: pod sets spec.hostIPC to true`,
			},
		},
		{
			name:     "no policy: no suite",
			args:     []string{"-f", "-"},
			stdin:    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
			wantCode: exitOK,
		},
		{
			name:     "bad input is one error naming every problem",
			args:     []string{"-f", samples, "-f", "testdata/eval/bad-input.yaml"},
			wantCode: exitBadInput,
			want:     []string{"podsieve eval | read the input | error"},
			out: map[string]string{
				"podsieve eval | read the input": "testdata/eval/bad-input.yaml, document 1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"eval", "--now", "2026-11-22T00:00:00Z", "-o", "junit"}, tt.args...)
			code := run(args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			r := parseJUnit(t, stdout.Bytes())
			var got []string
			texts := map[string]string{}
			for _, s := range r.Suites {
				for _, c := range s.Cases {
					if c.Classname != s.Name {
						t.Errorf("case %s: classname %q in suite %q", c.Name, c.Classname, s.Name)
					}
					got = append(got, s.Name+" | "+c.Name+" | "+c.status())
					text := c.SystemOut
					if c.Failure != nil {
						text += c.Failure.Message + "\n" + c.Failure.Text
					}
					if c.Error != nil {
						text += c.Error.Message + "\n" + c.Error.Text
					}
					texts[s.Name+" | "+c.Name] = text
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("cases:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			for k, want := range tt.out {
				if !strings.Contains(texts[k], want) {
					t.Errorf("%s lacks %q:\n%s", k, want, texts[k])
				}
			}
			if (r.Failures > 0) != (code == exitDenied) {
				t.Errorf("%d failures with exit %d", r.Failures, code)
			}
		})
	}
}

// FuzzEvalJUnit: whatever arrives on stdin, -o junit writes one well-formed
// report whose failures agree with the exit status, and on bad input one
// error.
func FuzzEvalJUnit(f *testing.F) {
	policy := "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nmetadata: {name: p}\nspec: {rules: [{name: r, podSecurity: {level: restricted}}]}\n---\n"
	for _, seed := range []string{
		policy + "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: x}]}\n",
		policy + "apiVersion: v1\nkind: Pod\nmetadata: {name: \"\\u0000<]]>\\ud800\"}\nspec: {containers: [{name: \"\\u0007\", image: \"&amp;\"}]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: \"\\u0001\"}\nspec: {bogus: \"\\u0002\"}\n",
		"not: [yaml\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"eval", "-o", "junit", "-f", "-", "--now", "2026-11-22T00:00:00Z"}, strings.NewReader(in), &stdout, &stderr)
		r := parseJUnit(t, stdout.Bytes())
		switch code {
		case exitOK, exitDenied:
			if (r.Failures > 0) != (code == exitDenied) || r.Errors != 0 {
				t.Fatalf("exit %d with %d failures, %d errors", code, r.Failures, r.Errors)
			}
		case exitBadInput:
			if r.Errors != 1 || r.Tests != 1 {
				t.Fatalf("exit 2 with %d errors in %d tests", r.Errors, r.Tests)
			}
		default:
			t.Fatalf("exit %d", code)
		}
	})
}
