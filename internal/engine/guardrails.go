package engine

import (
	"fmt"
	"slices"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// controlLimit is one compiled spec.exceptions.controls entry: how much an
// exception may waive of one control.
type controlLimit struct {
	values        Globs    // nil: any value
	fields        []string // nil: any field
	requireImages bool
	requireNames  bool
	pinned        bool
	// registries are allowedRegistries; nil: any registry.
	registries []registryPrefix
	// kinds are allowedContainerKinds; nil: any kind, or none set.
	kinds []policyv1alpha1.ContainerKind
}

// needsImages reports whether every entry of the control must name images,
// each with a literal part.
func (l *controlLimit) needsImages() bool { return l.requireImages || l.pinned || l.registries != nil }

func compileControlLimits(g *policyv1alpha1.ExceptionGuardrails) (map[policyv1alpha1.ControlName]*controlLimit, error) {
	if g.Controls != nil && len(g.Controls) == 0 {
		return nil, fmt.Errorf("spec.exceptions.controls: an empty list bounds nothing; remove the field, or list the controls to bound")
	}
	for i, c := range g.AllowedControls {
		if !slices.Contains(policyv1alpha1.Controls, c) {
			return nil, fmt.Errorf("spec.exceptions.allowedControls[%d]: unknown control %q; use one of %s", i, c, strings.Join(quoteAll(policyv1alpha1.Controls), ", "))
		}
	}
	limits := map[policyv1alpha1.ControlName]*controlLimit{}
	for i := range g.Controls {
		c := &g.Controls[i]
		path := fmt.Sprintf("spec.exceptions.controls[%d]", i)
		if limits[c.ControlName] != nil {
			return nil, fmt.Errorf("%s.controlName: control %q is listed twice; merge the two entries", path, c.ControlName)
		}
		l, err := compileControlLimit(g, c, path)
		if err != nil {
			return nil, err
		}
		limits[c.ControlName] = l
	}
	return limits, nil
}

// compileControlLimit compiles one spec.exceptions.controls entry, at path.
func compileControlLimit(g *policyv1alpha1.ExceptionGuardrails, c *policyv1alpha1.ControlGuardrail, path string) (*controlLimit, error) {
	control := c.ControlName
	switch {
	case !slices.Contains(policyv1alpha1.Controls, control):
		return nil, fmt.Errorf("%s.controlName: unknown control %q; use one of %s", path, control, strings.Join(quoteAll(policyv1alpha1.Controls), ", "))
	case g.AllowedControls != nil && !slices.Contains(g.AllowedControls, c.ControlName):
		return nil, fmt.Errorf("%s.controlName: %q is not in spec.exceptions.allowedControls, which no exception may go beyond; add it there or remove this entry", path, control)
	case c.AllowedValues != nil && len(c.AllowedValues) == 0:
		return nil, fmt.Errorf("%s.allowedValues: an empty list would allow no value; remove the control from allowedControls to allow none, or remove the field to allow any", path)
	case c.AllowedFields != nil && len(c.AllowedFields) == 0:
		return nil, fmt.Errorf("%s.allowedFields: an empty list would allow no field; remove the control from allowedControls to allow none, or remove the field to allow any", path)
	case control == policyv1alpha1.ControlVolumeTypes && c.AllowedValues != nil:
		return nil, fmt.Errorf("%s.allowedValues: the values of Volume Types are volume names, which the workload chooses, so they bound nothing; "+
			"bound the volume types with allowedFields, for example spec.volumes[*].nfs", path)
	}
	for j, f := range c.AllowedFields {
		if !slices.Contains(FieldsOf(control), f) {
			return nil, fmt.Errorf("%s.allowedFields[%d]: %q is not a field of control %q; use one of %s", path, j, f, control, strings.Join(FieldsOf(control), ", "))
		}
	}
	l := &controlLimit{
		fields:        slices.Clone(c.AllowedFields),
		requireImages: c.RequireImages != nil && *c.RequireImages,
		requireNames:  c.RequireContainerNames != nil && *c.RequireContainerNames,
		pinned:        c.RequirePinnedRegistry != nil && *c.RequirePinnedRegistry,
	}
	if PodLevelOnly(control) && (l.requireImages || l.requireNames || l.pinned || c.AllowedRegistries != nil || c.AllowedContainerKinds != nil) {
		return nil, fmt.Errorf("%s: control %q has only pod-level fields, so no entry of it can name images, containers or container kinds; "+
			"remove requireImages, requireContainerNames, requirePinnedRegistry, allowedRegistries and allowedContainerKinds", path, control)
	}
	if err := l.compileRegistries(c.AllowedRegistries, path); err != nil {
		return nil, err
	}
	if err := l.compileKinds(c.AllowedContainerKinds, path); err != nil {
		return nil, err
	}
	values, err := CompileGlobs(c.AllowedValues)
	if err != nil {
		return nil, fmt.Errorf("%s.allowedValues%w", path, err)
	}
	l.values = values
	return l, nil
}

// compileRegistries compiles allowedRegistries (nil: any registry).
func (l *controlLimit) compileRegistries(registries []string, path string) error {
	if registries == nil {
		return nil
	}
	if len(registries) == 0 {
		return fmt.Errorf("%s.allowedRegistries: an empty list would allow no image; remove the control from allowedControls to allow none, or remove the field to allow any registry", path)
	}
	l.registries = make([]registryPrefix, 0, len(registries))
	for j, r := range registries {
		prefix, err := parseRegistryPrefix(r)
		if err != nil {
			return fmt.Errorf("%s.allowedRegistries[%d]: %w", path, j, err)
		}
		l.registries = append(l.registries, prefix)
	}
	return nil
}

// compileKinds checks allowedContainerKinds (nil: any kind) and keeps each
// once.
func (l *controlLimit) compileKinds(kinds []policyv1alpha1.ContainerKind, path string) error {
	if kinds == nil {
		return nil
	}
	if len(kinds) == 0 {
		return fmt.Errorf("%s.allowedContainerKinds: an empty list would allow no container; remove the control from allowedControls to allow none, or remove the field to allow every kind", path)
	}
	for j, k := range kinds {
		if !slices.Contains(policyv1alpha1.ContainerKinds, k) {
			return fmt.Errorf("%s.allowedContainerKinds[%d]: unknown kind %q; use Init, Sidecar, App or Ephemeral", path, j, k)
		}
		if !slices.Contains(l.kinds, k) {
			l.kinds = append(l.kinds, k)
		}
	}
	return nil
}

// permitMemo remembers what the entry guardrails of a few compiled policies
// said about an exception. Policies and exceptions are immutable once
// compiled, so the answer for one pair never changes.
type permitMemo struct {
	policy *Policy
	err    error
}

// permittedEntries checks the exception's entries against the policy's
// allowedControls and per-control limits, remembering the answer.
func (e *Exception) permittedEntries(p *Policy) error {
	memo := e.permitted.Load()
	if memo != nil {
		for _, m := range *memo {
			if m.policy == p {
				return m.err
			}
		}
	}
	err := e.judgeEntries(p)
	var next []permitMemo
	if memo != nil {
		// A few slots: an exception names at most a few policies, and a
		// recompiled policy is a new pointer that replaces the oldest.
		next = append(next, (*memo)[max(0, len(*memo)-3):]...)
	}
	next = append(next, permitMemo{policy: p, err: err})
	e.permitted.Store(&next)
	return err
}

func (e *Exception) judgeEntries(p *Policy) error {
	g := p.guardrails
	if e.WholeRule {
		if g.AllowedControls != nil || len(p.limits) > 0 {
			return fmt.Errorf("policy %q allows exceptions only for controls %s; spec.podSecurity is empty, which waives every control: list the controls to waive",
				p.Name, p.allowedControlsOrBounded())
		}
		return nil
	}
	for i := range e.Exclusions {
		x := &e.Exclusions[i]
		if g.AllowedControls != nil && !p.AllowsControl(x.control) {
			if len(g.AllowedControls) == 0 {
				return fmt.Errorf("policy %q allows exceptions for no control (spec.exceptions.allowedControls is empty); remove control %q from spec.podSecurity", p.Name, x.control)
			}
			return fmt.Errorf("policy %q allows exceptions only for controls %s; remove control %q from spec.podSecurity",
				p.Name, p.allowedControls(), x.control)
		}
		l := p.limits[x.control]
		if l == nil {
			continue
		}
		j := entryJudge{p: p, l: l, x: x, path: fmt.Sprintf("spec.podSecurity[%d]", i)}
		for _, judge := range []func() error{j.fields, j.values, j.images, j.kinds, j.names} {
			if err := judge(); err != nil {
				return err
			}
		}
	}
	return nil
}

// entryJudge judges one entry of an exception, at path, against the
// policy's limits for its control, one part at a time, in the order a
// developer reads the entry.
type entryJudge struct {
	p    *Policy
	l    *controlLimit
	x    *Exclusion
	path string
}

func (j entryJudge) fields() error {
	l, x, path := j.l, j.x, j.path
	if l.fields == nil || slices.Contains(l.fields, x.field) {
		return nil
	}
	if x.field == "" {
		return fmt.Errorf("%s: policy %q allows exceptions for control %q only for the fields %s (spec.exceptions.controls); "+
			"this entry has no restrictedField, so it would waive every field: set %s.restrictedField",
			path, j.p.Name, x.control, strings.Join(l.fields, ", "), path)
	}
	return fmt.Errorf("%s.restrictedField: %s is not among the fields policy %q allows for control %q: %s",
		path, x.field, j.p.Name, x.control, strings.Join(l.fields, ", "))
}

func (j entryJudge) values() error {
	l, x, path := j.l, j.x, j.path
	if l.values == nil {
		return nil
	}
	if !x.hasValues {
		return fmt.Errorf("%s: policy %q allows exceptions for control %q only for the values %s (spec.exceptions.controls); "+
			"this entry has no values, so it would waive any value: set restrictedField and list the values to waive",
			path, j.p.Name, x.control, strings.Join(quoteAll(l.values.Patterns()), ", "))
	}
	for k, v := range x.values.Patterns() {
		if !within(v, l.values) {
			return fmt.Errorf("%s.values[%d]: %q is not within the values policy %q allows for control %q: %s "+
				"(a value is within when one of them matches it, or a glob is written exactly as one of them)",
				path, k, v, j.p.Name, x.control, strings.Join(quoteAll(l.values.Patterns()), ", "))
		}
	}
	return nil
}

func (j entryJudge) images() error {
	l, x, path, p := j.l, j.x, j.path, j.p
	if l.needsImages() && len(x.images) == 0 {
		return fmt.Errorf("%s: policy %q requires exceptions for control %q to name images (spec.exceptions.controls): set %s.images, for example [%q]",
			path, p.Name, x.control, path, l.exampleImage())
	}
	if l.needsImages() {
		for k, img := range x.images.Patterns() {
			if !ImageGlobHasLiteralPart(img) {
				return fmt.Errorf("%s.images[%d]: %q matches any image (it writes out no registry host and no whole repository path segment), "+
					"and policy %q requires exceptions for control %q to name images: name them, for example %s",
					path, k, img, p.Name, x.control, l.exampleImage())
			}
		}
	}
	if l.pinned {
		for k, img := range x.images.Patterns() {
			if !PinnedRegistry(img) {
				return fmt.Errorf("%s.images[%d]: %q does not pin its registry, and policy %q requires a literal registry host for control %q (spec.exceptions.controls): "+
					"start the glob with the registry, for example docker.io/istio/proxyv2:*", path, k, img, p.Name, x.control)
			}
		}
	}
	if l.registries != nil {
		for k, img := range x.images.Patterns() {
			if !imageGlobWithin(img, l.registries) {
				return fmt.Errorf("%s.images[%d]: %q %s, and policy %q allows images for control %q only from %s (spec.exceptions.controls[].allowedRegistries): "+
					"start the glob with one of them and \"/\", for example %s",
					path, k, img, outsideWhy(img), p.Name, x.control, strings.Join(quoteAll(registryNames(l.registries)), ", "), l.exampleImage())
			}
		}
	}
	return nil
}

func (j entryJudge) kinds() error {
	l, x, path := j.l, j.x, j.path
	if l.kinds == nil {
		return nil
	}
	if len(x.kinds) == 0 {
		return fmt.Errorf("%s: policy %q allows exceptions for control %q only for containers of kinds %s (spec.exceptions.controls[].allowedContainerKinds); "+
			"this entry has no containerKinds, so it would cover every kind (a native sidecar is an init container too): set %s.containerKinds: [%s]",
			path, j.p.Name, x.control, strings.Join(quoteAll(l.kinds), ", "), path, kindList(l.kinds))
	}
	for k, kind := range x.kinds {
		if !slices.Contains(l.kinds, kind) {
			return fmt.Errorf("%s.containerKinds[%d]: %s is not among the kinds of container policy %q allows for control %q: %s; remove it",
				path, k, kind, j.p.Name, x.control, strings.Join(quoteAll(l.kinds), ", "))
		}
	}
	return nil
}

func (j entryJudge) names() error {
	l, x, path := j.l, j.x, j.path
	if !l.requireNames {
		return nil
	}
	if len(x.names) == 0 {
		return fmt.Errorf("%s: policy %q requires exceptions for control %q to name containers (spec.exceptions.controls): set %s.containerNames, for example [\"istio-init\"]",
			path, j.p.Name, x.control, path)
	}
	for k, n := range x.names.Patterns() {
		if wildcardOnly(n) {
			return fmt.Errorf("%s.containerNames[%d]: %q matches any container, and policy %q requires exceptions for control %q to name containers: name them, for example istio-init",
				path, k, n, j.p.Name, x.control)
		}
	}
	return nil
}

// allowedControlsOrBounded names the controls an exception may waive, for
// the refusal of a whole-rule waiver.
func (p *Policy) allowedControlsOrBounded() string {
	if p.guardrails.AllowedControls != nil {
		return p.allowedControls()
	}
	bounded := make([]policyv1alpha1.ControlName, 0, len(p.limits))
	for _, c := range policyv1alpha1.Controls {
		if p.limits[c] != nil {
			bounded = append(bounded, c)
		}
	}
	return "within the limits of spec.exceptions.controls (" + strings.Join(quoteAll(bounded), ", ") + ")"
}

// wildcardOnly reports whether a container name glob has no literal part:
// it matches any name ("*", "?*").
func wildcardOnly(glob string) bool { return strings.Trim(glob, "*?/") == "" }

// exampleImage is an image glob to suggest for the control: under its first
// allowed registry, when it has allowedRegistries.
func (l *controlLimit) exampleImage() string {
	if len(l.registries) == 0 {
		return "docker.io/istio/proxyv2"
	}
	r := l.registries[0]
	if r.path == "" {
		return r.raw + "/<repository>:*"
	}
	return r.raw + "/<image>:*"
}

// outsideWhy says why an image glob is not within allowedRegistries.
func outsideWhy(glob string) string {
	host, _, ok := normalizedImageGlob(glob)
	switch {
	case !ok:
		return "has a wildcard in its registry host, so it matches images on any registry"
	case host == dockerHub && !strings.HasPrefix(glob, dockerHub+"/") && !strings.HasPrefix(glob, legacyDockerHub+"/"):
		return "is an image on docker.io (as the runtime reads a name without a registry host), not under a registry the policy allows"
	default:
		return "can match images outside the registries and path prefixes the policy allows"
	}
}

func registryNames(rs []registryPrefix) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.raw
	}
	return out
}

func kindList(kinds []policyv1alpha1.ContainerKind) string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return strings.Join(out, ", ")
}

// within reports whether an entry's value glob v waives nothing beyond the
// allowed globs: a literal (no * or ?) that one of them matches, or a glob
// written exactly as one of them. Anything else is refused, even a glob
// that is in fact narrower: that is undecidable at a glance, and the rule
// has to be obvious to the developer who reads the refusal.
func within(v string, allowed Globs) bool {
	if !strings.ContainsAny(v, "*?") {
		return allowed.Match(v)
	}
	return slices.Contains(allowed.Patterns(), v)
}

// PinnedRegistry reports whether an image glob starts with a literal
// registry host: a "/" follows its first segment, which has no wildcard and
// is a host (it holds a "." or a ":", or is localhost), as the container
// runtime reads a reference. docker.io/istio/proxyv2:* is pinned;
// */istio/proxyv2*, istio/proxyv2:* and **/proxyv2 are not.
func PinnedRegistry(glob string) bool {
	host, rest, ok := strings.Cut(glob, "/")
	if !ok || rest == "" || strings.ContainsAny(host, "*?") {
		return false
	}
	return strings.ContainsAny(host, ".:") || host == "localhost"
}

// wildcardRegistry reports whether an image glob matches its path on any
// registry: its first segment holds a wildcard.
func wildcardRegistry(glob string) bool {
	host, _, ok := strings.Cut(glob, "/")
	if !ok {
		// One segment: only "**" (or "*" alone, which matches everything)
		// reaches past it.
		return glob == "*" || strings.Contains(glob, "**")
	}
	return strings.ContainsAny(host, "*?")
}

// hostOrPathFields are the fields whose values are hosts or paths, where a
// "*" matches more than it seems to.
var hostOrPathFields = func() map[string]bool {
	m := map[string]bool{fHostPathVolume: true}
	for _, f := range fieldsByControl[policyv1alpha1.ControlHostProbesLifecycle] {
		m[f] = true
	}
	return m
}()

// ExclusionWarnings are the admission warnings for an entry that is easy to
// spoof or broader than it looks: an image glob with a wildcard registry, an
// entry that selects containers by name only, a value glob with a wildcard
// on a host or path field. They do not refuse anything: an admin may mean
// it; the warning makes sure they read it. path is where the entry sits.
func ExclusionWarnings(e policyv1alpha1.PodSecurityExclusion, path string) []string {
	var out []string
	for i, img := range e.Images {
		if wildcardRegistry(img) {
			out = append(out, fmt.Sprintf("%s.images[%d] %q matches its path on any registry, including one an attacker can push to: "+
				"pin the registry, for example docker.io/istio/proxyv2:*", path, i, img))
		}
	}
	if len(e.ContainerNames) > 0 && len(e.Images) == 0 && !PodLevelOnly(e.ControlName) {
		out = append(out, fmt.Sprintf("%s selects containers by name only: any image can run under the names %s; add images to pin what runs",
			path, strings.Join(quoteAll(e.ContainerNames), ", ")))
	}
	if e.RestrictedField == fHostPathVolume {
		for i, v := range e.Values {
			if s := crossSlash(v); s != "" {
				out = append(out, fmt.Sprintf("%s.values[%d] %q: * does not cross \"/\", so it matches no path below %s; write %q for the paths below it",
					path, i, v, strings.TrimSuffix(strings.TrimSuffix(v, "*"), "/"), s))
			}
		}
	}
	if hostOrPathFields[e.RestrictedField] {
		for i, v := range e.Values {
			if strings.ContainsAny(v, "*?") {
				out = append(out, fmt.Sprintf("%s.values[%d] %q is a glob on %s: a wildcard in a host or path matches more than it seems "+
					"(10.0.0.* also matches 10.0.0.metadata.attacker.example); list exact values", path, i, v, e.RestrictedField))
			}
		}
	}
	return out
}

// PolicyWarnings are the admission warnings for a SecurityPolicy: every
// exclusion entry's, and guardrails that let exceptions waive any control.
func PolicyWarnings(sp *policyv1alpha1.SecurityPolicy) []string {
	var out []string
	for i, r := range sp.Spec.Rules {
		for j, e := range r.PodSecurity.Exclude {
			out = append(out, ExclusionWarnings(e, fmt.Sprintf("spec.rules[%d].podSecurity.exclude[%d]", i, j))...)
		}
	}
	for i, r := range sp.Spec.Rules {
		if r.Exclude == nil {
			continue
		}
		for j, u := range r.Exclude.Usernames {
			if strings.HasPrefix(u, "system:serviceaccount:kube-system:") || strings.HasPrefix(u, "system:node:") || u == "system:kube-controller-manager" {
				out = append(out, fmt.Sprintf("spec.rules[%d].exclude.usernames[%d] %q is a controller's or a node's user: it creates pods for others, so every pod it creates (for anyone who may create a Deployment, Job or DaemonSet) is exempt; name the users who create the exempt pods themselves", i, j, u))
			}
		}
	}
	if g := sp.Spec.Exceptions; g != nil && (g.Allow == nil || *g.Allow) && g.AllowedControls == nil {
		out = append(out, "spec.exceptions has no allowedControls: a PolicyException may waive any control, or a whole rule; list the controls developers may waive")
	}
	if g := sp.Spec.Exceptions; g != nil {
		for i, c := range g.Controls {
			if c.RequirePinnedRegistry != nil && *c.RequirePinnedRegistry && c.AllowedRegistries == nil {
				out = append(out, fmt.Sprintf("spec.exceptions.controls[%d] (%s) has requirePinnedRegistry but no allowedRegistries: an exception must write a registry host, "+
					"but any host, including one its author pushes to; list the registries exceptions may use in allowedRegistries", i, c.ControlName))
			}
		}
	}
	return out
}

// ExceptionWarnings are the admission warnings for a PolicyException's
// entries.
func ExceptionWarnings(pe *policyv1alpha1.PolicyException) []string {
	var out []string
	for i, e := range pe.Spec.PodSecurity {
		out = append(out, ExclusionWarnings(e, fmt.Sprintf("spec.podSecurity[%d]", i))...)
	}
	return out
}

// WaiverControl is the control an entry must name to waive a finding: its
// own, except that a hostPath volume is waived only by a HostPath Volumes
// entry, at every level. Restricted's volume check reports it under Volume
// Types too, and an exception allowed Volume Types (for, say, an NFS
// volume) must not reach the node's filesystem through it.
func WaiverControl(f *Finding) policyv1alpha1.ControlName {
	if f.Field == fHostPathVolume {
		return policyv1alpha1.ControlHostPathVolumes
	}
	return f.Control
}

// Waivable reports whether an exception the policy's guardrails permit could
// waive a finding: its control is allowed and, where spec.exceptions.controls
// bounds the values, the finding has values and each is matched by an allowed
// glob; where it bounds the kinds of container, the finding is in a
// container of one of them; where it bounds the registries, the finding's
// image is in one of them. A missing setting has no value, so a
// value-bounded control cannot waive it. It does not say whether the policy
// honours exceptions at all (PermitsAny).
func (p *Policy) Waivable(f *Finding) bool {
	return p.AllowsControl(WaiverControl(f)) && p.limitRefusing(f) == ""
}

// limitRefusing says which of its control's per-control guardrails
// (spec.exceptions.controls) no exception could meet for a finding, as the
// end of "allows PolicyExceptions for <control> only ...": "for the fields
// ...", "for containers of kind ...", "for images under ...", "for the values
// ...". "" when they permit an entry for it, or set none.
func (p *Policy) limitRefusing(f *Finding) string {
	l := p.limits[WaiverControl(f)]
	switch {
	case l == nil:
		return ""
	case l.fields != nil && !slices.Contains(l.fields, f.Field):
		return "for the fields " + strings.Join(l.fields, ", ")
	case l.kinds != nil && !slices.Contains(l.kinds, f.Kind()):
		kinds := make([]string, len(l.kinds))
		for i, k := range l.kinds {
			kinds[i] = string(k)
		}
		return "for containers of kind " + strings.Join(kinds, ", ")
	case l.registries != nil && (f.Scope != ScopeContainer || !imageWithin(f.Image, l.registries)):
		registries := make([]string, len(l.registries))
		for i, r := range l.registries {
			registries[i] = r.raw
		}
		return "for images under " + strings.Join(registries, ", ")
	case l.values == nil:
		return ""
	case len(f.Values) == 0 || slices.ContainsFunc(f.Values, func(v string) bool { return !l.values.Match(v) }):
		return "for the values " + strings.Join(l.values.Patterns(), ", ")
	}
	return ""
}
