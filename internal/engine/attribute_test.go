package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/upstreamfixtures"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"
)

// defaultChecks is computed once: DefaultChecks builds fresh values per call.
var defaultChecks = policy.DefaultChecks()

// allVersions is every policy version the invariant is held at.
var allVersions = func() []api.Version {
	vs := make([]api.Version, 0, 39)
	for minor := 0; minor <= 37; minor++ {
		vs = append(vs, api.MajorMinorVersion(1, minor))
	}
	return append(vs, api.LatestVersion())
}()

// upstreamIndex returns the index in c.Versions of the revision that applies
// at v, the one with the greatest MinimumVersion <= v, or -1 when the check is
// newer than v.
func upstreamIndex(c policy.Check, v api.Version) int {
	idx := -1
	for i := range c.Versions {
		if v.Older(c.Versions[i].MinimumVersion) {
			break
		}
		idx = i
	}
	return idx
}

func upstreamCheck(c policy.Check, v api.Version) policy.CheckPodFn {
	if i := upstreamIndex(c, v); i >= 0 {
		return c.Versions[i].CheckPod
	}
	return nil
}

func checkByID(tb testing.TB, id policy.CheckID) policy.Check {
	tb.Helper()
	for _, c := range defaultChecks {
		if c.ID == id {
			return c
		}
	}
	tb.Fatalf("no upstream check %q", id)
	return policy.Check{}
}

// checkViolations asserts the contract every violation must meet, whatever
// the pod: the attribution is labelled with its check and control, names a
// field the control documents, and its container fields describe a real
// container (or, for the AppArmor annotation only, a name with no container).
func checkViolations(tb testing.TB, id policy.CheckID, pod *corev1.Pod, got []Violation) {
	tb.Helper()
	control := controlOf(id)
	fields := fieldsByControl[control]
	for i, viol := range got {
		fail := func(format string, args ...any) {
			tb.Helper()
			tb.Errorf("%s violation %d %+v: "+format, append([]any{id, i, viol}, args...)...)
		}
		if viol.Field == "" {
			fail("empty field")
		}
		if viol.Control != control || viol.Control == "" {
			fail("control %q, want %q", viol.Control, control)
		}
		if viol.CheckID != string(id) {
			fail("check %q, want %q", viol.CheckID, id)
		}
		if _, ok := slices.BinarySearch(fields, viol.Field); !ok {
			fail("field not in FieldsOf(%q)", control)
		}
		if viol.Values == nil {
			fail("nil values; missing settings must be []")
		}
		for j := range viol.Values {
			if slices.Contains(viol.Values[:j], viol.Values[j]) {
				fail("duplicate value %q", viol.Values[j])
			}
		}
		switch viol.Scope {
		case ScopePod:
			if viol.Container != "" || viol.ContainerType != "" || viol.Image != "" {
				fail("pod violation with container fields")
			}
			if strings.HasPrefix(viol.Field, "spec.containers[") || strings.HasPrefix(viol.Field, "spec.initContainers[") ||
				strings.HasPrefix(viol.Field, "spec.ephemeralContainers[") {
				fail("pod violation of a container field")
			}
		case ScopeContainer:
			if PodLevelOnly(control) {
				fail("container violation of pod-level-only control")
			}
			if viol.ContainerType == "" {
				if viol.Field != fAppArmorAnnotation || viol.Image != "" {
					fail("container violation without container type")
				}
				for _, c := range containers(&pod.Spec) {
					if c.Name == viol.Container {
						fail("annotation names existing container but type is unset")
					}
				}
				continue
			}
			if strings.HasPrefix(viol.Field, "spec.") && !strings.HasPrefix(viol.Field, "spec."+string(viol.ContainerType)+"[*].") {
				fail("field is not in the container's list")
			}
			found := false
			for k, c := range containers(&pod.Spec) {
				if kindTypes[k] == viol.ContainerType && c.Name == viol.Container && c.Image == viol.Image {
					found = true
					break
				}
			}
			if !found {
				fail("no such container in the pod")
			}
		default:
			fail("scope %q", viol.Scope)
		}
	}
}

// fixture is one upstream test pod.
type fixture struct {
	rel     string // path below test/testdata, used as the subtest name
	version api.Version
	fail    bool
	check   policy.CheckID // the check a fail fixture is named after
	pod     *corev1.Pod
}

// loadFixtures reads every upstream fixture once per test binary; two tests
// share them and decoding 4,500 YAML files is most of their cost.
var loadFixtures = sync.OnceValues(func() ([]fixture, error) {
	all, err := upstreamfixtures.Load()
	if err != nil {
		return nil, err
	}
	byLowerID := map[string]policy.CheckID{}
	for _, c := range defaultChecks {
		byLowerID[strings.ToLower(string(c.ID))] = c.ID
	}
	fixtures := make([]fixture, len(all))
	for i, u := range all {
		pod := u.Pod.DeepCopy()
		ApplyPodDefaults(&pod.Spec)
		f := fixture{rel: u.Rel, version: u.Version, fail: u.Fail, pod: pod}
		if f.fail {
			f.check = byLowerID[strings.TrimRight(u.Name, "0123456789")]
		}
		fixtures[i] = f
	}
	return fixtures, nil
})

func TestAttributionInvariantFixtures(t *testing.T) {
	fixtures, err := loadFixtures()
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) == 0 {
		t.Fatal("no fixtures found")
	}
	var evaluations, failures, attributed atomic.Int64
	t.Run("fixtures", func(t *testing.T) {
		for _, f := range fixtures {
			t.Run(f.rel, func(t *testing.T) {
				t.Parallel()
				pod := f.pod
				before := pod.DeepCopy()
				if f.fail {
					if f.check == "" {
						t.Fatalf("fail fixture names no known check")
					}
					c := checkByID(t, f.check)
					fn := upstreamCheck(c, f.version)
					if fn == nil || fn(&pod.ObjectMeta, &pod.Spec).Allowed {
						t.Fatalf("upstream %s does not fail its own fixture at %s", f.check, f.version)
					}
					if len(attribute(f.check, f.version, &pod.ObjectMeta, &pod.Spec)) == 0 {
						t.Errorf("%s not attributed at %s", f.check, f.version)
					}
				}
				for _, c := range defaultChecks {
					// Upstream's verdict depends only on which revision
					// applies, so compute it once per revision.
					verdicts := make([]int8, len(c.Versions)) // 0 unknown, 1 allowed, 2 forbidden
					for _, v := range allVersions {
						evaluations.Add(1)
						got := attribute(c.ID, v, &pod.ObjectMeta, &pod.Spec)
						i := upstreamIndex(c, v)
						if i < 0 {
							if got != nil {
								t.Errorf("%s at %s: check does not apply, got %v", c.ID, v, got)
							}
							continue
						}
						if verdicts[i] == 0 {
							verdicts[i] = 1
							if !c.Versions[i].CheckPod(&pod.ObjectMeta, &pod.Spec).Allowed {
								verdicts[i] = 2
							}
						}
						if forbidden := verdicts[i] == 2; forbidden != (len(got) > 0) {
							t.Errorf("%s at %s: upstream forbidden=%v, attribution %v", c.ID, v, forbidden, got)
							continue
						}
						if len(got) > 0 {
							failures.Add(1)
							attributed.Add(int64(len(got)))
						}
						checkViolations(t, c.ID, pod, got)
					}
				}
				if !apiequality.Semantic.DeepEqual(before, pod) {
					t.Errorf("attribution modified the pod")
				}
			})
		}
	})
	t.Logf("%d fixtures, %d checks, %d versions: %d (check, version, fixture) evaluations, %d failing, %d violations",
		len(fixtures), len(defaultChecks), len(allVersions), evaluations.Load(), failures.Load(), attributed.Load())
}

// attribute is what appendAttribution appends for one check on its own, as
// violations: nil when it appends nothing.
func attribute(id policy.CheckID, v api.Version, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []Violation {
	fs := appendAttribution(nil, id, v, meta, spec)
	if len(fs) == 0 {
		return nil
	}
	out := make([]Violation, len(fs))
	for i := range fs {
		out[i] = fs[i].Violation
	}
	return out
}

// TestAppendAttributionKeepsEarlierFindings: Rule.check attributes every
// failed check into one slice of findings, so a check's attribution appends
// after those of the checks before it, whether the slice has room or must
// grow, and keeps them: what it appends is what it appends on its own, at
// every fixture and check, at 1.0 (where some checks do not apply and append
// nothing) and at each of the check's revisions.
func TestAppendAttributionKeepsEarlierFindings(t *testing.T) {
	fixtures, err := loadFixtures()
	if err != nil {
		t.Fatal(err)
	}
	earlier := Finding{Violation: Violation{Control: "Privileged Containers", CheckID: "privileged", Scope: ScopeContainer,
		Container: "before", Field: "spec.containers[*].securityContext.privileged", Values: []string{"true"}}}
	for _, room := range []struct {
		name string
		cap  int
	}{{"full", 1}, {"room", 64}} {
		t.Run(room.name, func(t *testing.T) {
			for _, f := range fixtures {
				for _, c := range defaultChecks {
					versions := []api.Version{api.MajorMinorVersion(1, 0)}
					for _, r := range c.Versions {
						versions = append(versions, r.MinimumVersion)
					}
					for _, v := range versions {
						prefix := append(make([]Finding, 0, room.cap), earlier)
						got := appendAttribution(prefix, c.ID, v, &f.pod.ObjectMeta, &f.pod.Spec)
						alone := attribute(c.ID, v, &f.pod.ObjectMeta, &f.pod.Spec)
						if len(got) != 1+len(alone) || !reflect.DeepEqual(got[0], earlier) {
							t.Fatalf("%s: %s at %s: %d findings after one, want %d; first %+v", f.rel, c.ID, v, len(got), 1+len(alone), got[0])
						}
						for i := range alone {
							if !reflect.DeepEqual(got[1+i], Finding{Violation: alone[i]}) {
								t.Fatalf("%s: %s at %s: finding %d is %+v, alone %+v", f.rel, c.ID, v, i, got[1+i], alone[i])
							}
						}
					}
				}
			}
		})
	}
}

// TestFieldsOfCoversFixtureAttribution holds FieldsOf to what attribution
// actually reports, so exclusion validation never rejects a real field.
func TestFieldsOfCoversFixtureAttribution(t *testing.T) {
	fixtures, err := loadFixtures()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[policyv1alpha1.ControlName]map[string]bool{}
	for _, f := range fixtures {
		for _, c := range defaultChecks {
			for _, v := range allVersions {
				for _, viol := range attribute(c.ID, v, &f.pod.ObjectMeta, &f.pod.Spec) {
					if !slices.Contains(FieldsOf(viol.Control), viol.Field) {
						t.Errorf("%s: %s at %s reports %q, not in FieldsOf(%q)", f.rel, c.ID, v, viol.Field, viol.Control)
					}
					if seen[viol.Control] == nil {
						seen[viol.Control] = map[string]bool{}
					}
					seen[viol.Control][viol.Field] = true
				}
			}
		}
	}
	// Informational: fields the fixtures never exercise are covered by the
	// table tests and the fuzzer instead.
	var unexercised []string
	for _, control := range policyv1alpha1.Controls {
		for _, field := range FieldsOf(control) {
			if !seen[control][field] {
				unexercised = append(unexercised, field)
			}
		}
	}
	t.Logf("%d fields not reported by any fixture: %s", len(unexercised), strings.Join(unexercised, ", "))
}

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

func TestViolationJSONRendersEmptyValues(t *testing.T) {
	pod := mkPod(withContainers(ctr("app", nil)))
	got := attribute(checkRunAsNonRoot, api.LatestVersion(), &pod.ObjectMeta, &pod.Spec)
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"values":[]`)) {
		t.Errorf("missing setting does not render values as []: %s", b)
	}
}

func BenchmarkAttributeFailingFixtures(b *testing.B) {
	fixtures, err := loadFixtures()
	if err != nil {
		b.Fatal(err)
	}
	type job struct {
		id  policy.CheckID
		v   api.Version
		pod *corev1.Pod
	}
	var jobs []job
	for _, f := range fixtures {
		if f.fail {
			jobs = append(jobs, job{f.check, f.version, f.pod})
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Into findings sized as Rule.check sizes them.
		j := &jobs[i%len(jobs)]
		appendAttribution(make([]Finding, 0, 1+countContainers(&j.pod.Spec)), j.id, j.v, &j.pod.ObjectMeta, &j.pod.Spec)
	}
}
