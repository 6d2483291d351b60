package generate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
)

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
