package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/internal/samples"
)

// TestImageGlobHasLiteralPart: a glob has a literal part when it writes out
// a registry host or a whole repository path segment; every spelling of
// "any image" has none.
func TestImageGlobHasLiteralPart(t *testing.T) {
	tests := []struct {
		name, glob string
		want       bool
	}{
		// Every image, spelled many ways.
		{"a star", "*", false},
		{"a double star", "**", false},
		{"a run of stars", "****", false},
		{"any name, any tag", "**:*", false},
		{"any name, any digest", "**@*", false},
		{"any name, any tag, double", "**:**", false},
		{"any path", "*/**", false},
		{"any two segments, any tag", "*/*:*", false},
		{"any three segments", "*/*/*", false},
		{"any segments below any", "**/*", false},
		{"any segments, slash-led", "/**", false},
		{"question marks", "?*", false},
		{"question marks in segments", "???/**", false},
		{"wildcard segments and a tag", "*/**:latest", false},
		{"a literal tag only", "**:1.24.0", false},
		{"a literal digest only", "**@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", false},
		{"a partial segment", "**proxyv2", false},
		{"a partial segment after a slash", "**/proxy*", false},
		{"a partial host", "docker.*/**", false},
		{"punctuation only", "*/-/*", false},
		{"empty segments", "*//*", false},
		{"one segment running past a slash", "nginx:**", false},
		{"one segment with a double star", "nginx**", false},
		// A literal part.
		{"a registry host", "docker.io/**", true},
		{"a host with a port", "registry.local:5000/**", true},
		{"a repository segment", "**/proxyv2:*", true},
		{"a middle segment", "**/istio/**", true},
		{"a wildcard registry, literal path", "*/istio/proxyv2*", true},
		{"a familiar name", "nginx", true},
		{"a familiar name, any tag", "nginx:*", true},
		{"a familiar name, any digest", "nginx@*", true},
		{"a Docker Hub namespace", "istio/*", true},
		{"fully written", "docker.io/istio/proxyv2:1.24.0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ImageGlobHasLiteralPart(tt.glob); got != tt.want {
				t.Errorf("ImageGlobHasLiteralPart(%q) = %v, want %v", tt.glob, got, tt.want)
			}
		})
	}
}

// TestImageGlobWithin: a glob is within allowedRegistries when every image
// it can match is on one of the registries, under the path prefix when one
// is given, as the runtime reads the images.
func TestImageGlobWithin(t *testing.T) {
	allowed := []string{"docker.io/istio", "gcr.io/istio-release", "quay.io", "localhost:5000/mesh", "docker.io/library"}
	tests := []struct {
		name, glob string
		want       bool
	}{
		{"under a path prefix", "gcr.io/istio-release/proxyv2:*", true},
		{"every image under a path prefix", "gcr.io/istio-release/**", true},
		{"the path prefix is a repository", "gcr.io/istio-release:1.0", true},
		{"the path prefix written out", "gcr.io/istio-release", true},
		{"the path prefix by digest", "gcr.io/istio-release@sha256:*", true},
		{"a sibling path", "gcr.io/istio-release-evil/proxyv2", false},
		{"a longer name", "gcr.io/istio-releasex", false},
		{"a longer name with a wildcard", "gcr.io/istio-releasex/**", false},
		{"a wildcard after the prefix", "gcr.io/istio-release*", false},
		{"a wildcard after the prefix, then a slash", "gcr.io/istio-release*/proxyv2", false},
		{"a question mark after the prefix", "gcr.io/istio-release?proxyv2", false},
		{"a double star after the prefix", "gcr.io/istio-release**", false},
		{"the registry, not the path", "gcr.io/**", false},
		{"a wildcard in the path prefix", "gcr.io/istio-*/proxyv2", false},
		{"a whole registry", "quay.io/anything/at/all:*", true},
		{"a whole registry, every image", "quay.io/**", true},
		{"a wildcard host", "*/istio/proxyv2", false},
		{"a lone star, which matches every image", "*", false},
		{"a host with a wildcard", "quay.*/x", false},
		{"a host prefix", "quay.io.attacker.example/x", false},
		{"a host with another port", "quay.io:443/x", false},
		{"an uppercase host is another string", "QUAY.io/x", false},
		{"a leading double star", "**/istio/proxyv2", false},
		{"a Docker Hub namespace, familiar", "istio/proxyv2:*", true},
		{"a Docker Hub namespace, qualified", "docker.io/istio/proxyv2", true},
		{"Docker Hub's legacy name", "index.docker.io/istio/proxyv2", true},
		{"another Docker Hub namespace", "attacker/proxyv2", false},
		{"a Docker Hub namespace that starts like an allowed one", "istio-evil/proxyv2", false},
		{"an official image, familiar", "nginx:1.25", true},
		{"an official image, any tag", "nginx:*", true},
		{"an official image, qualified without library", "docker.io/nginx:*", true},
		{"an official image, qualified", "docker.io/library/nginx", true},
		{"any official image", "*:*", true},
		{"a double star on Docker Hub can leave library", "docker.io/ngin**", false},
		{"one segment with a double star", "nginx:**", false},
		{"a bare host is an official image's name (docker.io/library/quay.io)", "quay.io", true},
		{"localhost with its port and path", "localhost:5000/mesh/init:*", true},
		{"localhost with another path", "localhost:5000/other/init", false},
		{"localhost without the port", "localhost/mesh/init", false},
		{"a Docker Hub path named like a host", "docker.io/gcr.io/istio-release/proxyv2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ImageGlobWithin(tt.glob, allowed); got != tt.want {
				t.Errorf("ImageGlobWithin(%q) = %v, want %v", tt.glob, got, tt.want)
			}
		})
	}
}

// imageGlobSubjects are the spellings an image glob is matched against:
// the image as written and its forms (imageForms).
func imageGlobSubjects(image string) []string {
	return append([]string{image}, imageForms(image)...)
}

// FuzzImageGlobGuardrails: what the guardrails conclude from an image glob
// alone holds for every image the glob matches, in any of its spellings:
// a glob within allowedRegistries matches only images (that a runtime can
// pull) under one of them, and a glob with a literal part matches only
// images that have that part as a whole segment.
func FuzzImageGlobGuardrails(f *testing.F) {
	for _, seed := range [][2]string{
		{"gcr.io/istio-release/**", "gcr.io/istio-release-evil/proxyv2:1"},
		{"gcr.io/istio-release*", "gcr.io/istio-releasex:1"},
		{"nginx:**", "nginx:5000/evil/app:1"},
		{"docker.io/ngin**", "docker.io/nginx/evil:1"},
		{"*:*", "nginx:1.25"},
		{"istio/**", "docker.io/istio/proxyv2:1.24.0"},
		{"**/proxyv2:*", "registry.attacker.example/proxyv2:1"},
		{"docker.io/gcr.io/**", "gcr.io/istio-release/proxyv2"},
		{"Quay.io/x/**", "Quay.io/x/y"},
		{"index.docker.io/istio/*", "istio/proxyv2"},
		{"**@*", "busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	} {
		f.Add(seed[0], seed[1])
	}
	allowed := []string{"docker.io/istio", "gcr.io/istio-release", "quay.io", "localhost:5000/mesh", "docker.io/library", "index.docker.io/kumahq"}
	rs := make([]registryPrefix, len(allowed))
	for i, a := range allowed {
		r, err := parseRegistryPrefix(a)
		if err != nil {
			f.Fatal(err)
		}
		rs[i] = r
	}
	f.Fuzz(func(t *testing.T, glob, image string) {
		g, err := CompileGlob(glob)
		if err != nil || len(image) > maxImageReference {
			return
		}
		named, err := reference.ParseNormalizedNamed(image)
		if err != nil {
			return // no runtime pulls it
		}
		var matched []string
		for _, s := range imageGlobSubjects(image) {
			if g.Match(s) {
				matched = append(matched, s)
			}
		}
		if len(matched) == 0 {
			return
		}
		if imageGlobWithin(glob, rs) && !imageWithin(image, rs) {
			t.Fatalf("glob %q is within %q, but matches %q (spelled %q), which is %s", glob, allowed, image, matched, named.Name())
		}
		if !ImageGlobHasLiteralPart(glob) {
			return
		}
		literals := literalSegments(glob)
		for _, s := range matched {
			if !slices.ContainsFunc(imageSegments(s), func(seg string) bool { return slices.Contains(literals, seg) }) {
				t.Fatalf("glob %q has literal parts %q, but matches %q, which has none of them as a segment", glob, literals, s)
			}
		}
	})
}

// literalSegments are the segments ImageGlobHasLiteralPart counts.
func literalSegments(glob string) []string {
	segments := strings.Split(glob, "/")
	var out []string
	for i, s := range segments {
		if i == len(segments)-1 {
			s = repositoryPart(s)
		}
		if literalSegment(s) {
			out = append(out, s)
		}
	}
	return out
}

// imageSegments are an image spelling's segments, the last without its tag
// or digest.
func imageSegments(s string) []string {
	segments := strings.Split(s, "/")
	segments[len(segments)-1] = repositoryPart(segments[len(segments)-1])
	return segments
}

// samplePolicy compiles the SecurityPolicy of a config/samples file.
func samplePolicy(t *testing.T, file string) *Policy {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../config/samples", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if !bytes.Contains(doc, []byte("kind: SecurityPolicy")) {
			continue
		}
		sp := &policyv1alpha1.SecurityPolicy{}
		if err := yaml.UnmarshalStrict(doc, sp); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		p, err := CompilePolicy(sp)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return p
	}
	t.Fatalf("%s has no SecurityPolicy", file)
	return nil
}

// TestSampleGuardrailsRefuseAttacks: under the shipped sample policies, a
// namespace editor's exception cannot reach an image on the attacker's
// registry, name every image, or stretch an init container's waiver over a
// native sidecar of the same name or an app container; the samples' own
// exceptions are permitted; and the pods those exceptions were meant for
// are refused.
func TestSampleGuardrailsRefuseAttacks(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	baseline := samplePolicy(t, "policy_v1alpha1_securitypolicy_baseline_mesh.yaml")
	restricted := samplePolicy(t, "policy_v1alpha1_securitypolicy_restricted.yaml")
	exception := func(policy, rule, entries string) string {
		return "exceptions: [{policyName: " + policy + ", ruleNames: [" + rule + "]}]\n" +
			"justification: ticket SEC-1\nexpiresAt: \"2026-12-01T00:00:00Z\"\npodSecurity:\n" + entries
	}
	const appCaps = `- {controlName: Capabilities, containerNames: [app], restrictedField: "spec.containers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]`
	const initCaps = `- {controlName: Capabilities, containerNames: [istio-init], images: ["docker.io/istio/proxyv2"], restrictedField: "spec.initContainers[*].securityContext.capabilities.add", values: [NET_ADMIN, NET_RAW]`
	netAdmin := caps([]corev1.Capability{"NET_ADMIN", "NET_RAW"}, nil)
	appPod := mkPod(withContainers(image(ctr("app", netAdmin), "registry.attacker.example/team/app:1")))
	sidecar := image(ctr("istio-init", netAdmin), "docker.io/istio/proxyv2:1.24.0")
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	sidecarPod := mkPod(withInit(sidecar), withContainers(ctr("app", nil)))
	tests := []struct {
		name    string
		policy  *Policy
		entries string
		pod     *corev1.Pod // refused under the policy (when Enforce), with the exception
		refused string
	}{
		{"baseline: the attacker's registry for an app container", baseline,
			appCaps + `, containerKinds: [App], images: ["registry.attacker.example/team/app"]}`, appPod,
			`spec.podSecurity[0].images[0]: "registry.attacker.example/team/app" can match images outside the registries and path prefixes the policy allows, ` +
				`and policy "pod-security-standards" allows images for control "Capabilities" only from "docker.io/istio", "gcr.io/istio-release", "cr.l5d.io/linkerd", "docker.io/kumahq"`},
		{"baseline: the attacker's registry without containerKinds", baseline,
			appCaps + `, images: ["registry.attacker.example/team/app:*"]}`, appPod, `"registry.attacker.example/team/app:*" can match images outside`},
		{"restricted: the attacker's registry", restricted,
			appCaps + `, containerKinds: [App], images: ["registry.attacker.example/team/app"]}`, nil,
			`"registry.attacker.example/team/app" can match images outside`},
		{"baseline: a universal glob", baseline, appCaps + `, containerKinds: [App], images: ["**:*"]}`, appPod,
			`spec.podSecurity[0].images[0]: "**:*" matches any image`},
		{"restricted: a universal glob", restricted, appCaps + `, containerKinds: [Init], images: ["*/**"]}`, nil,
			`spec.podSecurity[0].images[0]: "*/**" matches any image`},
		{"baseline: an allowed registry for an app container", baseline,
			appCaps + `, containerKinds: [App], images: ["docker.io/istio/proxyv2"]}`, nil,
			`spec.podSecurity[0].containerKinds[0]: App is not among the kinds of container policy "pod-security-standards" allows for control "Capabilities": "Init"`},
		{"baseline: istio-init without containerKinds covers a native sidecar", baseline, initCaps + `}`, sidecarPod,
			`spec.podSecurity[0]: policy "pod-security-standards" allows exceptions for control "Capabilities" only for containers of kinds "Init"`},
		{"baseline: istio-init as a sidecar", baseline, initCaps + `, containerKinds: [Sidecar]}`, sidecarPod,
			`spec.podSecurity[0].containerKinds[0]: Sidecar is not among the kinds`},
		{"restricted: istio-init without containerKinds", restricted, initCaps + `}`, nil,
			`allows exceptions for control "Capabilities" only for containers of kinds "Init"`},
		{"baseline: istio-init, init only", baseline, initCaps + `, containerKinds: [Init]}`, nil, ""},
		{"restricted: istio-init, init only", restricted, initCaps + `, containerKinds: [Init]}`, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rule := "baseline-service-mesh"
			if tt.policy == restricted {
				rule = "restricted"
			}
			e := mustException(t, "staging", "attempt", exception(tt.policy.Name, rule, tt.entries))
			err := tt.policy.Permits(e, now)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && err == nil:
				t.Fatalf("permitted, want refused with %q", tt.refused)
			case tt.refused != "" && !strings.Contains(err.Error(), tt.refused):
				t.Fatalf("refused with\n  %v\nwant it to contain\n  %s", err, tt.refused)
			}
			if tt.pod == nil {
				return
			}
			pod := tt.pod.DeepCopy()
			pod.Name = "web"
			d := Decide([]*Policy{tt.policy}, AllExceptions([]*Exception{e}), podObject("staging", pod), nil, now, Admission)
			if d.Allowed {
				t.Fatalf("the pod is admitted under %s with the exception", tt.policy.Name)
			}
			if msg := d.Results[0].DenyMessage(d.Object); !strings.Contains(msg, "exception/staging/attempt") {
				t.Errorf("the refusal does not name the exception that does not apply:\n%s", msg)
			}
		})
	}
	// The samples' own exceptions pass the samples' guardrails; they carry
	// no date, so one under the baseline policy's maxDuration passes once
	// it is given the expiry its comment says to set.
	for _, pe := range samples.Exceptions(t) {
		p := baseline
		if pe.Spec.Exceptions[0].PolicyName == restricted.Name {
			p = restricted
		}
		if pe.Spec.ExpiresAt != nil {
			t.Errorf("sample exception %s carries expiresAt %s: a date in a sample rots", pe.Name, pe.Spec.ExpiresAt)
		}
		if p.guardrails.MaxDuration != nil {
			e, err := CompileException(pe, "podsieve-system")
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Permits(e, now); err == nil || !strings.Contains(err.Error(), "set spec.expiresAt") {
				t.Errorf("sample exception %s without expiresAt under %s's maxDuration: %v, want refused until it has one", pe.Name, p.Name, err)
			}
			pe.Spec.ExpiresAt = &metav1.Time{Time: now.Add(14 * 24 * time.Hour)}
		}
		e, err := CompileException(pe, "podsieve-system")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Permits(e, now); err != nil {
			t.Errorf("sample exception %s: %v", pe.Name, err)
		}
	}
}
