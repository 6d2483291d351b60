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
	vocabularies := engineVocabularies()
	for _, file := range moduleGoFiles(t) {
		for _, at := range spellings(file.ast, file.fset, vocabularies) {
			if file.rel != at.v.owner {
				t.Errorf("%s:%d spells %s again (%s); read it from the engine", file.rel, at.line, at.v.name, strings.Join(at.words, ", "))
			}
		}
	}
}

// TestWordsDeclaredOnce fails when a Go file of the module outside
// internal/words writes a pluraliser (a "%ss" format, or a noun + "s") or a
// quoter (a function quoting each string of a list with %q or
// strconv.Quote): messages count and quote with package words.
func TestWordsDeclaredOnce(t *testing.T) {
	for _, file := range moduleGoFiles(t) {
		if strings.HasPrefix(file.rel, "internal/words/") || file.rel == "internal/engine/vocabulary_test.go" {
			// words itself, and this file's examples
			continue
		}
		for _, h := range helpers(file.ast, file.fset) {
			t.Errorf("%s:%d: %s; use package words", file.rel, h.line, h.what)
		}
	}
}

// goFile is a parsed Go file of the module; rel is its path from the
// module's root, with slashes.
type goFile struct {
	rel  string
	fset *token.FileSet
	ast  *ast.File
}

// moduleGoFiles parses the module's Go files but generated ones (a
// generated decoder names every field of what it decodes) and testdata.
func moduleGoFiles(t *testing.T) []goFile {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	var files []goFile
	walked := 0
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
		walked++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		if !ast.IsGenerated(f) {
			files = append(files, goFile{rel: filepath.ToSlash(rel), fset: fset, ast: f})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if walked < 100 {
		t.Fatalf("walked %d Go files under %s; is that the module?", walked, root)
	}
	return files
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
			f, fset := parseSnippet(t, tt.src)
			if got := spellings(f, fset, v); len(got) != tt.want {
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

// spellings are the literals of a file that spell out one of the
// vocabularies.
func spellings(f *ast.File, fset *token.FileSet, vocabularies []vocabulary) []spelling {
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

// helper is a pluraliser or a quoter written outside package words.
type helper struct {
	line int
	what string
}

func helpers(f *ast.File, fset *token.FileSet) []helper {
	var out []helper
	isString := func(e ast.Expr, want string) bool {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return false
		}
		s, err := strconv.Unquote(lit.Value)
		return err == nil && s == want
	}
	quotes := func(call *ast.CallExpr) bool {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return false
		}
		switch {
		case pkg.Name == "strconv" && sel.Sel.Name == "Quote":
			return true
		case pkg.Name == "fmt" && sel.Sel.Name == "Sprintf":
			return len(call.Args) == 2 && isString(call.Args[0], "%q")
		}
		return false
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && strings.Contains(s, "%ss") {
				out = append(out, helper{fset.Position(n.Pos()).Line, "a pluraliser (a %ss format)"})
			}
		case *ast.BinaryExpr:
			if n.Op == token.ADD && isString(n.Y, "s") {
				out = append(out, helper{fset.Position(n.Pos()).Line, `a pluraliser (+ "s")`})
			}
		case *ast.RangeStmt:
			// A quoter stores or appends, for each string of a list, the
			// string quoted.
			value, ok := n.Value.(*ast.Ident)
			if !ok {
				break
			}
			quotesValue := func(e ast.Expr) bool {
				call, ok := e.(*ast.CallExpr)
				if !ok || !quotes(call) {
					return false
				}
				arg := call.Args[len(call.Args)-1]
				if conv, ok := arg.(*ast.CallExpr); ok && len(conv.Args) == 1 {
					arg = conv.Args[0]
				}
				id, ok := arg.(*ast.Ident)
				return ok && id.Name == value.Name
			}
			ast.Inspect(n.Body, func(m ast.Node) bool {
				switch m := m.(type) {
				case *ast.AssignStmt:
					for _, rhs := range m.Rhs {
						if quotesValue(rhs) {
							out = append(out, helper{fset.Position(rhs.Pos()).Line, "a quoter (each string of a list quoted)"})
						}
					}
				case *ast.CallExpr:
					if id, ok := m.Fun.(*ast.Ident); ok && id.Name == "append" {
						for _, arg := range m.Args[1:] {
							if quotesValue(arg) {
								out = append(out, helper{fset.Position(arg.Pos()).Line, "a quoter (each string of a list quoted)"})
							}
						}
					}
				}
				return true
			})
		}
		return true
	})
	return out
}

// TestHelpers: what counts as a pluraliser or a quoter, and what does not.
func TestHelpers(t *testing.T) {
	tests := []struct {
		name, src string
		want      int
	}{
		{"a counted plural", `func f(n int, s string) string { return fmt.Sprintf("%d %ss", n, s) }`, 1},
		{"a plural noun", `func f(s string) string { return s + "s" }`, 1},
		{"a quoter with Sprintf", `func f(ss []string) { for i, s := range ss { ss[i] = fmt.Sprintf("%q", s) } }`, 1},
		{"a quoter with strconv", `func f(ss []string) { for i, s := range ss { ss[i] = strconv.Quote(s) } }`, 1},
		{"one quoted name", `func f(s string) string { return fmt.Sprintf("%q", s) }`, 0},
		{"a quoter that appends", `func f(ss []string) (out []string) { for _, s := range ss { out = append(out, strconv.Quote(string(s))) }; return }`, 1},
		{"a quoted name in a longer format", `func f(ss []string) { for i, s := range ss { ss[i] = fmt.Sprintf("name %q", s) } }`, 0},
		{"a quoted name printed in a loop", `func f(ss []string) { for _, s := range ss { println(strconv.Quote(s)) } }`, 0},
		{"a string ending in s", `var x = "rule" + "s:"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, fset := parseSnippet(t, tt.src)
			if got := helpers(f, fset); len(got) != tt.want {
				t.Errorf("found %d helpers (%v), want %d", len(got), got, tt.want)
			}
		})
	}
}

// TestKindRelationsDeclaredOnce fails when a Go file of the module outside
// internal/engine/kinds.go writes a map from pod-bearing kinds to other
// pod-bearing kinds (which kind creates, owns or repeats which): callers
// read PodBearingKinds' Creates.
func TestKindRelationsDeclaredOnce(t *testing.T) {
	for _, file := range moduleGoFiles(t) {
		if file.rel == "internal/engine/kinds.go" || file.rel == "internal/engine/vocabulary_test.go" {
			continue
		}
		for _, line := range kindRelations(file.ast, file.fset) {
			t.Errorf("%s:%d maps kinds to kinds; read engine.PodBearingKinds' Creates", file.rel, line)
		}
	}
}

// kindRelations are the lines of the map literals of a file whose keys are
// kinds and whose values name other kinds.
func kindRelations(f *ast.File, fset *token.FileSet) []int {
	// kindOf is the pod-bearing kind an expression spells, or "".
	kindOf := func(e ast.Expr) string {
		name := ""
		switch e := e.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(e.Value); e.Kind == token.STRING && err == nil {
				name = s
			}
		case *ast.SelectorExpr:
			if s, ok := strings.CutPrefix(e.Sel.Name, "Kind"); ok {
				name = s
			}
		}
		if _, ok := KindNamed(name); !ok {
			return ""
		}
		return name
	}
	var out []int
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if _, ok := lit.Type.(*ast.MapType); !ok {
			return true
		}
		keys, related := 0, false
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key := kindOf(kv.Key)
			if key == "" {
				continue
			}
			keys++
			ast.Inspect(kv.Value, func(m ast.Node) bool {
				if e, ok := m.(ast.Expr); ok {
					if k := kindOf(e); k != "" && k != key {
						related = true
					}
				}
				return !related
			})
		}
		if keys >= 2 && related {
			out = append(out, fset.Position(lit.Pos()).Line)
		}
		return true
	})
	return out
}

// TestKindRelations: what counts as a map from kinds to kinds.
func TestKindRelations(t *testing.T) {
	tests := []struct {
		name, src string
		want      int
	}{
		{"parents by name", `var m = map[string]metav1.TypeMeta{"ReplicaSet": {Kind: "Deployment"}, "Job": {Kind: "CronJob"}}`, 1},
		{"children by constant", `var m = map[K][]K{policyv1alpha1.KindDeployment: {policyv1alpha1.KindReplicaSet}, policyv1alpha1.KindCronJob: {policyv1alpha1.KindJob}}`, 1},
		{"a set of kinds", `var m = map[string]bool{"ReplicaSet": true, "Job": true}`, 0},
		{"one kind", `var m = map[string]string{"ReplicaSet": "Deployment"}`, 0},
		{"each kind to itself", `var m = map[string]string{"Pod": "Pod", "CronJob": "CronJob"}`, 0},
		{"not kinds", `var m = map[string]string{"a": "Deployment", "b": "Job"}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, fset := parseSnippet(t, tt.src)
			if got := kindRelations(f, fset); len(got) != tt.want {
				t.Errorf("found %d maps (%v), want %d", len(got), got, tt.want)
			}
		})
	}
}

// parseSnippet parses src as the body of a file of package x.
func parseSnippet(t *testing.T, src string) (*ast.File, *token.FileSet) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", "package x\n\n"+src+"\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	return f, fset
}
