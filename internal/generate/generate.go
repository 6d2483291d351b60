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

	"github.com/distribution/reference"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	type group struct {
		policy   *engine.Policy
		rules    []string
		builder  entries
		waives   []string
		refusals []engine.Refusal
	}
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
	base, _ := nameGlob(o)
	names := exceptionNames(base, opts.Name, groups, func(g *group) string { return g.policy.Name })
	var selectorNote string
	// A Pod is matched by its name alone; a controller's exceptions also
	// select its pod template's labels, unless none is stable.
	controller := o.Kind != string(policyv1alpha1.KindPod) && o.Kind != string(policyv1alpha1.KindPodTemplate)
	if controller && len(o.Labels) > 0 && selectorLabels(o.Labels) == nil {
		selectorNote = fmt.Sprintf("the object's pod labels all change with each release or rollout (%s), so the exceptions select by name and kind alone: "+
			"another workload named %s-* is covered too; give the pod template a stable label (app.kubernetes.io/name) and generate again",
			strings.Join(slices.Sorted(maps.Keys(o.Labels)), ", "), base)
	}
	for i, g := range groups {
		if len(g.builder.list) == 0 {
			// Every uncovered violation of this policy is unwaivable.
			continue
		}
		podSecurity, entryNotes := g.builder.exclusions()
		for _, m := range matchesFor(o) {
			namespace, name := o.Namespace, names[i]
			var notes []string
			if clusterOnly(g.policy) && namespace != opts.ExceptionsNamespace {
				// Only an exception in the cluster exceptions namespace is
				// honoured: write it there, reaching the object's namespace,
				// and named after it, so that the same workload name in
				// two namespaces gets two exceptions.
				namespace = opts.ExceptionsNamespace
				if opts.Name == "" {
					name = o.Namespace + "-" + name
					if len(name) > 253 {
						name = strings.TrimRight(name[:253], "-.")
					}
				}
				m.match.Namespaces = []string{o.Namespace}
				notes = append(notes, fmt.Sprintf("policy %q honours only PolicyExceptions in the cluster exceptions namespace (spec.exceptions.clusterExceptionsOnly): a cluster admin applies this one, in %q",
					g.policy.Name, opts.ExceptionsNamespace))
			}
			entries := slices.Clone(podSecurity)
			if slices.Contains(m.match.Kinds, policyv1alpha1.KindPod) {
				entries = withStoredAppArmor(entries)
			}
			// An entry the schema would refuse becomes several that waive
			// exactly what it did; more entries than one PolicyException
			// holds, several exceptions, each within the schema, all needed
			// together.
			entries, notesOf := fitEntries(entries, entryNotes)
			parts := splitEntries(entries)
			partNames := make([]string, len(parts))
			for k := range parts {
				partNames[k] = withSuffix(name, m.suffix+partSuffix(k))
			}
			first := 0
			for k, part := range parts {
				ex := Exception{Policy: g.policy, Rules: g.rules, Waives: g.waives, Notes: append(slices.Clone(g.builder.notes), notes...),
					EntryNotes: shiftNotes(notesOf, first, len(part)), Of: m.of}
				first += len(part)
				if selectorNote != "" {
					ex.Notes = append(ex.Notes, selectorNote)
				}
				if len(parts) > 1 {
					ex.Notes = append(ex.Notes, fmt.Sprintf("part %d of %d: %s together waive this workload's violations, since one PolicyException holds at most %d entries, %d image globs, %d container name globs and %d values; apply them all, and delete a part a later generate no longer prints (it would still waive)",
						k+1, len(parts), strings.Join(partNames, ", "), engine.MaxExceptionEntries, engine.MaxExceptionImages, engine.MaxExceptionContainerNames, engine.MaxExceptionValues))
				}
				pe := &policyv1alpha1.PolicyException{
					TypeMeta:   metav1.TypeMeta{APIVersion: policyv1alpha1.GroupVersion.String(), Kind: "PolicyException"},
					ObjectMeta: metav1.ObjectMeta{Name: partNames[k], Namespace: namespace},
					Spec: policyv1alpha1.PolicyExceptionSpec{
						Exceptions:    []policyv1alpha1.ExceptionTarget{{PolicyName: g.policy.Name, RuleNames: literals(g.rules)}},
						Match:         m.match.DeepCopy(),
						PodSecurity:   part,
						Justification: opts.Justification,
					},
				}
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
					return Plan{}, fmt.Errorf("%s %s/%s: no PolicyException the schema allows waives exactly this: %w", o.Kind, o.Namespace, o.Name, err)
				}
				if err := ex.judge(pe, opts); err != nil {
					return Plan{}, err
				}
				ex.Object = pe
				plan.Exceptions = append(plan.Exceptions, ex)
			}
		}
	}
	// Names must not collide: one applied after the other would replace it.
	seen := map[string]bool{}
	for _, ex := range plan.Exceptions {
		key := ex.Object.Namespace + "/" + ex.Object.Name
		if seen[key] {
			return Plan{}, fmt.Errorf("two generated PolicyExceptions would be named %s (a policy's name ends as another's generated name does): pass --name", key)
		}
		seen[key] = true
	}
	return plan, nil
}

// fitEntries splits each entry that names more containers or images than
// one entry may into several, one for each share of its names and of its
// images (every pairing), which together waive exactly what it did: a
// violation is covered when its container's name matches one name glob and
// its image one image glob. An entry's values are never split (a violation
// is covered only by one entry that lists all its values); one with more
// than an entry may hold is left for the compile check to refuse. notes, by
// entry index, follow their entry, on its first share.
func fitEntries(entries []policyv1alpha1.PodSecurityExclusion, notes map[int]string) ([]policyv1alpha1.PodSecurityExclusion, map[int]string) {
	var (
		fitting []policyv1alpha1.PodSecurityExclusion
		moved   map[int]string
	)
	for i, e := range entries {
		if note, ok := notes[i]; ok {
			if moved == nil {
				moved = map[int]string{}
			}
			moved[len(fitting)] = note
		}
		for _, names := range shares(e.ContainerNames, engine.MaxEntryContainerNames) {
			for _, images := range shares(e.Images, engine.MaxEntryImages) {
				part := *e.DeepCopy()
				part.ContainerNames, part.Images = names, images
				fitting = append(fitting, part)
			}
		}
	}
	return fitting, moved
}

// shares cuts list into consecutive pieces of at most n; a list that fits
// (an empty one too) is one piece, itself.
func shares(list []string, n int) [][]string {
	if len(list) <= n {
		return [][]string{list}
	}
	var out [][]string
	for len(list) > n {
		out = append(out, list[:n:n])
		list = list[n:]
	}
	return append(out, list)
}

// splitEntries packs entries (each within an entry's bounds: fitEntries),
// in order, into as few lists as it takes for each to fit one
// PolicyException: at most MaxExceptionEntries entries and, in all,
// MaxExceptionImages image globs, MaxExceptionContainerNames container name
// globs and MaxExceptionValues values. Entries are never merged or widened.
// One list when they fit.
func splitEntries(entries []policyv1alpha1.PodSecurityExclusion) [][]policyv1alpha1.PodSecurityExclusion {
	var (
		parts                 [][]policyv1alpha1.PodSecurityExclusion
		cur                   []policyv1alpha1.PodSecurityExclusion
		images, names, values int
	)
	for _, e := range entries {
		if len(cur) > 0 && (len(cur) == engine.MaxExceptionEntries || images+len(e.Images) > engine.MaxExceptionImages ||
			names+len(e.ContainerNames) > engine.MaxExceptionContainerNames || values+len(e.Values) > engine.MaxExceptionValues) {
			parts = append(parts, cur)
			cur, images, names, values = nil, 0, 0, 0
		}
		cur = append(cur, e)
		images, names, values = images+len(e.Images), names+len(e.ContainerNames), values+len(e.Values)
	}
	return append(parts, cur)
}

// partSuffix ends the name of the k-th (from 0) of the exceptions that
// hold one match's entries together: nothing for the first, "-part-2" for
// the second, and so on.
func partSuffix(k int) string {
	if k == 0 {
		return ""
	}
	return fmt.Sprintf("-part-%d", k+1)
}

// shiftNotes are the entry notes of the n entries from first on, by their
// index in that part.
func shiftNotes(notes map[int]string, first, n int) map[int]string {
	var out map[int]string
	for j, note := range notes {
		if j >= first && j < first+n {
			if out == nil {
				out = map[int]string{}
			}
			out[j-first] = note
		}
	}
	return out
}

// withStoredAppArmor adds, for each entry on the AppArmor annotation, the
// entry for the field the API server copies the annotation to in the pods
// it stores (engine.StoredAppArmor), so that the exception of a pod, or of
// the pods a controller creates, covers the pods as stored, not only as
// written.
func withStoredAppArmor(ps []policyv1alpha1.PodSecurityExclusion) []policyv1alpha1.PodSecurityExclusion {
	out := ps
	for _, x := range ps {
		kind := policyv1alpha1.ContainerKindApp
		if len(x.ContainerKinds) == 1 {
			kind = x.ContainerKinds[0]
		}
		var field string
		var values []string
		for _, v := range x.Values {
			f, stored, ok := engine.StoredAppArmor(x.RestrictedField, kind, v)
			if !ok {
				continue
			}
			field = f
			if !slices.Contains(values, stored) {
				values = append(values, stored)
			}
		}
		if field == "" || len(x.ContainerKinds) > 1 {
			continue
		}
		y := x
		y.RestrictedField, y.Values = field, values
		y.ContainerNames, y.Images, y.ContainerKinds = slices.Clone(x.ContainerNames), slices.Clone(x.Images), slices.Clone(x.ContainerKinds)
		out = append(out, y)
	}
	return out
}

// clusterOnly reports whether the policy honours only exceptions in the
// cluster exceptions namespace.
func clusterOnly(p *engine.Policy) bool {
	g := p.Guardrails()
	return g != nil && g.ClusterExceptionsOnly != nil && *g.ClusterExceptionsOnly
}

// Permitted reports whether the policy's guardrails permit the exception.
func (ex *Exception) Permitted() bool { return len(ex.Refused) == 0 && len(ex.RefusedEntries) == 0 }

// justificationPlaceholder stands in for a justification when checking what
// else the guardrails say; it is never printed.
const justificationPlaceholder = "(checking the other guardrails)"

// judge asks the policy's guardrails, through the engine, whether they permit
// the exception, and if not, which entries and which of its other fields
// they refuse, so that the comments name every problem at once.
func (ex *Exception) judge(pe *policyv1alpha1.PolicyException, opts Options) error {
	// permits returns the guardrails' refusal, "" when they permit.
	permits := func(pe *policyv1alpha1.PolicyException) (string, error) {
		compiled, err := engine.CompileException(pe, opts.ExceptionsNamespace)
		if err != nil {
			// A generated exception that does not compile is podsieve's bug.
			return "", fmt.Errorf("generated PolicyException %s/%s does not compile: %w", pe.Namespace, pe.Name, err)
		}
		if refusal := ex.Policy.Permits(compiled, opts.Now); refusal != nil {
			return refusal.Error(), nil
		}
		return "", nil
	}
	refusal, err := permits(pe)
	if err != nil || refusal == "" {
		return err
	}
	g := ex.Policy.Guardrails()
	if !ex.Policy.PermitsAny() {
		ex.Refused = []string{refusal}
		return nil
	}
	// Each entry alone, with a justification, meets only the control
	// guardrail.
	var permitted []policyv1alpha1.PodSecurityExclusion
	for j, entry := range pe.Spec.PodSecurity {
		one := pe.DeepCopy()
		one.Spec.PodSecurity = []policyv1alpha1.PodSecurityExclusion{entry}
		one.Spec.Justification = justificationPlaceholder
		r, err := permits(one)
		if err != nil {
			return err
		}
		if r != "" {
			if ex.RefusedEntries == nil {
				ex.RefusedEntries = map[int]string{}
			}
			// Judged alone, the entry was spec.podSecurity[0]; say where
			// it is in the exception the developer reads.
			ex.RefusedEntries[j] = strings.ReplaceAll(r, "spec.podSecurity[0]", fmt.Sprintf("spec.podSecurity[%d]", j))
			continue
		}
		permitted = append(permitted, entry)
	}
	rest := pe.DeepCopy()
	rest.Spec.PodSecurity = permitted
	if len(permitted) == 0 {
		// Without entries the exception would waive whole rules, which is
		// another question; ask only about the justification.
		if g.RequireJustification != nil && *g.RequireJustification && strings.TrimSpace(pe.Spec.Justification) == "" {
			ex.Refused = append(ex.Refused, fmt.Sprintf("policy %q requires a justification: set spec.justification", ex.Policy.Name))
		}
		return nil
	}
	r, err := permits(rest)
	if err != nil {
		return err
	}
	if r != "" {
		ex.Refused = append(ex.Refused, r)
	}
	return nil
}

// controlFor is the control an entry names for a finding: a hostPath volume
// is waived only by a HostPath Volumes entry, also where restricted's volume
// check reports it under Volume Types (docs/semantics.md).
func controlFor(f *engine.Finding, _ *engine.Policy) policyv1alpha1.ControlName {
	return engine.WaiverControl(f)
}

// entries builds podSecurity entries: one per control, field, kind of
// container, image and set of values, listing the containers that share
// them. Keeping images and values apart per entry is what keeps an entry
// from covering container A with B's image or B's values; the kind keeps an
// init container's entry off a sidecar of the same image and name pattern.
type entries struct {
	list  []*entry
	byKey map[string]*entry
	seen  map[string]bool
	notes []string
}

type entry struct {
	control       policyv1alpha1.ControlName
	field, image  string
	kind          policyv1alpha1.ContainerKind
	values, names []string
}

// add records a finding; it reports false when an entry already covered
// the same violation (the same finding from two rules of one policy).
func (b *entries) add(f *engine.Finding, control policyv1alpha1.ControlName, anyTag bool) bool {
	values := make([]string, 0, len(f.Values))
	for _, v := range f.Values {
		g, exact := engine.ValueGlob(f.Field, v)
		if !exact {
			b.note(fmt.Sprintf("value %q of %s cannot be written exactly; the entry lists %q, which matches it and values of its shape", v, f.Field, g))
		}
		if !slices.Contains(values, g) {
			values = append(values, g)
		}
	}
	slices.Sort(values)
	image := ""
	if f.Scope == engine.ScopeContainer && f.Image != "" {
		image = imageGlob(f.Image, anyTag)
	}
	kind := f.Kind()
	key := strings.Join([]string{string(control), f.Field, string(kind), image, strings.Join(values, "\x00")}, "\x01")
	if b.byKey == nil {
		b.byKey, b.seen = map[string]*entry{}, map[string]bool{}
	}
	e := b.byKey[key]
	if e == nil {
		e = &entry{control: control, field: f.Field, kind: kind, image: image, values: values}
		b.byKey[key] = e
		b.list = append(b.list, e)
	}
	// The same violation may come from two rules of one policy.
	seen := key + "\x02" + f.Container
	if b.seen[seen] {
		return false
	}
	b.seen[seen] = true
	if f.Scope == engine.ScopeContainer {
		e.names = append(e.names, literal(f.Container))
	}
	return true
}

func (b *entries) note(s string) {
	if !slices.Contains(b.notes, s) {
		b.notes = append(b.notes, s)
	}
}

// exclusions are the entries, and by index a note on each entry written
// for a missing setting.
func (b *entries) exclusions() ([]policyv1alpha1.PodSecurityExclusion, map[int]string) {
	out := make([]policyv1alpha1.PodSecurityExclusion, 0, len(b.list))
	var notes map[int]string
	for i, e := range b.list {
		if len(e.values) == 0 {
			if notes == nil {
				notes = map[int]string{}
			}
			notes[i] = missingNote(e.field)
		}
		x := policyv1alpha1.PodSecurityExclusion{
			ControlName:     policyv1alpha1.ControlName(e.control),
			ContainerNames:  e.names,
			RestrictedField: e.field,
		}
		if len(e.values) > 0 {
			x.Values = e.values
		}
		if e.image != "" {
			x.Images = []string{e.image}
		}
		if e.kind != "" {
			x.ContainerKinds = []policyv1alpha1.ContainerKind{e.kind}
		}
		out = append(out, x)
	}
	return out, notes
}

// missingNote explains an entry without values. The violation it was
// written for is a required setting left unset, which has no value; an
// entry can only cover that by having no values, and such an entry covers
// every value of its field (docs/semantics.md, "What an entry covers").
func missingNote(field string) string {
	missing, example := "the setting is missing", ""
	switch {
	case strings.HasSuffix(field, ".allowPrivilegeEscalation"):
		missing, example = "allowPrivilegeEscalation is unset", "allowPrivilegeEscalation: true"
	case strings.HasSuffix(field, ".runAsNonRoot"):
		missing, example = "runAsNonRoot is unset", "runAsNonRoot: false"
	case strings.HasSuffix(field, ".seccompProfile.type"):
		missing, example = "no seccomp profile is set", "type: Unconfined"
	case strings.HasSuffix(field, ".capabilities.drop"):
		missing, example = "ALL is not dropped", "any drop list without ALL"
	}
	if example != "" {
		example = " (" + example + " too)"
	}
	return fmt.Sprintf("no values: %s, which has no value to match, so this entry waives any value of %s%s; podsieve cannot waive only the missing setting", missing, field, example)
}

// imageGlob is the image fully qualified, or with anyTag its repository, fully
// qualified, with any tag (or any digest, for an image pinned by digest
// only). An image written without tag or digest is pinned to the tag it
// runs, fully qualified (nginx → docker.io/library/nginx:latest): written
// as is, the glob would match every tag, since the engine also tries an
// image's repository without its tag. An image that does not parse is kept
// as written.
func imageGlob(image string, anyTag bool) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return literal(image)
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	switch {
	case anyTag && digested && !tagged:
		return named.Name() + "@*"
	case anyTag:
		return named.Name() + ":*"
	case !tagged && !digested:
		return reference.TagNameOnly(named).String()
	}
	// Fully qualified, so that the glob pins its registry (a policy may
	// require it: requirePinnedRegistry); the engine matches an image in
	// its qualified form too.
	return literal(named.String())
}

// literal spells a name as a glob that matches it: the characters a glob
// treats as special or refuses become "?" (names and images from the API
// never hold them).
func literal(s string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(`*?[]\`, r) {
			return '?'
		}
		return r
	}, s)
}

func literals(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = literal(s)
	}
	return out
}

// nameGlob is what a generated exception is named after and the glob that
// matches the object's name: its name, literally; or, for an object the API
// server names (engine.GeneratedName), its generateName prefix (without a
// trailing "-" or ".") and the prefix followed by *, which every name the
// API server may generate matches.
func nameGlob(o *engine.Object) (base, glob string) {
	if prefix, ok := o.NamePrefix(); ok {
		base = strings.TrimRight(prefix, "-.")
		if base == "" {
			base = "generated"
		}
		return base, literal(prefix) + "*"
	}
	return o.Name, literal(o.Name)
}

// scopedMatch is the match of one generated exception, the suffix of its
// name, and what it matches in words (Exception.Of).
type scopedMatch struct {
	match  *policyv1alpha1.ExceptionMatch
	suffix string
	of     string
}

// childrenSuffix ends the name of a controller's second exception.
const childrenSuffix = "-pods"

// matchesFor narrows the exceptions to the workload. A Pod (or PodTemplate)
// gets one, by its name. A controller gets two, since one match cannot pair
// names with kinds: the controller by its exact name and kind; and the
// objects it creates by their names (name-*, which is how ReplicaSets, Jobs
// and pods created from it are named) and kinds. Both also select its pod
// template labels, which those objects carry. A single match with names
// [web, web-*] and the controller's kind would also cover a sibling
// controller named web-admin.
func matchesFor(o *engine.Object) []scopedMatch {
	_, name := nameGlob(o)
	own := &policyv1alpha1.ExceptionMatch{Names: []string{name}, Kinds: []policyv1alpha1.PodBearingKind{policyv1alpha1.PodBearingKind(o.Kind)}}
	k, _ := engine.KindNamed(o.Kind)
	kinds := k.Descendants()
	if len(kinds) == 0 {
		return []scopedMatch{{match: own}}
	}
	var plurals []string
	for _, k := range kinds {
		plurals = append(plurals, words.Plural(2, string(k)))
	}
	of := strings.Join(plurals, " and ")
	children := &policyv1alpha1.ExceptionMatch{Names: []string{name + "-*"}, Kinds: kinds}
	if labels := selectorLabels(o.Labels); labels != nil {
		own.Selector = &metav1.LabelSelector{MatchLabels: labels}
		children.Selector = &metav1.LabelSelector{MatchLabels: maps.Clone(labels)}
	}
	return []scopedMatch{{match: own}, {match: children, suffix: childrenSuffix, of: of}}
}

// volatileLabels are labels that change on every release or rollout of a
// workload, or differ between the objects one controller creates: a
// selector requiring them would stop matching at the next chart upgrade or
// rollout (and, for per-replica labels, match one replica only). Generated
// selectors leave them out.
var volatileLabels = map[string]bool{
	// Helm charts and the recommended labels: the release's version.
	"app.kubernetes.io/version": true,
	"helm.sh/chart":             true,
	"chart":                     true,
	// Set by controllers on what they create, per revision or per object.
	"pod-template-hash":                        true,
	"controller-revision-hash":                 true,
	"pod-template-generation":                  true,
	"statefulset.kubernetes.io/pod-name":       true,
	"apps.kubernetes.io/pod-index":             true,
	"controller-uid":                           true,
	"batch.kubernetes.io/controller-uid":       true,
	"job-name":                                 true,
	"batch.kubernetes.io/job-name":             true,
	"batch.kubernetes.io/job-completion-index": true,
}

// selectorLabels are the labels a generated selector requires: all but the
// volatile ones, or the first engine.MaxSelectorRequirements of those in
// key order when there are more than an exception's selector may hold. The
// names and kinds pin the objects either way; the labels only narrow them
// further. Nil when no label is left.
func selectorLabels(labels map[string]string) map[string]string {
	keys := slices.Sorted(maps.Keys(labels))
	keys = slices.DeleteFunc(keys, func(k string) bool { return volatileLabels[k] })
	if len(keys) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(keys), engine.MaxSelectorRequirements))
	for _, k := range keys[:min(len(keys), engine.MaxSelectorRequirements)] {
		out[k] = labels[k]
	}
	return out
}

// withSuffix appends a suffix to an object name, shortening the name first
// so that the suffix survives truncation.
func withSuffix(name, suffix string) string {
	if suffix == "" {
		return name
	}
	const maxLen = 253
	if len(name)+len(suffix) > maxLen {
		name = strings.TrimRight(name[:maxLen-len(suffix)], "-.")
	}
	return name + suffix
}

// expiry is expiresAt: Now+ExpiresIn, or the latest the policy's maxDuration
// permits when that is sooner or when the policy requires an expiry and
// none was asked for. Seconds are dropped, as RFC3339 in the API keeps none.
func expiry(p *engine.Policy, opts Options) (*time.Time, string) {
	var exp *time.Time
	if opts.ExpiresIn > 0 {
		t := opts.Now.Add(opts.ExpiresIn).UTC().Truncate(time.Second)
		exp = &t
	}
	var maxDuration *metav1.Duration
	if g := p.Guardrails(); g != nil {
		maxDuration = g.MaxDuration
	}
	if maxDuration == nil {
		return exp, ""
	}
	limit := opts.Now.Add(maxDuration.Duration).UTC().Truncate(time.Second)
	switch {
	case exp == nil:
		return &limit, ""
	case exp.After(limit):
		return &limit, fmt.Sprintf("--expires-in %s is longer than policy %q permits (maxDuration %s); expiresAt is set to %s",
			shortDuration(opts.ExpiresIn), p.Name, shortDuration(maxDuration.Duration), limit.Format(time.RFC3339))
	}
	return exp, ""
}

// exceptionNames names one exception per policy: Name when there is one and
// it is set, else <base>-<policy>, kept to a valid object name's length.
func exceptionNames[T any](workload, name string, groups []T, policy func(T) string) []string {
	out := make([]string, len(groups))
	for i, g := range groups {
		switch {
		case name != "" && len(groups) == 1:
			out[i] = name
		case name != "":
			out[i] = truncateName(name + "-" + policy(g))
		default:
			out[i] = truncateName(workload + "-" + policy(g))
		}
	}
	return out
}

func truncateName(s string) string {
	const maxLen = 253
	if len(s) <= maxLen {
		return s
	}
	return strings.TrimRight(s[:maxLen], "-.")
}

// shortDuration writes 720h for 720h0m0s, as people write durations.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
