package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestLoadKustomization: a directory with a kustomization file is read as
// kubectl apply -k would apply it, its resources in their order and nothing
// else (a sibling directory of alternatives stays out); a kustomization that
// would change the objects, a remote resource, a cycle or a directory
// without a kustomization is refused with the file and what to run instead.
func TestLoadKustomization(t *testing.T) {
	pod := func(name string) string { return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\n" }
	tests := []struct {
		name    string
		files   map[string]string
		dir     string // the directory given to -f, below the test's; "" for the test's
		want    string // the pods read, in order
		wantErr string
	}{
		{
			name: "resources in their order, alternatives left out",
			files: map[string]string{
				"kustomization.yaml":     "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- z.yaml\n- base\n- a.yaml\n",
				"z.yaml":                 pod("z"),
				"a.yaml":                 pod("a"),
				"unlisted.yaml":          pod("unlisted"),
				"base/kustomization.yml": "resources: [b.yaml]\n",
				"base/b.yaml":            pod("b"),
				"meshes/m.yaml":          pod("m"),
			},
			want: "z b a",
		},
		{
			name:  "Kustomization spelt as kustomize also reads it",
			files: map[string]string{"Kustomization": "resources: [a.yaml]\n", "a.yaml": pod("a"), "b.yaml": pod("b")},
			want:  "a",
		},
		{
			name:    "a patch is refused with the command that renders it",
			files:   map[string]string{"kustomization.yaml": "resources: [a.yaml]\nnamePrefix: x-\npatches: []\n", "a.yaml": pod("a")},
			wantErr: "kustomization.yaml sets namePrefix, patches, which change what kustomize writes and podsieve does not apply; decide the rendered objects instead: kubectl kustomize",
		},
		{
			name:    "a remote resource is refused",
			files:   map[string]string{"kustomization.yaml": "resources: [https://github.com/example/repo/config]\n"},
			wantErr: `resources[0] "https://github.com/example/repo/config" is not a local path`,
		},
		{
			name:    "a directory without a kustomization is refused",
			files:   map[string]string{"kustomization.yaml": "resources: [sub]\n", "sub/a.yaml": pod("a")},
			wantErr: `resources[0] "sub" is a directory without a kustomization file`,
		},
		{
			name:    "a cycle is refused",
			files:   map[string]string{"kustomization.yaml": "resources: [sub]\n", "sub/kustomization.yaml": "resources: [..]\n"},
			wantErr: "this directory is included more than once",
		},
		{
			name: "a directory listed twice is refused, not expanded again",
			files: map[string]string{
				"kustomization.yaml":   "resources: [a, b]\n",
				"a/kustomization.yaml": "resources: [../c]\n",
				"b/kustomization.yaml": "resources: [../c]\n",
				"c/kustomization.yaml": "resources: [p.yaml]\n",
				"c/p.yaml":             pod("p"),
			},
			wantErr: "this directory is included more than once",
		},
		{
			name:    "a file listed twice is refused",
			files:   map[string]string{"kustomization.yaml": "resources: [a.yaml, ./a.yaml]\n", "a.yaml": pod("a")},
			wantErr: `resources[1] "./a.yaml" is included more than once`,
		},
		{
			name:    "a file outside the kustomization's directory is refused",
			files:   map[string]string{"k/kustomization.yaml": "resources: [../a.yaml]\n", "a.yaml": pod("a")},
			dir:     "k",
			wantErr: `resources[0] "../a.yaml" is outside`,
		},
		{
			name: "a directory elsewhere with its own kustomization is read",
			files: map[string]string{
				"k/kustomization.yaml":    "resources: [../base]\n",
				"base/kustomization.yaml": "resources: [b.yaml]\n",
				"base/b.yaml":             pod("b"),
			},
			dir:  "k",
			want: "b",
		},
		{
			name:  "bases, kustomize's deprecated spelling of resources, are read",
			files: map[string]string{"kustomization.yaml": "resources: [a.yaml]\nbases: [base]\n", "a.yaml": pod("a"), "base/kustomization.yaml": "resources: [b.yaml]\n", "base/b.yaml": pod("b")},
			want:  "a b",
		},
		{
			name:    "an absolute path is refused",
			files:   map[string]string{"kustomization.yaml": "resources: [/etc/a.yaml]\n", "etc/a.yaml": pod("a")},
			wantErr: `resources[0] "/etc/a.yaml" is an absolute path`,
		},
		{
			name:    "the kustomization file itself is refused",
			files:   map[string]string{"kustomization.yaml": "resources: [kustomization.yaml]\n"},
			wantErr: `resources[0] "kustomization.yaml" is the kustomization file itself`,
		},
		{
			name:    "two kustomization files are refused",
			files:   map[string]string{"kustomization.yaml": "resources: [a.yaml]\n", "Kustomization": "resources: [a.yaml]\n", "a.yaml": pod("a")},
			wantErr: "kustomize refuses more than one kustomization file",
		},
		{
			name:    "a Component is refused as a resource",
			files:   map[string]string{"kustomization.yaml": "resources: [c]\n", "c/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [a.yaml]\n", "c/a.yaml": pod("a")},
			wantErr: "is a Component, not a Kustomization",
		},
		{
			name:    "a missing resource names the entry",
			files:   map[string]string{"kustomization.yaml": "resources: [gone.yaml]\n"},
			wantErr: "kustomization.yaml: resources[0]: ",
		},
		{
			name:    "no resources",
			files:   map[string]string{"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"},
			wantErr: "kustomization.yaml lists no resources",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			arg := filepath.Join(dir, tt.dir)
			set, err := Load([]string{arg}, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "-f "+arg) {
					t.Fatalf("error %v, want one starting with -f %s and containing %q", err, arg, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range set.Workloads {
				names = append(names, d.Object.(*corev1.Pod).Name)
			}
			if got := strings.Join(names, " "); got != tt.want {
				t.Errorf("read %q, want %q", got, tt.want)
			}
		})
	}
}
