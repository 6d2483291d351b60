package engine

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

// TestUpstreamChecksKnown holds the attribution table (one entry per
// check_<id>.go file) to upstream's checks: every upstream check has an entry
// with a control and an attributor, every entry names an upstream check, and
// each entry mirrors exactly upstream's revisions. When a
// k8s.io/pod-security-admission upgrade adds a check or a revision, this
// fails until a check file learns it.
func TestUpstreamChecksKnown(t *testing.T) {
	upstream := map[policy.CheckID]bool{}
	controls := map[policyv1alpha1.ControlName]bool{}
	for _, c := range defaultChecks {
		upstream[c.ID] = true
		at, ok := attributions[c.ID]
		if !ok {
			t.Errorf("%s: upstream check has no entry in the attribution table; add check_%s.go", c.ID, c.ID)
			continue
		}
		if at.control == "" || at.attribute == nil {
			t.Errorf("%s: attribution has no control or no attributor", c.ID)
		}
		var got []api.Version
		for _, vc := range c.Versions {
			got = append(got, vc.MinimumVersion)
		}
		if !reflect.DeepEqual(got, at.revisions) {
			t.Errorf("%s: upstream revisions %v, attribute mirrors %v", c.ID, got, at.revisions)
		}
		if controlOf(c.ID) != at.control {
			t.Errorf("%s: controlOf = %q, table says %q", c.ID, controlOf(c.ID), at.control)
		}
		controls[at.control] = true
	}
	for id := range attributions {
		if !upstream[id] {
			t.Errorf("%s: attributed, but upstream has no such default check", id)
		}
	}
	if len(policyv1alpha1.Controls) != 16 || len(controls) != len(policyv1alpha1.Controls) {
		t.Errorf("policyv1alpha1.Controls has %d entries, checks map to %d controls", len(policyv1alpha1.Controls), len(controls))
	}
	for _, c := range policyv1alpha1.Controls {
		if !controls[c] {
			t.Errorf("control %q has no check", c)
		}
	}
	if n := len(policy.ExperimentalChecks()); n != 0 {
		t.Errorf("upstream has %d experimental checks; decide whether podsieve enforces them", n)
	}
	if controlOf("noSuchCheck") != "" {
		t.Error("unknown check has a control")
	}
	pod := mkPod(withContainers(ctr("app", &corev1.SecurityContext{Privileged: ptr.To(true)})))
	if got := attribute("noSuchCheck", api.LatestVersion(), &pod.ObjectMeta, &pod.Spec); got != nil {
		t.Errorf("unknown check attributed: %v", got)
	}
}

// TestRegistryRefusesUnattributedCheck is the start-up guard behind
// TestUpstreamChecksKnown: a check missing from the attribution table stops
// the registry from being built, so podsieve cannot run a check whose
// failures it cannot place.
func TestRegistryRefusesUnattributedCheck(t *testing.T) {
	checks := slices.Clone(defaultChecks)
	unknown := checkByID(t, checkHostPorts)
	unknown.ID = "noSuchCheck"
	checks = append(checks, unknown)
	_, err := newRegistry(checks)
	if err == nil || !strings.Contains(err.Error(), `"noSuchCheck"`) {
		t.Errorf("newRegistry with an unattributed check: err = %v", err)
	}
	if _, err := newRegistry(defaultChecks); err != nil {
		t.Errorf("newRegistry(policy.DefaultChecks()): %v", err)
	}
}

// TestAddAttributionRefusesBadEntries keeps the table one entry per check,
// each complete.
func TestAddAttributionRefusesBadEntries(t *testing.T) {
	good := attributions[checkHostPorts]
	for _, tc := range []struct {
		name string
		id   policy.CheckID
		at   attribution
	}{
		{"repeated", checkHostPorts, good},
		{"no control", "x", attribution{revisions: good.revisions, attribute: good.attribute}},
		{"unknown control", "x", attribution{control: "No Such Control", revisions: good.revisions, attribute: good.attribute}},
		{"no attributor", "x", attribution{control: good.control, revisions: good.revisions}},
		{"no revisions", "x", attribution{control: good.control, attribute: good.attribute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
				if _, ok := attributions["x"]; ok {
					delete(attributions, "x")
					t.Error("bad entry added to the table")
				}
			}()
			addAttribution(tc.id, tc.at)
		})
	}
}

func TestFieldsOf(t *testing.T) {
	for _, control := range policyv1alpha1.Controls {
		t.Run(string(control), func(t *testing.T) {
			fields := FieldsOf(control)
			if len(fields) == 0 {
				t.Fatal("no fields")
			}
			if !slices.IsSorted(fields) || len(slices.Compact(slices.Clone(fields))) != len(fields) {
				t.Errorf("not sorted and unique: %v", fields)
			}
			podOnly := true
			for _, f := range fields {
				if !strings.HasPrefix(f, "spec.") && !strings.HasPrefix(f, "metadata.") {
					t.Errorf("%q is not pod-relative", f)
				}
				for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
					prefix := "spec." + list + "[*]."
					if strings.HasPrefix(f, prefix) {
						podOnly = false
						for _, other := range []string{"containers", "initContainers", "ephemeralContainers"} {
							if !slices.Contains(fields, "spec."+other+"[*]."+strings.TrimPrefix(f, prefix)) {
								t.Errorf("%q not expanded to %s", f, other)
							}
						}
					}
				}
				if strings.HasPrefix(f, "metadata.annotations[\"container.") {
					podOnly = false
				}
			}
			if PodLevelOnly(control) != podOnly {
				t.Errorf("PodLevelOnly = %v, fields say %v", PodLevelOnly(control), podOnly)
			}
			fields[0] = "mutated"
			if FieldsOf(control)[0] == "mutated" {
				t.Error("FieldsOf returned shared storage")
			}
		})
	}
	if FieldsOf("No Such Control") != nil {
		t.Error("unknown control has fields")
	}
	if got := FieldsOf(policyv1alpha1.ControlCapabilities); !reflect.DeepEqual(got, []string{
		"spec.containers[*].securityContext.capabilities.add",
		"spec.containers[*].securityContext.capabilities.drop",
		"spec.ephemeralContainers[*].securityContext.capabilities.add",
		"spec.ephemeralContainers[*].securityContext.capabilities.drop",
		"spec.initContainers[*].securityContext.capabilities.add",
		"spec.initContainers[*].securityContext.capabilities.drop",
	}) {
		t.Errorf("FieldsOf(Capabilities) = %v", got)
	}
}

// Pod builders for the table tests. Images differ per container so that a
// violation attributed to the wrong container shows.

type podOpt func(*corev1.Pod)

func mkPod(opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ctr(name string, sc *corev1.SecurityContext) corev1.Container {
	return corev1.Container{Name: name, Image: "registry.example/" + name + ":1", SecurityContext: sc}
}

func withContainers(cs ...corev1.Container) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, cs...) }
}

func withInit(cs ...corev1.Container) podOpt {
	return func(p *corev1.Pod) { p.Spec.InitContainers = append(p.Spec.InitContainers, cs...) }
}

func withEphemeral(cs ...corev1.Container) podOpt {
	return func(p *corev1.Pod) {
		for _, c := range cs {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers,
				corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)})
		}
	}
}

func withPodSC(sc *corev1.PodSecurityContext) podOpt {
	return func(p *corev1.Pod) { p.Spec.SecurityContext = sc }
}

func withSpec(f func(*corev1.PodSpec)) podOpt {
	return func(p *corev1.Pod) { f(&p.Spec) }
}

func withAnnotations(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// windows marks the pod as a Windows pod.
func windows(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }

// userNS puts the pod in a user namespace.
func userNS(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) }

func restrictedSC() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func caps(add, drop []corev1.Capability) *corev1.SecurityContext {
	return &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: add, Drop: drop}}
}

// pv and cv build the expected pod and container violations; the control is
// filled in from the check.
func pv(field string, values ...string) Violation {
	return Violation{Scope: ScopePod, Field: field, Values: nonNil(values)}
}

func cv(t ContainerType, name, suffix string, values ...string) Violation {
	return Violation{
		Scope:         ScopeContainer,
		Container:     name,
		ContainerType: t,
		Image:         "registry.example/" + name + ":1",
		Field:         "spec." + string(t) + "[*]." + suffix,
		Values:        nonNil(values),
	}
}

func nonNil(values []string) []string {
	if values == nil {
		return []string{}
	}
	return values
}

func TestAttribute(t *testing.T) {
	v := api.MajorMinorVersion
	latest := api.LatestVersion()
	const (
		capAdd  = "securityContext.capabilities.add"
		capDrop = "securityContext.capabilities.drop"
		ape     = "securityContext.allowPrivilegeEscalation"
		ranr    = "securityContext.runAsNonRoot"
		seccomp = "securityContext.seccompProfile.type"
	)
	sysctlPod := mkPod(withPodSC(&corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
		{Name: "net.ipv4.ip_local_reserved_ports"},
		{Name: "net.ipv4.tcp_keepalive_time"},
		{Name: "net.ipv4.tcp_rmem"},
		{Name: "net.ipv4.tcp_slow_start_after_idle"},
		{Name: "kernel.msgmax"},
		{Name: "kernel.msgmax"},
		{Name: "kernel.shm_rmid_forced"},
	}}), withContainers(ctr("app", nil)))
	windowsPod := mkPod(windows, withContainers(ctr("app", nil)))
	capsPod := mkPod(withContainers(ctr("app", caps([]corev1.Capability{"NET_ADMIN", "NET_RAW", "CHOWN"}, nil))))
	capsDropAllPod := mkPod(withContainers(ctr("app", caps([]corev1.Capability{"NET_ADMIN", "NET_RAW", "CHOWN", "NET_BIND_SERVICE"}, []corev1.Capability{"ALL"}))))
	hostPathPod := mkPod(withContainers(ctr("app", nil)), withSpec(func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{
			{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "etc", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}},
			{Name: "logs-again", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
		}
	}))
	volumesPod := mkPod(withContainers(ctr("app", nil)), withSpec(func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{
			{Name: "nfs1", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/a"}}},
			{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
			{Name: "pd", VolumeSource: corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "x"}}},
			{Name: "nfs2", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/b"}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "future"}, // a source this k8s.io/api does not know
		}
	}))
	hostPortPod := mkPod(
		withInit(corev1.Container{Name: "init", Image: "registry.example/init:1", Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 8080}}}),
		withContainers(
			corev1.Container{Name: "web", Image: "registry.example/web:1", Ports: []corev1.ContainerPort{
				{ContainerPort: 80, HostPort: 80}, {ContainerPort: 81}, {ContainerPort: 443, HostPort: 443}, {ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolUDP},
			}},
			corev1.Container{Name: "side", Image: "registry.example/side:1", Ports: []corev1.ContainerPort{{ContainerPort: 9}}},
		),
		withEphemeral(corev1.Container{Name: "debug", Image: "registry.example/debug:1", Ports: []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}}),
	)
	multiPod := mkPod(
		withInit(ctr("init", &corev1.SecurityContext{Privileged: ptr.To(true)})),
		withContainers(
			ctr("a", &corev1.SecurityContext{Privileged: ptr.To(true)}),
			ctr("b", &corev1.SecurityContext{Privileged: ptr.To(false)}),
			ctr("c", nil),
			ctr("d", &corev1.SecurityContext{Privileged: ptr.To(true)}),
		),
		withEphemeral(ctr("debug", &corev1.SecurityContext{Privileged: ptr.To(true)})),
	)
	mixedRestricted := mkPod(
		withPodSC(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}),
		withInit(ctr("init", restrictedSC())),
		withContainers(
			ctr("good", restrictedSC()),
			ctr("bare", nil),
			ctr("escalates", &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"all"}}}),
		),
		withEphemeral(ctr("debug", &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)})),
	)
	noRunAsNonRoot := mkPod(withInit(ctr("init", nil)), withContainers(ctr("app", nil), ctr("set", &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)})))
	podRunAsNonRootFalse := mkPod(withPodSC(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false)}),
		withContainers(ctr("app", nil), ctr("set", &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)})))
	userNSRoot := mkPod(userNS, withPodSC(&corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0)}),
		withContainers(ctr("app", &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), ProcMount: ptr.To(corev1.UnmaskedProcMount)})))
	seccompUnset := mkPod(withContainers(ctr("app", nil), ctr("set", &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost}})))
	seccompUnconfined := mkPod(withPodSC(&corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}),
		withContainers(ctr("app", nil), ctr("set", &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}})))
	seccompContainerUnconfined := mkPod(withPodSC(&corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}),
		withContainers(ctr("app", &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}), ctr("ok", nil)))
	seccompAnnotations := mkPod(withAnnotations(
		"seccomp.security.alpha.kubernetes.io/pod", "unconfined",
		"container.seccomp.security.alpha.kubernetes.io/app", "",
		"container.seccomp.security.alpha.kubernetes.io/ok", "docker/default",
		"container.seccomp.security.alpha.kubernetes.io/ghost", "unconfined",
	), withContainers(ctr("app", nil), ctr("ok", nil)))
	appArmorPod := mkPod(withAnnotations(
		"container.apparmor.security.beta.kubernetes.io/sidecar", "unconfined",
		"container.apparmor.security.beta.kubernetes.io/app", "runtime/default",
		"container.apparmor.security.beta.kubernetes.io/ghost", "unconfined",
		"container.apparmor.security.beta.kubernetes.io/init", "localhost/custom",
		"container.apparmor.security.beta.kubernetes.io/dbg", "docker-default",
		"unrelated", "unconfined",
	),
		withPodSC(&corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}),
		withInit(ctr("init", nil)),
		withContainers(ctr("app", &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}}), ctr("sidecar", nil)),
		withEphemeral(ctr("dbg", &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: "Other"}})))
	probePod := mkPod(withContainers(corev1.Container{
		Name: "app", Image: "registry.example/app:1",
		LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "metadata.internal"}}},
		StartupProbe:   &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{}}},
		Lifecycle: &corev1.Lifecycle{
			PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1"}},
			PreStop:   &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.2"}},
		},
	}))
	seLinuxPod := mkPod(
		withPodSC(&corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "container_engine_t", Level: "s0:c1"}}),
		withContainers(ctr("app", &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t", User: "system_u", Role: "system_r"}})))
	hostNSPod := mkPod(withSpec(func(s *corev1.PodSpec) { s.HostNetwork, s.HostIPC = true, true }), withContainers(ctr("app", nil)))
	hostProcessPod := mkPod(
		withPodSC(&corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}),
		withContainers(ctr("app", &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}),
			ctr("other", &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(false)}})))
	procMountPod := mkPod(withInit(ctr("init", &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)})),
		withContainers(ctr("app", &corev1.SecurityContext{ProcMount: ptr.To(corev1.DefaultProcMount)})))

	cases := []struct {
		name    string
		check   policy.CheckID
		version api.Version
		pod     *corev1.Pod
		want    []Violation
	}{
		{"privileged across all three lists", checkPrivileged, latest, multiPod, []Violation{
			cv(InitContainers, "init", "securityContext.privileged", "true"),
			cv(Containers, "a", "securityContext.privileged", "true"),
			cv(Containers, "d", "securityContext.privileged", "true"),
			cv(EphemeralContainers, "debug", "securityContext.privileged", "true"),
		}},
		{"restricted multi-container: only the offending containers and fields", checkAllowPrivilegeEscalation, latest, mixedRestricted, []Violation{
			cv(Containers, "bare", ape),
			cv(Containers, "escalates", ape, "true"),
			cv(EphemeralContainers, "debug", ape),
		}},
		{"restricted multi-container: drop must contain ALL exactly", checkCapabilitiesRestricted, latest, mixedRestricted, []Violation{
			cv(Containers, "bare", capDrop),
			cv(Containers, "escalates", capDrop),
			cv(EphemeralContainers, "debug", capDrop),
		}},
		{"restricted multi-container: container false overrides pod true", checkRunAsNonRoot, latest, mixedRestricted, []Violation{
			cv(EphemeralContainers, "debug", ranr, "false"),
		}},
		{"restricted multi-container: pod seccomp covers every container", checkSeccompProfileRestricted, latest, mixedRestricted, nil},

		{"windows pod at v1.24: allowPrivilegeEscalation still required", checkAllowPrivilegeEscalation, v(1, 24), windowsPod, []Violation{cv(Containers, "app", ape)}},
		{"windows pod at v1.25: allowPrivilegeEscalation exempt", checkAllowPrivilegeEscalation, v(1, 25), windowsPod, nil},
		{"windows pod at v1.24: drop ALL still required", checkCapabilitiesRestricted, v(1, 24), windowsPod, []Violation{cv(Containers, "app", capDrop)}},
		{"windows pod at v1.25: capabilities exempt", checkCapabilitiesRestricted, v(1, 25), windowsPod, nil},
		{"windows pod at v1.24: seccomp still required", checkSeccompProfileRestricted, v(1, 24), windowsPod, []Violation{cv(Containers, "app", seccomp)}},
		{"windows pod at latest: seccomp exempt", checkSeccompProfileRestricted, latest, windowsPod, nil},
		{"windows pod: runAsNonRoot is not exempt", checkRunAsNonRoot, latest, windowsPod, []Violation{cv(Containers, "app", ranr)}},
		{"hostProcess at pod and container level", checkWindowsHostProcess, latest, hostProcessPod, []Violation{
			pv("spec.securityContext.windowsOptions.hostProcess", "true"),
			cv(Containers, "app", "securityContext.windowsOptions.hostProcess", "true"),
		}},

		{"capabilities add at baseline: only caps outside the default set", checkCapabilitiesBaseline, latest, capsPod, []Violation{
			cv(Containers, "app", capAdd, "NET_ADMIN", "NET_RAW"),
		}},
		{"capabilities add at restricted: drop missing and every cap but NET_BIND_SERVICE", checkCapabilitiesRestricted, latest, capsPod, []Violation{
			cv(Containers, "app", capDrop),
			cv(Containers, "app", capAdd, "NET_ADMIN", "NET_RAW", "CHOWN"),
		}},
		{"capabilities add at restricted with drop ALL", checkCapabilitiesRestricted, latest, capsDropAllPod, []Violation{
			cv(Containers, "app", capAdd, "NET_ADMIN", "NET_RAW", "CHOWN"),
		}},
		{"capabilities restricted before v1.22 does not apply", checkCapabilitiesRestricted, v(1, 21), capsPod, nil},

		{"hostPath volumes: paths, deduplicated, in spec order", checkHostPathVolumes, latest, hostPathPod, []Violation{
			pv("spec.volumes[*].hostPath", "/var/log", "/etc"),
		}},
		{"hostPath under restrictedVolumes keeps reporting paths", checkRestrictedVolumes, latest, hostPathPod, []Violation{
			pv("spec.volumes[*].hostPath", "/var/log", "/etc"),
		}},
		{"restricted volume types: one violation per type, volume names", checkRestrictedVolumes, v(1, 30), volumesPod, []Violation{
			pv("spec.volumes[*].nfs", "nfs1", "nfs2"),
			pv("spec.volumes[*].hostPath", "/var/log"),
			pv("spec.volumes[*].gcePersistentDisk", "pd"),
			pv("spec.volumes[*]", "future"),
		}},

		{"sysctls at v1.26", checkSysctls, v(1, 26), sysctlPod, []Violation{pv("spec.securityContext.sysctls[*].name",
			"net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_rmem", "net.ipv4.tcp_slow_start_after_idle", "kernel.msgmax")}},
		{"sysctls at v1.27", checkSysctls, v(1, 27), sysctlPod, []Violation{pv("spec.securityContext.sysctls[*].name",
			"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_rmem", "net.ipv4.tcp_slow_start_after_idle", "kernel.msgmax")}},
		{"sysctls at v1.29", checkSysctls, v(1, 29), sysctlPod, []Violation{pv("spec.securityContext.sysctls[*].name",
			"net.ipv4.tcp_rmem", "net.ipv4.tcp_slow_start_after_idle", "kernel.msgmax")}},
		{"sysctls at v1.32", checkSysctls, v(1, 32), sysctlPod, []Violation{pv("spec.securityContext.sysctls[*].name",
			"net.ipv4.tcp_slow_start_after_idle", "kernel.msgmax")}},
		{"sysctls at v1.37", checkSysctls, v(1, 37), sysctlPod, []Violation{pv("spec.securityContext.sysctls[*].name", "kernel.msgmax")}},
		{"sysctls at latest", checkSysctls, latest, sysctlPod, []Violation{pv("spec.securityContext.sysctls[*].name", "kernel.msgmax")}},

		{"runAsNonRoot missing everywhere: one empty violation per container", checkRunAsNonRoot, latest, noRunAsNonRoot, []Violation{
			cv(InitContainers, "init", ranr),
			cv(Containers, "app", ranr),
		}},
		{"runAsNonRoot false at pod level: pod value and the containers it leaves unset", checkRunAsNonRoot, latest, podRunAsNonRootFalse, []Violation{
			pv("spec.securityContext.runAsNonRoot", "false"),
			cv(Containers, "app", ranr),
		}},
		{"runAsNonRoot missing in a user namespace at v1.34", checkRunAsNonRoot, v(1, 34), mkPod(userNS, withContainers(ctr("app", nil))), []Violation{cv(Containers, "app", ranr)}},
		{"runAsNonRoot missing in a user namespace at v1.35", checkRunAsNonRoot, v(1, 35), mkPod(userNS, withContainers(ctr("app", nil))), nil},
		{"runAsUser 0 before v1.23 does not apply", checkRunAsUser, v(1, 22), userNSRoot, nil},
		{"runAsUser 0 in a user namespace at v1.34", checkRunAsUser, v(1, 34), userNSRoot, []Violation{
			pv("spec.securityContext.runAsUser", "0"),
			cv(Containers, "app", "securityContext.runAsUser", "0"),
		}},
		{"runAsUser 0 in a user namespace at v1.35", checkRunAsUser, v(1, 35), userNSRoot, nil},
		{"procMount Unmasked in a user namespace at v1.34", checkProcMount, v(1, 34), userNSRoot, []Violation{cv(Containers, "app", "securityContext.procMount", "Unmasked")}},
		{"procMount Unmasked in a user namespace at v1.35 (baseline)", checkProcMount, v(1, 35), userNSRoot, nil},
		{"procMount Unmasked in a user namespace at v1.35 (restricted)", checkProcMountRestricted, v(1, 35), userNSRoot, []Violation{cv(Containers, "app", "securityContext.procMount", "Unmasked")}},
		{"procMount restricted before v1.35 does not apply", checkProcMountRestricted, v(1, 34), userNSRoot, nil},
		{"procMount Default is allowed", checkProcMount, latest, procMountPod, []Violation{cv(InitContainers, "init", "securityContext.procMount", "Unmasked")}},

		{"seccomp unset at restricted: containers without a profile", checkSeccompProfileRestricted, latest, seccompUnset, []Violation{cv(Containers, "app", seccomp)}},
		{"seccomp unset at baseline is allowed", checkSeccompProfileBaseline, latest, seccompUnset, nil},
		{"seccomp Unconfined at pod level, restricted", checkSeccompProfileRestricted, latest, seccompUnconfined, []Violation{
			pv("spec.securityContext.seccompProfile.type", "Unconfined"),
			cv(Containers, "app", seccomp),
		}},
		{"seccomp Unconfined at pod level, baseline", checkSeccompProfileBaseline, latest, seccompUnconfined, []Violation{
			pv("spec.securityContext.seccompProfile.type", "Unconfined"),
		}},
		{"seccomp Unconfined at container level, restricted", checkSeccompProfileRestricted, latest, seccompContainerUnconfined, []Violation{
			cv(Containers, "app", seccomp, "Unconfined"),
		}},
		{"seccomp restricted before v1.19 does not apply", checkSeccompProfileRestricted, v(1, 18), seccompUnset, nil},
		{"seccomp baseline before v1.19 judges annotations of existing containers", checkSeccompProfileBaseline, v(1, 18), seccompAnnotations, []Violation{
			pv(`metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"]`, "unconfined"),
			{Scope: ScopeContainer, Container: "app", ContainerType: Containers, Image: "registry.example/app:1",
				Field: `metadata.annotations["container.seccomp.security.alpha.kubernetes.io/*"]`, Values: []string{""}},
		}},
		{"seccomp baseline from v1.19 ignores annotations", checkSeccompProfileBaseline, v(1, 19), seccompAnnotations, nil},

		{"host ports in init, regular and ephemeral containers", checkHostPorts, latest, hostPortPod, []Violation{
			cv(InitContainers, "init", "ports[*].hostPort", "8080"),
			cv(Containers, "web", "ports[*].hostPort", "80", "443"),
			cv(EphemeralContainers, "debug", "ports[*].hostPort", "9000"),
		}},
		{"host namespaces", checkHostNamespaces, latest, hostNSPod, []Violation{pv("spec.hostNetwork", "true"), pv("spec.hostIPC", "true")}},

		{"AppArmor fields and annotations", checkAppArmorProfile, latest, appArmorPod, []Violation{
			pv("spec.securityContext.appArmorProfile.type", "Unconfined"),
			cv(EphemeralContainers, "dbg", "securityContext.appArmorProfile.type", "Other"),
			{Scope: ScopeContainer, Container: "dbg", ContainerType: EphemeralContainers, Image: "registry.example/dbg:1",
				Field: fAppArmorAnnotation, Values: []string{"docker-default"}},
			{Scope: ScopeContainer, Container: "ghost", Field: fAppArmorAnnotation, Values: []string{"unconfined"}},
			{Scope: ScopeContainer, Container: "sidecar", ContainerType: Containers, Image: "registry.example/sidecar:1",
				Field: fAppArmorAnnotation, Values: []string{"unconfined"}},
		}},

		{"probe and lifecycle hosts before v1.34 do not apply", checkHostProbesAndHostLifecycle, v(1, 33), probePod, nil},
		{"probe and lifecycle hosts, one field per handler", checkHostProbesAndHostLifecycle, v(1, 34), probePod, []Violation{
			cv(Containers, "app", "livenessProbe.httpGet.host", "10.0.0.1"),
			cv(Containers, "app", "readinessProbe.tcpSocket.host", "metadata.internal"),
			cv(Containers, "app", "lifecycle.postStart.httpGet.host", "10.0.0.1"),
			cv(Containers, "app", "lifecycle.preStop.tcpSocket.host", "10.0.0.2"),
		}},

		{"SELinux at v1.30: container_engine_t not yet allowed", checkSELinuxOptions, v(1, 30), seLinuxPod, []Violation{
			pv("spec.securityContext.seLinuxOptions.type", "container_engine_t"),
			cv(Containers, "app", "securityContext.seLinuxOptions.type", "spc_t"),
			cv(Containers, "app", "securityContext.seLinuxOptions.user", "system_u"),
			cv(Containers, "app", "securityContext.seLinuxOptions.role", "system_r"),
		}},
		{"SELinux at v1.31: container_engine_t allowed", checkSELinuxOptions, v(1, 31), seLinuxPod, []Violation{
			cv(Containers, "app", "securityContext.seLinuxOptions.type", "spc_t"),
			cv(Containers, "app", "securityContext.seLinuxOptions.user", "system_u"),
			cv(Containers, "app", "securityContext.seLinuxOptions.role", "system_r"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.want {
				tc.want[i].Control = controlOf(tc.check)
				tc.want[i].CheckID = string(tc.check)
			}
			got := attribute(tc.check, tc.version, &tc.pod.ObjectMeta, &tc.pod.Spec)
			if !reflect.DeepEqual(got, tc.want) {
				g, _ := json.MarshalIndent(got, "", "  ")
				w, _ := json.MarshalIndent(tc.want, "", "  ")
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
			// The expectation is only meaningful if upstream agrees that
			// the pod fails.
			fn := upstreamCheck(checkByID(t, tc.check), tc.version)
			forbidden := fn != nil && !fn(&tc.pod.ObjectMeta, &tc.pod.Spec).Allowed
			if forbidden != (len(tc.want) > 0) {
				t.Errorf("upstream forbidden=%v, but want has %d violations", forbidden, len(tc.want))
			}
			checkViolations(t, tc.check, tc.pod, got)
		})
	}
}
