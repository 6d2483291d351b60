package engine

import (
	"fmt"
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// Attribution mirrors each upstream check in a file of its own,
// check_<id>.go, named like upstream's policy/check_<id>.go. Each file
// declares the check's ID and registers, once, the control it implements and
// the function that attributes its failures; adding a check touches that one
// file (and fields.go for any new field path).

// attribution is what podsieve knows about one upstream check.
type attribution struct {
	// control is the Pod Security Standards control the check implements;
	// several checks (a baseline one and the restricted one that overrides
	// it) share a control.
	control policyv1alpha1.ControlName
	// revisions are the MinimumVersions of the upstream revisions attribute
	// mirrors, oldest first. TestUpstreamChecksKnown fails when upstream's
	// differ, so an upgrade that adds a revision is noticed.
	revisions []api.Version
	// attribute finds the violations; see attributeFunc.
	attribute attributeFunc
}

// attributeFunc appends to a.out the violations of one check at policy
// version v, as findings, and returns a.out; it returns nil when the check
// does not apply at v. a is passed by value because a pointer passed through
// a func value escapes to the heap, and attribution must not allocate more
// than its result.
type attributeFunc func(a attributor, v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding

// attributions holds one entry per upstream check, each added by the
// check_<id>.go file that mirrors it, in an init function (as upstream's
// check files call addCheck). defaultRegistry is built on first use, after
// every init function, so it always sees the whole table. Nothing writes it
// afterwards, so reads need no lock.
var attributions = map[policy.CheckID]attribution{}

// addAttribution registers a check's attribution. It panics, at start-up, on
// an incomplete or repeated entry.
func addAttribution(id policy.CheckID, at attribution) {
	switch {
	case id == "" || at.control == "" || at.attribute == nil || len(at.revisions) == 0:
		panic(fmt.Sprintf("attribution of check %q is incomplete", id))
	case !slices.Contains(policyv1alpha1.Controls, at.control):
		panic(fmt.Sprintf("attribution of check %q names unknown control %q", id, at.control))
	}
	if _, dup := attributions[id]; dup {
		panic(fmt.Sprintf("check %q is attributed twice", id))
	}
	attributions[id] = at
}

// controlOf maps an upstream check to the Pod Security Standards control it
// implements. It returns "" for an unknown check.
func controlOf(id policy.CheckID) policyv1alpha1.ControlName {
	return attributions[id].control
}

// appendAttribution explains why upstream check id, in the revision that
// applies at policy version v, rejected the pod: it appends to out one
// finding per offending field (and container), carrying the offending values,
// none covered yet. Upstream reports only a prose message, which cannot be
// matched against exclusions, so each check's logic is mirrored here revision
// by revision; the fixture and fuzz tests hold the two to "upstream fails ⇔
// appendAttribution appends something".
//
// Where upstream reports one class of failure only when another is absent
// (seccompProfile_restricted and runAsNonRoot mention unset containers only
// when nothing is explicitly wrong), attribution reports both: excluding the
// explicit failure must not let the implicit one through unnoticed.
//
// It appends nothing when the check is unknown, does not apply at v or
// passes. Violations are ordered pod-level first, then by container in
// upstream's visiting order (initContainers, containers, ephemeralContainers).
// Attribution appends to the rule's findings rather than to a slice of its
// own: a check fails every container of a pod of thousands, and copying its
// violations into findings cost as much as finding them.
func appendAttribution(out []Finding, id policy.CheckID, v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []Finding {
	at, ok := attributions[id]
	if spec == nil || !ok {
		return out
	}
	if got := at.attribute(attributor{control: at.control, id: string(id), out: out}, v, meta, spec); got != nil {
		return got
	}
	return out
}

// since reports whether policy version v includes changes made in v1.minor,
// using upstream's own ordering so that "latest" and unusual versions compare
// exactly as they do when upstream picks a VersionedCheck.
func since(v api.Version, minor int) bool {
	return !v.Older(api.MajorMinorVersion(1, minor))
}

// windowsExempt mirrors the v1.25 revisions of the Linux-only restricted
// checks, which pass every pod that declares spec.os.name=windows.
func windowsExempt(v api.Version, spec *corev1.PodSpec) bool {
	return since(v, 25) && spec.OS != nil && spec.OS.Name == corev1.Windows
}

// userNamespaceExempt mirrors the v1.35 revisions of the checks that pass
// pods in a user namespace (hostUsers: false).
func userNamespaceExempt(v api.Version, spec *corev1.PodSpec) bool {
	return since(v, 35) && spec.HostUsers != nil && !*spec.HostUsers
}

// containers yields every container the way upstream's visitContainers does,
// plus the list each one came from, which upstream does not need but field
// paths do.
func containers(spec *corev1.PodSpec) iter.Seq2[ctrKind, *corev1.Container] {
	return func(yield func(ctrKind, *corev1.Container) bool) {
		for i := range spec.InitContainers {
			if !yield(kindInit, &spec.InitContainers[i]) {
				return
			}
		}
		for i := range spec.Containers {
			if !yield(kindRegular, &spec.Containers[i]) {
				return
			}
		}
		for i := range spec.EphemeralContainers {
			if !yield(kindEphemeral, (*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon)) {
				return
			}
		}
	}
}

// attributor accumulates the violations of one check, after those of the
// checks before it.
type attributor struct {
	control policyv1alpha1.ControlName
	id      string
	out     []Finding
}

func (a *attributor) pod(field string, values []string) {
	a.out = append(a.out, Finding{Violation: Violation{
		Control: a.control,
		CheckID: a.id,
		Scope:   ScopePod,
		Field:   field,
		Values:  values,
	}})
}

func (a *attributor) ctr(k ctrKind, c *corev1.Container, field ctrField, values []string) {
	a.ctrPath(k, c, field[k], values)
}

// ctrPath is ctr for a container's violation of a field outside the container
// lists, such as a per-container annotation.
func (a *attributor) ctrPath(k ctrKind, c *corev1.Container, field string, values []string) {
	a.out = append(a.out, Finding{Violation: Violation{
		Control:       a.control,
		CheckID:       a.id,
		Scope:         ScopeContainer,
		Container:     c.Name,
		ContainerType: kindTypes[k],
		Sidecar:       isSidecar(k, c),
		Image:         c.Image,
		Field:         field,
		Values:        values,
	}})
}

// missing is the Values of a required setting that is absent. It is empty
// rather than nil so that JSON renders "values": [] consistently, and costs no
// allocation.
func missing() []string { return []string{} }

// uniqueValues collects a violation's values in spec order without
// repeats. A pod-only user controls how long the lists are (the API server
// checks neither capability names nor how many there are), so the cost must
// stay linear: short lists, the usual ones, are scanned and allocate only
// their slice; past uniqueScan values, a set takes over.
type uniqueValues struct {
	values []string
	seen   map[string]struct{}
	// most is how many values there can be (the length of the list they
	// come from), or 0 when unknown: the set is sized for them once rather
	// than grown, which cost as much again on the longest lists.
	most int
}

// uniqueScan is the longest list that is scanned rather than indexed.
const uniqueScan = 16

func (u *uniqueValues) add(s string) {
	if u.seen == nil {
		if len(u.values) < uniqueScan {
			if !slices.Contains(u.values, s) {
				u.values = append(u.values, s)
			}
			return
		}
		u.seen = make(map[string]struct{}, max(2*len(u.values), u.most))
		for _, v := range u.values {
			u.seen[v] = struct{}{}
		}
	}
	// One hash of s, not a lookup and then an insertion.
	n := len(u.seen)
	u.seen[s] = struct{}{}
	if len(u.seen) > n {
		u.values = append(u.values, s)
	}
}

const valueTrue = "true"

// isSidecar reports whether a container is a native sidecar: an init
// container with restartPolicy: Always, which runs for the pod's life.
func isSidecar(k ctrKind, c *corev1.Container) bool {
	return k == kindInit && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}
