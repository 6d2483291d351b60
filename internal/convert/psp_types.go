package convert

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A minimal copy of policy/v1beta1 PodSecurityPolicy, which k8s.io/api no
// longer carries: every field of the last release that served it.

type podSecurityPolicy struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            pspSpec           `json:"spec"`
}

type pspSpec struct {
	Privileged                      bool             `json:"privileged,omitempty"`
	DefaultAddCapabilities          []string         `json:"defaultAddCapabilities,omitempty"`
	RequiredDropCapabilities        []string         `json:"requiredDropCapabilities,omitempty"`
	AllowedCapabilities             []string         `json:"allowedCapabilities,omitempty"`
	Volumes                         []string         `json:"volumes,omitempty"`
	HostNetwork                     bool             `json:"hostNetwork,omitempty"`
	HostPorts                       []pspRange       `json:"hostPorts,omitempty"`
	HostPID                         bool             `json:"hostPID,omitempty"`
	HostIPC                         bool             `json:"hostIPC,omitempty"`
	SELinux                         pspSELinux       `json:"seLinux"`
	RunAsUser                       pspRunAs         `json:"runAsUser"`
	RunAsGroup                      *pspRunAs        `json:"runAsGroup,omitempty"`
	SupplementalGroups              pspRunAs         `json:"supplementalGroups"`
	FSGroup                         pspRunAs         `json:"fsGroup"`
	ReadOnlyRootFilesystem          bool             `json:"readOnlyRootFilesystem,omitempty"`
	DefaultAllowPrivilegeEscalation *bool            `json:"defaultAllowPrivilegeEscalation,omitempty"`
	AllowPrivilegeEscalation        *bool            `json:"allowPrivilegeEscalation,omitempty"`
	AllowedHostPaths                []pspHostPath    `json:"allowedHostPaths,omitempty"`
	AllowedFlexVolumes              []pspFlexVolume  `json:"allowedFlexVolumes,omitempty"`
	AllowedCSIDrivers               []pspCSIDriver   `json:"allowedCSIDrivers,omitempty"`
	AllowedUnsafeSysctls            []string         `json:"allowedUnsafeSysctls,omitempty"`
	ForbiddenSysctls                []string         `json:"forbiddenSysctls,omitempty"`
	AllowedProcMountTypes           []string         `json:"allowedProcMountTypes,omitempty"`
	RuntimeClass                    *pspRuntimeClass `json:"runtimeClass,omitempty"`
}

type pspRange struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

type pspSELinux struct {
	Rule           string             `json:"rule"`
	SELinuxOptions *pspSELinuxOptions `json:"seLinuxOptions,omitempty"`
}

type pspSELinuxOptions struct {
	User  string `json:"user,omitempty"`
	Role  string `json:"role,omitempty"`
	Type  string `json:"type,omitempty"`
	Level string `json:"level,omitempty"`
}

type pspRunAs struct {
	Rule   string     `json:"rule"`
	Ranges []pspRange `json:"ranges,omitempty"`
}

type pspHostPath struct {
	PathPrefix string `json:"pathPrefix,omitempty"`
	ReadOnly   bool   `json:"readOnly,omitempty"`
}

type pspFlexVolume struct {
	Driver string `json:"driver"`
}

type pspCSIDriver struct {
	Name string `json:"name"`
}

type pspRuntimeClass struct {
	AllowedRuntimeClassNames []string `json:"allowedRuntimeClassNames"`
	DefaultRuntimeClassName  *string  `json:"defaultRuntimeClassName,omitempty"`
}
