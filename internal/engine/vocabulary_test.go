package engine

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestVolumeTypeLists holds restrictedVolumeType's switch, written in Go
// fields, equal to the two lists of JSON names that every other package
// reads: each listed source is classified as its list says, and every
// source of this build of k8s.io/api is in one of the lists.
func TestVolumeTypeLists(t *testing.T) {
	volume := func(source string) *corev1.Volume {
		var v corev1.Volume
		if err := json.Unmarshal([]byte(`{"name":"v",`+strconv.Quote(source)+`:{}}`), &v); err != nil {
			t.Fatal(err)
		}
		return &v
	}
	for _, source := range allowedVolumeTypes {
		if got := restrictedVolumeType(volume(source)); got != -1 {
			t.Errorf("allowed %s: restrictedVolumeType = %d, want -1", source, got)
		}
	}
	for i, source := range forbiddenVolumeTypes {
		if got := restrictedVolumeType(volume(source)); got != i {
			t.Errorf("forbidden %s: restrictedVolumeType = %d, want %d", source, got, i)
		}
	}
	sources := reflect.TypeFor[corev1.VolumeSource]()
	for i := range sources.NumField() {
		name, _, _ := strings.Cut(sources.Field(i).Tag.Get("json"), ",")
		if !slices.Contains(allowedVolumeTypes[:], name) && !slices.Contains(forbiddenVolumeTypes[:], name) {
			t.Errorf("volume source %s is in neither allowedVolumeTypes nor forbiddenVolumeTypes", name)
		}
	}
}

// vocabulary is a list the engine declares once; owner is the file that
// declares it, relative to the module's root.
type vocabulary struct {
	name, owner string
	words       []string
}

func engineVocabularies() []vocabulary {
	capabilities := make([]string, len(baselineCapabilities))
	for i, c := range baselineCapabilities {
		capabilities[i] = string(c)
	}
	return []vocabulary{
		{"baselineCapabilities", "internal/engine/check_capabilities_baseline.go", capabilities},
		{"allowedVolumeTypes", "internal/engine/check_restrictedVolumes.go", allowedVolumeTypes[:]},
		{"forbiddenVolumeTypes", "internal/engine/check_restrictedVolumes.go", forbiddenVolumeTypes[:]},
	}
}

// spelledAgain is how many of a list's words one literal may name before it
// counts as a second copy of the list: a test or a message names one or two
// capabilities or volume types, a copy names them all.
const spelledAgain = 3

// TestVocabularyDeclaredOnce fails when a Go file of the module other than
// a list's owner spells the list out again: a composite literal or a case
// clause whose string elements name spelledAgain or more of its words, or a
// string literal (a CEL or YAML text) that quotes as many. Generated files
// are not read. Callers read the
// list from the engine (BaselineCapabilities, AllowedVolumeTypes,
// ForbiddenVolumeTypes) instead.
func TestVocabularyDeclaredOnce(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	vocabularies := engineVocabularies()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files++
		for _, at := range spellings(t, path, vocabularies) {
			if filepath.ToSlash(rel) != at.v.owner {
				t.Errorf("%s:%d spells %s again (%s); read it from the engine", filepath.ToSlash(rel), at.line, at.v.name, strings.Join(at.words, ", "))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files under %s; is that the module?", files, root)
	}
}

// TestSpellings: what counts as spelling a list again, and what does not.
func TestSpellings(t *testing.T) {
	v := []vocabulary{{name: "letters", words: []string{"A", "B", "C", "D"}}}
	tests := []struct {
		name, src string
		want      int
	}{
		{"a slice literal", `var x = []string{"A", "B", "C"}`, 1},
		{"a typed array literal", `var x = [...]T{"A", "B", "D"}`, 1},
		{"a case clause", `func f(s string) bool { switch s { case "A", "C", "D": return true }; return false }`, 1},
		{"a quoted list in a string", "var x = `[\"A\", \"B\", \"C\"]`", 1},
		{"two words are a mention", `var x = []string{"A", "B", "Z"}`, 0},
		{"words in different literals", `var x, y = []string{"A", "B"}, []string{"C"}`, 0},
		{"unquoted words in a string", `var x = "A B C"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.go")
			if err := os.WriteFile(path, []byte("package x\n\n"+tt.src+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := spellings(t, path, v); len(got) != tt.want {
				t.Errorf("found %d spellings (%v), want %d", len(got), got, tt.want)
			}
		})
	}
}

type spelling struct {
	v     vocabulary
	line  int
	words []string
}

// spellings are the literals of the file at path that spell out one of the
// vocabularies.
func spellings(t *testing.T, path string, vocabularies []vocabulary) []spelling {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if ast.IsGenerated(f) {
		// A generated decoder names every field of what it decodes.
		return nil
	}
	var out []spelling
	check := func(at token.Pos, found []string) {
		for _, v := range vocabularies {
			var named []string
			for _, w := range found {
				if slices.Contains(v.words, w) && !slices.Contains(named, w) {
					named = append(named, w)
				}
			}
			if len(named) >= spelledAgain {
				out = append(out, spelling{v: v, line: fset.Position(at).Line, words: named})
			}
		}
	}
	elements := func(exprs []ast.Expr) []string {
		var found []string
		for _, e := range exprs {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					found = append(found, s)
				}
			}
		}
		return found
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			check(n.Pos(), elements(n.Elts))
		case *ast.CaseClause:
			check(n.Pos(), elements(n.List))
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				break
			}
			s, err := strconv.Unquote(n.Value)
			if err != nil {
				break
			}
			var found []string
			for _, v := range vocabularies {
				for _, w := range v.words {
					if strings.Contains(s, strconv.Quote(w)) {
						found = append(found, w)
					}
				}
			}
			check(n.Pos(), found)
		}
		return true
	})
	return out
}
