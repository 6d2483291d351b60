package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestMeshSamplesAreMinimal: every exclusion and exception entry of every
// mesh sample is needed by its mesh's output (a node agent's DaemonSet or
// the pod the API server stores for it; a proxy as a native sidecar or, as
// older releases inject it, an app container): dropping any one entry makes
// the sample refuse one of them, so no entry is there for nothing.
func TestMeshSamplesAreMinimal(t *testing.T) {
	for _, tt := range []struct {
		sample     string
		fixture    meshFixture
		restricted bool
	}{
		{"istio-sidecar-baseline.yaml", istioSidecar, false},
		{"istio-sidecar-restricted.yaml", istioSidecar, true},
		{"linkerd-baseline.yaml", linkerd, false},
		{"linkerd-restricted.yaml", linkerd, true},
		{"linkerd-cni-restricted.yaml", linkerdCNI, true},
		{"kuma-baseline.yaml", kuma, false},
		{"kuma-restricted.yaml", kuma, true},
		{"istio-cni-node.yaml", istioCNINode, false},
		{"linkerd-cni-node.yaml", linkerdCNINode, false},
	} {
		t.Run(tt.sample, func(t *testing.T) {
			obj := loadMeshFixture(t, tt.fixture)
			if tt.restricted {
				hardenApp(t, obj, !tt.fixture.rootInit)
			}
			objs := []map[string]any{obj}
			if obj["kind"] == "DaemonSet" {
				objs = append(objs, podOfDaemonSet(t, obj))
			}
			for _, proxy := range []string{"istio-proxy", "linkerd-proxy", "kuma-sidecar"} {
				older := deepCopy(obj)
				if _, ok := proxyAsApp(proxy)(older); ok {
					objs = append(objs, older)
				}
			}
			data, err := os.ReadFile(filepath.Join(meshSamples, tt.sample))
			if err != nil {
				t.Fatal(err)
			}
			docs := strings.Split(string(data), "\n---\n")
			for d, doc := range docs {
				var m map[string]any
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatal(err)
				}
				entries, path := meshEntries(m)
				// Each value of each entry is needed too, and each image is
				// one of the meshes' release images.
				for i, e := range entries {
					entry := e.(map[string]any)
					for _, image := range entryList(entry, "images") {
						if !slices.Contains(meshReleaseImages, image) {
							t.Errorf("document %d's %s entry %d names image %q, not a mesh's release image", d+1, path, i, image)
						}
					}
					values, _ := entry["values"].([]any)
					for j := 0; j < len(values) && len(values) > 1; j++ {
						trimmed := deepCopy(m)
						te, _ := meshEntries(trimmed)
						te[i].(map[string]any)["values"] = slices.Delete(slices.Clone(values), j, j+1)
						if !refusesOne(t, docs, d, trimmed, objs) {
							t.Errorf("without value %q of document %d's %s entry %d the sample still admits %s: the value waives nothing", values[j], d+1, path, i, tt.fixture.file)
						}
					}
				}
				for i := range entries {
					trimmed := deepCopy(m)
					e, _ := meshEntries(trimmed)
					setAt(trimmed, path, slices.Delete(e, i, i+1))
					if len(e) == 1 && m["kind"] == "PolicyException" {
						trimmed = nil // an exception without its one entry is no exception
					}
					if !refusesOne(t, docs, d, trimmed, objs) {
						t.Errorf("without document %d's %s entry %d the sample still admits %s: the entry waives nothing", d+1, path, i, tt.fixture.file)
					}
				}
			}
		})
	}
}

// meshReleaseImages are the images the meshes publish for their injected
// containers and node agents, on their own registries.
var meshReleaseImages = []string{
	"docker.io/istio/proxyv2", "gcr.io/istio-release/proxyv2",
	"docker.io/istio/install-cni", "gcr.io/istio-release/install-cni",
	"cr.l5d.io/linkerd/proxy", "cr.l5d.io/linkerd/proxy-init",
	"docker.io/kumahq/kuma-init", "docker.io/kumahq/kuma-dp",
}

func entryList(entry map[string]any, key string) []string {
	var out []string
	list, _ := entry[key].([]any)
	for _, v := range list {
		out = append(out, v.(string))
	}
	return out
}

// refusesOne reports whether the sample, with document d replaced by
// changed (left out when nil), refuses one of the objects.
func refusesOne(t *testing.T, docs []string, d int, changed map[string]any, objs []map[string]any) bool {
	t.Helper()
	rest := slices.Clone(docs)
	if changed == nil {
		rest = slices.Delete(rest, d, d+1)
	} else {
		out, err := yaml.Marshal(changed)
		if err != nil {
			t.Fatal(err)
		}
		rest[d] = string(out)
	}
	file := filepath.Join(t.TempDir(), "changed.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(rest, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if _, code := evalMesh(t, []string{"--cluster-state", file}, obj, "", ""); code == exitDenied {
			return true
		}
	}
	return false
}

// meshEntries returns a sample document's exclusion or exception entries,
// and where they are.
func meshEntries(m map[string]any) ([]any, []string) {
	switch m["kind"] {
	case "SecurityPolicy":
		rules, _ := dig(m, "spec", "rules").([]any)
		if len(rules) != 1 {
			return nil, nil
		}
		entries, _ := dig(rules[0].(map[string]any), "podSecurity", "exclude").([]any)
		return entries, []string{"spec", "rules", "0", "podSecurity", "exclude"}
	case "PolicyException":
		entries, _ := dig(m, "spec", "podSecurity").([]any)
		return entries, []string{"spec", "podSecurity"}
	}
	return nil, nil
}

func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func setAt(m map[string]any, path []string, v any) {
	cur := m
	for _, p := range path[:len(path)-1] {
		switch next := cur[p].(type) {
		case map[string]any:
			cur = next
		case []any:
			cur = next[0].(map[string]any) // rules[0]
		}
	}
	cur[path[len(path)-1]] = v
}
