package engine

import policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"

// Scope says whether a violation belongs to the pod as a whole or to one container.
type Scope string

const (
	// ScopePod marks a violation of a pod-level field (spec.hostNetwork, spec.volumes, ...).
	ScopePod Scope = "pod"
	// ScopeContainer marks a violation of one container's field.
	ScopeContainer Scope = "container"
)

// ContainerType names the pod spec list a container belongs to, as it is
// spelled in field paths.
type ContainerType string

const (
	// Containers is spec.containers.
	Containers ContainerType = "containers"
	// InitContainers is spec.initContainers, native sidecars included.
	InitContainers ContainerType = "initContainers"
	// EphemeralContainers is spec.ephemeralContainers.
	EphemeralContainers ContainerType = "ephemeralContainers"
)

// Violation is one failing PSS check attributed to a scope, a field and the
// offending values. Field paths are pod-relative and written with [*] for list
// indices (spec.initContainers[*].securityContext.capabilities.add), which is
// also how exclusions name them.
type Violation struct {
	// Control is the PSS control name (Capabilities, HostPath Volumes, ...).
	Control policyv1alpha1.ControlName `json:"control"`
	// CheckID is the upstream pod-security-admission check that failed.
	CheckID string `json:"check"`
	// Scope is pod or container.
	Scope Scope `json:"scope"`
	// Container is the container's name when Scope is container.
	Container string `json:"container,omitempty"`
	// ContainerType is the list the container is in when Scope is container.
	ContainerType ContainerType `json:"containerType,omitempty"`
	// Sidecar is set for an init container with restartPolicy: Always,
	// which runs for the pod's life (a native sidecar).
	Sidecar bool `json:"sidecar,omitempty"`
	// Image is the container's image as written, when Scope is container.
	Image string `json:"image,omitempty"`
	// Field is the offending field, pod-relative, with [*] for list indices.
	Field string `json:"field"`
	// Values are the offending values of Field. Empty when the violation is a
	// required setting that is missing (runAsNonRoot unset, drop lacks ALL).
	Values []string `json:"values"`
}

// Kind is the kind of container the violation is in ("" for a pod-level
// one), as containerKinds names it.
func (v *Violation) Kind() policyv1alpha1.ContainerKind {
	if v.Scope != ScopeContainer {
		return ""
	}
	switch {
	case v.ContainerType == InitContainers && v.Sidecar:
		return policyv1alpha1.ContainerKindSidecar
	case v.ContainerType == InitContainers:
		return policyv1alpha1.ContainerKindInit
	case v.ContainerType == EphemeralContainers:
		return policyv1alpha1.ContainerKindEphemeral
	case v.ContainerType == Containers:
		return policyv1alpha1.ContainerKindApp
	}
	// An annotation for a container the pod does not have: no kind, so
	// that no entry limited to kinds covers it.
	return ""
}
