package engine

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// TestObjectKeysTyped fails when a Go file of the module (tests aside) keys
// a map by an object's namespace and name joined into a string
// ("ns/name"), or splits such a key again: exceptions and other namespaced
// objects are keyed by types.NamespacedName (or a struct holding one), so
// that a key cannot be confused with a display string, and nothing parses
// it back.
func TestObjectKeysTyped(t *testing.T) {
	for _, file := range moduleGoFiles(t) {
		if strings.HasSuffix(file.rel, "_test.go") {
			continue
		}
		for _, k := range stringKeys(file.ast, file.fset) {
			t.Errorf("%s:%d: %s; key by types.NamespacedName", file.rel, k.line, k.what)
		}
	}
}

// stringKey is a place where a file builds or splits a string key.
type stringKey struct {
	line int
	what string
}

// stringKeys are a file's map indexes and map literal keys built by joining
// strings around a "/", the functions named *Key or *key that return such a
// join, and the keys (variables named key or *Key) cut at a "/".
func stringKeys(f *ast.File, fset *token.FileSet) []stringKey {
	var out []stringKey
	add := func(n ast.Node, what string) {
		out = append(out, stringKey{line: fset.Position(n.Pos()).Line, what: what})
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IndexExpr:
			if joinsAtSlash(n.Index) {
				add(n, "a map indexed by a string joined at \"/\"")
			}
		case *ast.CompositeLit:
			if _, ok := n.Type.(*ast.MapType); ok {
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok && joinsAtSlash(kv.Key) {
						add(kv, "a map literal keyed by a string joined at \"/\"")
					}
				}
			}
		case *ast.FuncDecl:
			if strings.HasSuffix(strings.ToLower(n.Name.Name), "key") && n.Body != nil && returnsJoin(n.Body) {
				add(n, "func "+n.Name.Name+" joins a key at \"/\"")
			}
		case *ast.CallExpr:
			if cutsKeyAtSlash(n) {
				add(n, "a key split at \"/\"")
			}
		}
		return true
	})
	return out
}

// joinsAtSlash reports whether e is a string concatenation with a literal
// that holds "/", or fmt.Sprintf with a format that joins two verbs with one.
func joinsAtSlash(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return joinsAtSlash(e.X)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return false
		}
		return slashLiteral(e.X) || slashLiteral(e.Y) || joinsAtSlash(e.X) || joinsAtSlash(e.Y)
	case *ast.CallExpr:
		sel, ok := e.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Sprintf" || len(e.Args) < 3 {
			return false
		}
		if lit, ok := e.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			format, err := strconv.Unquote(lit.Value)
			return err == nil && strings.Contains(format, "s/%")
		}
	}
	return false
}

// slashLiteral reports whether e is a string literal holding a "/".
func slashLiteral(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return false
	}
	s, err := strconv.Unquote(lit.Value)
	return err == nil && strings.Contains(s, "/")
}

// returnsJoin reports whether a function body returns a join at "/".
func returnsJoin(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if r, ok := n.(*ast.ReturnStmt); ok {
			for _, e := range r.Results {
				found = found || joinsAtSlash(e)
			}
		}
		return !found
	})
	return found
}

// cutsKeyAtSlash reports whether a call is strings.Cut, Split or SplitN of
// a variable named key or *Key at "/".
func cutsKeyAtSlash(c *ast.CallExpr) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || len(c.Args) < 2 {
		return false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "strings" {
		return false
	}
	switch sel.Sel.Name {
	case "Cut", "Split", "SplitN":
	default:
		return false
	}
	v, ok := c.Args[0].(*ast.Ident)
	if !ok || !strings.HasSuffix(strings.ToLower(v.Name), "key") {
		return false
	}
	lit, ok := c.Args[1].(*ast.BasicLit)
	return ok && lit.Value == `"/"`
}

// TestStringKeys: what counts as a string key, and what does not.
func TestStringKeys(t *testing.T) {
	tests := []struct {
		name, src string
		want      int
	}{
		{"index by a join", `func f() { _ = m[pe.Namespace+"/"+pe.Name] }`, 1},
		{"index by a parenthesised join", `func f() { m[(ns + "/" + name)] = true }`, 1},
		{"index by Sprintf", `func f() { _ = m[fmt.Sprintf("%s/%s", ns, name)] }`, 1},
		{"map literal keyed by a join", `var m = map[string]int{ns + "/" + name: 1}`, 1},
		{"a key function", `func exceptionKey(ns, name string) string { return "PolicyException/" + ns + "/" + name }`, 1},
		{"a key cut again", `func f() { ns, name, _ := strings.Cut(key, "/"); _, _ = ns, name }`, 1},
		{"index by a typed key", `func f() { _ = m[types.NamespacedName{Namespace: ns, Name: name}] }`, 0},
		{"a display string", `func f() string { return ns + "/" + name }`, 0},
		{"an API version cut", `func f() { group, _, _ := strings.Cut(apiVersion, "/"); _ = group }`, 0},
		{"index by a plain string", `func f() { _ = m[name] }`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, fset := parseSnippet(t, tt.src)
			if got := stringKeys(f, fset); len(got) != tt.want {
				t.Errorf("found %d keys (%v), want %d", len(got), got, tt.want)
			}
		})
	}
}
