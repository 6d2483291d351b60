package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// kustomizationFiles are the names kustomize reads a directory's
// kustomization from.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// maxKustomizationDepth bounds how deep kustomizations may nest.
const maxKustomizationDepth = 16

// kustomizationIn returns the path of dir's kustomization file, "" when it
// has none, or an error when it has more than one, which kustomize refuses.
func kustomizationIn(dir string) (string, error) {
	var found []string
	for _, name := range kustomizationFiles {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s holds %s: kustomize refuses more than one kustomization file; keep one", dir, strings.Join(found, " and "))
}

// kustomizeWalk expands a kustomization's resources as kustomize loads
// them: each file or directory once in the whole tree (kustomize refuses
// an object loaded twice), files only at or below the kustomization's own
// directory (kustomize's default load restriction), a directory by its own
// kustomization, which may not be a Component.
type kustomizeWalk struct {
	included map[string]bool // absolute, symlinks resolved
	depth    int
}

// expandKustomization lists the files a kustomization's resources (and
// bases, their deprecated spelling) name, in the order listed. podsieve
// decides what is written, not what kustomize would render, so a
// kustomization that changes or adds objects (patches, a namespace, name
// prefixes, generators, components, ...) is refused, with the command that
// renders it for -f -. Remote resources are refused likewise.
func expandKustomization(file string) ([]string, error) {
	w := &kustomizeWalk{included: map[string]bool{}}
	return w.expand(file)
}

func (w *kustomizeWalk) expand(file string) ([]string, error) {
	root, err := w.enter(file)
	if err != nil {
		return nil, err
	}
	defer func() { w.depth-- }()
	resources, err := readKustomization(file)
	if err != nil {
		return nil, err
	}
	var files []string
	for i, r := range resources {
		more, err := w.resource(file, root, i, r)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s lists no resources", file)
	}
	return files, nil
}

// enter marks the kustomization's directory included, and returns it
// absolute with symlinks resolved; it refuses a directory included twice
// and nesting beyond maxKustomizationDepth. The caller leaves it by
// decrementing w.depth.
func (w *kustomizeWalk) enter(file string) (root string, err error) {
	root, err = filepath.EvalSymlinks(filepath.Dir(file))
	if err != nil {
		return "", err
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", err
	}
	if w.included[root] {
		return "", fmt.Errorf("%s: this directory is included more than once (kustomize would load its objects twice)", file)
	}
	w.included[root] = true
	if w.depth >= maxKustomizationDepth {
		return "", fmt.Errorf("%s: kustomizations nest more than %d deep", file, maxKustomizationDepth)
	}
	w.depth++
	return root, nil
}

// readKustomization is the resources (and bases) a kustomization lists; it
// refuses any other kind, and any field that changes what kustomize writes.
func readKustomization(file string) ([]string, error) {
	dir := filepath.Dir(file)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var k map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var kind string
	if raw, ok := k["kind"]; ok {
		_ = json.Unmarshal(raw, &kind)
	}
	if kind != "" && kind != "Kustomization" {
		return nil, fmt.Errorf("%s is a %s, not a Kustomization; kustomize refuses it as a resource", file, kind)
	}
	var fields []string
	for key := range k {
		if !slices.Contains([]string{"apiVersion", "kind", "metadata", "resources", "bases"}, key) {
			fields = append(fields, key)
		}
	}
	if len(fields) > 0 {
		slices.Sort(fields)
		return nil, fmt.Errorf("%s sets %s, which change what kustomize writes and podsieve does not apply; "+
			"decide the rendered objects instead: kubectl kustomize %s | podsieve <command> -f -", file, strings.Join(fields, ", "), dir)
	}
	var resources []string
	for _, key := range []string{"resources", "bases"} {
		raw, ok := k[key]
		if !ok {
			continue
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("%s: %s must be a list of paths: %w", file, key, err)
		}
		resources = append(resources, list...)
	}
	return resources, nil
}

// resource is the files the i-th resource r of the kustomization file
// (whose directory is root, resolved) names: a local file at or below its
// directory, included once, or a directory's own kustomization, expanded.
func (w *kustomizeWalk) resource(file, root string, i int, r string) ([]string, error) {
	dir := filepath.Dir(file)
	if r == "" || strings.Contains(r, "://") || strings.HasPrefix(r, "git@") || strings.HasPrefix(r, "github.com/") {
		return nil, fmt.Errorf("%s: resources[%d] %q is not a local path; podsieve reads local files only: "+
			"kubectl kustomize %s | podsieve <command> -f -", file, i, r, dir)
	}
	if filepath.IsAbs(r) {
		return nil, fmt.Errorf("%s: resources[%d] %q is an absolute path, which kustomize refuses; write it relative to %s", file, i, r, dir)
	}
	p := filepath.Join(dir, r)
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%s: resources[%d]: %w", file, i, err)
	}
	if info.IsDir() {
		inner, err := kustomizationIn(p)
		if err != nil {
			return nil, err
		}
		if inner == "" {
			return nil, fmt.Errorf("%s: resources[%d] %q is a directory without a kustomization file, which kustomize refuses", file, i, r)
		}
		return w.expand(inner)
	}
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: resources[%d]: %w", file, i, err)
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s: resources[%d] %q is outside %s, which kustomize refuses for a file (a directory with its own kustomization may be elsewhere)", file, i, r, dir)
	}
	if self, err := filepath.EvalSymlinks(file); err == nil {
		if self, err = filepath.Abs(self); err == nil && self == real {
			return nil, fmt.Errorf("%s: resources[%d] %q is the kustomization file itself", file, i, r)
		}
	}
	if w.included[real] {
		return nil, fmt.Errorf("%s: resources[%d] %q is included more than once (kustomize would load its objects twice)", file, i, r)
	}
	w.included[real] = true
	return []string{p}, nil
}
