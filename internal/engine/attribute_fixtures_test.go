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

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/upstreamfixtures"
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
