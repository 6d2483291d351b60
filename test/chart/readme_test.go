package chart

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the values table of charts/podsieve/README.md from values.yaml")

const (
	tableStart = "<!-- values table: generated from values.yaml by `go test ./test/chart -run TestValuesTable -update` -->"
	tableEnd   = "<!-- end of values table -->"
)

// TestValuesTable keeps the values table of charts/podsieve/README.md
// generated from the `# --` comments of values.yaml, and every value
// documented: a value without a comment, or a comment for a value that is
// gone, fails.
func TestValuesTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	docs := valueDocs(string(raw))

	// Every documented key exists; every value is documented, itself or as
	// part of a documented object.
	var paths []string
	for _, d := range docs {
		if _, ok := lookup(values, d.path); !ok {
			t.Errorf("values.yaml documents %s, which it does not set", d.path)
		}
		paths = append(paths, d.path)
	}
	for _, leaf := range leaves("", values) {
		documented := slices.ContainsFunc(paths, func(p string) bool { return p == leaf || strings.HasPrefix(leaf, p+".") })
		if !documented {
			t.Errorf("values.yaml sets %s without a `# --` comment above it (or above the object it is in)", leaf)
		}
	}

	var b strings.Builder
	b.WriteString(tableStart + "\n\n| Key | Type | Default | Description |\n|---|---|---|---|\n")
	for _, d := range docs {
		v, _ := lookup(values, d.path)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.path, typeOf(v), defaultOf(v), strings.ReplaceAll(d.text, "|", `\|`))
	}
	b.WriteString("\n" + tableEnd)
	table := b.String()

	readme := filepath.Join(chartDir(), "README.md")
	text, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	start, end := strings.Index(string(text), tableStart), strings.Index(string(text), tableEnd)
	if start < 0 || end < start {
		t.Fatalf("%s has no values table between %q and %q", readme, tableStart, tableEnd)
	}
	current := string(text[start : end+len(tableEnd)])
	if current == table {
		return
	}
	if *update {
		if err := os.WriteFile(readme, []byte(string(text[:start])+table+string(text[end+len(tableEnd):])), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the values table of %s is not values.yaml's: run `go test ./test/chart -run TestValuesTable -update`", readme)
}

type valueDoc struct{ path, text string }

var (
	keyLine  = regexp.MustCompile(`^( *)([A-Za-z0-9_.-]+):( .*)?$`)
	docStart = regexp.MustCompile(`^ *# -- (.*)$`)
	docMore  = regexp.MustCompile(`^ *#( (.*))?$`)
	listItem = regexp.MustCompile(`^( *)- `)
)

// valueDocs reads the `# --` comments of values.yaml (helm-docs'
// convention): a comment that starts with `# --`, and the comment lines
// after it, describe the key below it. Lines inside lists are defaults,
// not keys.
func valueDocs(text string) []valueDoc {
	type level struct {
		indent int
		key    string
	}
	var (
		stack     []level
		docs      []valueDoc
		doc       []string
		inDoc     bool
		listUnder = -1 // the indent of the list being skipped, or -1
	)
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			inDoc, doc = false, nil
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if listUnder >= 0 {
			if indent > listUnder || (indent == listUnder && listItem.MatchString(line)) {
				continue
			}
			listUnder = -1
		}
		if m := docStart.FindStringSubmatch(line); m != nil {
			inDoc, doc = true, []string{m[1]}
			continue
		}
		if m := docMore.FindStringSubmatch(line); m != nil {
			if inDoc {
				doc = append(doc, m[2])
			}
			continue
		}
		if m := listItem.FindStringSubmatch(line); m != nil {
			listUnder = len(m[1])
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, level{indent, m[2]})
		if inDoc {
			keys := make([]string, len(stack))
			for i, l := range stack {
				keys[i] = l.key
			}
			docs = append(docs, valueDoc{strings.Join(keys, "."), strings.Join(doc, " ")})
		}
		inDoc, doc = false, nil
	}
	return docs
}

func lookup(values map[string]any, path string) (any, bool) {
	var v any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// leaves are the paths of the values that are not non-empty objects.
func leaves(prefix string, m map[string]any) []string {
	var out []string
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 {
			out = append(out, leaves(p, sub)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

func typeOf(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case float64:
		return "int"
	case string:
		return "string"
	case []any:
		return "list"
	default:
		return "object"
	}
}

func defaultOf(v any) string {
	if s, ok := v.(string); ok && s == "" {
		return "`\"\"`"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	if len(b) > 60 {
		return "see values.yaml"
	}
	return "`" + string(b) + "`"
}
