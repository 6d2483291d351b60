package engine

import (
	"iter"
	"slices"
	"strconv"
	"strings"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// The IDs of policy.DefaultChecks(). Upstream exports only a few of them, so
// they are spelled here; TestUpstreamChecksKnown fails if upstream adds,
// removes or re-versions a check.
const (
	checkWindowsHostProcess         policy.CheckID = "windowsHostProcess"
	checkHostNamespaces             policy.CheckID = "hostNamespaces"
	checkPrivileged                 policy.CheckID = "privileged"
	checkCapabilitiesBaseline       policy.CheckID = "capabilities_baseline"
	checkCapabilitiesRestricted     policy.CheckID = "capabilities_restricted"
	checkHostPathVolumes            policy.CheckID = "hostPathVolumes"
	checkHostPorts                  policy.CheckID = "hostPorts"
	checkHostProbesAndHostLifecycle policy.CheckID = "hostProbesAndHostLifecycle"
	checkAppArmorProfile            policy.CheckID = "appArmorProfile"
	checkSELinuxOptions             policy.CheckID = "seLinuxOptions"
	checkProcMount                  policy.CheckID = "procMount"
	checkProcMountRestricted        policy.CheckID = "procMount_restricted"
	checkSeccompProfileBaseline     policy.CheckID = "seccompProfile_baseline"
	checkSeccompProfileRestricted   policy.CheckID = "seccompProfile_restricted"
	checkSysctls                    policy.CheckID = "sysctls"
	checkRestrictedVolumes          policy.CheckID = "restrictedVolumes"
	checkAllowPrivilegeEscalation   policy.CheckID = "allowPrivilegeEscalation"
	checkRunAsNonRoot               policy.CheckID = "runAsNonRoot"
	checkRunAsUser                  policy.CheckID = "runAsUser"
)

// Annotation keys of the pre-v1.19 seccomp policy. Upstream keeps them
// unexported and the corev1 equivalents are deprecated, hence the literals.
const (
	seccompPodAnnotation             = "seccomp.security.alpha.kubernetes.io/pod"
	seccompContainerAnnotationPrefix = "container.seccomp.security.alpha.kubernetes.io/"
)

// controlOf maps an upstream check to the Pod Security Standards control it
// implements; several checks (a baseline one and the restricted one that
// overrides it) share a control. It returns "" for an unknown check.
func controlOf(id policy.CheckID) policyv1alpha1.ControlName {
	switch id {
	case checkWindowsHostProcess:
		return policyv1alpha1.ControlHostProcess
	case checkHostNamespaces:
		return policyv1alpha1.ControlHostNamespaces
	case checkPrivileged:
		return policyv1alpha1.ControlPrivilegedContainers
	case checkCapabilitiesBaseline, checkCapabilitiesRestricted:
		return policyv1alpha1.ControlCapabilities
	case checkHostPathVolumes:
		return policyv1alpha1.ControlHostPathVolumes
	case checkHostPorts:
		return policyv1alpha1.ControlHostPorts
	case checkHostProbesAndHostLifecycle:
		return policyv1alpha1.ControlHostProbesLifecycle
	case checkAppArmorProfile:
		return policyv1alpha1.ControlAppArmor
	case checkSELinuxOptions:
		return policyv1alpha1.ControlSELinux
	case checkProcMount, checkProcMountRestricted:
		return policyv1alpha1.ControlProcMountType
	case checkSeccompProfileBaseline, checkSeccompProfileRestricted:
		return policyv1alpha1.ControlSeccomp
	case checkSysctls:
		return policyv1alpha1.ControlSysctls
	case checkRestrictedVolumes:
		return policyv1alpha1.ControlVolumeTypes
	case checkAllowPrivilegeEscalation:
		return policyv1alpha1.ControlPrivilegeEscalation
	case checkRunAsNonRoot:
		return policyv1alpha1.ControlRunningAsNonRoot
	case checkRunAsUser:
		return policyv1alpha1.ControlRunningAsNonRootUser
	}
	return ""
}

// attribute explains why upstream check id, in the revision that applies at
// policy version v, rejected the pod: one Violation per offending field (and
// container), carrying the offending values. Upstream reports only a prose
// message, which cannot be matched against exclusions, so each check's logic
// is mirrored here revision by revision; the fixture and fuzz tests hold the
// two to "upstream fails ⇔ attribute returns something".
//
// Where upstream reports one class of failure only when another is absent
// (seccompProfile_restricted and runAsNonRoot mention unset containers only
// when nothing is explicitly wrong), attribute reports both: excluding the
// explicit failure must not let the implicit one through unnoticed.
//
// It returns nil when the check does not apply at v or passes. Violations are
// ordered pod-level first, then by container in upstream's visiting order
// (initContainers, containers, ephemeralContainers).
func attribute(id policy.CheckID, v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []Violation {
	if spec == nil {
		return nil
	}
	// Most checks report at most one violation per container: sizing the
	// slice once saves the growth that dominated many-violation pods.
	a := attributor{control: controlOf(id), id: string(id),
		out: make([]Violation, 0, 1+len(spec.Containers)+len(spec.InitContainers)+len(spec.EphemeralContainers))}
	switch id {
	case checkWindowsHostProcess:
		a.windowsHostProcess(v, spec)
	case checkHostNamespaces:
		a.hostNamespaces(v, spec)
	case checkPrivileged:
		a.privileged(v, spec)
	case checkCapabilitiesBaseline:
		a.capabilitiesBaseline(v, spec)
	case checkCapabilitiesRestricted:
		a.capabilitiesRestricted(v, spec)
	case checkHostPathVolumes:
		a.hostPathVolumes(v, spec)
	case checkHostPorts:
		a.hostPorts(v, spec)
	case checkHostProbesAndHostLifecycle:
		a.hostProbesAndHostLifecycle(v, spec)
	case checkAppArmorProfile:
		a.appArmorProfile(v, meta, spec)
	case checkSELinuxOptions:
		a.seLinuxOptions(v, spec)
	case checkProcMount:
		a.procMount(v, spec, true)
	case checkProcMountRestricted:
		a.procMount(v, spec, false)
	case checkSeccompProfileBaseline:
		a.seccompProfileBaseline(v, meta, spec)
	case checkSeccompProfileRestricted:
		a.seccompProfileRestricted(v, spec)
	case checkSysctls:
		a.sysctls(v, spec)
	case checkRestrictedVolumes:
		a.restrictedVolumes(v, spec)
	case checkAllowPrivilegeEscalation:
		a.allowPrivilegeEscalation(v, spec)
	case checkRunAsNonRoot:
		a.runAsNonRoot(v, spec)
	case checkRunAsUser:
		a.runAsUser(v, spec)
	}
	if len(a.out) == 0 {
		return nil
	}
	return a.out
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

// attributor accumulates the violations of one check.
type attributor struct {
	control policyv1alpha1.ControlName
	id      string
	out     []Violation
}

func (a *attributor) pod(field string, values []string) {
	a.out = append(a.out, Violation{
		Control: a.control,
		CheckID: a.id,
		Scope:   ScopePod,
		Field:   field,
		Values:  values,
	})
}

func (a *attributor) ctr(k ctrKind, c *corev1.Container, field ctrField, values []string) {
	a.ctrPath(k, c, field[k], values)
}

// ctrPath is ctr for a container's violation of a field outside the container
// lists, such as a per-container annotation.
func (a *attributor) ctrPath(k ctrKind, c *corev1.Container, field string, values []string) {
	a.out = append(a.out, Violation{
		Control:       a.control,
		CheckID:       a.id,
		Scope:         ScopeContainer,
		Container:     c.Name,
		ContainerType: kindTypes[k],
		Image:         c.Image,
		Field:         field,
		Values:        values,
	})
}

// missing is the Values of a required setting that is absent. It is empty
// rather than nil so that JSON renders "values": [] consistently, and costs no
// allocation.
func missing() []string { return []string{} }

// appendUnique keeps values in spec order without repeats. Lists here are a
// handful of entries, so a linear scan beats building a set.
func appendUnique(values []string, s string) []string {
	if slices.Contains(values, s) {
		return values
	}
	return append(values, s)
}

const valueTrue = "true"

func (a *attributor) windowsHostProcess(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil &&
		sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
		a.pod(fPodHostProcess, []string{valueTrue})
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.WindowsOptions != nil &&
			sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
			a.ctr(k, c, fCtrHostProcess, []string{valueTrue})
		}
	}
}

func (a *attributor) hostNamespaces(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	if spec.HostNetwork {
		a.pod(fHostNetwork, []string{valueTrue})
	}
	if spec.HostPID {
		a.pod(fHostPID, []string{valueTrue})
	}
	if spec.HostIPC {
		a.pod(fHostIPC, []string{valueTrue})
	}
}

func (a *attributor) privileged(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
			a.ctr(k, c, fCtrPrivileged, []string{valueTrue})
		}
	}
}

// baselineCapability is upstream's capabilities_allowed_1_0. Upstream
// compares the strings as written: "CAP_CHOWN" or "chown" are not CHOWN.
func baselineCapability(c corev1.Capability) bool {
	switch c {
	case "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
		"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT":
		return true
	}
	return false
}

func (a *attributor) capabilitiesBaseline(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	for k, c := range containers(spec) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			continue
		}
		var bad []string
		for _, capability := range c.SecurityContext.Capabilities.Add {
			if !baselineCapability(capability) {
				bad = appendUnique(bad, string(capability))
			}
		}
		if bad != nil {
			a.ctr(k, c, fCtrCapAdd, bad)
		}
	}
}

func (a *attributor) capabilitiesRestricted(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 22) || windowsExempt(v, spec) {
		return
	}
	for k, c := range containers(spec) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			a.ctr(k, c, fCtrCapDrop, missing())
			continue
		}
		caps := c.SecurityContext.Capabilities
		// Upstream looks for the exact string "ALL"; "all" does not count.
		if !slices.Contains(caps.Drop, "ALL") {
			a.ctr(k, c, fCtrCapDrop, missing())
		}
		var bad []string
		for _, capability := range caps.Add {
			if capability != "NET_BIND_SERVICE" {
				bad = appendUnique(bad, string(capability))
			}
		}
		if bad != nil {
			a.ctr(k, c, fCtrCapAdd, bad)
		}
	}
}

func (a *attributor) hostPathVolumes(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	var paths []string
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			paths = appendUnique(paths, hp.Path)
		}
	}
	if paths != nil {
		a.pod(fHostPathVolume, paths)
	}
}

func (a *attributor) hostPorts(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	for k, c := range containers(spec) {
		var bad []string
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				bad = appendUnique(bad, strconv.FormatInt(int64(p.HostPort), 10))
			}
		}
		if bad != nil {
			a.ctr(k, c, fCtrHostPort, bad)
		}
	}
}

func (a *attributor) hostProbesAndHostLifecycle(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 34) {
		return
	}
	for k, c := range containers(spec) {
		a.probeHosts(k, c, c.LivenessProbe, fCtrLivenessHTTP, fCtrLivenessTCP)
		a.probeHosts(k, c, c.ReadinessProbe, fCtrReadinessHTTP, fCtrReadinessTCP)
		a.probeHosts(k, c, c.StartupProbe, fCtrStartupHTTP, fCtrStartupTCP)
		if c.Lifecycle != nil {
			a.handlerHosts(k, c, c.Lifecycle.PostStart, fCtrPostStartHTTP, fCtrPostStartTCP)
			a.handlerHosts(k, c, c.Lifecycle.PreStop, fCtrPreStopHTTP, fCtrPreStopTCP)
		}
	}
}

func (a *attributor) probeHosts(k ctrKind, c *corev1.Container, p *corev1.Probe, httpField, tcpField ctrField) {
	if p == nil {
		return
	}
	a.hosts(k, c, p.HTTPGet, p.TCPSocket, httpField, tcpField)
}

func (a *attributor) handlerHosts(k ctrKind, c *corev1.Container, h *corev1.LifecycleHandler, httpField, tcpField ctrField) {
	if h == nil {
		return
	}
	a.hosts(k, c, h.HTTPGet, h.TCPSocket, httpField, tcpField)
}

func (a *attributor) hosts(k ctrKind, c *corev1.Container, http *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, httpField, tcpField ctrField) {
	if http != nil && http.Host != "" {
		a.ctr(k, c, httpField, []string{http.Host})
	}
	if tcp != nil && tcp.Host != "" {
		a.ctr(k, c, tcpField, []string{tcp.Host})
	}
}

func allowedAppArmorType(t corev1.AppArmorProfileType) bool {
	return t == corev1.AppArmorProfileTypeRuntimeDefault || t == corev1.AppArmorProfileTypeLocalhost
}

func allowedAppArmorAnnotation(v string) bool {
	return v == "" ||
		v == corev1.DeprecatedAppArmorBetaProfileRuntimeDefault ||
		strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix)
}

func (a *attributor) appArmorProfile(v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	if sc := spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !allowedAppArmorType(sc.AppArmorProfile.Type) {
		a.pod(fPodAppArmorType, []string{string(sc.AppArmorProfile.Type)})
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !allowedAppArmorType(sc.AppArmorProfile.Type) {
			a.ctr(k, c, fCtrAppArmorType, []string{string(sc.AppArmorProfile.Type)})
		}
	}
	if meta == nil {
		return
	}
	// Upstream judges every annotation with the prefix, whether or not a
	// container of that name exists, so attribution must too. Map order is
	// random; key order keeps the output stable.
	var keys []string
	for key, val := range meta.Annotations {
		if strings.HasPrefix(key, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && !allowedAppArmorAnnotation(val) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		name := key[len(corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix):]
		viol := Violation{
			Control:   a.control,
			CheckID:   a.id,
			Scope:     ScopeContainer,
			Container: name,
			Field:     fAppArmorAnnotation,
			Values:    []string{meta.Annotations[key]},
		}
		for k, c := range containers(spec) {
			if c.Name == name {
				viol.ContainerType, viol.Image = kindTypes[k], c.Image
				break
			}
		}
		a.out = append(a.out, viol)
	}
}

func (a *attributor) seLinuxOptions(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	engineType := since(v, 31)
	allowedType := func(t string) bool {
		switch t {
		case "", "container_t", "container_init_t", "container_kvm_t":
			return true
		case "container_engine_t":
			return engineType
		}
		return false
	}
	if sc := spec.SecurityContext; sc != nil && sc.SELinuxOptions != nil {
		o := sc.SELinuxOptions
		if !allowedType(o.Type) {
			a.pod(fPodSELinuxType, []string{o.Type})
		}
		if o.User != "" {
			a.pod(fPodSELinuxUser, []string{o.User})
		}
		if o.Role != "" {
			a.pod(fPodSELinuxRole, []string{o.Role})
		}
	}
	for k, c := range containers(spec) {
		if c.SecurityContext == nil || c.SecurityContext.SELinuxOptions == nil {
			continue
		}
		o := c.SecurityContext.SELinuxOptions
		if !allowedType(o.Type) {
			a.ctr(k, c, fCtrSELinuxType, []string{o.Type})
		}
		if o.User != "" {
			a.ctr(k, c, fCtrSELinuxUser, []string{o.User})
		}
		if o.Role != "" {
			a.ctr(k, c, fCtrSELinuxRole, []string{o.Role})
		}
	}
}

// procMount serves both procMount checks: they share upstream's procMount_1_0
// and differ only in whether v1.35 relaxes it for user-namespaced pods
// (baseline) and in when they start to apply.
func (a *attributor) procMount(v api.Version, spec *corev1.PodSpec, baseline bool) {
	if baseline {
		if !since(v, 0) || userNamespaceExempt(v, spec) {
			return
		}
	} else if !since(v, 35) {
		return
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			a.ctr(k, c, fCtrProcMount, []string{string(*sc.ProcMount)})
		}
	}
}

func validSeccompType(t corev1.SeccompProfileType) bool {
	return t == corev1.SeccompProfileTypeLocalhost || t == corev1.SeccompProfileTypeRuntimeDefault
}

func validSeccompAnnotation(v string) bool {
	return v == "runtime/default" || v == "docker/default" || strings.HasPrefix(v, "localhost/")
}

func (a *attributor) seccompProfileBaseline(v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	if since(v, 19) {
		if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil && !validSeccompType(sc.SeccompProfile.Type) {
			a.pod(fPodSeccompType, []string{string(sc.SeccompProfile.Type)})
		}
		for k, c := range containers(spec) {
			if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil && !validSeccompType(sc.SeccompProfile.Type) {
				a.ctr(k, c, fCtrSeccompType, []string{string(sc.SeccompProfile.Type)})
			}
		}
		return
	}
	// Before v1.19 only the alpha annotations count, and, unlike AppArmor,
	// only container annotations naming a container of the pod.
	if meta == nil || len(meta.Annotations) == 0 {
		return
	}
	if val, ok := meta.Annotations[seccompPodAnnotation]; ok && !validSeccompAnnotation(val) {
		a.pod(fPodSeccompAnnotation, []string{val})
	}
	hasContainerAnnotations := false
	for key := range meta.Annotations {
		if strings.HasPrefix(key, seccompContainerAnnotationPrefix) {
			hasContainerAnnotations = true
			break
		}
	}
	if !hasContainerAnnotations {
		return
	}
	for k, c := range containers(spec) {
		if val, ok := meta.Annotations[seccompContainerAnnotationPrefix+c.Name]; ok && !validSeccompAnnotation(val) {
			a.ctrPath(k, c, fCtrSeccompAnnotation, []string{val})
		}
	}
}

func (a *attributor) seccompProfileRestricted(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 19) || windowsExempt(v, spec) {
		return
	}
	podValid := false
	if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		if validSeccompType(sc.SeccompProfile.Type) {
			podValid = true
		} else {
			a.pod(fPodSeccompType, []string{string(sc.SeccompProfile.Type)})
		}
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
			if !validSeccompType(sc.SeccompProfile.Type) {
				a.ctr(k, c, fCtrSeccompType, []string{string(sc.SeccompProfile.Type)})
			}
		} else if !podValid {
			a.ctr(k, c, fCtrSeccompType, missing())
		}
	}
}

// allowedSysctl is the union of upstream's sysctlsAllowedV1Dot* sets, each
// name gated on the version that admitted it.
func allowedSysctl(v api.Version, name string) bool {
	switch name {
	case "kernel.shm_rmid_forced",
		"net.ipv4.ip_local_port_range",
		"net.ipv4.tcp_syncookies",
		"net.ipv4.ping_group_range",
		"net.ipv4.ip_unprivileged_port_start":
		return true
	case "net.ipv4.ip_local_reserved_ports":
		return since(v, 27)
	case "net.ipv4.tcp_keepalive_time",
		"net.ipv4.tcp_fin_timeout",
		"net.ipv4.tcp_keepalive_intvl",
		"net.ipv4.tcp_keepalive_probes":
		return since(v, 29)
	case "net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem":
		return since(v, 32)
	case "net.ipv4.tcp_slow_start_after_idle",
		"net.ipv4.tcp_notsent_lowat":
		return since(v, 37)
	}
	return false
}

func (a *attributor) sysctls(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) || spec.SecurityContext == nil {
		return
	}
	var bad []string
	for _, s := range spec.SecurityContext.Sysctls {
		if !allowedSysctl(v, s.Name) {
			bad = appendUnique(bad, s.Name)
		}
	}
	if bad != nil {
		a.pod(fSysctlName, bad)
	}
}

// restrictedVolumeType returns the index into restrictedVolumeTypes of the
// source upstream blames a volume on, len(restrictedVolumeTypes) when upstream
// would call it "unknown", or -1 when the volume is allowed.
func restrictedVolumeType(vol *corev1.Volume) int {
	switch {
	case vol.ConfigMap != nil,
		vol.CSI != nil,
		vol.DownwardAPI != nil,
		vol.EmptyDir != nil,
		vol.Ephemeral != nil,
		vol.Image != nil,
		vol.PersistentVolumeClaim != nil,
		vol.Projected != nil,
		vol.Secret != nil:
		return -1
	case vol.HostPath != nil:
		return 0
	case vol.GCEPersistentDisk != nil:
		return 1
	case vol.AWSElasticBlockStore != nil:
		return 2
	case vol.GitRepo != nil:
		return 3
	case vol.NFS != nil:
		return 4
	case vol.ISCSI != nil:
		return 5
	case vol.Glusterfs != nil:
		return 6
	case vol.RBD != nil:
		return 7
	case vol.FlexVolume != nil:
		return 8
	case vol.Cinder != nil:
		return 9
	case vol.CephFS != nil:
		return 10
	case vol.Flocker != nil:
		return 11
	case vol.FC != nil:
		return 12
	case vol.AzureFile != nil:
		return 13
	case vol.VsphereVolume != nil:
		return 14
	case vol.Quobyte != nil:
		return 15
	case vol.AzureDisk != nil:
		return 16
	case vol.PhotonPersistentDisk != nil:
		return 17
	case vol.PortworxVolume != nil:
		return 18
	case vol.ScaleIO != nil:
		return 19
	case vol.StorageOS != nil:
		return 20
	}
	return len(restrictedVolumeTypes)
}

func (a *attributor) restrictedVolumes(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) {
		return
	}
	// at[t] is the index in a.out of the violation for volume type t, so each
	// type gets one violation, in order of first appearance, without a map.
	var at [len(restrictedVolumeTypes) + 1]int
	for i := range at {
		at[i] = -1
	}
	for i := range spec.Volumes {
		vol := &spec.Volumes[i]
		t := restrictedVolumeType(vol)
		if t < 0 {
			continue
		}
		// hostPath is reported by path, like the baseline hostPathVolumes
		// check, so that one exclusion covers a hostPath at both levels.
		value := vol.Name
		if t == 0 {
			value = vol.HostPath.Path
		}
		if at[t] < 0 {
			at[t] = len(a.out)
			a.pod(fRestrictedVolume[t], []string{value})
			continue
		}
		a.out[at[t]].Values = appendUnique(a.out[at[t]].Values, value)
	}
}

func (a *attributor) allowPrivilegeEscalation(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 8) || windowsExempt(v, spec) {
		return
	}
	for k, c := range containers(spec) {
		sc := c.SecurityContext
		switch {
		case sc == nil || sc.AllowPrivilegeEscalation == nil:
			a.ctr(k, c, fCtrAllowPrivilegeEscalation, missing())
		case *sc.AllowPrivilegeEscalation:
			a.ctr(k, c, fCtrAllowPrivilegeEscalation, []string{valueTrue})
		}
	}
}

func (a *attributor) runAsNonRoot(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 0) || userNamespaceExempt(v, spec) {
		return
	}
	podTrue := false
	if sc := spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		if *sc.RunAsNonRoot {
			podTrue = true
		} else {
			a.pod(fPodRunAsNonRoot, []string{"false"})
		}
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
			if !*sc.RunAsNonRoot {
				a.ctr(k, c, fCtrRunAsNonRoot, []string{"false"})
			}
		} else if !podTrue {
			a.ctr(k, c, fCtrRunAsNonRoot, missing())
		}
	}
}

func (a *attributor) runAsUser(v api.Version, spec *corev1.PodSpec) {
	if !since(v, 23) || userNamespaceExempt(v, spec) {
		return
	}
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		a.pod(fPodRunAsUser, []string{"0"})
	}
	for k, c := range containers(spec) {
		if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			a.ctr(k, c, fCtrRunAsUser, []string{"0"})
		}
	}
}
