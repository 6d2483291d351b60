package engine

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/randfill"
)

// fuzzVersion spreads a byte over v1.0..v1.37 and latest, the versions the
// fixture test covers.
func fuzzVersion(b byte) api.Version {
	n := int(b) % len(allVersions)
	return allVersions[n]
}

// fuzzWords are the strings the checks compare against, plus a few names, so
// that pods filled from random bytes hit allowed and forbidden values alike
// instead of random strings that are always forbidden.
var fuzzWords = []string{
	"", "a", "b", "/",
	"ALL", "all", "NET_BIND_SERVICE", "NET_RAW", "CHOWN", "SYS_ADMIN",
	"RuntimeDefault", "Localhost", "Unconfined",
	"windows", "linux",
	"container_t", "container_init_t", "container_engine_t", "spc_t",
	"Default", "Unmasked",
	"runtime/default", "localhost/p", "docker/default", "unconfined",
	"kernel.shm_rmid_forced", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_rmem", "net.ipv4.tcp_slow_start_after_idle", "kernel.msgmax",
	"container.apparmor.security.beta.kubernetes.io/a",
	"container.apparmor.security.beta.kubernetes.io/",
	"seccomp.security.alpha.kubernetes.io/pod",
	"container.seccomp.security.alpha.kubernetes.io/a",
	"container.seccomp.security.alpha.kubernetes.io/b",
}

// fuzzSkipFields are deep structures no check looks at. Left in, nested lists
// multiply (affinity terms of match expressions of values...) and a single
// input can take seconds to fill.
var fuzzSkipFields = regexp.MustCompile(`^(Affinity|TopologySpreadConstraints|Overhead|Resources|ResourceClaims|` +
	`Env|EnvFrom|VolumeMounts|VolumeDevices|ResizePolicy|RestartPolicyRules|Tolerations|ReadinessGates|DNSConfig|` +
	`HostAliases|ImagePullSecrets|SchedulingGates|NodeSelector|Sources|VolumeClaimTemplate|Items|Command|Args|` +
	`Exec|GRPC|HTTPHeaders|SecretRef|SecretReference|ClusterTrustBundle|Monitors|TargetWWNs|WWIDs|Portals|Options|` +
	`VolumeAttributes|NodePublishSecretRef|Labels|Finalizers)$`)

func pickWord[T ~string](s *T, c randfill.Continue) { *s = T(fuzzWords[c.Intn(len(fuzzWords))]) }

// fillPod builds a pod from bytes that are not JSON. Mutating JSON mostly
// breaks it, so without this most fuzz executions would be skipped; filling
// the structure directly reaches pointer and list combinations (nil
// securityContexts, sourceless volumes, several sources in one volume) that
// hand-written seeds miss.
func fillPod(data []byte) *corev1.Pod {
	pod := &corev1.Pod{}
	f := randfill.NewFromGoFuzz(data).NilChance(0.6).NumElements(0, 3).MaxDepth(12).SkipFieldsWithPattern(fuzzSkipFields).Funcs(
		pickWord[string],
		pickWord[corev1.Capability],
		pickWord[corev1.SeccompProfileType],
		pickWord[corev1.AppArmorProfileType],
		pickWord[corev1.ProcMountType],
		pickWord[corev1.OSName],
		func(i *int32, c randfill.Continue) { *i = []int32{0, 0, 80, 8080}[c.Intn(4)] },
		func(i *int64, c randfill.Continue) { *i = []int64{0, 1000}[c.Intn(2)] },
		func(q *resource.Quantity, c randfill.Continue) {},
		func(vs *corev1.VolumeSource, c randfill.Continue) {
			c.FillNoCustom(vs)
			// Some volume sets one of the allowed sources in almost every
			// random pod, which would hide restrictedVolumes; clear them
			// often, and sometimes leave a volume with no known source.
			switch c.Intn(4) {
			case 0:
				*vs = corev1.VolumeSource{}
			case 1, 2:
				vs.ConfigMap, vs.CSI, vs.DownwardAPI, vs.EmptyDir, vs.Ephemeral = nil, nil, nil, nil, nil
				vs.Image, vs.PersistentVolumeClaim, vs.Projected, vs.Secret = nil, nil, nil, nil
			}
		},
	)
	f.Fill(&pod.Annotations)
	f.Fill(&pod.Spec)
	return pod
}

// FuzzAttributionInvariant holds attribute to upstream on arbitrary pods:
// for every check that applies at the version, upstream forbids the pod
// exactly when attribution reports something, and what it reports meets the
// Violation contract. Input that decodes as JSON is the pod (the seed corpus
// in testdata/fuzz holds upstream fixtures and hand-written pods); anything
// else seeds fillPod.
func FuzzAttributionInvariant(f *testing.F) {
	f.Add([]byte(`{"spec":{"containers":[{"name":"a"}]}}`), byte(37))
	f.Add([]byte("\x00\x01\x02\x03not json"), byte(38))
	f.Fuzz(func(t *testing.T, data []byte, ver byte) {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(data, pod); err != nil {
			pod = fillPod(data)
		}
		v := fuzzVersion(ver)
		before := pod.DeepCopy()
		results := make([][]Violation, len(defaultChecks))
		for i, c := range defaultChecks {
			results[i] = fuzzCheck(t, c, v, pod)
		}
		if !apiequality.Semantic.DeepEqual(before, pod) {
			t.Errorf("attribution modified the pod")
		}
		// Upstream only says whether the pod as a whole fails, so the
		// invariant alone would not notice a violation pinned on the wrong
		// container. Every check judges a container by its own fields and
		// the pod's, never its siblings', so a container's violations must
		// be the same when it is the pod's only container; and upstream
		// must agree about that single-container pod too.
		if !uniqueContainerNames(&pod.Spec) {
			return
		}
		for k, ctr := range containers(&pod.Spec) {
			solo := soloPod(pod, k, ctr)
			for i, c := range defaultChecks {
				got := containerViolations(fuzzCheck(t, c, v, solo), k, ctr.Name)
				want := containerViolations(results[i], k, ctr.Name)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s at %s: %s %q alone has violations %v, among its siblings %v", c.ID, v, kindTypes[k], ctr.Name, got, want)
				}
			}
		}
	})
}

// fuzzCheck runs one check both ways and asserts the invariant.
func fuzzCheck(t *testing.T, c policy.Check, v api.Version, pod *corev1.Pod) []Violation {
	t.Helper()
	got := attribute(c.ID, v, &pod.ObjectMeta, &pod.Spec)
	fn := upstreamCheck(c, v)
	if fn == nil {
		if got != nil {
			t.Errorf("%s at %s: check does not apply, got %v", c.ID, v, got)
		}
		return got
	}
	if forbidden := !fn(&pod.ObjectMeta, &pod.Spec).Allowed; forbidden != (len(got) > 0) {
		t.Errorf("%s at %s: upstream forbidden=%v, attribution %v", c.ID, v, forbidden, got)
	}
	checkViolations(t, c.ID, pod, got)
	return got
}

// uniqueContainerNames reports whether container names identify containers,
// across all lists as the AppArmor annotations see them.
func uniqueContainerNames(spec *corev1.PodSpec) bool {
	seen := map[string]bool{}
	for _, c := range containers(spec) {
		if seen[c.Name] {
			return false
		}
		seen[c.Name] = true
	}
	return true
}

// soloPod is pod with ctr as its only container, in the same list.
func soloPod(pod *corev1.Pod, k ctrKind, ctr *corev1.Container) *corev1.Pod {
	solo := pod.DeepCopy()
	solo.Spec.InitContainers, solo.Spec.Containers, solo.Spec.EphemeralContainers = nil, nil, nil
	c := *ctr.DeepCopy()
	switch k {
	case kindInit:
		solo.Spec.InitContainers = []corev1.Container{c}
	case kindRegular:
		solo.Spec.Containers = []corev1.Container{c}
	case kindEphemeral:
		solo.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)}}
	}
	return solo
}

func containerViolations(all []Violation, k ctrKind, name string) []Violation {
	var out []Violation
	for _, viol := range all {
		if viol.Scope == ScopeContainer && viol.ContainerType == kindTypes[k] && viol.Container == name {
			out = append(out, viol)
		}
	}
	return out
}
