package admissionpolicy

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// ruleCEL is what one rule adds to its policy: variables and a validation.
type ruleCEL struct {
	// checks are the variables of the checks the rule runs, which rules
	// share by name.
	checks     []admissionregistrationv1.Variable
	vars       []admissionregistrationv1.Variable
	validation admissionregistrationv1.Validation
}

func compileRule(sp *policyv1alpha1.SecurityPolicy, p *engine.Policy, r *engine.Rule, pr *policyv1alpha1.PolicyRule, i int, params bool) (*ruleCEL, error) {
	rc := &ruleCompiler{sp: sp, p: p, r: r, pr: pr, i: i, params: params,
		object: fmt.Sprintf("SecurityPolicy %s", sp.Name), path: fmt.Sprintf("spec.rules[%d]", i)}
	checks, viol, err := rc.checks()
	if err != nil {
		return nil, err
	}
	applies, err := ruleApplies(pr, rc.object, rc.path)
	if err != nil {
		return nil, err
	}
	covers, err := rc.covers()
	if err != nil {
		return nil, err
	}
	excs, refused := "[]", "[]"
	if params {
		excs, refused = rc.exceptions()
	}
	lefts, err := rc.uncovered(covers)
	if err != nil {
		return nil, err
	}
	return &ruleCEL{
		checks: checks,
		vars: append([]admissionregistrationv1.Variable{
			{Name: rc.name("applies"), Expression: applies},
			{Name: rc.name("viol"), Expression: viol},
			{Name: rc.name("excs"), Expression: excs},
		}, lefts...),
		validation: rc.validation(refused),
	}, nil
}

// ruleCompiler compiles the i-th rule of a SecurityPolicy, step by step.
type ruleCompiler struct {
	sp     *policyv1alpha1.SecurityPolicy
	p      *engine.Policy
	r      *engine.Rule
	pr     *policyv1alpha1.PolicyRule
	i      int
	params bool
	// object and path name the rule in errors.
	object, path string
}

// name is the name of the rule's variable s: r<i>_<s>.
func (rc *ruleCompiler) name(s string) string { return fmt.Sprintf("r%d_%s", rc.i, s) }

// checks are the variables of the checks, at the rule's level and version,
// and the rule's violations (CEL for a list).
func (rc *ruleCompiler) checks() ([]admissionregistrationv1.Variable, string, error) {
	version, ids := rc.r.Checks()
	var checks []admissionregistrationv1.Variable
	var lists, pods, ctrs []string
	for _, id := range ids {
		c, ok := celChecks[id]
		if !ok {
			return nil, "", &Unsupported{Object: rc.object, Field: rc.path + ".podSecurity", Reason: fmt.Sprintf("upstream check %q has no CEL form", id)}
		}
		if cv := c(builder{id: id}, version.Minor()); cv.list != "" {
			v := admissionregistrationv1.Variable{Name: fmt.Sprintf("check_%s_v1_%d", id, version.Minor()), Expression: cv.list}
			checks = append(checks, v)
			lists = append(lists, "variables."+v.Name)
			pods = append(pods, cv.podCond())
			ctrs = append(ctrs, cv.ctr)
		}
	}
	if len(lists) == 0 {
		return checks, "[]", nil
	}
	// Whether any check finds a violation, in one pass over the containers
	// and without building a record: what an object that violates nothing
	// costs. Only then are the checks' lists built.
	found := or(pods...)
	if c := or(ctrs...); c != "" {
		found = or(found, "variables.ctrs.exists(x, "+c+")")
	}
	if found == "" {
		found = "false"
	}
	v := admissionregistrationv1.Variable{Name: fmt.Sprintf("violates_%s_v1_%d", rc.r.Level, version.Minor()), Expression: found}
	checks = append(checks, v)
	return checks, fmt.Sprintf("(variables.%s ? %s : [])", v.Name, concatLists(lists...)), nil
}

// covers is CEL for what covers a violation v, one expression per entry:
// the rule's own entries, inlined, and (with parameters) the entries of
// the exceptions in force that reach the object.
func (rc *ruleCompiler) covers() ([]string, error) {
	var covers []string
	for j, x := range rc.pr.PodSecurity.Exclude {
		c, err := entryCovers(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %s.podSecurity.exclude[%d]: %w", rc.object, rc.path, j, err)
		}
		covers = append(covers, c)
	}
	if rc.params {
		covers = append(covers, fmt.Sprintf("variables.%s.exists(e, e.?entries.orValue([]).exists(x, %s))", rc.name("excs"), paramEntryCovers))
	}
	return covers, nil
}

// exceptions is CEL for the parameters' exceptions in force for the rule
// (a target without a refusal) that match the object, and for the
// refusals of the others, which waive nothing.
func (rc *ruleCompiler) exceptions() (excs, refused string) {
	target := fmt.Sprintf("t.policy == %s && t.rule == %s", quote(rc.sp.Name), quote(rc.r.Name))
	excs = fmt.Sprintf(`variables.excs.filter(e, e.targets.exists(t, %s && !has(t.refusal)) && %s)`, target, exceptionMatches)
	refused = fmt.Sprintf(`variables.excs.filter(e, e.targets.exists(t, %[1]s && has(t.refusal)) && %[2]s).map(e, e.source + " does not apply: " + e.targets.filter(t, %[1]s && has(t.refusal))[0].refusal)`,
		target, exceptionMatches)
	return excs, refused
}

// uncovered are the variables of the violations no entry covers, filtered
// a chunk of entries at a time: the API server parses no expression longer
// than maxExpression, and a rule may hold 64 entries of long globs. The
// last is r<i>_left.
func (rc *ruleCompiler) uncovered(covers []string) ([]admissionregistrationv1.Variable, error) {
	var lefts []admissionregistrationv1.Variable
	from := fmt.Sprintf("size(variables.%[2]s) == 0 || variables.%[1]s.exists(e, e.?wholeRule.orValue(false) == true) ? [] : variables.%[2]s", rc.name("excs"), rc.name("viol"))
	for len(covers) > 0 {
		n, size := 0, 0
		for n < len(covers) && (n == 0 || size+len(covers[n]) < maxExpression/2) {
			size += len(covers[n]) + 4
			n++
		}
		expr := from + ".filter(v, !(" + strings.Join(covers[:n], " || ") + "))"
		if len(expr) > maxExpression {
			return nil, &Unsupported{Object: rc.object, Field: rc.path + ".podSecurity.exclude",
				Reason: fmt.Sprintf("an entry compiles to %d characters of CEL, and the API server parses at most %d per expression: shorten its globs or split it", len(expr), maxExpression)}
		}
		covers = covers[n:]
		v := admissionregistrationv1.Variable{Name: rc.name("left"), Expression: expr}
		if len(covers) > 0 {
			v.Name = rc.name(fmt.Sprintf("left%d", len(lefts)))
		}
		lefts = append(lefts, v)
		from = "variables." + v.Name
	}
	if len(lefts) == 0 {
		lefts = append(lefts, admissionregistrationv1.Variable{Name: rc.name("left"), Expression: from})
	}
	return lefts, nil
}

// validation is the rule's validation: it admits when the rule does not
// apply or leaves no violation uncovered, and otherwise words the refusal
// as the engine does, with the refusals of the exceptions (refused).
func (rc *ruleCompiler) validation(refused string) admissionregistrationv1.Validation {
	sp, r := rc.sp, rc.r
	verb := "violates"
	if rc.p.Action == policyv1alpha1.ActionEnforce {
		verb = "is refused by"
	}
	head := fmt.Sprintf(`object.kind + " " + request.namespace + "/" + object.metadata.?name.orValue("") + %s`,
		quote(fmt.Sprintf(" %s SecurityPolicy %q rule %q (%s): ", verb, sp.Name, r.Name, r.LevelVersion())))
	// As the engine's Finding.Describe words it.
	describe := `v.control + ": " + (v.scope == "container" ? (v.kind == "Init" ? "init container" : v.kind == "Sidecar" ? "sidecar container" : ` +
		`v.kind == "Ephemeral" ? "ephemeral container" : "container") + " \"" + v.name + "\"" : "pod") + ` +
		`(size(v.values) == 0 ? " must set " + variables.prefix + v.field : " sets " + variables.prefix + v.field + " to " + v.values.join(", "))`
	// The API server evaluates every messageExpression whether or not its
	// validation fails (validating.validator.Validate), with the variables
	// evaluated again: the message is built only when the object is refused,
	// so that an admitted object costs no more than its validation.
	admits := fmt.Sprintf(`!variables.%s || (variables.tooLarge == "" && size(variables.%s) == 0)`, rc.name("applies"), rc.name("left"))
	return admissionregistrationv1.Validation{
		Expression: admits,
		Message:    fmt.Sprintf("the object %s SecurityPolicy %q rule %q (%s)", verb, sp.Name, r.Name, r.LevelVersion()),
		MessageExpression: fmt.Sprintf(`(%s) ? "" : %s + (variables.tooLarge != "" ? variables.tooLarge + %s : `+
			`variables.%s.map(v, %s).join("; ") + [%s].map(r, size(r) > 0 ? "; " + r.join("; ") : "")[0] + %s)`,
			admits, head, quote(TooLargeMessage+" (each evaluation's CPU grows with the square of a list's length): "+
				"podsieve's webhook decides such objects; shorten the lists"), rc.name("left"), describe, refused, hintExpr(sp, r.Name, rc.name("left"))),
		Reason: ptr.To(metav1.StatusReasonForbidden),
	}
}

// maxExpression is the longest expression, in characters, the API server
// parses (cel-go's default limit, which Kubernetes keeps).
const maxExpression = 100_000

// hintExpr is CEL for the last sentence of a refusal, as the engine's
// Hint words it, where the compiled form can say it exactly: a policy that
// honours no exception; the controls of the uncovered violations that the
// policy's allowedControls leave out; otherwise who may waive them, unless
// a control's per-control guardrails (allowedValues, allowedRegistries, ...)
// decide, which the sentence then leaves to the webhook and podsieve
// explain rather than say something the guardrails may refuse.
func hintExpr(sp *policyv1alpha1.SecurityPolicy, rule, left string) string {
	g := sp.Spec.Exceptions
	if g == nil || (g.Allow != nil && !*g.Allow) {
		return quote(fmt.Sprintf(". Policy %q allows no PolicyExceptions: change the workload.", sp.Name))
	}
	var all, allowed, bounded []string
	for _, c := range policyv1alpha1.Controls {
		all = append(all, string(c))
	}
	if g.AllowedControls != nil {
		for _, c := range g.AllowedControls {
			allowed = append(allowed, string(c))
		}
	} else {
		allowed = all
	}
	for _, c := range g.Controls {
		bounded = append(bounded, string(c.ControlName))
	}
	// The control that would waive each violation (engine.WaiverControl).
	controls := fmt.Sprintf(`variables.%s.map(v, v.field == "spec.volumes[*].hostPath" ? "HostPath Volumes" : v.control)`, left)
	who := fmt.Sprintf(`". A PolicyException in namespace \"" + request.namespace + "\"" + %s`, quote(fmt.Sprintf(" naming policy %q rule ", sp.Name)))
	tail := " can waive these."
	if g.ClusterExceptionsOnly != nil && *g.ClusterExceptionsOnly {
		tail = " can waive these (spec.exceptions.clusterExceptionsOnly)."
		who = fmt.Sprintf(`". Only a PolicyException in the cluster exceptions namespace, written by a cluster admin with match.namespaces: [\"" + request.namespace + "\"], naming policy " + %s + " rule "`, quote(fmt.Sprintf("%q", sp.Name)))
	}
	return fmt.Sprintf(`[%s].map(wc, [%s.filter(c, !(c in %s) && c in wc)].map(bad, size(bad) > 0 ? %s + bad.map(c, "\"" + c + "\"").join(", ") + ": change the workload." : `+
		`wc.exists(c, c in %s) ? "" : %s + %s + %s)[0])[0]`,
		controls, quoteList(all), quoteList(allowed), quote(fmt.Sprintf(". Policy %q does not allow PolicyExceptions for ", sp.Name)),
		quoteList(bounded), who, quote(fmt.Sprintf("%q", rule)), quote(tail))
}

// ruleApplies is CEL for the rule's match and exclude.
func ruleApplies(pr *policyv1alpha1.PolicyRule, object, path string) (string, error) {
	match, err := filterExpr(pr.Match, false)
	if err != nil {
		return "", &Unsupported{Object: object, Field: path + ".match", Reason: err.Error()}
	}
	if pr.Exclude == nil {
		return match, nil
	}
	exclude, err := filterExpr(pr.Exclude, true)
	if err != nil {
		return "", &Unsupported{Object: object, Field: path + ".exclude", Reason: err.Error()}
	}
	return fmt.Sprintf("(%s) && !(%s)", match, exclude), nil
}

// filterExpr is CEL for a ResourceFilter: every part it sets must select
// the object; runtimeClassNames and usernames (an exclude's) exempt when
// either holds.
func filterExpr(f *policyv1alpha1.ResourceFilter, exclude bool) (string, error) {
	if f == nil {
		return "true", nil
	}
	parts := []string{"true"}
	if f.Namespaces != nil {
		gs, err := compileGlobs(f.Namespaces)
		if err != nil {
			return "", err
		}
		parts = append(parts, gs.matchExpr("request.namespace"))
	}
	if f.NamespaceSelector != nil {
		parts = append(parts, selectorExpr(f.NamespaceSelector, "variables.nslabels"))
	}
	if f.Selector != nil {
		parts = append(parts, selectorExpr(f.Selector, "variables.labels"))
	}
	if exclude && (len(f.RuntimeClassNames) > 0 || len(f.Usernames) > 0) {
		var ex []string
		if len(f.RuntimeClassNames) > 0 {
			ex = append(ex, "variables.spec.?runtimeClassName.hasValue() && variables.spec.runtimeClassName in "+quoteList(f.RuntimeClassNames))
		}
		if len(f.Usernames) > 0 {
			ex = append(ex, `request.userInfo.?username.orValue("") != "" && request.userInfo.username in `+quoteList(f.Usernames))
		}
		parts = append(parts, "("+strings.Join(ex, " || ")+")")
	}
	return strings.Join(parts, " && "), nil
}

// selectorExpr is CEL for a label selector over the label map expression
// labels, inlined.
func selectorExpr(s *metav1.LabelSelector, labels string) string {
	parts := []string{"true"}
	for _, k := range sortedKeys(s.MatchLabels) {
		parts = append(parts, fmt.Sprintf("(%[2]s in %[1]s && %[1]s[%[2]s] == %[3]s)", labels, quote(k), quote(s.MatchLabels[k])))
	}
	for _, e := range s.MatchExpressions {
		k := quote(e.Key)
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			parts = append(parts, fmt.Sprintf("(%[2]s in %[1]s && %[1]s[%[2]s] in %[3]s)", labels, k, quoteList(e.Values)))
		case metav1.LabelSelectorOpNotIn:
			parts = append(parts, fmt.Sprintf("!(%[2]s in %[1]s && %[1]s[%[2]s] in %[3]s)", labels, k, quoteList(e.Values)))
		case metav1.LabelSelectorOpExists:
			parts = append(parts, fmt.Sprintf("%s in %s", k, labels))
		case metav1.LabelSelectorOpDoesNotExist:
			parts = append(parts, fmt.Sprintf("!(%s in %s)", k, labels))
		}
	}
	return "(" + strings.Join(parts, " && ") + ")"
}

// hostPathOfVolumeTypes is the hostPath part of restricted's Volume Types,
// which only a HostPath Volumes entry waives (engine.Exclusion).
const hostPathOfVolumeTypes = `(v.check == "restrictedVolumes" && v.field == "spec.volumes[*].hostPath")`

// formsOf is CEL for the spellings of the violation's image, computed once
// per container (variables.forms); an annotation's violation for a
// container the pod does not have has the image "".
const formsOf = `[variables.forms.filter(p, p.i == v.image)].map(m, size(m) > 0 ? m[0].f : [v.image])[0]`

// entryCovers is CEL for whether a rule's exclusion entry covers the
// violation v, inlined as constants, as engine.Exclusion decides it.
func entryCovers(x policyv1alpha1.PodSecurityExclusion) (string, error) {
	hp := policyv1alpha1.ControlHostPathVolumes
	var parts []string
	if x.ControlName == hp {
		parts = append(parts, fmt.Sprintf("(v.control == %s || %s)", quote(string(hp)), hostPathOfVolumeTypes))
	} else {
		parts = append(parts, fmt.Sprintf("v.control == %s && !%s", quote(string(x.ControlName)), hostPathOfVolumeTypes))
	}
	if x.RestrictedField != "" {
		parts = append(parts, "v.field == "+quote(x.RestrictedField))
	}
	if len(x.ContainerKinds) > 0 {
		kinds := make([]string, len(x.ContainerKinds))
		for i, k := range x.ContainerKinds {
			kinds[i] = string(k)
		}
		parts = append(parts, `v.scope == "container" && v.kind in `+quoteList(kinds))
	}
	if len(x.ContainerNames) > 0 {
		gs, err := compileGlobs(x.ContainerNames)
		if err != nil {
			return "", err
		}
		parts = append(parts, `v.scope == "container" && `+gs.matchExpr("v.name"))
	}
	if len(x.Values) > 0 {
		gs, err := compileGlobs(x.Values)
		if err != nil {
			return "", err
		}
		parts = append(parts, "size(v.values) > 0 && v.values.all(val, "+gs.matchExpr("val")+")")
	}
	if len(x.Images) > 0 {
		gs, err := compileGlobs(x.Images)
		if err != nil {
			return "", err
		}
		parts = append(parts, `v.scope == "container" && `+formsOf+".exists(f, "+gs.matchExpr("f")+")")
	}
	return "(" + strings.Join(parts, " && ") + ")", nil
}

// exceptionMatches is CEL for whether the parameters' exception e matches
// the object by name, kind and pod labels (its namespace was decided when
// the parameters were written).
var exceptionMatches = `(!has(e.names) || ` + paramGlobs("e.names", `object.metadata.?name.orValue("")`) + `) && ` +
	`(!has(e.kinds) || object.kind in e.kinds) && ` +
	`(!has(e.selector) || (e.selector.?matchLabels.orValue({}).all(k, k in variables.labels && variables.labels[k] == e.selector.matchLabels[k]) && ` +
	`e.selector.?matchExpressions.orValue([]).all(q, q.operator == "In" ? (q.key in variables.labels && variables.labels[q.key] in q.values) : ` +
	`q.operator == "NotIn" ? !(q.key in variables.labels && variables.labels[q.key] in q.?values.orValue([])) : ` +
	`q.operator == "Exists" ? q.key in variables.labels : !(q.key in variables.labels))))`

// paramEntryCovers is entryCovers for an entry x of the parameters.
var paramEntryCovers = `(x.control == v.control || (x.control == "HostPath Volumes" && ` + hostPathOfVolumeTypes + `)) && ` +
	`!(` + hostPathOfVolumeTypes + ` && x.control != "HostPath Volumes") && ` +
	`(!has(x.field) || x.field == v.field) && ` +
	`(!has(x.kinds) || (v.scope == "container" && v.kind in x.kinds)) && ` +
	`(!has(x.names) || (v.scope == "container" && ` + paramGlobs("x.names", "v.name") + `)) && ` +
	`(!has(x.values) || (size(v.values) > 0 && v.values.all(val, ` + paramGlobs("x.values", "val") + `))) && ` +
	`(!has(x.images) || (v.scope == "container" && ` + formsOf + `.exists(f, ` + paramGlobs("x.images", "f") + `)))`
