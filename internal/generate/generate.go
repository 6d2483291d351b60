// Package generate writes the PolicyExceptions that waive exactly what an
// engine decision refuses, for podsieve exception generate: one entry per
// control, field, image and set of values, for the containers that need it,
// matched to the one workload, shaped by each policy's guardrails.
//
// It is pure: it reads a Decision and returns API objects, and checks them
// with the engine's own compiler and guardrails (CompileException, Permits),
// so that what it writes is what the cluster will honour or refuse. It
// imports no CLI, client or controller-runtime package.
package generate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/words"
)

// Options shape the generated exceptions.
type Options struct {
	// Name is metadata.name; "" derives <workload>-<policy>. When several
	// policies need an exception, each gets Name-<policy>.
	Name string
	// Now is when the exception is written; expiresAt counts from it.
	Now time.Time
	// ExpiresIn sets expiresAt to Now+ExpiresIn. Zero sets it only when a
	// policy's maxDuration requires one, to the longest it permits. A value
	// beyond maxDuration is shortened to it, with a note.
	ExpiresIn time.Duration
	// Justification is spec.justification.
	Justification string
	// AnyTag writes each image as its repository with any tag
	// (docker.io/istio/proxyv2:*) instead of the image as written.
	AnyTag bool
	// IncludeAudit waives the violations of Audit and Warn policies too,
	// which report but do not refuse.
	IncludeAudit bool
	// ExceptionsNamespace is the cluster exceptions namespace, as the
	// exception is compiled with it.
	ExceptionsNamespace string
}

// Exception is the exception for one policy.
type Exception struct {
	Policy *engine.Policy
	// Rules are the failing rules it names.
	Rules []string
	// Object is the PolicyException to print.
	Object *policyv1alpha1.PolicyException
	// Waives describes each violation it waives, as the webhook names it.
	Waives []string
	// Refused are the policy's guardrails' answers (engine.Policy.Permits)
	// when they would refuse the exception as a whole: no exceptions at all,
	// a justification missing. Empty when permitted.
	Refused []string
	// RefusedEntries are, by index in spec.podSecurity, the entries the
	// guardrails refuse (a control they do not allow), with the reason.
	RefusedEntries map[int]string
	// Notes say where the exception is wider than the violations (values a
	// glob cannot spell) or differs from what was asked (expiry shortened).
	Notes []string
	// EntryNotes are, by index in spec.podSecurity, where an entry waives
	// more than the violation: an entry without values, written for a
	// missing setting, also covers every value of its field.
	EntryNotes map[int]string
	// Of says which objects the exception matches: "" for the workload
	// itself; for the second exception of a controller, the kinds it
	// creates ("ReplicaSets and Pods").
	Of string
}

// Plan is what a workload needs.
type Plan struct {
	Exceptions []Exception
	// Unwaivable are violations without a field (engine.Finding.Detail):
	// no podSecurity entry covers them; only a whole-rule waiver does.
	Unwaivable []string
	// NotWaived are failing Audit and Warn rules left alone (without
	// IncludeAudit), as "policy/rule (Action): n violations".
	NotWaived []string
}

// For plans the exceptions that waive every uncovered violation of the
// decision's failing rules: Enforce rules, and Audit and Warn rules too with
// IncludeAudit. Violations already covered (by a policy's exclusions or an
// exception in force) are left alone.
func For(d engine.Decision, opts Options) (Plan, error) {
	var plan Plan
	o := d.Object
	groups := plan.group(d, opts)
	base, _ := nameGlob(o)
	names := exceptionNames(base, opts.Name, groups, func(g *group) string { return g.policy.Name })
	selectorNote := unstableLabelsNote(o, base)
	for i, g := range groups {
		if len(g.builder.list) == 0 {
			// Every uncovered violation of this policy is unwaivable.
			continue
		}
		podSecurity, entryNotes := g.builder.exclusions()
		for _, m := range matchesFor(o) {
			at, notes := place(g.policy, o, names[i], &m, opts)
			if selectorNote != "" {
				notes = append(notes, selectorNote)
			}
			entries := slices.Clone(podSecurity)
			if slices.Contains(m.match.Kinds, policyv1alpha1.KindPod) {
				entries = withStoredAppArmor(entries)
			}
			exs, err := g.parts(o, at, m, entries, entryNotes, notes, opts)
			if err != nil {
				return Plan{}, err
			}
			plan.Exceptions = append(plan.Exceptions, exs...)
		}
	}
	if err := uniqueNames(plan.Exceptions); err != nil {
		return Plan{}, err
	}
	return plan, nil
}

// group is what one policy's exception waives: its failing rules, the
// entries for their uncovered violations, and the exceptions that match the
// workload but do not apply.
type group struct {
	policy   *engine.Policy
	rules    []string
	builder  entries
	waives   []string
	refusals []engine.Refusal
}

// group gathers the decision's failing rules by policy, in the order the
// decision lists them, and records in the plan what no exception will
// waive: Audit and Warn rules left alone, violations without a field.
func (plan *Plan) group(d engine.Decision, opts Options) []*group {
	var groups []*group
	byPolicy := map[string]*group{}
	for i := range d.Results {
		res := &d.Results[i]
		if res.Outcome != engine.Fail {
			continue
		}
		p := res.Rule.Policy
		if !res.Enforced() && !opts.IncludeAudit {
			n := 0
			for j := range res.Findings {
				if !res.Findings[j].Covered() {
					n++
				}
			}
			plan.NotWaived = append(plan.NotWaived, fmt.Sprintf("%s/%s (%s): %d uncovered %s", p.Name, res.Rule.Name, p.Action, n, words.Plural(n, "violation")))
			continue
		}
		g := byPolicy[p.Name]
		if g == nil {
			g = &group{policy: p}
			byPolicy[p.Name] = g
			groups = append(groups, g)
		}
		g.add(plan, d.Object, res, opts)
	}
	return groups
}

// add records a failing rule's uncovered violations, and the exceptions
// that did not apply to it.
func (g *group) add(plan *Plan, o *engine.Object, res *engine.RuleResult, opts Options) {
	p := g.policy
	g.rules = append(g.rules, res.Rule.Name)
	for j := range res.Findings {
		f := &res.Findings[j]
		if f.Covered() {
			continue
		}
		if f.Field == "" {
			plan.Unwaivable = append(plan.Unwaivable, fmt.Sprintf("%s/%s: %s", p.Name, res.Rule.Name, f.Describe(o)))
			continue
		}
		if g.builder.add(f, controlFor(f, p), opts.AnyTag) {
			g.waives = append(g.waives, f.Describe(o))
		}
	}
	for _, rf := range res.Refused {
		if !slices.Contains(g.refusals, rf) {
			g.refusals = append(g.refusals, rf)
		}
	}
}

// unstableLabelsNote explains, for a controller whose pod labels all change
// with each release, why its exceptions select by name and kind alone. A
// Pod is matched by its name alone; a controller's exceptions also select
// its pod template's labels, unless none is stable.
func unstableLabelsNote(o *engine.Object, base string) string {
	controller := o.Kind != string(policyv1alpha1.KindPod) && o.Kind != string(policyv1alpha1.KindPodTemplate)
	if !controller || len(o.Labels) == 0 || selectorLabels(o.Labels) != nil {
		return ""
	}
	return fmt.Sprintf("the object's pod labels all change with each release or rollout (%s), so the exceptions select by name and kind alone: "+
		"another workload named %s-* is covered too; give the pod template a stable label (app.kubernetes.io/name) and generate again",
		strings.Join(slices.Sorted(maps.Keys(o.Labels)), ", "), base)
}

// place is where an exception of policy p for o is written: in o's
// namespace, as name; or, for a policy that honours only the cluster
// exceptions namespace, there, reaching o's namespace (m's match is
// narrowed to it), with a note saying so.
func place(p *engine.Policy, o *engine.Object, name string, m *scopedMatch, opts Options) (types.NamespacedName, []string) {
	if !clusterOnly(p) || o.Namespace == opts.ExceptionsNamespace {
		return types.NamespacedName{Namespace: o.Namespace, Name: name}, nil
	}
	// Named after the object's namespace too, so that the same workload
	// name in two namespaces gets two exceptions.
	if opts.Name == "" {
		name = o.Namespace + "-" + name
		if len(name) > 253 {
			name = strings.TrimRight(name[:253], "-.")
		}
	}
	m.match.Namespaces = []string{o.Namespace}
	note := fmt.Sprintf("policy %q honours only PolicyExceptions in the cluster exceptions namespace (spec.exceptions.clusterExceptionsOnly): a cluster admin applies this one, in %q",
		p.Name, opts.ExceptionsNamespace)
	return types.NamespacedName{Namespace: opts.ExceptionsNamespace, Name: name}, []string{note}
}

// parts are the exceptions that hold one match's entries. An entry the
// schema would refuse becomes several that waive exactly what it did; more
// entries than one PolicyException holds, several exceptions, each within
// the schema, all needed together. Each is judged by the policy's
// guardrails.
func (g *group) parts(o *engine.Object, at types.NamespacedName, m scopedMatch, entries []policyv1alpha1.PodSecurityExclusion,
	entryNotes map[int]string, notes []string, opts Options) ([]Exception, error) {
	entries, notesOf := fitEntries(entries, entryNotes)
	parts := splitEntries(entries)
	partNames := make([]string, len(parts))
	for k := range parts {
		partNames[k] = withSuffix(at.Name, m.suffix+partSuffix(k))
	}
	exs := make([]Exception, 0, len(parts))
	first := 0
	for k, part := range parts {
		ex := Exception{Policy: g.policy, Rules: g.rules, Waives: g.waives, Notes: append(slices.Clone(g.builder.notes), notes...),
			EntryNotes: shiftNotes(notesOf, first, len(part)), Of: m.of}
		first += len(part)
		if len(parts) > 1 {
			ex.Notes = append(ex.Notes, fmt.Sprintf("part %d of %d: %s together waive this workload's violations, since one PolicyException holds at most %d entries, %d image globs, %d container name globs and %d values; apply them all, and delete a part a later generate no longer prints (it would still waive)",
				k+1, len(parts), strings.Join(partNames, ", "), engine.MaxExceptionEntries, engine.MaxExceptionImages, engine.MaxExceptionContainerNames, engine.MaxExceptionValues))
		}
		pe := g.object(types.NamespacedName{Namespace: at.Namespace, Name: partNames[k]}, m, part, opts)
		exp, note := expiry(g.policy, opts)
		if note != "" {
			ex.Notes = append(ex.Notes, note)
		}
		if exp != nil {
			pe.Spec.ExpiresAt = &metav1.Time{Time: *exp}
		}
		for _, rf := range g.refusals {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s matches this workload but does not apply (%s); fixing or renewing it may be the better change", rf.Source, strings.TrimSuffix(rf.Message, ".")))
		}
		if err := engine.ExceptionEntriesFit(part); err != nil {
			return nil, fmt.Errorf("%s %s/%s: no PolicyException the schema allows waives exactly this: %w", o.Kind, o.Namespace, o.Name, err)
		}
		if err := ex.judge(pe, opts); err != nil {
			return nil, err
		}
		ex.Object = pe
		exs = append(exs, ex)
	}
	return exs, nil
}

// object is the PolicyException at that waives the group's rules with the
// entries of one part.
func (g *group) object(at types.NamespacedName, m scopedMatch, part []policyv1alpha1.PodSecurityExclusion, opts Options) *policyv1alpha1.PolicyException {
	return &policyv1alpha1.PolicyException{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.GroupVersion.String(), Kind: "PolicyException"},
		ObjectMeta: metav1.ObjectMeta{Name: at.Name, Namespace: at.Namespace},
		Spec: policyv1alpha1.PolicyExceptionSpec{
			Exceptions:    []policyv1alpha1.ExceptionTarget{{PolicyName: g.policy.Name, RuleNames: literals(g.rules)}},
			Match:         m.match.DeepCopy(),
			PodSecurity:   part,
			Justification: opts.Justification,
		},
	}
}

// uniqueNames refuses two exceptions of one name: one applied after the
// other would replace it.
func uniqueNames(exs []Exception) error {
	seen := map[types.NamespacedName]bool{}
	for _, ex := range exs {
		key := types.NamespacedName{Namespace: ex.Object.Namespace, Name: ex.Object.Name}
		if seen[key] {
			return fmt.Errorf("two generated PolicyExceptions would be named %s (a policy's name ends as another's generated name does): pass --name", key)
		}
		seen[key] = true
	}
	return nil
}
