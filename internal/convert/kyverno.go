package convert

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

// The Kyverno converter, in files of their own: the policy-wide settings
// (kyverno_settings.go), the rules (kyverno_rules.go), their match and
// exclude filters (kyverno_filters.go) and the PolicyExceptions
// (kyverno_exceptions.go). Its input types are in kyverno_types.go.

// kyvernoReads are the kinds the Kyverno converter reads; it notes and
// ignores the others.
var kyvernoReads = reads{kinds: "kyverno.io ClusterPolicy, Policy or PolicyException, or policies.kyverno.io ValidatingPolicy, NamespacedValidatingPolicy or (CEL)PolicyException", is: func(d *Document) bool {
	group, _, _ := strings.Cut(d.APIVersion, "/")
	return (group == "kyverno.io" && (d.Kind == "ClusterPolicy" || d.Kind == "Policy" || d.Kind == "PolicyException")) || isKyvernoCEL(d)
}}

// KyvernoOptions tune the Kyverno converter.
type KyvernoOptions struct {
	// ExceptionsNamespace is the cluster exceptions namespace: a Kyverno
	// PolicyException whose namespaces are globs, a namespaceSelector or
	// unset (every namespace) becomes an exception there.
	ExceptionsNamespace string
}

// ruleRef is a converted rule: the podsieve policy and rule names.
type ruleRef struct{ policy, rule string }

// kyvernoConverter holds what converting policies learnt, for the exceptions
// that name them.
type kyvernoConverter struct {
	opts KyvernoOptions
	res  *Result
	// rules maps a Kyverno policy's key (name, or namespace/name for a
	// namespaced Policy) and Kyverno rule name to the converted rules.
	rules map[string]map[string][]ruleRef
	// exceptionNames are the names taken per namespace.
	exceptionNames map[string]map[string]bool
	// optIn collects, per converted policy, what the converted exceptions
	// that target it waive: podsieve honours exceptions only for a policy
	// that opts in (spec.exceptions), where Kyverno honours them for all.
	optIn map[string]*optIn
	// vpolRefs maps a converted ValidatingPolicy's name to where it went.
	vpolRefs map[vpolID]vpolRef
}

// Kyverno converts ClusterPolicies and Policies with validate.podSecurity
// rules into SecurityPolicies, and PolicyExceptions with podSecurity into
// PolicyExceptions; and policies.kyverno.io ValidatingPolicies of Kyverno's
// CEL Pod Security library (kyverno_vpol.go) and the policies.kyverno.io
// PolicyExceptions that name them (kyverno_vpol_exceptions.go). Documents
// of other kinds are noted and ignored. The error is bad input: a document
// that does not decode.
func Kyverno(docs []Document, opts KyvernoOptions) (*Result, error) {
	c := &kyvernoConverter{opts: opts, res: &Result{}, rules: map[string]map[string][]ruleRef{}, exceptionNames: map[string]map[string]bool{}, vpolRefs: map[vpolID]vpolRef{}}
	var policies []*kyvernoPolicy
	var policyDocs, excDocs, vpolDocs, celExcDocs []*Document
	var exceptions []*kyvernoException
	var vpols []*kyvernoVPol
	var celExceptions []*kyvernoCELException
	var errs []error
	for i := range docs {
		d := &docs[i]
		switch {
		case !kyvernoReads.is(d):
			kyvernoReads.ignore(c.res, d)
		case isKyvernoCEL(d) && isVPol(d.Kind):
			vp := &kyvernoVPol{}
			if err := decodeStrict(d, vp); err != nil {
				errs = append(errs, err)
				continue
			}
			if vp.Metadata.Name == "" {
				errs = append(errs, atDoc(d.Loc, fmt.Errorf("%s: %s: metadata.name is required", d.Where(), d.Kind)))
				continue
			}
			vpols, vpolDocs = append(vpols, vp), append(vpolDocs, d)
		case isKyvernoCEL(d):
			e := &kyvernoCELException{}
			if err := decodeStrict(d, e); err != nil {
				errs = append(errs, err)
				continue
			}
			celExceptions, celExcDocs = append(celExceptions, e), append(celExcDocs, d)
		case d.Kind == "PolicyException":
			e := &kyvernoException{}
			if err := decodeStrict(d, e); err != nil {
				errs = append(errs, err)
				continue
			}
			exceptions, excDocs = append(exceptions, e), append(excDocs, d)
		default:
			p := &kyvernoPolicy{}
			if err := decodeStrict(d, p); err != nil {
				errs = append(errs, err)
				continue
			}
			policies, policyDocs = append(policies, p), append(policyDocs, d)
		}
	}
	// Policies first, so that exceptions follow renamed and split rules.
	for i, p := range policies {
		if err := c.policy(policyDocs[i], p); err != nil {
			errs = append(errs, atDoc(policyDocs[i].Loc, err))
		}
	}
	for i, e := range exceptions {
		if e.Metadata.Name == "" {
			errs = append(errs, atDoc(excDocs[i].Loc, fmt.Errorf("%s: PolicyException: metadata.name is required", excDocs[i].Where())))
			continue
		}
		c.exception(excDocs[i], e)
	}
	if err := c.vpols(vpolDocs, vpols); err != nil {
		errs = append(errs, err)
	}
	for i, e := range celExceptions {
		if e.Metadata.Name == "" {
			errs = append(errs, atDoc(celExcDocs[i].Loc, fmt.Errorf("%s: PolicyException: metadata.name is required", celExcDocs[i].Where())))
			continue
		}
		c.celException(celExcDocs[i], e)
	}
	c.optInPolicies()
	c.res.sortNotes()
	return c.res, SortErrors(errs...)
}

// kyvernoPolicyName is how Kyverno's PolicyExceptions name a policy in
// spec.exceptions[].policyName: <namespace>/<name> for a Policy, the name
// for a ClusterPolicy.
func kyvernoPolicyName(kind string, meta metav1.ObjectMeta) string {
	if kind == "Policy" {
		return meta.Namespace + "/" + meta.Name
	}
	return meta.Name
}

// kyvernoPolicyConversion is what converting one ClusterPolicy or Policy
// learns as its phases run.
type kyvernoPolicyConversion struct {
	c  *kyvernoConverter
	d  *Document
	kp *kyvernoPolicy
	n  *noter
	// key is the policy's key in c.rules; name is the converted policy's.
	key, name string
	// namespace is a Policy's namespace ("default" when unset), "" for a
	// ClusterPolicy.
	namespace string
	// action is the policy's failure action, the default of its rules.
	action policyv1alpha1.PolicyAction
	// groups are the converted rules, one group per action: podsieve's
	// action is per policy.
	groups []*ruleGroup
	// severity and category are what the rules report with, read from the
	// policy's annotations once (reporting).
	severity   *policyv1alpha1.Severity
	category   *string
	reportRead bool
}

// kyvernoPolicyPhases convert one policy, in this order, which is the order
// of the notes they write. A phase's error is bad input and ends the policy.
var kyvernoPolicyPhases = []func(*kyvernoPolicyConversion) error{
	(*kyvernoPolicyConversion).naming,   // kyverno_settings.go
	(*kyvernoPolicyConversion).settings, // kyverno_settings.go
	(*kyvernoPolicyConversion).rules,    // kyverno_rules.go
	(*kyvernoPolicyConversion).output,   // kyverno_rules.go
}

func (c *kyvernoConverter) policy(d *Document, kp *kyvernoPolicy) error {
	p := &kyvernoPolicyConversion{c: c, d: d, kp: kp, n: newNoter(c.res, d)}
	for _, phase := range kyvernoPolicyPhases {
		if err := phase(p); err != nil {
			return err
		}
	}
	return nil
}

// entryOutcome is what became of one Kyverno podSecurity entry.
type entryOutcome int

const (
	// entryTranslated: the entry is written.
	entryTranslated entryOutcome = iota
	// entryDropped: it could not be translated; its object waives or
	// excludes less (noted as untranslated).
	entryDropped
	// entryNoEffect: it never matches anything in Kyverno, so it is left
	// out without loss (noted as a warning).
	entryNoEffect
)

// convertEntry translates one Kyverno podSecurity exclusion. When it
// cannot be, the reason is noted with what leaving it out means
// (consequence).
func convertEntry(n *noter, e kyvernoEntry, path, consequence string) (policyv1alpha1.PodSecurityExclusion, entryOutcome) {
	x := policyv1alpha1.PodSecurityExclusion{
		ControlName: policyv1alpha1.ControlName(e.ControlName),
		Images:      slices.Clone(e.Images),
		Values:      slices.Clone(e.Values),
	}
	control := policyv1alpha1.ControlName(e.ControlName)
	if !slices.Contains(policyv1alpha1.Controls, control) {
		n.untranslated(path+".controlName", "%q is not a Pod Security Standards control; %s", control, consequence)
		return x, entryDropped
	}
	field := e.RestrictedField
	if strings.HasPrefix(field, "metadata.annotations[") {
		// Kyverno matches an annotation field only as it names its
		// violations: the key unquoted, digits in the container name
		// written as *, and only on a pod whose annotations it kept, which
		// it does not for an entry with images, nor for per-container
		// seccomp annotations (it re-checks them on a stand-in container).
		// Every other spelling never matches there.
		f, c, ok := engine.KyvernoField(control, field)
		key := strings.TrimSuffix(strings.TrimPrefix(field, "metadata.annotations["), "]")
		switch {
		case strings.ContainsAny(key, `"'`) || len(e.Images) > 0 || strings.ContainsAny(c, "0123456789") ||
			(ok && f == engine.KyvernoSeccompContainerField):
			n.warn(path+".restrictedField", "Kyverno never matches %s as written (its annotation violations are matched unquoted, with digits in container names as *, on a pod without images' filtering, and per-container seccomp annotations not at all), so the entry has no effect there and was left out", field)
			return x, entryNoEffect
		case !ok:
			n.untranslated(path+".restrictedField", "%s names no annotation podsieve can keep to one container (a container name with * stands for Kyverno's digits, which no podsieve glob says exactly); %s", field, consequence)
			return x, entryDropped
		}
		// metadata.annotations[<key>/<container>]: podsieve's annotation
		// field, kept to that container.
		field = f
		if c != "" {
			x.ContainerNames = []string{c}
		}
	}
	switch {
	case field == "":
	case control == policyv1alpha1.ControlAppArmor && field == engine.KyvernoAppArmorBare:
		n.warn(path+".restrictedField", "Kyverno never matches %s alone (its AppArmor violations name metadata.annotations[container.apparmor.security.beta.kubernetes.io/<container>]), so the entry has no effect there and was left out", field)
		return x, entryNoEffect
	case control == policyv1alpha1.ControlVolumeTypes && field == "spec.volumes[*]":
		n.warn(path+".restrictedField", "Kyverno names Volume Types violations by the volume type's field (spec.volumes[*].nfs, ...), so an entry on spec.volumes[*] never matches there; it has no effect and was left out")
		return x, entryNoEffect
	case control == policyv1alpha1.ControlVolumeTypes && strings.HasPrefix(field, "spec.volumes[*].") && len(e.Values) > 0:
		// Kyverno's Volume Types violations carry no values, so it
		// ignores them: the entry covers every volume of that type.
		n.warn(path+".values", "Kyverno ignores values on Volume Types (its violations carry none), so the entry covers every %s volume there; converted without them (podsieve reads Volume Types values as volume names: list the volume names to narrow it)",
			strings.TrimPrefix(field, "spec.volumes[*]."))
		x.Values = nil
	case strings.HasPrefix(field, "spec.ephemeralContainers[*].seLinuxOptions."):
		// Kyverno spells these without securityContext.
		field = strings.Replace(field, "[*].seLinuxOptions.", "[*].securityContext.seLinuxOptions.", 1)
	}
	x.RestrictedField = field
	for _, img := range e.Images {
		if i := strings.Index(img, "*"); i >= 0 && !strings.Contains(img, "**") && (strings.Contains(img[i:], "/") || strings.HasSuffix(img, "/*")) {
			n.warn(path+".images", "%q: podsieve's * stays within one path segment (Kyverno's also crosses /); write ** where deeper paths are meant", img)
		}
	}
	if _, err := engine.CompileExclusion(x, engine.Source{}, path); err != nil {
		// The engine's message starts with the field it is about.
		field, msg := path, err.Error()
		if f, m, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(f, path) {
			field, msg = f, m
		}
		n.untranslated(field, "%s; %s", msg, consequence)
		return x, entryDropped
	}
	return x, entryTranslated
}
