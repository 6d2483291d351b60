package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
				if d.Object == nil || d.Index < 1 {
					t.Fatalf("document without object or position: %+v", d)
				}
			}
		}
	})
}
