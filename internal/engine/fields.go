package engine

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// ctrKind indexes the three container lists of a pod spec. The order is the
// order upstream visits them in (init, regular, ephemeral), so violations come
// out in the same order as upstream's messages name containers.
type ctrKind uint8

const (
	kindInit ctrKind = iota
	kindRegular
	kindEphemeral
	numKinds
)

var kindTypes = [numKinds]ContainerType{InitContainers, Containers, EphemeralContainers}

// ctrField is one container field spelled for each of the three container
// lists. The paths are built once at start-up so that attribution never
// concatenates strings.
type ctrField [numKinds]string

func newCtrField(suffix string) ctrField {
	var f ctrField
	for k := range numKinds {
		f[k] = "spec." + string(kindTypes[k]) + "[*]." + suffix
	}
	return f
}

// Every field path attribution can report. Keeping them in one place lets
// FieldsOf be derived from the same values attribution uses, so the two cannot
// drift apart.
var (
	fPodHostProcess = "spec.securityContext.windowsOptions.hostProcess"
	fCtrHostProcess = newCtrField("securityContext.windowsOptions.hostProcess")

	fHostNetwork = "spec.hostNetwork"
	fHostPID     = "spec.hostPID"
	fHostIPC     = "spec.hostIPC"

	fCtrPrivileged = newCtrField("securityContext.privileged")

	fCtrCapAdd  = newCtrField("securityContext.capabilities.add")
	fCtrCapDrop = newCtrField("securityContext.capabilities.drop")

	fHostPathVolume = "spec.volumes[*].hostPath"

	fCtrHostPort = newCtrField("ports[*].hostPort")

	fCtrLivenessHTTP  = newCtrField("livenessProbe.httpGet.host")
	fCtrLivenessTCP   = newCtrField("livenessProbe.tcpSocket.host")
	fCtrReadinessHTTP = newCtrField("readinessProbe.httpGet.host")
	fCtrReadinessTCP  = newCtrField("readinessProbe.tcpSocket.host")
	fCtrStartupHTTP   = newCtrField("startupProbe.httpGet.host")
	fCtrStartupTCP    = newCtrField("startupProbe.tcpSocket.host")
	fCtrPostStartHTTP = newCtrField("lifecycle.postStart.httpGet.host")
	fCtrPostStartTCP  = newCtrField("lifecycle.postStart.tcpSocket.host")
	fCtrPreStopHTTP   = newCtrField("lifecycle.preStop.httpGet.host")
	fCtrPreStopTCP    = newCtrField("lifecycle.preStop.tcpSocket.host")
	fPodAppArmorType  = "spec.securityContext.appArmorProfile.type"
	fCtrAppArmorType  = newCtrField("securityContext.appArmorProfile.type")

	fPodSELinuxType = "spec.securityContext.seLinuxOptions.type"
	fPodSELinuxUser = "spec.securityContext.seLinuxOptions.user"
	fPodSELinuxRole = "spec.securityContext.seLinuxOptions.role"
	fCtrSELinuxType = newCtrField("securityContext.seLinuxOptions.type")
	fCtrSELinuxUser = newCtrField("securityContext.seLinuxOptions.user")
	fCtrSELinuxRole = newCtrField("securityContext.seLinuxOptions.role")

	fCtrProcMount = newCtrField("securityContext.procMount")

	fPodSeccompType = "spec.securityContext.seccompProfile.type"
	fCtrSeccompType = newCtrField("securityContext.seccompProfile.type")

	fSysctlName = "spec.securityContext.sysctls[*].name"

	fCtrAllowPrivilegeEscalation = newCtrField("securityContext.allowPrivilegeEscalation")

	fPodRunAsNonRoot = "spec.securityContext.runAsNonRoot"
	fCtrRunAsNonRoot = newCtrField("securityContext.runAsNonRoot")

	fPodRunAsUser = "spec.securityContext.runAsUser"
	fCtrRunAsUser = newCtrField("securityContext.runAsUser")
)

// The annotation fields: AppArmor's per-container annotation and, for policy
// versions before v1.19, which judge seccomp by the alpha annotations only,
// seccomp's.
const (
	fAppArmorAnnotation   = `metadata.annotations["` + appArmorAnnotationPrefix + `*"]`
	fPodSeccompAnnotation = `metadata.annotations["` + seccompPodAnnotation + `"]`
	fCtrSeccompAnnotation = `metadata.annotations["` + seccompContainerAnnotationPrefix + `*"]`
)

// fRestrictedVolume is indexed like forbiddenVolumeTypes; its last entry is
// the volume itself, for a volume whose source this build of k8s.io/api does
// not know (upstream calls that type "unknown"; there is no field to name).
var fRestrictedVolume = func() []string {
	f := make([]string, 0, len(forbiddenVolumeTypes)+1)
	for _, t := range forbiddenVolumeTypes {
		f = append(f, "spec.volumes[*]."+t)
	}
	return append(f, "spec.volumes[*]")
}()

var fieldsByControl = func() map[policyv1alpha1.ControlName][]string {
	m := map[policyv1alpha1.ControlName][]string{}
	add := func(control policyv1alpha1.ControlName, fields ...string) {
		m[control] = append(m[control], fields...)
	}
	addCtr := func(control policyv1alpha1.ControlName, fields ...ctrField) {
		for _, f := range fields {
			add(control, f[:]...)
		}
	}
	add(policyv1alpha1.ControlHostProcess, fPodHostProcess)
	addCtr(policyv1alpha1.ControlHostProcess, fCtrHostProcess)
	add(policyv1alpha1.ControlHostNamespaces, fHostNetwork, fHostPID, fHostIPC)
	addCtr(policyv1alpha1.ControlPrivilegedContainers, fCtrPrivileged)
	addCtr(policyv1alpha1.ControlCapabilities, fCtrCapAdd, fCtrCapDrop)
	// restrictedVolumes reports hostPath under the same path, so both
	// controls list it.
	add(policyv1alpha1.ControlHostPathVolumes, fHostPathVolume)
	addCtr(policyv1alpha1.ControlHostPorts, fCtrHostPort)
	addCtr(policyv1alpha1.ControlHostProbesLifecycle,
		fCtrLivenessHTTP, fCtrLivenessTCP,
		fCtrReadinessHTTP, fCtrReadinessTCP,
		fCtrStartupHTTP, fCtrStartupTCP,
		fCtrPostStartHTTP, fCtrPostStartTCP,
		fCtrPreStopHTTP, fCtrPreStopTCP)
	add(policyv1alpha1.ControlAppArmor, fPodAppArmorType, fAppArmorAnnotation)
	addCtr(policyv1alpha1.ControlAppArmor, fCtrAppArmorType)
	add(policyv1alpha1.ControlSELinux, fPodSELinuxType, fPodSELinuxUser, fPodSELinuxRole)
	addCtr(policyv1alpha1.ControlSELinux, fCtrSELinuxType, fCtrSELinuxUser, fCtrSELinuxRole)
	addCtr(policyv1alpha1.ControlProcMountType, fCtrProcMount)
	add(policyv1alpha1.ControlSeccomp, fPodSeccompType, fPodSeccompAnnotation, fCtrSeccompAnnotation)
	addCtr(policyv1alpha1.ControlSeccomp, fCtrSeccompType)
	add(policyv1alpha1.ControlSysctls, fSysctlName)
	add(policyv1alpha1.ControlVolumeTypes, fRestrictedVolume...)
	addCtr(policyv1alpha1.ControlPrivilegeEscalation, fCtrAllowPrivilegeEscalation)
	add(policyv1alpha1.ControlRunningAsNonRoot, fPodRunAsNonRoot)
	addCtr(policyv1alpha1.ControlRunningAsNonRoot, fCtrRunAsNonRoot)
	add(policyv1alpha1.ControlRunningAsNonRootUser, fPodRunAsUser)
	addCtr(policyv1alpha1.ControlRunningAsNonRootUser, fCtrRunAsUser)
	for _, fields := range m {
		slices.Sort(fields)
	}
	return m
}()

// FieldsOf returns, sorted, every field path attribution can report for a
// control: what an exclusion's restrictedField may usefully name. It returns
// nil for an unknown control. The slice is the caller's to keep.
func FieldsOf(control policyv1alpha1.ControlName) []string {
	return slices.Clone(fieldsByControl[control])
}

// PodLevelOnly reports whether every field of control is a pod-level field,
// so that selecting containers (by name or image) in an exclusion of it can
// never match anything.
func PodLevelOnly(control policyv1alpha1.ControlName) bool {
	switch control {
	case policyv1alpha1.ControlHostNamespaces, policyv1alpha1.ControlHostPathVolumes, policyv1alpha1.ControlSysctls, policyv1alpha1.ControlVolumeTypes:
		return true
	}
	return false
}

// StoredAppArmor is what the API server stores for a pod that asks for an
// AppArmor profile by annotation (Kubernetes 1.30 and later): the same
// profile in the container's appArmorProfile field too, which the checks
// read as well. Given an entry's field and one of its values, it returns
// that field for a container of the kind and the value the API server
// writes there; ok is false for any other field or a value it does not
// convert.
func StoredAppArmor(field string, kind policyv1alpha1.ContainerKind, value string) (storedField, storedValue string, ok bool) {
	if field != fAppArmorAnnotation {
		return "", "", false
	}
	k := kindRegular
	switch kind {
	case policyv1alpha1.ContainerKindInit, policyv1alpha1.ContainerKindSidecar:
		k = kindInit
	case policyv1alpha1.ContainerKindEphemeral:
		k = kindEphemeral
	}
	switch {
	case value == "runtime/default":
		storedValue = string(corev1.AppArmorProfileTypeRuntimeDefault)
	case value == "unconfined":
		storedValue = string(corev1.AppArmorProfileTypeUnconfined)
	case strings.HasPrefix(value, "localhost/"):
		storedValue = string(corev1.AppArmorProfileTypeLocalhost)
	default:
		return "", "", false
	}
	return fCtrAppArmorType[k], storedValue, true
}
