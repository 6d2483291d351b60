package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		name, glob, s string
		want          bool
	}{
		{"literal", "istio-init", "istio-init", true},
		{"literal mismatch", "istio-init", "istio-init2", false},
		{"star alone matches everything", "*", "docker.io/istio/proxyv2:1.24", true},
		{"star stays in its segment", "registry.io/team*", "registry.io/team-evil/app", false},
		{"star within a segment", "registry.io/team*", "registry.io/team-a", true},
		{"double star crosses segments", "registry.io/team*/**", "registry.io/team-a/app:1", true},
		{"leading star for the registry", "*/istio/proxyv2*", "docker.io/istio/proxyv2:1.24.0", true},
		{"question mark is one character", "v1.?", "v1.9", true},
		{"question mark is not a slash", "a?b", "a/b", false},
		{"path values", "/var/log/**", "/var/log/pods/x", true},
		{"path values stay in segment", "/var/*", "/var/run/docker.sock", false},
		{"regexp metacharacters are literal", "a.b+c", "axb+c", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := CompileGlob(tt.glob)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Match(tt.s); got != tt.want {
				t.Errorf("%q matching %q = %v, want %v", tt.glob, tt.s, got, tt.want)
			}
		})
	}
}

func TestCompileGlobErrors(t *testing.T) {
	for name, tt := range map[string]struct{ glob, want string }{
		"empty":           {"", "empty glob: write a name, or \"*\" for any"},
		"character class": {"nginx[0-9]", `glob "nginx[0-9]": only *, ** and ? are special; character classes and escapes ([, ], \) are not supported`},
		"escape":          {`a\*`, `glob "a\\*": only *, ** and ? are special`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := CompileGlob(tt.glob)
			if err == nil || len(err.Error()) < len(tt.want) || err.Error()[:len(tt.want)] != tt.want {
				t.Errorf("error %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestImageMatches(t *testing.T) {
	tests := []struct {
		name, glob, image string
		want              bool
	}{
		{"repository without tag matches any tag", "nginx", "nginx:1.25", true},
		{"familiar glob", "nginx*", "nginx:1.25", true},
		{"normalized glob", "*/library/nginx*", "nginx:1.25", true},
		{"qualified glob with tag wildcard", "docker.io/library/nginx:*", "nginx:1.25", true},
		{"untagged image is :latest", "docker.io/library/nginx:latest", "nginx", true},
		{"another repository", "nginx", "nginx-evil:1.25", false},
		{"another registry", "docker.io/istio/proxyv2*", "registry.example/istio/proxyv2:1", false},
		{"digest", "*/istio/proxyv2*", "docker.io/istio/proxyv2@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", true},
		{"repository name matched in the reference's pass", "registry.example/team/app", "registry.example/team/app:1@sha256:" + strings.Repeat("0123456789abcdef", 4), true},
		{"longest reference", "registry.example/**", maxLengthImage(), true},
		{"longer than any reference, even for *", "*", maxLengthImage() + "0", false},
		{"longer than any reference", "registry.example/**", "registry.example/" + strings.Repeat("a", maxImageReference), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs, err := CompileGlobs([]string{tt.glob})
			if err != nil {
				t.Fatal(err)
			}
			info := newImageInfo(tt.image)
			if got, _ := info.matches(gs, &globScratch{}); got != tt.want {
				t.Errorf("%q matching image %q (forms %v) = %v, want %v", tt.glob, tt.image, imageForms(tt.image), got, tt.want)
			}
		})
	}
}

// maxLengthImage is a reference of maxImageReference bytes that parses.
func maxLengthImage() string {
	name := "registry.example/team/" + strings.Repeat("a", 255-len("registry.example/team/"))
	return name + ":" + strings.Repeat("t", maxTagLength) + "@sha512:" + strings.Repeat("0123456789abcdef", 8)
}

// TestMaxImageReference: the bound is the longest reference that parses.
func TestMaxImageReference(t *testing.T) {
	image := maxLengthImage()
	if len(image) != maxImageReference || maxImageReference != 520 {
		t.Fatalf("the longest reference is %d bytes, maxImageReference %d", len(image), maxImageReference)
	}
	if forms := parseImageForms(image); len(forms) == 0 {
		t.Errorf("%q does not parse", image)
	}
	info := newImageInfo(image)
	if !info.matchable || len(info.subjects) != 1 || info.subjects[0].cut != 255 {
		t.Errorf("subjects %+v: want the reference once, cut after its name", info.subjects)
	}
	if info := newImageInfo(image + "0"); info.matchable || info.subjects != nil {
		t.Errorf("an image longer than the bound is matchable or parsed: %+v", info)
	}
}

// globRegexp is GlobRegexp, compiled: the glob dialect written as a
// regular expression, the form the CEL of ValidatingAdmissionPolicies
// evaluates. FuzzGlob holds it equal to the automaton and to referenceMatch.
func globRegexp(s string) *regexp.Regexp {
	re, err := GlobRegexp(s)
	if err != nil {
		panic(err)
	}
	return regexp.MustCompile(re)
}

// referenceMatch is the dialect read off its definition, over characters:
// whether pattern p matches s, by dynamic programming on (position in p,
// position in s). Obviously correct and quadratic; the automaton is neither
// obvious nor quadratic.
func referenceMatch(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	if !utf8.ValidString(s) {
		return false
	}
	p, t := []rune(pattern), []rune(s)
	memo := map[[2]int]bool{}
	var m func(i, j int) bool
	m = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var v bool
		switch {
		case i == len(p):
			v = j == len(t)
		case p[i] == '*':
			k := i
			for k < len(p) && p[k] == '*' {
				k++
			}
			double := k-i > 1
			// The stars take nothing, or one more character and stay.
			v = m(k, j) || j < len(t) && (double || t[j] != '/') && m(i, j+1)
		case j == len(t):
			v = false
		case p[i] == '?':
			v = t[j] != '/' && m(i+1, j+1)
		default:
			v = p[i] == t[j] && m(i+1, j+1)
		}
		memo[key] = v
		return v
	}
	return m(0, 0)
}

// FuzzGlob: the automaton agrees with the reference matcher (and with the
// regular expression of the same glob), on whole subjects and on a prefix
// matched in the same pass, including multi-byte characters, long globs and
// runs of stars; and no match costs more than
//
//	steps <= globCallSteps + len(pattern) + (2×len(pattern) + 10)×w + len(subject)×(w+1)
//
// where a step is a word operation and w is the automaton's words:
// ⌈(positions+1)/64⌉ (positions are the glob's literal bytes and "?"s after
// its literal prefix), rounded up to 4 between 2 and 4. w <= 4 for the API's
// 256-byte globs, <= 17 under MaxGlobLength: linear in pattern and subject,
// whatever their content.
func FuzzGlob(f *testing.F) {
	for _, seed := range [][2]string{
		{"registry.io/team*", "registry.io/team-evil/app"},
		{"**/nginx:*", "docker.io/library/nginx:1.25"},
		{"a*b*c?d", "aXbYbZcQd"},
		{"é?*ü", "éàxü"},
		{"app-*-??", "app-7-ab"},
		{strings.Repeat("a*", 40), strings.Repeat("ab", 50)},
		{"*/**/*", "a/b/c/d"},
		{"x***y", "x/y"},
		{"**", "\n"},
		{"a\uFFFD*", "a\xffb"},
		{"*\uFFFD", "a\xff"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		g, err := CompileGlob(pattern)
		if err != nil {
			return
		}
		want := referenceMatch(pattern, s)
		if got := g.Match(s); got != want {
			t.Fatalf("glob %q on %q: automaton %v, reference %v", pattern, s, got, want)
		}
		if len(pattern) <= 256 {
			if re := utf8.ValidString(s) && globRegexp(pattern).MatchString(s); re != want && utf8.ValidString(s) {
				t.Fatalf("glob %q on %q: regexp %v, reference %v", pattern, s, re, want)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		// Every cut for a short subject (an image's repository name is a
		// prefix of it, at any length), the middle for a long one.
		cuts := []int{len(s) / 2}
		if len(s) <= 64 {
			cuts = cuts[:0]
			for c := 0; c <= len(s); c++ {
				cuts = append(cuts, c)
			}
		}
		for _, cut := range cuts {
			for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
				cut--
			}
			var sc globScratch
			atCut, atEnd, steps := g.match(s, cut, &sc)
			if atEnd != want || atCut != referenceMatch(pattern, s[:cut]) {
				t.Fatalf("glob %q on %q cut at %d: automaton %v, %v; reference %v, %v",
					pattern, s, cut, atCut, atEnd, referenceMatch(pattern, s[:cut]), want)
			}
			if bound := globStepsBound(&g, len(pattern), len(s)); steps > bound {
				t.Fatalf("glob %q (%d bytes, w=%d) on a %d-byte subject: %d steps, more than %d", pattern, len(pattern), g.words(), len(s), steps, bound)
			}
		}
	})
}

// globStepsBound is FuzzGlob's bound on one match.
func globStepsBound(g *Glob, pattern, subject int) int64 {
	w := int64(g.words())
	return globCallSteps + int64(pattern) + (2*int64(pattern)+10)*w + int64(subject)*(w+1)
}

// TestGlobCostAdversarial: the patterns that made the old automaton (and
// backtracking matchers) slow cost what FuzzGlob's bound allows, no more.
func TestGlobCostAdversarial(t *testing.T) {
	long := strings.Repeat("a", 2000)
	for name, tt := range map[string]struct{ pattern, s string }{
		"stars and a":        {strings.Repeat("*a", 127) + "b", long},
		"double stars":       {strings.Repeat("**/", 85), strings.Repeat("a/", 1000)},
		"question marks":     {strings.Repeat("?", 256), long},
		"wildcard-led image": {"**" + strings.Repeat("/a?", 84) + "*", strings.Repeat("/ab", 600)},
		"longest glob":       {strings.Repeat("*a?", MaxGlobLength/3), long},
	} {
		t.Run(name, func(t *testing.T) {
			g, err := CompileGlob(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			var sc globScratch
			_, got, steps := g.match(tt.s, -1, &sc)
			if want := referenceMatch(tt.pattern, tt.s); got != want {
				t.Errorf("match %v, reference %v", got, want)
			}
			if bound := globStepsBound(&g, len(tt.pattern), len(tt.s)); steps > bound {
				t.Errorf("%d steps, more than %d", steps, bound)
			}
			t.Logf("%d-byte glob on a %d-byte subject: %d steps (w=%d)", len(tt.pattern), len(tt.s), steps, g.words())
		})
	}
}

// TestGlobSize: a compiled glob holds its pattern and a few lengths.
func TestGlobSize(t *testing.T) {
	if size := unsafe.Sizeof(Glob{}); size > 32 {
		t.Errorf("a Glob is %d bytes besides its pattern, want at most 32", size)
	}
	if _, err := CompileGlob(strings.Repeat("a*", MaxGlobLength/2) + "a"); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("a glob may have at most %d", MaxGlobLength)) {
		t.Errorf("a glob longer than MaxGlobLength: error %v", err)
	}
}

// TestImageFormsRecord: remembered forms equal parsed ones, long references
// are not remembered, and the record never holds more than its bound.
func TestImageFormsRecord(t *testing.T) {
	for _, image := range []string{"nginx", "nginx:1.25", "docker.io/istio/proxyv2:1.24.0", "not a reference"} {
		first, second := imageForms(image), imageForms(image)
		if !slices.Equal(first, parseImageForms(image)) || !slices.Equal(second, first) {
			t.Errorf("%q: forms %v then %v, parsed %v", image, first, second, parseImageForms(image))
		}
	}
	long := "registry.example/" + strings.Repeat("a", imageFormsCacheMaxLen) + ":1"
	imageForms(long)
	if _, ok := imageFormsCache.Load().Load(long); ok {
		t.Error("a reference longer than the bound was remembered")
	}
	for i := range imageFormsCacheSize + 100 {
		imageForms(fmt.Sprintf("registry.example/app-%d:1", i))
	}
	n := 0
	imageFormsCache.Load().Range(func(any, any) bool { n++; return true })
	if n > imageFormsCacheSize {
		t.Errorf("the record holds %d images, more than %d", n, imageFormsCacheSize)
	}
}

// TestGlobMatchesRepositoryName: a glob with a literal suffix after a
// wildcard matches an image through its repository name (the form without
// tag), which match tests at a cut of the reference.
func TestGlobMatchesRepositoryName(t *testing.T) {
	for _, tt := range []struct{ glob, image string }{
		{"docker.io/*/proxyv2", "docker.io/istio/proxyv2:1.24.0"},
		{"docker.io/*/proxyv2", "docker.io/istio/proxyv2"},
		{"**/proxyv2", "istio/proxyv2:1.2"},
		{"gcr.io/*-release/proxyv2", "gcr.io/istio-release/proxyv2@sha256:0123456789012345678901234567890123456789012345678901234567890123"},
	} {
		x, err := CompileExclusion(policyv1alpha1.PodSecurityExclusion{ControlName: "Capabilities", Images: []string{tt.glob}}, PolicyRuleSource("x", "x"), "e")
		if err != nil {
			t.Fatal(err)
		}
		v := Violation{Control: "Capabilities", Scope: ScopeContainer, Container: "c", Image: tt.image, Field: "spec.containers[*].securityContext.capabilities.add", Values: []string{"NET_ADMIN"}}
		if why := x.WhyNot(&v); why != "" {
			t.Errorf("%s on %s: %s", tt.glob, tt.image, why)
		}
	}
}
