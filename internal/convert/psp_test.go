package convert

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

func convertPSPFile(t *testing.T, path string) (*Result, compiled) {
	t.Helper()
	res, err := PSP(readTestdata(t, path), PSPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 {
		t.Fatalf("%d objects, want 1", len(res.Objects))
	}
	return res, compileResult(t, res)
}

func hostPathVolume(path string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "host", MountPath: "/host", ReadOnly: true})
	}
}

func hostPort(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func seLinuxType(t string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.SecurityContext == nil {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: t}
	}
}

func seccomp(t corev1.SeccompProfileType) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.SecurityContext == nil {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: t}
		if t == corev1.SeccompProfileTypeLocalhost {
			p.Spec.SecurityContext.SeccompProfile.LocalhostProfile = ptr("profiles/agent.json")
		}
	}
}

// profilesSet sets the seccomp and AppArmor profiles that the mesh PSP
// lists and does not default: runtime/default.
func profilesSet(p *corev1.Pod) {
	seccomp(corev1.SeccompProfileTypeRuntimeDefault)(p)
	p.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
}

func groups(p *corev1.Pod) {
	p.Spec.SecurityContext.FSGroup = ptr(int64(1000))
	p.Spec.SecurityContext.SupplementalGroups = []int64{1000}
}

func privilegedApp(p *corev1.Pod) {
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
}

func sysctl(name string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.SecurityContext == nil {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: name, Value: "1"})
	}
}

func nfsVolume(p *corev1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/data"}}})
}

// TestPSPAdmitsWhatThePSPAdmits decides, with each converted PSP, pods that
// the PSP admits as written (every field the PSP would have defaulted is set,
// since podsieve does not mutate) and pods it refuses. A pod the PSP admits
// must be admitted; the pods it refuses for a reason the Pod Security
// Standards share must be refused too. Pods refused only for what has no
// counterpart (read-only hostPath mounts, group ranges) are not in the table:
// docs/semantics.md lists them.
func TestPSPAdmitsWhatThePSPAdmits(t *testing.T) {
	tests := []struct {
		psp       string
		wantLevel policyv1alpha1.PodSecurityLevel
		admitted  map[string]*corev1.Pod
		refused   map[string]*corev1.Pod
	}{
		{
			psp:       "testdata/psp/restricted.yaml",
			wantLevel: policyv1alpha1.LevelRestricted,
			admitted: map[string]*corev1.Pod{
				"a restricted pod with groups in range": pod("a", "web", restrictedPod, groups),
				"any SELinux type (rule RunAsAny)":      pod("a", "web", restrictedPod, groups, seLinuxType("spc_t")),
				"a restricted pod with a mesh init":     pod("a", "web", withInit("init", "busybox:1.36"), restrictedPod, groups),
				"a restricted pod with NET_BIND_SERVICE": pod("a", "web", restrictedPod, func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
				}),
			},
			refused: map[string]*corev1.Pod{
				"host network": pod("a", "web", restrictedPod, hostNetwork),
				"privileged":   pod("a", "web", privilegedApp),
				"NET_ADMIN": pod("a", "web", restrictedPod, func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
				}),
				"root (MustRunAsNonRoot)": pod("a", "web", restrictedPod, func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsNonRoot = ptr(false) }),
				"a hostPath volume":       pod("a", "web", restrictedPod, hostPathVolume("/var/log")),
				"an nfs volume":           pod("a", "web", restrictedPod, nfsVolume),
				"escalation allowed":      pod("a", "web", restrictedPod, func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true) }),
			},
		},
		{
			psp:       "testdata/psp/mesh.yaml",
			wantLevel: policyv1alpha1.LevelBaseline,
			// The PSP lists seccomp and AppArmor profiles without a default:
			// it refused pods without them, so every admitted pod sets them.
			admitted: map[string]*corev1.Pod{
				"mesh init with NET_ADMIN and NET_RAW": pod("a", "web", withInit("istio-init", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN", "NET_RAW"), profilesSet),
				"an app adding CHOWN and NET_RAW":      pod("a", "web", withApp("agent:1", "CHOWN", "NET_RAW"), profilesSet),
				"hostPath under /var/log, read-only":   pod("a", "agent", hostPathVolume("/var/log/pods"), profilesSet),
				"hostPath /run/agent itself":           pod("a", "agent", hostPathVolume("/run/agent"), profilesSet),
				"host port in range":                   pod("a", "agent", hostPort(9105), profilesSet),
				"host port at the range's end":         pod("a", "agent", hostPort(9110), profilesSet),
				"the SELinux type it sets":             pod("a", "agent", seLinuxType("spc_t"), profilesSet),
				"an allowed unsafe sysctl":             pod("a", "agent", sysctl("net.core.somaxconn"), profilesSet),
				"an nfs volume":                        pod("a", "agent", nfsVolume, profilesSet),
				"root":                                 pod("a", "agent", func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))} }, profilesSet),
				"a localhost seccomp profile":          pod("a", "agent", profilesSet, seccomp(corev1.SeccompProfileTypeLocalhost)),
			},
			refused: map[string]*corev1.Pod{
				"SYS_ADMIN":                pod("a", "web", withInit("istio-init", "docker.io/istio/proxyv2:1.24.0", "NET_ADMIN", "SYS_ADMIN")),
				"hostPath /etc":            pod("a", "agent", hostPathVolume("/etc")),
				"hostPath /var/logs-other": pod("a", "agent", hostPathVolume("/var/logs-other")),
				"host port out of range":   pod("a", "agent", hostPort(9111)),
				"another SELinux type":     pod("a", "agent", seLinuxType("unconfined_t")),
				"another unsafe sysctl":    pod("a", "agent", sysctl("kernel.msgmax")),
				"privileged":               pod("a", "agent", privilegedApp),
				"host network":             pod("a", "agent", hostNetwork),
				"seccomp Unconfined":       pod("a", "agent", profilesSet, seccomp(corev1.SeccompProfileTypeUnconfined)),
			},
		},
		{
			// No seccomp annotation: the PSP admitted pods without a profile
			// and refused every profile, Unconfined included.
			psp:       "testdata/psp/no-profiles.yaml",
			wantLevel: policyv1alpha1.LevelBaseline,
			admitted: map[string]*corev1.Pod{
				"no seccomp profile": pod("a", "web"),
				"root":               pod("a", "web", func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(0))} }),
			},
			refused: map[string]*corev1.Pod{
				"seccomp Unconfined on the pod": pod("a", "web", seccomp(corev1.SeccompProfileTypeUnconfined)),
				"seccomp Unconfined on the container": pod("a", "web", func(p *corev1.Pod) {
					p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
				}),
				"host network": pod("a", "web", hostNetwork),
			},
		},
		{
			psp:       "testdata/psp/privileged.yaml",
			wantLevel: policyv1alpha1.LevelPrivileged,
			admitted: map[string]*corev1.Pod{
				"privileged with the host's network": pod("a", "node", privilegedApp, hostNetwork, hostPathVolume("/"), hostPort(22)),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.psp, func(t *testing.T) {
			res, c := convertPSPFile(t, tt.psp)
			sp := res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy)
			if got := sp.Spec.Rules[0].PodSecurity.Level; got != tt.wantLevel {
				t.Errorf("level %s, want %s", got, tt.wantLevel)
			}
			for name, p := range tt.admitted {
				if d := c.decide(t, p, nil); !d.Allowed {
					t.Errorf("%s: refused; failing %v", name, failing(d))
				}
			}
			for name, p := range tt.refused {
				if d := c.decide(t, p, nil); d.Allowed {
					t.Errorf("%s: admitted", name)
				}
			}
		})
	}
}

// TestPSPReportsWhatIsLost: every PSP restriction without a Pod Security
// Standards counterpart is reported on its field.
func TestPSPReportsWhatIsLost(t *testing.T) {
	res, _ := convertPSPFile(t, "testdata/psp/mesh.yaml")
	var fields []string
	for _, n := range res.Notes {
		if n.Severity == Untranslated {
			fields = append(fields, n.Field)
		}
	}
	// In the order they are found.
	want := []string{
		"spec.allowedHostPaths[0].readOnly", "spec.seLinux", "spec.forbiddenSysctls",
		"metadata.annotations[apparmor.security.beta.kubernetes.io/allowedProfileNames]",
		"spec.volumes",
		"metadata.annotations[seccomp.security.alpha.kubernetes.io/allowedProfileNames]",
	}
	if !slices.Equal(fields, want) {
		t.Errorf("untranslated fields %v, want %v", fields, want)
	}
	res, _ = convertPSPFile(t, "testdata/psp/restricted.yaml")
	fields = nil
	for _, n := range res.Notes {
		if n.Severity == Untranslated {
			fields = append(fields, n.Field)
		}
	}
	if want := []string{"spec.supplementalGroups", "spec.fsGroup"}; !slices.Equal(fields, want) {
		t.Errorf("untranslated fields %v, want %v", fields, want)
	}
}

func TestPSPBadInput(t *testing.T) {
	docs, err := Read([]string{"-"}, strings.NewReader("apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata: {name: x}\nspec:\n  runAsUser: {rule: MustRunAsRoot}\n  seLinux: {rule: RunAsAny}\n  hostPortz: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PSP(docs, PSPOptions{EveryPolicyApplies: true}); err == nil || !strings.Contains(err.Error(), `"spec.hostPortz"`) {
		t.Errorf("error %v, want the unknown field named", err)
	}
	docs, _ = Read([]string{"-"}, strings.NewReader("apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata: {name: x}\nspec:\n  runAsUser: {rule: MustRunAsRoot}\n  seLinux: {rule: RunAsAny}\n"))
	if _, err := PSP(docs, PSPOptions{EveryPolicyApplies: true}); err == nil || !strings.Contains(err.Error(), `spec.runAsUser.rule: "MustRunAsRoot" is not a rule`) {
		t.Errorf("error %v, want the bad rule named", err)
	}
}

// TestPSPSeccompProfiles: the seccomp annotations decide the Seccomp
// exclusion (only when the PSP admitted unconfined pods) and whether pods
// without a profile, which a list without a default refused, are reported.
func TestPSPSeccompProfiles(t *testing.T) {
	const field = "metadata.annotations[" + seccompAllowed + "]"
	tests := []struct {
		name             string
		annotations      string
		wantExclusion    bool
		wantUntranslated bool
	}{
		{"no annotation", "{}", false, false},
		{"empty list", `{seccomp.security.alpha.kubernetes.io/allowedProfileNames: ""}`, false, false},
		{"a list without a default", `{seccomp.security.alpha.kubernetes.io/allowedProfileNames: "runtime/default"}`, false, true},
		{"a list with a default", `{seccomp.security.alpha.kubernetes.io/allowedProfileNames: "runtime/default", seccomp.security.alpha.kubernetes.io/defaultProfileName: "runtime/default"}`, false, false},
		{"any profile", `{seccomp.security.alpha.kubernetes.io/allowedProfileNames: "*"}`, true, false},
		{"unconfined without a default", `{seccomp.security.alpha.kubernetes.io/allowedProfileNames: "runtime/default,unconfined"}`, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Read([]string{"-"}, strings.NewReader("apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata: {name: x, annotations: "+tt.annotations+"}\nspec:\n  runAsUser: {rule: RunAsAny}\n  seLinux: {rule: RunAsAny}\n"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := PSP(docs, PSPOptions{EveryPolicyApplies: true})
			if err != nil {
				t.Fatal(err)
			}
			sp := res.Objects[0].Object.(*policyv1alpha1.SecurityPolicy)
			exclusion := slices.ContainsFunc(sp.Spec.Rules[0].PodSecurity.Exclude, func(x policyv1alpha1.PodSecurityExclusion) bool { return x.ControlName == "Seccomp" })
			untranslated := slices.ContainsFunc(res.Notes, func(n Note) bool { return n.Severity == Untranslated && n.Field == field })
			if exclusion != tt.wantExclusion || untranslated != tt.wantUntranslated {
				t.Errorf("Seccomp exclusion %v, untranslated %v; want %v, %v: %v", exclusion, untranslated, tt.wantExclusion, tt.wantUntranslated, res.Notes)
			}
		})
	}
}

// TestPSPSeveralRefuseToGuess: several PodSecurityPolicies are refused,
// saying what the user must decide, unless every converted policy is to
// apply to every pod; one is converted as before.
func TestPSPSeveralRefuseToGuess(t *testing.T) {
	psp := func(name, extra string) string {
		return "apiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata: {name: " + name + "}\nspec:\n  runAsUser: {rule: RunAsAny}\n  seLinux: {rule: RunAsAny}\n" + extra
	}
	tests := []struct {
		name    string
		input   string
		opts    PSPOptions
		objects int
		err     string
	}{
		{"one", psp("restricted", ""), PSPOptions{}, 1, ""},
		{"two", psp("restricted", "") + "---\n" + psp("privileged", "  privileged: true\n"), PSPOptions{}, 0,
			"2 PodSecurityPolicies (restricted, privileged): PodSecurityPolicy admits a pod when any PodSecurityPolicy"},
		{"two, every policy applying", psp("restricted", "") + "---\n" + psp("privileged", "  privileged: true\n"), PSPOptions{EveryPolicyApplies: true}, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Read([]string{"-"}, strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			res, err := PSP(docs, tt.opts)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrPSPAny) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case len(res.Objects) != tt.objects:
				t.Fatalf("%d objects, want %d", len(res.Objects), tt.objects)
			}
		})
	}
}

// TestPSPVolumeSpellings: a PodSecurityPolicy names cephfs volumes cephFS;
// the converted restricted rule allows spec.volumes[*].cephfs, the pod's
// field, as the PSP did (it was dropped, and cephfs refused).
func TestPSPVolumeSpellings(t *testing.T) {
	restricted, err := os.ReadFile(filepath.Join("testdata", "psp", "restricted.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withCephFS := strings.Replace(string(restricted), "  - ephemeral\n", "  - ephemeral\n  - cephFS\n  - nfs\n", 1)
	if withCephFS == string(restricted) {
		t.Fatal("testdata/psp/restricted.yaml lists no ephemeral volumes to add after")
	}
	docs, err := Read([]string{"-"}, strings.NewReader(withCephFS))
	if err != nil {
		t.Fatal(err)
	}
	res, err := PSP(docs, PSPOptions{EveryPolicyApplies: true})
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, o := range res.Objects {
		for _, r := range o.Object.(*policyv1alpha1.SecurityPolicy).Spec.Rules {
			for _, x := range r.PodSecurity.Exclude {
				if x.ControlName == policyv1alpha1.ControlVolumeTypes {
					fields = append(fields, x.RestrictedField)
				}
			}
		}
	}
	for _, want := range []string{"spec.volumes[*].cephfs", "spec.volumes[*].nfs"} {
		if !slices.Contains(fields, want) {
			t.Errorf("Volume Types exclusions %v lack %s", fields, want)
		}
	}
}
