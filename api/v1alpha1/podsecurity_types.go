package v1alpha1

// PodSecurityLevel is a Pod Security Standards profile.
// +kubebuilder:validation:Enum=privileged;baseline;restricted
type PodSecurityLevel string

const (
	// LevelPrivileged enforces nothing.
	LevelPrivileged PodSecurityLevel = "privileged"
	// LevelBaseline prevents known privilege escalations.
	LevelBaseline PodSecurityLevel = "baseline"
	// LevelRestricted follows current pod hardening best practice.
	LevelRestricted PodSecurityLevel = "restricted"
)

// VersionLatest selects the newest Pod Security Standards version podsieve knows.
const VersionLatest = "latest"

// ControlName is the name of a Pod Security Standards control, as written in
// the Kubernetes documentation.
// +kubebuilder:validation:Enum=HostProcess;"Host Namespaces";"Privileged Containers";Capabilities;"HostPath Volumes";"Host Ports";"Host Probes / Lifecycle Hooks";AppArmor;SELinux;"/proc Mount Type";Seccomp;Sysctls;"Volume Types";"Privilege Escalation";"Running as Non-root";"Running as Non-root user"
type ControlName string

// The controls of the Pod Security Standards, each named as the Kubernetes
// documentation names it; Controls lists them in its order.
const (
	ControlHostProcess          ControlName = "HostProcess"
	ControlHostNamespaces       ControlName = "Host Namespaces"
	ControlPrivilegedContainers ControlName = "Privileged Containers"
	ControlCapabilities         ControlName = "Capabilities"
	ControlHostPathVolumes      ControlName = "HostPath Volumes"
	ControlHostPorts            ControlName = "Host Ports"
	ControlHostProbesLifecycle  ControlName = "Host Probes / Lifecycle Hooks"
	ControlAppArmor             ControlName = "AppArmor"
	ControlSELinux              ControlName = "SELinux"
	ControlProcMountType        ControlName = "/proc Mount Type"
	ControlSeccomp              ControlName = "Seccomp"
	ControlSysctls              ControlName = "Sysctls"
	ControlVolumeTypes          ControlName = "Volume Types"
	ControlPrivilegeEscalation  ControlName = "Privilege Escalation"
	ControlRunningAsNonRoot     ControlName = "Running as Non-root"
	ControlRunningAsNonRootUser ControlName = "Running as Non-root user"
)

// Controls lists every control, in the order of the Pod Security Standards
// document (baseline first, then restricted). It is the one list of control
// names: the engine, the converters and every output format read it.
var Controls = []ControlName{
	ControlHostProcess,
	ControlHostNamespaces,
	ControlPrivilegedContainers,
	ControlCapabilities,
	ControlHostPathVolumes,
	ControlHostPorts,
	ControlHostProbesLifecycle,
	ControlAppArmor,
	ControlSELinux,
	ControlProcMountType,
	ControlSeccomp,
	ControlSysctls,
	ControlVolumeTypes,
	ControlPrivilegeEscalation,
	ControlRunningAsNonRoot,
	ControlRunningAsNonRootUser,
}

// PodSecurity selects the Pod Security Standards profile a rule enforces and
// the violations it tolerates.
type PodSecurity struct {
	// level is the Pod Security Standards profile to enforce: privileged
	// (nothing), baseline or restricted.
	// +required
	Level PodSecurityLevel `json:"level"`

	// version pins the profile to the checks of one Kubernetes minor version,
	// "v1.N", or follows the newest with "latest". Pinning keeps checks added in
	// later versions from refusing pods that were valid when the policy was written.
	// +optional
	// +default="latest"
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="self == 'latest' || self.matches('^v1\\\\.(0|[1-9][0-9]?)$')",message="version must be \"latest\" or \"v1.N\", for example \"v1.30\""
	Version string `json:"version,omitempty"`

	// exclude lists the violations this rule tolerates everywhere it applies.
	// Each entry is as narrow as the fields it sets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Exclude []PodSecurityExclusion `json:"exclude,omitempty"`
}

// ContainerKind is a kind of container, for PodSecurityExclusion.containerKinds.
// +kubebuilder:validation:Enum=Init;Sidecar;App;Ephemeral
type ContainerKind string

// The kinds of container.
const (
	// ContainerKindInit is an init container that runs to completion.
	ContainerKindInit ContainerKind = "Init"
	// ContainerKindSidecar is an init container with restartPolicy: Always.
	ContainerKindSidecar ContainerKind = "Sidecar"
	// ContainerKindApp is a container of spec.containers.
	ContainerKindApp ContainerKind = "App"
	// ContainerKindEphemeral is an ephemeral container.
	ContainerKindEphemeral ContainerKind = "Ephemeral"
)

// ContainerKinds are the kinds, in the order messages list them.
var ContainerKinds = []ContainerKind{ContainerKindInit, ContainerKindSidecar, ContainerKindApp, ContainerKindEphemeral}

// PodSecurityExclusion tolerates the violations of one control, optionally
// only for some containers or images, one field and some values. A violation
// is covered when every field the entry sets matches it.
// +kubebuilder:validation:XValidation:rule="!has(self.values) || has(self.restrictedField)",message="values requires restrictedField: name the field whose values are listed, for example spec.initContainers[*].securityContext.capabilities.add"
// +kubebuilder:validation:XValidation:rule="!(self.controlName in ['Host Namespaces', 'HostPath Volumes', 'Sysctls', 'Volume Types']) || (!has(self.images) && !has(self.containerNames) && !has(self.containerKinds))",messageExpression="'images, containerNames and containerKinds select containers, but control \"' + self.controlName + '\" has only pod-level fields; remove them from this entry'"
type PodSecurityExclusion struct {
	// controlName is the Pod Security Standards control whose violations this
	// entry tolerates, for example "Capabilities".
	// +required
	ControlName ControlName `json:"controlName"`

	// images limits the entry to containers whose image matches one of these
	// globs. An image is matched as written and in its normalized form
	// (nginx:1.25 is also docker.io/library/nginx:1.25). "*" matches within one
	// path segment, "**" across segments, "?" one character.
	// An image glob should pin its registry (docker.io/istio/proxyv2:*, not
	// */istio/proxyv2*): a wildcard registry matches the same path on any
	// registry, including one an attacker controls.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="images: an empty list would match no image; remove the field to mean any image"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	Images []string `json:"images,omitempty"`

	// containerNames limits the entry to containers whose name matches one of
	// these globs, in any of containers, initContainers and ephemeralContainers.
	// Container names are DNS labels of at most 63 characters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="containerNames: an empty list would match no container; remove the field to mean any container"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	ContainerNames []string `json:"containerNames,omitempty"`

	// containerKinds limits the entry to these kinds of container: Init (an
	// init container that runs to completion before the others start),
	// Sidecar (an init container with restartPolicy: Always, which runs for
	// the pod's life, as a mesh's native sidecar proxy does), App (in
	// containers) and Ephemeral (added by kubectl debug). Without it the
	// entry covers every kind its restrictedField reaches, so an entry on
	// spec.initContainers[*] covers sidecars too: write containerKinds: [Init]
	// to keep a mesh's init-container waiver off its long-running proxy.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="containerKinds: an empty list would match no container; remove the field to mean every kind"
	ContainerKinds []ContainerKind `json:"containerKinds,omitempty"`

	// restrictedField limits the entry to one field of the control, written
	// pod-relative with [*] for list indices, for example
	// spec.initContainers[*].securityContext.capabilities.add.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('spec.') || self.startsWith('metadata.')",message="restrictedField is a pod field path starting with spec. or metadata., for example spec.containers[*].securityContext.capabilities.add"
	RestrictedField string `json:"restrictedField,omitempty"`

	// values limits the entry to violations whose offending values all match
	// one of these globs. A violation of a missing required setting has no
	// values and is covered only by entries without values.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="values: an empty list would match no value; remove the field to mean any value"
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[^\x5b\x5d\x5c]*$`
	Values []string `json:"values,omitempty"`
}
