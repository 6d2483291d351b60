package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want counts policies, exceptions, namespaces, workloads, ignored.
		want    [5]int
		wantErr []string
	}{
		{
			name: "multi-document YAML of every kind podsieve reads",
			in: `apiVersion: policy.podsieve.dev/v1alpha1
kind: SecurityPolicy
metadata: {name: p}
spec: {rules: [{name: r, podSecurity: {level: baseline}}]}
---
apiVersion: policy.podsieve.dev/v1alpha1
kind: PolicyException
metadata: {name: e, namespace: staging}
spec: {exceptions: [{policyName: p, ruleNames: [r]}]}
---
# only a comment
---
apiVersion: v1
kind: Namespace
metadata: {name: staging}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {selector: {}, template: {spec: {containers: [{name: a, image: nginx}]}}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
`,
			want: [5]int{1, 1, 1, 1, 1},
		},
		{
			name: "JSON and a v1 List whose items say their kinds",
			in: `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "a", "image": "x"}]}},
  {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "b"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}}]}`,
			want: [5]int{0, 0, 0, 2, 0},
		},
		{
			name: "a typed list whose items do not say their kind",
			in:   "apiVersion: apps/v1\nkind: DeploymentList\nitems:\n- metadata: {name: a}\n  spec: {selector: {}, template: {spec: {containers: []}}}\n",
			want: [5]int{0, 0, 0, 1, 0},
		},
		{
			name:    "an unknown field is named",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: a, image: x, securityContxt: {}}]\n",
			wantErr: []string{"<stdin>, document 1: Pod web:", `unknown field "spec.containers[0].securityContxt"`},
		},
		{
			name:    "a duplicate key is refused",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nmetadata: {name: other}\n",
			wantErr: []string{"<stdin>, document 1: not valid YAML", `"metadata"`},
		},
		{
			name:    "every bad document is reported, not only the first",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {hostPID: yes-please}\n---\nkind: Pod\n---\napiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: old}\n",
			wantErr: []string{"document 1: Pod a:", "document 2: apiVersion and kind are required", `document 3: Deployment: apiVersion "apps/v1beta1" is not one podsieve reads; use apps/v1`},
		},
		{
			name: "a pod and a Job the API server names",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {generateName: web-}\n---\napiVersion: batch/v1\nkind: Job\nmetadata: {generateName: migrate-}\nspec: {template: {spec: {containers: []}}}\n",
			want: [5]int{0, 0, 0, 2, 0},
		},
		{
			name:    "a pod without name or generateName",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {labels: {app: web}}\n",
			wantErr: []string{"document 1: Pod: metadata.name or metadata.generateName is required"},
		},
		{
			name:    "a podsieve object without a name",
			in:      "apiVersion: policy.podsieve.dev/v1alpha1\nkind: SecurityPolicy\nspec: {rules: []}\n",
			wantErr: []string{"document 1: SecurityPolicy: metadata.name is required"},
		},
		{
			name:    "a bad item of a List names the item",
			in:      "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- {apiVersion: v1, kind: Pod, metadata: {name: b}, spek: {}}\n",
			wantErr: []string{"<stdin>, document 1, item 2: Pod b:", `unknown field "spek"`},
		},
		{
			name:    "not YAML at all",
			in:      "apiVersion: v1\nkind: [Pod\n",
			wantErr: []string{"<stdin>, document 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Load([]string{Stdin}, strings.NewReader(tt.in))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := [5]int{len(set.Policies), len(set.Exceptions), len(set.Namespaces), len(set.Workloads), len(set.Ignored)}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\n"
	write("a.yaml", strings.Replace(pod, "%s", "a", 1))
	write("nested/b.yml", strings.Replace(pod, "%s", "b", 1))
	write("nested/deeper/c.JSON", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}}`)
	write("README.md", "not a manifest")
	write("empty/.keep", "")

	set, err := Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range set.Workloads {
		names = append(names, filepath.Base(d.Source)+":"+d.Where()[len(d.Source):])
	}
	if got := strings.Join(names, " "); got != "a.yaml:, document 1 b.yml:, document 1 c.JSON:, document 1" {
		t.Errorf("read %s", got)
	}

	for name, args := range map[string][]string{
		"missing file":         {filepath.Join(dir, "nope.yaml")},
		"directory of nothing": {filepath.Join(dir, "empty")},
		"stdin twice":          {Stdin, Stdin},
	} {
		if _, err := Load(args, strings.NewReader("")); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.Contains(err.Error(), "-f ") {
			t.Errorf("%s: error does not name the flag: %v", name, err)
		}
	}
}

// FuzzLoad: any input either decodes or returns an error; it never panics,
// and every decoded document has an object and a position.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: a, image: nginx}]}\n",
		"apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Pod, metadata: {name: a}}]\n",
		"apiVersion: apps/v1\nkind: DeploymentList\nitems: [{metadata: {name: a}}]\n",
		"apiVersion: policy.podsieve.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e}\nspec: {exceptions: [{policyName: p, ruleNames: [r]}]}\n---\n---\n",
		`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"a": "b"}}}`,
		"kind: List\napiVersion: v1\nitems: [{kind: List, apiVersion: v1, items: []}]\n",
		"- a\n- b\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {volumes: [{name: v}]}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		set, err := Load([]string{Stdin}, strings.NewReader(in))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		for _, group := range [][]Document{set.Policies, set.Exceptions, set.Namespaces, set.Workloads} {
			for _, d := range group {
				if d.Object == nil || d.Index < 1 || d.Line < 1 {
					t.Fatalf("document without object or position: %+v", d)
				}
			}
		}
	})
}

// TestLoadListErrors pins how Load reports a List's bad items: one error
// that names the List, then each item, after the errors of earlier documents.
func TestLoadListErrors(t *testing.T) {
	in := "kind: Pod\n---\napiVersion: v1\nkind: List\nitems:\n- {kind: Pod}\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- {apiVersion: v1, kind: Pod, metadata: {name: b}, spek: {}}\n"
	_, err := Load([]string{Stdin}, strings.NewReader(in))
	want := "<stdin>, document 1: apiVersion and kind are required\n" +
		"<stdin>, document 2: <stdin>, document 2, item 1: apiVersion and kind are required\n" +
		"<stdin>, document 2, item 3: Pod b: strict decoding error: unknown field \"spek\""
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

// TestDocuments pins what the reader underneath Load (and podsieve convert)
// yields: documents and List items in input order with their place, typed
// List items with the List's type, errors that name the document or item,
// and nothing after a broken separator.
func TestDocuments(t *testing.T) {
	in := "# only a comment\n" +
		"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n" +
		"---\napiVersion: apps/v1\nkind: DeploymentList\nitems:\n- metadata: {name: b}\n- null\n- {kind: Pod}\n- {apiVersion: v1, kind: List}\n" +
		"---\nkind: [x\n" +
		"---\napiVersion: v1\nkind: List\nitems: 5\n" +
		// As YAMLReader, a broken separator loses the document it ends.
		"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: lost}\n" +
		"--- not a separator\napiVersion: v1\nkind: Namespace\nmetadata: {name: never}\n"
	want := []string{
		"<stdin>, document 2 line 3: v1 Namespace",
		"<stdin>, document 3, item 1 line 7: apps/v1 Deployment",
		"<stdin>, document 3, item 3: error: <stdin>, document 3, item 3: apiVersion and kind are required",
		"<stdin>, document 3, item 4 line 7: v1 List",
		"<stdin>, document 4: error: <stdin>, document 4: not valid YAML",
		"<stdin>, document 5: error: <stdin>, document 5: List: json: cannot unmarshal",
		"<stdin>, document 6: error: <stdin>, document 6: invalid Yaml document separator: not a separator",
	}
	var got []string
	for d, err := range Documents(Stdin, strings.NewReader(in)) {
		if err != nil {
			var de *DocumentError
			if !errors.As(err, &de) {
				t.Fatalf("%v is a %T, not a *DocumentError", err, err)
			}
			got = append(got, de.Loc.Where()+": error: "+err.Error())
			continue
		}
		got = append(got, fmt.Sprintf("%s line %d: %s %s", d.Loc.Where(), d.Loc.Line, d.APIVersion, d.Kind))
		if d.Kind == "Deployment" && !bytes.Contains(d.JSON, []byte(`"kind":"Deployment"`)) {
			t.Errorf("a typed List's item does not carry its inherited kind: %s", d.JSON)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("yield %d: got %q, want it to start with %q", i, got[i], want[i])
		}
	}
}

// TestDocumentLines pins the line each document starts on: the first line
// that is not blank, a comment or a separator, counted across separators.
func TestDocumentLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// want is "name:line" of every workload, in input order.
		want []string
	}{
		{
			name: "one document",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
			want: []string{"a:1"},
		},
		{
			name: "comments and blank lines before the content are skipped",
			in:   "# a pod\n\n  # indented comment\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
			want: []string{"a:4"},
		},
		{
			name: "a leading separator and separators with comments",
			in: "---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n" +
				"--- # next\n# b\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n",
			want: []string{"a:2", "b:7"},
		},
		{
			name: "empty documents still count their lines",
			in:   "---\n---\n# nothing\n---\n\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
			want: []string{"a:7"},
		},
		{
			name: "CRLF line ends and no final newline",
			in:   "apiVersion: v1\r\nkind: Pod\r\nmetadata: {name: a}\r\n---\r\n\r\napiVersion: v1\r\nkind: Pod\r\nmetadata: {name: b}",
			want: []string{"a:1", "b:6"},
		},
		{
			name: "items of a List have the List's line",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n- {apiVersion: v1, kind: Pod, metadata: {name: c}}\n",
			want: []string{"a:1", "b:6", "c:6"},
		},
		{
			name: "a line longer than the read buffer is one line",
			in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: a, annotations: {x: " + strings.Repeat("y", 10000) + "}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n",
			want: []string{"a:1", "b:5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Load([]string{Stdin}, strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range set.Workloads {
				got = append(got, d.Object.(metav1.Object).GetName()+":"+strconv.Itoa(d.Line))
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// splitBoth splits in with docReader and with apimachinery's YAMLReader and
// fails when they disagree on a document or an error, or when a start line
// does not point at the document's first content line.
func splitBoth(t *testing.T, in string) {
	t.Helper()
	ours := &docReader{r: bufio.NewReader(strings.NewReader(in))}
	theirs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(in)))
	lines := strings.Split(strings.ReplaceAll(in, "\r\n", "\n"), "\n")
	for n := 1; ; n++ {
		doc, start, err := ours.Read()
		want, wantErr := theirs.Read()
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("document %d: error %v, YAMLReader's %v", n, err, wantErr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(doc, want) {
			t.Fatalf("document %d: %q, YAMLReader's %q", n, doc, want)
		}
		if start == 0 {
			continue
		}
		if start > len(lines) {
			t.Fatalf("document %d starts on line %d of %d", n, start, len(lines))
		}
		first := strings.TrimSpace(lines[start-1])
		if first == "" || first[0] == '#' || strings.HasPrefix(lines[start-1], "---") {
			t.Fatalf("document %d starts on line %d, which is %q", n, start, lines[start-1])
		}
		if !bytes.Contains(doc, []byte(strings.TrimRight(lines[start-1], "\r"))) {
			t.Fatalf("document %d does not hold its start line %d %q", n, start, lines[start-1])
		}
	}
}

// TestDocReaderAgrees: docReader splits as YAMLReader does, whose behaviour
// kubectl users know, including its odd corners.
func TestDocReaderAgrees(t *testing.T) {
	for name, in := range map[string]string{
		"empty":                       "",
		"only separators":             "---\n---\n---\n",
		"separator with text":         "a: 1\n--- b\n",
		"four dashes":                 "a: 1\n----\nb: 2\n",
		"separator comment":           "a: 1\n---   # x\nb: 2\n",
		"indented separator is text":  "a: |\n  ---\n  x\n",
		"no final newline":            "a: 1\n---\nb: 2",
		"final separator":             "a: 1\n---",
		"CRLF":                        "a: 1\r\n---\r\nb: 2\r\n",
		"long line":                   strings.Repeat("x", 9000) + "\n---\n" + strings.Repeat("y", 5000),
		"JSON":                        `{"apiVersion": "v1",` + "\n" + `"kind": "Pod"}`,
		"blank lines between":         "\n\na: 1\n\n---\n\n\nb: 2\n\n",
		"separator then EOF with doc": "a: 1\n---\n",
	} {
		t.Run(name, func(t *testing.T) { splitBoth(t, in) })
	}
}

// FuzzDocReader: on any input docReader returns what YAMLReader returns, and
// every start line is a content line of its document.
func FuzzDocReader(f *testing.F) {
	for _, seed := range []string{"a: 1\n---\nb: 2\n", "---\n# c\n---\n\n", "x\r\n--- #\r\ny", "----\n", "a\n--- b\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		splitBoth(t, in)
	})
}

// TestDocumentsNothingDropped: objects one after the other in a JSON file
// are each a document, as kubectl reads them; anything else after a
// document's first YAML node (which the YAML parser would drop without a
// word) is an error, not an object left undecided.
func TestDocumentsNothingDropped(t *testing.T) {
	pod := func(name string) string {
		return `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "` + name + `"}}`
	}
	for _, tt := range []struct {
		name string
		in   string
		want []string
	}{
		{name: "objects one after the other", in: pod("a") + "\n" + pod("b") + "\n\n" + pod("c"),
			want: []string{"document 1 line 1: a", "document 2 line 2: b", "document 3 line 4: c"}},
		{name: "on one line", in: pod("a") + pod("b"), want: []string{"document 1 line 1: a", "document 2 line 1: b"}},
		{name: "after a YAML document", in: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n" + pod("b") + pod("c"),
			want: []string{"document 1 line 1: a", "document 2 line 5: b", "document 3 line 5: c"}},
		{name: "one object", in: pod("a"), want: []string{"document 1 line 1: a"}},
		{name: "flow YAML", in: "{apiVersion: v1, kind: Pod, metadata: {name: a}}\n", want: []string{"document 1 line 1: a"}},
		{name: "words after an object", in: pod("a") + " trailing\n", want: []string{"document 1: error: something follows the first object or value"}},
		{name: "a list after an object", in: pod("a") + "\n[1]\n",
			want: []string{"document 1 line 1: a", "document 2: error: not a Kubernetes object: json: cannot unmarshal array into Go value of type v1.TypeMeta"}},
		{name: "flow YAML after an object", in: "{apiVersion: v1, kind: Pod, metadata: {name: a}} {b: 1}\n", want: []string{"document 1: error: something follows the first object or value"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for d, err := range Documents(Stdin, strings.NewReader(tt.in)) {
				if err != nil {
					var de *DocumentError
					if !errors.As(err, &de) {
						t.Fatalf("%v is a %T, not a *DocumentError", err, err)
					}
					msg, _, _ := strings.Cut(de.Err.Error(), ", and would be ignored")
					got = append(got, fmt.Sprintf("document %d: error: %s", de.Loc.Index, msg))
					continue
				}
				var m struct {
					Metadata struct{ Name string } `json:"metadata"`
				}
				if err := json.Unmarshal(d.JSON, &m); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("document %d line %d: %s", d.Loc.Index, d.Loc.Line, m.Metadata.Name))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}
