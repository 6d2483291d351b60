package admissionpolicy

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// Labels and names of what Compile writes.
const (
	// ManagedByLabel marks every object podsieve compiles, so that the
	// manager finds (and removes) the ones no policy needs any more.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "podsieve"
	// PolicyLabel names the SecurityPolicy a ValidatingAdmissionPolicy or
	// binding was compiled from.
	PolicyLabel = "policy.podsieve.dev/securitypolicy"
	// GenerationAnnotation is the SecurityPolicy generation compiled.
	GenerationAnnotation = "policy.podsieve.dev/generation"

	// The opt-out labels, as the webhook's configuration reads them
	// (config/webhook/manifests.yaml).
	allowIgnoreLabel = "podsieve.dev/allow-ignore"
	ignoreLabel      = "podsieve.dev/ignore"
)

// Options are what the compiled objects depend on besides the policies.
type Options struct {
	// SystemNamespaces are never enforced, as the webhook's configuration
	// excludes them: kube-system and podsieve's own namespace.
	SystemNamespaces []string
}

// PolicyName is the name of the ValidatingAdmissionPolicy of a
// SecurityPolicy.
func PolicyName(securityPolicy string) string { return "podsieve." + securityPolicy }

// Compiled is one SecurityPolicy in the API server's form.
type Compiled struct {
	Policy   *admissionregistrationv1.ValidatingAdmissionPolicy
	Bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// Params is true when the policy reads the PolicyExceptions in force
	// from a PodSecurityParams object in the namespace of each object: it
	// honours exceptions.
	Params bool
}

// CompilePolicy compiles a SecurityPolicy, which p is the engine's
// compilation of (engine.CompilePolicy), into a ValidatingAdmissionPolicy
// and its bindings. Every rule is one validation; the policy's action is
// the bindings' validation action.
func CompilePolicy(sp *policyv1alpha1.SecurityPolicy, p *engine.Policy, opts Options) (*Compiled, error) {
	if len(p.Rules) != len(sp.Spec.Rules) {
		return nil, fmt.Errorf("SecurityPolicy %s: compiled %d rules of %d", sp.Name, len(p.Rules), len(sp.Spec.Rules))
	}
	if n := len(PolicyName(sp.Name)); n > 253 {
		return nil, &Unsupported{Object: "SecurityPolicy " + sp.Name, Field: "metadata.name",
			Reason: fmt.Sprintf("the ValidatingAdmissionPolicy's name %q would be %d characters, more than 253", PolicyName(sp.Name), n)}
	}
	params := p.PermitsAny()
	vars := []admissionregistrationv1.Variable{
		{Name: "spec", Expression: podPart("object", "spec")},
		{Name: "meta", Expression: podPart("object", "metadata")},
		{Name: "labels", Expression: `variables.meta.?labels.orValue({})`},
		{Name: "nslabels", Expression: `namespaceObject == null ? {} : namespaceObject.?metadata.?labels.orValue({})`},
		{Name: "ctrs", Expression: containersExpr},
		{Name: "forms", Expression: `variables.ctrs.map(x, {"i": dyn(x.img), "f": dyn(` + imageForms("x.img") + `)})`},
		{Name: "tooLarge", Expression: tooLargeExpr},
		{Name: "prefix", Expression: `object.kind == "Pod" ? "" : object.kind == "CronJob" ? "spec.jobTemplate.spec.template." : object.kind == "PodTemplate" ? "template." : "spec.template."`},
	}
	if params {
		vars = append(vars, admissionregistrationv1.Variable{Name: "excs", Expression: `params == null ? [] : params.?spec.?exceptions.orValue([])`})
	}
	// Each check at each version is a variable of its own, shared by the
	// rules that run it: one expression per check keeps the type checker's
	// work linear (it grows faster than the length of one long
	// concatenation), and a policy's rules at one level share most checks.
	checkVars := map[string]bool{}
	var validations []admissionregistrationv1.Validation
	for i, r := range p.Rules {
		pr := &sp.Spec.Rules[i]
		rv, err := compileRule(sp, p, r, pr, i, params)
		if err != nil {
			return nil, err
		}
		for _, c := range rv.checks {
			if !checkVars[c.Name] {
				checkVars[c.Name] = true
				vars = append(vars, c)
			}
		}
		vars = append(vars, rv.vars...)
		validations = append(validations, rv.validation)
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        PolicyName(sp.Name),
			Labels:      map[string]string{ManagedByLabel: ManagedBy, PolicyLabel: sp.Name},
			Annotations: map[string]string{GenerationAnnotation: fmt.Sprint(sp.Generation)},
		},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: engine.NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: opts.SystemNamespaces},
				}},
				MatchPolicy:   ptr.To(admissionregistrationv1.Equivalent),
				ResourceRules: resourceRules(),
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "significant-change", Expression: significantChange}},
			Variables:       vars,
			Validations:     validations,
		},
	}
	if len(opts.SystemNamespaces) == 0 {
		vap.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
	}
	if params {
		vap.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: ParamsAPIVersion, Kind: ParamsKind}
	}
	for _, v := range vap.Spec.Variables {
		if n := utf8.RuneCountInString(v.Expression); n > maxExpression {
			return nil, &Unsupported{Object: "SecurityPolicy " + sp.Name, Field: "spec.rules",
				Reason: fmt.Sprintf("variable %s compiles to %d characters of CEL, and the API server parses at most %d per expression", v.Name, n, maxExpression)}
		}
	}
	return &Compiled{Policy: vap, Bindings: bindings(sp, p, params), Params: params}, nil
}

// resourceRules are the webhook's: every pod-bearing kind, and the pod
// subresources that change what runs.
func resourceRules() []admissionregistrationv1.NamedRuleWithOperations {
	rule := func(group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources,
				Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}}
	}
	return []admissionregistrationv1.NamedRuleWithOperations{
		rule("", "pods", "pods/ephemeralcontainers", "pods/resize", "podtemplates", "replicationcontrollers"),
		rule("apps", "deployments", "replicasets", "statefulsets", "daemonsets"),
		rule("batch", "jobs", "cronjobs"),
	}
}

// bindings mirror the webhook's two: one for the namespaces where objects
// may not opt out, one for those a cluster admin labelled
// podsieve.dev/allow-ignore=true, where an object labelled
// podsieve.dev/ignore=true is not evaluated.
func bindings(sp *policyv1alpha1.SecurityPolicy, p *engine.Policy, params bool) []*admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	action := admissionregistrationv1.Deny
	switch p.Action {
	case policyv1alpha1.ActionWarn:
		action = admissionregistrationv1.Warn
	case policyv1alpha1.ActionAudit:
		action = admissionregistrationv1.Audit
	}
	binding := func(name string, mr *admissionregistrationv1.MatchResources) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels:      map[string]string{ManagedByLabel: ManagedBy, PolicyLabel: sp.Name},
				Annotations: map[string]string{GenerationAnnotation: fmt.Sprint(sp.Generation)}},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        PolicyName(sp.Name),
				ValidationActions: []admissionregistrationv1.ValidationAction{action},
				MatchResources:    mr,
			},
		}
		if params {
			// No namespace: the parameters of the admitted object's own
			// namespace. Under Enforce, none there refuses (fail closed),
			// never admits: the API server treats it as a configuration
			// error, which the policy's failurePolicy (Fail) turns into a
			// refusal whatever the binding's action. So Warn and Audit
			// policies, which never refuse, skip a namespace without
			// parameters instead.
			notFound := admissionregistrationv1.DenyAction
			if action != admissionregistrationv1.Deny {
				notFound = admissionregistrationv1.AllowAction
			}
			b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: ParamsName, ParameterNotFoundAction: &notFound}
		}
		return b
	}
	req := func(key string, op metav1.LabelSelectorOperator) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: []string{"true"}}}}
	}
	return []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		binding(PolicyName(sp.Name), &admissionregistrationv1.MatchResources{NamespaceSelector: req(allowIgnoreLabel, metav1.LabelSelectorOpNotIn)}),
		binding(PolicyName(sp.Name)+".opt-out", &admissionregistrationv1.MatchResources{
			NamespaceSelector: req(allowIgnoreLabel, metav1.LabelSelectorOpIn),
			ObjectSelector:    req(ignoreLabel, metav1.LabelSelectorOpNotIn),
		}),
	}
}

// podPart is CEL for the pod spec or metadata of the object expression obj,
// {} when it bears none (a ReplicationController without a template).
func podPart(obj, part string) string {
	return fmt.Sprintf(`(%[1]s.kind == "Pod" ? %[1]s.?%[2]s.orValue({}) : %[1]s.kind == "CronJob" ? %[1]s.?spec.?jobTemplate.?spec.?template.?%[2]s.orValue({}) : `+
		`%[1]s.kind == "PodTemplate" ? %[1]s.?template.?%[2]s.orValue({}) : %[1]s.?spec.?template.?%[2]s.orValue({}))`, obj, part)
}

// Bounds on what the API server's form evaluates. The API server's CEL
// runtime spends time that grows with the square of a list's length
// within its cost budget (seconds of one core for a pod of 60,000 made-up
// capabilities, docs/performance.md), which a user who may only create
// pods could send again and again: objects over these bounds are refused
// at once, before any check, fail closed. Real pods are far below them.
const (
	maxContainers   = 128
	maxVolumes      = 256
	maxSysctls      = 64
	maxAnnotations  = 256
	maxCapabilities = 64
	maxPorts        = 128
)

// TooLarge is tooLargeExpr in Go: the first of these bounds that a pod spec
// and its metadata's annotations exceed, in the same words; "" when none.
// The background scan's cross-check reads it, since the compiled form
// refuses such an object by design where the engine decides it;
// TestTooLargeIsTheCEL holds the two equal.
func TooLarge(spec *corev1.PodSpec, annotations map[string]string) string {
	type limits struct{ caps, ports int }
	var each []limits
	count := func(sc *corev1.SecurityContext, ports []corev1.ContainerPort) {
		l := limits{ports: len(ports)}
		if sc != nil && sc.Capabilities != nil {
			l.caps = len(sc.Capabilities.Add) + len(sc.Capabilities.Drop)
		}
		each = append(each, l)
	}
	for _, c := range slices.Concat(spec.Containers, spec.InitContainers) {
		count(c.SecurityContext, c.Ports)
	}
	for _, c := range spec.EphemeralContainers {
		count(c.SecurityContext, c.Ports)
	}
	sysctls := 0
	if spec.SecurityContext != nil {
		sysctls = len(spec.SecurityContext.Sysctls)
	}
	switch {
	case len(each) > maxContainers:
		return fmt.Sprintf("it has more than %d containers", maxContainers)
	case len(spec.Volumes) > maxVolumes:
		return fmt.Sprintf("it has more than %d volumes", maxVolumes)
	case sysctls > maxSysctls:
		return fmt.Sprintf("it sets more than %d sysctls", maxSysctls)
	case len(annotations) > maxAnnotations:
		return fmt.Sprintf("its pod template has more than %d annotations", maxAnnotations)
	case slices.ContainsFunc(each, func(l limits) bool { return l.caps > maxCapabilities }):
		return fmt.Sprintf("a container adds or drops more than %d capabilities", maxCapabilities)
	case slices.ContainsFunc(each, func(l limits) bool { return l.ports > maxPorts }):
		return fmt.Sprintf("a container has more than %d ports", maxPorts)
	}
	return ""
}

// TooLargeMessage is in the refusal of an object over these bounds.
const TooLargeMessage = ", more than the API server's form of podsieve's policies evaluates"

// tooLargeExpr says, in words, which bound the object exceeds; "" when
// none. Each count is read before the lists it bounds are walked.
var tooLargeExpr = fmt.Sprintf(`size(variables.spec.?containers.orValue([])) + size(variables.spec.?initContainers.orValue([])) + size(variables.spec.?ephemeralContainers.orValue([])) > %[1]d ? "it has more than %[1]d containers" : `+
	`size(variables.spec.?volumes.orValue([])) > %[2]d ? "it has more than %[2]d volumes" : `+
	`size(variables.spec.?securityContext.?sysctls.orValue([])) > %[3]d ? "it sets more than %[3]d sysctls" : `+
	`size(variables.meta.?annotations.orValue({})) > %[4]d ? "its pod template has more than %[4]d annotations" : `+
	`!(variables.spec.?containers.orValue([]) + variables.spec.?initContainers.orValue([]) + variables.spec.?ephemeralContainers.orValue([])).exists(c, `+
	`size(c.?securityContext.?capabilities.?add.orValue([])) + size(c.?securityContext.?capabilities.?drop.orValue([])) > %[5]d || size(c.?ports.orValue([])) > %[6]d) ? "" : `+
	`(variables.spec.?containers.orValue([]) + variables.spec.?initContainers.orValue([]) + variables.spec.?ephemeralContainers.orValue([])).exists(c, `+
	`size(c.?securityContext.?capabilities.?add.orValue([])) + size(c.?securityContext.?capabilities.?drop.orValue([])) > %[5]d) ? "a container adds or drops more than %[5]d capabilities" : `+
	`"a container has more than %[6]d ports"`,
	maxContainers, maxVolumes, maxSysctls, maxAnnotations, maxCapabilities, maxPorts)

// containersExpr lists every container in upstream's order with its list
// and kind (a native sidecar is an init container with restartPolicy
// Always).
const containersExpr = `variables.spec.?initContainers.orValue([]).map(c, {"c": dyn(c), "s": dyn(c.?securityContext.orValue({})), "l": dyn("initContainers"), "k": dyn(c.?restartPolicy.orValue("") == "Always" ? "Sidecar" : "Init"), "n": dyn(c.?name.orValue("")), "img": dyn(c.?image.orValue(""))}) + ` +
	`variables.spec.?containers.orValue([]).map(c, {"c": dyn(c), "s": dyn(c.?securityContext.orValue({})), "l": dyn("containers"), "k": dyn("App"), "n": dyn(c.?name.orValue("")), "img": dyn(c.?image.orValue(""))}) + ` +
	`variables.spec.?ephemeralContainers.orValue([]).map(c, {"c": dyn(c), "s": dyn(c.?securityContext.orValue({})), "l": dyn("ephemeralContainers"), "k": dyn("Ephemeral"), "n": dyn(c.?name.orValue("")), "img": dyn(c.?image.orValue(""))})`

// significantChange is the webhook's test of an update (admission.SignificantUpdate):
// a pod is evaluated again when its containers or their images change or
// an ephemeral container is added or changes image, a controller when its
// pod template's spec, labels or annotations change.
var significantChange = `request.operation != "UPDATE" || oldObject == null || (object.kind == "Pod" ? (` +
	`object.spec.?containers.orValue([]).map(c, c.?image.orValue("")) != oldObject.spec.?containers.orValue([]).map(c, c.?image.orValue("")) || ` +
	`object.spec.?initContainers.orValue([]).map(c, c.?image.orValue("")) != oldObject.spec.?initContainers.orValue([]).map(c, c.?image.orValue("")) || ` +
	`object.spec.?ephemeralContainers.orValue([]).exists(c, !oldObject.spec.?ephemeralContainers.orValue([]).exists(o, o.?name.orValue("") == c.?name.orValue("")) || ` +
	`oldObject.spec.?ephemeralContainers.orValue([]).exists(o, o.?name.orValue("") == c.?name.orValue("") && o.?image.orValue("") != c.?image.orValue("")))) : (` +
	templatePresent("object") + ` != ` + templatePresent("oldObject") + ` || (` + templatePresent("object") + ` && (` +
	podPart("object", "spec") + ` != ` + podPart("oldObject", "spec") + ` || ` +
	`(` + podPart("object", "metadata") + `).?labels.orValue({}) != (` + podPart("oldObject", "metadata") + `).?labels.orValue({}) || ` +
	`(` + podPart("object", "metadata") + `).?annotations.orValue({}) != (` + podPart("oldObject", "metadata") + `).?annotations.orValue({})))))`

// templatePresent is CEL for whether a controller has a pod template.
func templatePresent(obj string) string {
	return fmt.Sprintf(`(%[1]s.kind == "CronJob" ? %[1]s.?spec.?jobTemplate.?spec.?template.hasValue() : %[1]s.kind == "PodTemplate" ? %[1]s.?template.hasValue() : %[1]s.?spec.?template.hasValue())`, obj)
}

// Unsupported is a part of a SecurityPolicy or PolicyException that the
// CEL form cannot say exactly; Compile refuses it rather than compiling a
// looser policy.
type Unsupported struct {
	Object, Field, Reason string
}

func (u *Unsupported) Error() string {
	return fmt.Sprintf("%s: %s: cannot be compiled into a ValidatingAdmissionPolicy exactly: %s", u.Object, u.Field, u.Reason)
}

// ruleCEL is what one rule adds to its policy: variables and a validation.
type ruleCEL struct {
	// checks are the variables of the checks the rule runs, which rules
	// share by name.
	checks     []admissionregistrationv1.Variable
	vars       []admissionregistrationv1.Variable
	validation admissionregistrationv1.Validation
}

func compileRule(sp *policyv1alpha1.SecurityPolicy, p *engine.Policy, r *engine.Rule, pr *policyv1alpha1.PolicyRule, i int, params bool) (*ruleCEL, error) {
	name := func(s string) string { return fmt.Sprintf("r%d_%s", i, s) }
	object := fmt.Sprintf("SecurityPolicy %s", sp.Name)
	path := fmt.Sprintf("spec.rules[%d]", i)

	// The checks, at the rule's level and version.
	version, ids := r.Checks()
	var checks []admissionregistrationv1.Variable
	var lists, pods, ctrs []string
	for _, id := range ids {
		c, ok := celChecks[id]
		if !ok {
			return nil, &Unsupported{Object: object, Field: path + ".podSecurity", Reason: fmt.Sprintf("upstream check %q has no CEL form", id)}
		}
		if cv := c(builder{id: id}, version.Minor()); cv.list != "" {
			v := admissionregistrationv1.Variable{Name: fmt.Sprintf("check_%s_v1_%d", id, version.Minor()), Expression: cv.list}
			checks = append(checks, v)
			lists = append(lists, "variables."+v.Name)
			pods = append(pods, cv.podCond())
			ctrs = append(ctrs, cv.ctr)
		}
	}
	// Whether any check finds a violation, in one pass over the containers
	// and without building a record: what an object that violates nothing
	// costs. Only then are the checks' lists built.
	viol := "[]"
	if len(lists) > 0 {
		found := or(pods...)
		if c := or(ctrs...); c != "" {
			found = or(found, "variables.ctrs.exists(x, "+c+")")
		}
		if found == "" {
			found = "false"
		}
		v := admissionregistrationv1.Variable{Name: fmt.Sprintf("violates_%s_v1_%d", r.Level, version.Minor()), Expression: found}
		checks = append(checks, v)
		viol = fmt.Sprintf("(variables.%s ? %s : [])", v.Name, concatLists(lists...))
	}

	applies, err := ruleApplies(pr, object, path)
	if err != nil {
		return nil, err
	}

	// What covers a violation v: the rule's own entries, inlined, and the
	// entries of the exceptions in force that reach the object.
	var covers []string
	for j, x := range pr.PodSecurity.Exclude {
		c, err := entryCovers(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %s.podSecurity.exclude[%d]: %w", object, path, j, err)
		}
		covers = append(covers, c)
	}
	excs, refused := "[]", "[]"
	if params {
		// In force for the rule: a target without a refusal. The others
		// waive nothing; a refusal names them.
		target := fmt.Sprintf("t.policy == %s && t.rule == %s", quote(sp.Name), quote(r.Name))
		excs = fmt.Sprintf(`variables.excs.filter(e, e.targets.exists(t, %s && !has(t.refusal)) && %s)`, target, exceptionMatches)
		refused = fmt.Sprintf(`variables.excs.filter(e, e.targets.exists(t, %[1]s && has(t.refusal)) && %[2]s).map(e, e.source + " does not apply: " + e.targets.filter(t, %[1]s && has(t.refusal))[0].refusal)`,
			target, exceptionMatches)
		covers = append(covers, fmt.Sprintf("variables.%s.exists(e, e.?entries.orValue([]).exists(x, %s))", name("excs"), paramEntryCovers))
	}
	// What no entry covers, filtered a chunk of entries at a time: the API
	// server parses no expression longer than maxExpression, and a rule
	// may hold 64 entries of long globs.
	var lefts []admissionregistrationv1.Variable
	from := fmt.Sprintf("size(variables.%[2]s) == 0 || variables.%[1]s.exists(e, e.?wholeRule.orValue(false) == true) ? [] : variables.%[2]s", name("excs"), name("viol"))
	for len(covers) > 0 {
		n, size := 0, 0
		for n < len(covers) && (n == 0 || size+len(covers[n]) < maxExpression/2) {
			size += len(covers[n]) + 4
			n++
		}
		expr := from + ".filter(v, !(" + strings.Join(covers[:n], " || ") + "))"
		if len(expr) > maxExpression {
			return nil, &Unsupported{Object: object, Field: path + ".podSecurity.exclude",
				Reason: fmt.Sprintf("an entry compiles to %d characters of CEL, and the API server parses at most %d per expression: shorten its globs or split it", len(expr), maxExpression)}
		}
		covers = covers[n:]
		v := admissionregistrationv1.Variable{Name: name("left"), Expression: expr}
		if len(covers) > 0 {
			v.Name = name(fmt.Sprintf("left%d", len(lefts)))
		}
		lefts = append(lefts, v)
		from = "variables." + v.Name
	}
	if len(lefts) == 0 {
		lefts = append(lefts, admissionregistrationv1.Variable{Name: name("left"), Expression: from})
	}

	verb := "violates"
	if p.Action == policyv1alpha1.ActionEnforce {
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
	admits := fmt.Sprintf(`!variables.%s || (variables.tooLarge == "" && size(variables.%s) == 0)`, name("applies"), name("left"))
	return &ruleCEL{
		checks: checks,
		vars: append([]admissionregistrationv1.Variable{
			{Name: name("applies"), Expression: applies},
			{Name: name("viol"), Expression: viol},
			{Name: name("excs"), Expression: excs},
		}, lefts...),
		validation: admissionregistrationv1.Validation{
			Expression: admits,
			Message:    fmt.Sprintf("the object %s SecurityPolicy %q rule %q (%s)", verb, sp.Name, r.Name, r.LevelVersion()),
			MessageExpression: fmt.Sprintf(`(%s) ? "" : %s + (variables.tooLarge != "" ? variables.tooLarge + %s : `+
				`variables.%s.map(v, %s).join("; ") + [%s].map(r, size(r) > 0 ? "; " + r.join("; ") : "")[0] + %s)`,
				admits, head, quote(TooLargeMessage+" (each evaluation's CPU grows with the square of a list's length): "+
					"podsieve's webhook decides such objects; shorten the lists"), name("left"), describe, refused, hintExpr(sp, r.Name, name("left"))),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		},
	}, nil
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
