package admissionpolicy

import (
	"fmt"
	"slices"
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
