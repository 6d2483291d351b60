package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/parser"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// CEL as convert reads it: parsed, never evaluated. A ValidatingPolicy is
// recognised by the fingerprint of what its validations test (their syntax
// trees with the variables written in place, printed back canonically:
// layout, comments, variable names and messages do not count); a matchCondition is read only when it is a conjunction of tests of
// the namespace or the name that convert can say exactly.

// The bounds of the work one expression may cost here, below the API
// server's own (MaxRecursionDepth 250 ... ExpressionSizeCodePointLimit 100K).
const (
	celMaxCodePoints = 10_000
	celMaxDepth      = 64
	// celMaxExpressions bounds the variables and validations of a policy
	// that are fingerprinted, and the matchConditions that are read.
	celMaxExpressions = 64
)

var celParser = func() *parser.Parser {
	p, err := parser.NewParser(
		parser.Macros(parser.AllMacros...),
		parser.EnableOptionalSyntax(true),
		parser.PopulateMacroCalls(true),
		parser.MaxRecursionDepth(celMaxDepth),
		parser.ExpressionSizeCodePointLimit(celMaxCodePoints),
	)
	if err != nil {
		panic(err)
	}
	return p
}()

func celParse(expr string) (*ast.AST, error) {
	if len(expr) > 4*celMaxCodePoints {
		return nil, fmt.Errorf("longer than %d characters", celMaxCodePoints)
	}
	a, iss := celParser.Parse(common.NewTextSource(expr))
	if iss != nil && len(iss.GetErrors()) > 0 {
		return nil, errors.New(strings.TrimSpace(iss.ToDisplayString()))
	}
	return a, nil
}

// celCanonical prints expr back from its syntax tree.
func celCanonical(expr string) (string, error) {
	a, err := celParse(expr)
	if err != nil {
		return "", err
	}
	return parser.Unparse(a.Expr(), a.SourceInfo())
}

// vpolFingerprint is what a ValidatingPolicy's validations test: each
// validation's expression with the variables it uses written in place,
// canonically printed, in order, hashed. Variable names, whether a test is
// written in a variable, layout, messages and annotations are not part of
// it.
func vpolFingerprint(spec *kyvernoVPolSpec) (string, error) {
	if len(spec.Variables)+len(spec.Validations) > celMaxExpressions {
		return "", fmt.Errorf("more than %d variables and validations", celMaxExpressions)
	}
	inlined := map[string]string{}
	expand := func(expr string) (string, error) {
		c, err := celCanonical(expr)
		if err != nil {
			return "", err
		}
		c = celVariableRef.ReplaceAllStringFunc(c, func(ref string) string {
			if v, ok := inlined[strings.TrimPrefix(ref, "variables.")]; ok {
				return "(" + v + ")"
			}
			return ref
		})
		// Written in place, variables can grow an expression past what
		// one may be; such a policy is not one of the library's.
		if len(c) > celMaxCodePoints {
			return "", fmt.Errorf("longer than %d characters with its variables written in place", celMaxCodePoints)
		}
		return celCanonical(c)
	}
	for i, v := range spec.Variables {
		c, err := expand(v.Expression)
		if err != nil {
			return "", fmt.Errorf("spec.variables[%d].expression: %w", i, err)
		}
		inlined[v.Name] = c
	}
	var b strings.Builder
	for i, v := range spec.Validations {
		c, err := expand(v.Expression)
		if err != nil {
			return "", fmt.Errorf("spec.validations[%d].expression: %w", i, err)
		}
		fmt.Fprintf(&b, "validate %s\n", c)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:16]), nil
}

// celVariableRef is a reference to a variable in a canonically printed
// expression.
var celVariableRef = regexp.MustCompile(`\bvariables\.[A-Za-z_][A-Za-z0-9_]*\b`)

// celAtom is one test of a matchCondition that convert reads: the object's
// namespace or name is (or, negated, is not) one of values.
type celAtom struct {
	field   string // "namespace" or "name"
	negated bool
	values  []string
}

// celSubjects are the expressions that name the object's namespace and
// name, as a matchCondition may write them.
var celSubjects = map[string]string{
	"object.metadata.namespace": "namespace",
	"request.namespace":         "namespace",
	"object.metadata.name":      "name",
	"request.name":              "name",
}

// matchConditionAtoms reads matchConditions (all must hold) as a
// conjunction of atoms; ok is false, with the reason, when one is anything
// else.
func matchConditionAtoms(conds []admissionregistrationv1.MatchCondition) ([]celAtom, string, bool) {
	if len(conds) > celMaxExpressions {
		return nil, fmt.Sprintf("more than %d matchConditions", celMaxExpressions), false
	}
	var atoms []celAtom
	for _, mc := range conds {
		a, err := celParse(mc.Expression)
		if err != nil {
			return nil, fmt.Sprintf("matchCondition %q does not parse: %v", mc.Name, err), false
		}
		got, ok := conjunction(a.Expr())
		if !ok {
			return nil, fmt.Sprintf("matchCondition %q tests more than the namespace's or the name's equality to string literals (%s)", mc.Name, oneLine(mc.Expression)), false
		}
		atoms = append(atoms, got...)
	}
	return atoms, "", true
}

// literalAtoms drops the values no namespace or pod can have (Kyverno's
// CEL compares them exactly, so they never match; podsieve would read * and
// ? in them as globs), noting each, and the negated atoms left with none.
func literalAtoms(n *noter, field string, atoms []celAtom) []celAtom {
	var out []celAtom
	for _, a := range atoms {
		valid := validation.IsDNS1123Subdomain
		if a.field == "namespace" {
			valid = validation.IsDNS1123Label
		}
		var kept []string
		for _, v := range a.values {
			if len(valid(v)) > 0 {
				n.warn(field, "%q is no %s an object can have, so the test never holds for it in Kyverno; it was left out", v, a.field)
				continue
			}
			kept = append(kept, v)
		}
		if a.negated && len(kept) == 0 {
			continue
		}
		a.values = kept
		out = append(out, a)
	}
	return out
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func conjunction(e ast.Expr) ([]celAtom, bool) {
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.LogicalAnd {
		var out []celAtom
		for _, arg := range e.AsCall().Args() {
			got, ok := conjunction(arg)
			if !ok {
				return nil, false
			}
			out = append(out, got...)
		}
		return out, true
	}
	a, ok := atom(e)
	if !ok {
		return nil, false
	}
	return []celAtom{a}, true
}

func atom(e ast.Expr) (celAtom, bool) {
	if e.Kind() != ast.CallKind {
		return celAtom{}, false
	}
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalNot:
		a, ok := atom(args[0])
		a.negated = !a.negated
		return a, ok
	case operators.Equals, operators.NotEquals:
		field, ok := subject(args[0])
		value, vok := stringConst(args[1])
		if !ok || !vok {
			field, ok = subject(args[1])
			value, vok = stringConst(args[0])
		}
		if !ok || !vok {
			return celAtom{}, false
		}
		return celAtom{field: field, negated: call.FunctionName() == operators.NotEquals, values: []string{value}}, true
	case operators.In:
		field, ok := subject(args[0])
		if !ok || args[1].Kind() != ast.ListKind {
			return celAtom{}, false
		}
		l := args[1].AsList()
		if len(l.OptionalIndices()) > 0 || len(l.Elements()) == 0 {
			return celAtom{}, false
		}
		a := celAtom{field: field}
		for _, el := range l.Elements() {
			v, ok := stringConst(el)
			if !ok {
				return celAtom{}, false
			}
			a.values = append(a.values, v)
		}
		return a, true
	}
	return celAtom{}, false
}

func subject(e ast.Expr) (string, bool) {
	var parts []string
	for e.Kind() == ast.SelectKind {
		s := e.AsSelect()
		if s.IsTestOnly() {
			return "", false
		}
		parts = append([]string{s.FieldName()}, parts...)
		e = s.Operand()
	}
	if e.Kind() != ast.IdentKind {
		return "", false
	}
	f, ok := celSubjects[strings.Join(append([]string{e.AsIdent()}, parts...), ".")]
	return f, ok
}

func stringConst(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}
