package generate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/enginetest"
)

func TestImageGlob(t *testing.T) {
	tests := []struct {
		name, image string
		anyTag      bool
		want        string
	}{
		{"as written", "docker.io/istio/proxyv2:1.24.0", false, "docker.io/istio/proxyv2:1.24.0"},
		{"familiar, qualified so its registry is pinned", "nginx:1.25", false, "docker.io/library/nginx:1.25"},
		{"any tag", "docker.io/istio/proxyv2:1.24.0", true, "docker.io/istio/proxyv2:*"},
		{"any tag of a familiar image", "nginx:1.25", true, "docker.io/library/nginx:*"},
		{"any tag of an untagged image", "nginx", true, "docker.io/library/nginx:*"},
		{"digest only", "quay.io/a/b@sha256:0123456789012345678901234567890123456789012345678901234567890123", true, "quay.io/a/b@*"},
		{"tag and digest", "quay.io/a/b:1@sha256:0123456789012345678901234567890123456789012345678901234567890123", true, "quay.io/a/b:*"},
		{"not a reference", "Not A Reference*", true, "Not A Reference?"},
		{"untagged, pinned to latest", "nginx", false, "docker.io/library/nginx:latest"},
		{"untagged with a registry port", "registry.example:5000/team/app", false, "registry.example:5000/team/app:latest"},
		{"digest only, as written", "quay.io/a/b@sha256:0123456789012345678901234567890123456789012345678901234567890123", false, "quay.io/a/b@sha256:0123456789012345678901234567890123456789012345678901234567890123"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := imageGlob(tt.image, tt.anyTag)
			if got != tt.want {
				t.Fatalf("imageGlob = %q, want %q", got, tt.want)
			}
			// The glob matches the image it was written for.
			x, err := engine.CompileExclusion(policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", Images: []string{got}}, engine.Source{}, "e")
			if err != nil {
				t.Fatal(err)
			}
			v := engine.Violation{Control: "Capabilities", Scope: engine.ScopeContainer, Container: "c", Image: tt.image, Field: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}
			if why := x.WhyNot(&v); why != "" {
				t.Fatalf("the glob does not match its image: %s", why)
			}
			// Without --any-tag, it matches no other tag of the image.
			if !tt.anyTag {
				if named, err := reference.ParseNormalizedNamed(tt.image); err == nil {
					v.Image = named.Name() + ":1.0-debug"
					if x.WhyNot(&v) == "" {
						t.Fatalf("the glob %q also matches %s", got, v.Image)
					}
				}
			}
		})
	}
}

// TestGenerateSplitsLargeWaivers: when the narrowest exception needs more
// than one PolicyException holds (here 20 image globs, over the 16 of the
// schema), generate writes several, each within the schema and named
// predictably, that together admit the workload; each alone does not, and
// one more violation is still refused.
func TestGenerateSplitsLargeWaivers(t *testing.T) {
	p := policy(t, `exceptions:
  controls:
  - {controlName: Capabilities, allowedValues: [NET_ADMIN, NET_RAW]}
rules: [{name: baseline, podSecurity: {level: baseline}}]`)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "team-a"}}
	for i := range 20 {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Image: fmt.Sprintf("registry.example/tool-%d:1", i), SecurityContext: caps("NET_ADMIN")})
	}
	d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, pod), nil, now, engine.Admission)
	plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var excs []*engine.Exception
	for _, ex := range plan.Exceptions {
		names = append(names, ex.Object.Name)
		if !ex.Permitted() {
			t.Errorf("%s refused: %v %v", ex.Object.Name, ex.Refused, ex.RefusedEntries)
		}
		images := 0
		for _, e := range ex.Object.Spec.PodSecurity {
			images += len(e.Images)
		}
		if len(ex.Object.Spec.PodSecurity) > engine.MaxExceptionEntries || images > engine.MaxExceptionImages {
			t.Errorf("%s: %d entries, %d image globs: more than one PolicyException holds", ex.Object.Name, len(ex.Object.Spec.PodSecurity), images)
		}
		if !slices.ContainsFunc(ex.Notes, func(n string) bool { return strings.Contains(n, "together waive") }) {
			t.Errorf("%s: notes %q do not say the parts are needed together", ex.Object.Name, ex.Notes)
		}
		e, err := engine.CompileException(ex.Object, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		excs = append(excs, e)
	}
	if want := []string{"agent-p", "agent-p-part-2"}; !slices.Equal(names, want) {
		t.Fatalf("exceptions %q, want %q", names, want)
	}
	decide := func(pod *corev1.Pod, excs ...*engine.Exception) bool {
		return engine.Decide([]*engine.Policy{p}, engine.AllExceptions(excs), object(t, pod), nil, now, engine.Admission).Allowed
	}
	if !decide(pod, excs...) {
		t.Error("refused with every part")
	}
	for i := range excs {
		if decide(pod, excs[i]) {
			t.Errorf("admitted with %s alone", names[i])
		}
	}
	more := pod.DeepCopy()
	more.Spec.Containers[19].SecurityContext = caps("NET_ADMIN", "NET_RAW")
	if decide(more, excs...) {
		t.Error("one more capability admitted")
	}
}

// TestSplitEntries: parts are filled in order up to each limit of one
// PolicyException, and entries are never merged.
func TestSplitEntries(t *testing.T) {
	entry := func(images, names, values int) policyv1alpha1.PodSecurityExclusion {
		var e policyv1alpha1.PodSecurityExclusion
		for i := range images {
			e.Images = append(e.Images, fmt.Sprintf("registry.example/i%d:*", i))
		}
		for i := range names {
			e.ContainerNames = append(e.ContainerNames, fmt.Sprintf("c%d", i))
		}
		for i := range values {
			e.Values = append(e.Values, fmt.Sprint(i))
		}
		return e
	}
	repeat := func(n int, e policyv1alpha1.PodSecurityExclusion) []policyv1alpha1.PodSecurityExclusion {
		out := make([]policyv1alpha1.PodSecurityExclusion, n)
		for i := range out {
			out[i] = e
		}
		return out
	}
	tests := []struct {
		name    string
		entries []policyv1alpha1.PodSecurityExclusion
		want    []int // entries per part
	}{
		{"fits", repeat(16, entry(1, 2, 4)), []int{16}},
		{"17 entries", repeat(17, entry(0, 0, 0)), []int{16, 1}},
		{"images", repeat(6, entry(3, 0, 0)), []int{5, 1}},
		{"container names", repeat(5, entry(0, 8, 0)), []int{4, 1}},
		{"an entry naming more containers than one may", repeat(1, entry(1, 20, 1)), []int{3}},
		{"an entry naming more containers and images than one may: every pairing of shares", repeat(1, entry(10, 9, 1)), []int{2, 2}},
		{"values", repeat(5, entry(0, 0, 16)), []int{4, 1}},
		{"40 entries", repeat(40, entry(0, 1, 1)), []int{16, 16, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// What the entries waive, as (container, image, value) triples:
			// the same before and after, so nothing is merged or widened.
			waived := func(entries []policyv1alpha1.PodSecurityExclusion) map[string]bool {
				out := map[string]bool{}
				for _, e := range entries {
					for _, n := range append([]string{"*"}, e.ContainerNames...) {
						for _, i := range append([]string{"*"}, e.Images...) {
							if (n == "*") != (len(e.ContainerNames) == 0) || (i == "*") != (len(e.Images) == 0) {
								continue
							}
							out[n+"|"+i+"|"+strings.Join(e.Values, ",")] = true
						}
					}
				}
				return out
			}
			fitted, _ := fitEntries(tt.entries, nil)
			var got []int
			var all []policyv1alpha1.PodSecurityExclusion
			for _, part := range splitEntries(fitted) {
				got = append(got, len(part))
				for _, e := range part {
					if len(e.ContainerNames) > engine.MaxEntryContainerNames || len(e.Images) > engine.MaxEntryImages {
						t.Errorf("an entry names %d containers and %d images", len(e.ContainerNames), len(e.Images))
					}
				}
				all = append(all, part...)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parts of %v entries, want %v", got, tt.want)
			}
			if w, g := waived(tt.entries), waived(all); !maps.Equal(w, g) {
				t.Errorf("the parts waive %d (container, image, values), the entries %d", len(g), len(w))
			}
		})
	}
}

// TestGenerateWithinTheSchema: a violation with more values than one entry
// may list (an entry covers a violation only with all its values) has no
// exception the schema allows, and generate says so rather than print one
// the API server would refuse; 16 values fit.
func TestGenerateWithinTheSchema(t *testing.T) {
	p := policy(t, "exceptions: {}\n"+enginetest.BaselineRule)
	podAdding := func(n int) *corev1.Pod {
		var add []corev1.Capability
		for i := range n {
			add = append(add, corev1.Capability(fmt.Sprintf("CAP_%d", i)))
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "caps", Namespace: "team-a"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1", SecurityContext: caps(add...)}}}}
	}
	for _, tt := range []struct {
		name    string
		values  int
		wantErr string
	}{
		{"16 values fit one entry", 16, ""},
		{"17 values do not", 17, "Pod team-a/caps: no PolicyException the schema allows waives exactly this: spec.podSecurity[0].values: 17 values; an entry lists at most 16"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := engine.Decide([]*engine.Policy{p}, engine.AllExceptions(nil), object(t, podAdding(tt.values)), nil, now, engine.Admission)
			plan, err := For(d, Options{Now: now, ExceptionsNamespace: "podsieve-system"})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err %v, want %q (plan %d exceptions)", err, tt.wantErr, len(plan.Exceptions))
			}
			for _, ex := range plan.Exceptions {
				if err := engine.ExceptionEntriesFit(ex.Object.Spec.PodSecurity); err != nil {
					t.Errorf("%s: %v", ex.Object.Name, err)
				}
			}
		})
	}
}
