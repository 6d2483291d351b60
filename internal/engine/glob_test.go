package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs, err := CompileGlobs([]string{tt.glob})
			if err != nil {
				t.Fatal(err)
			}
			if got := imageMatches(gs, tt.image, imageForms(tt.image)); got != tt.want {
				t.Errorf("%q matching image %q (forms %v) = %v, want %v", tt.glob, tt.image, imageForms(tt.image), got, tt.want)
			}
		})
	}
}

// globRegexp is the glob dialect written as a regular expression: the oracle
// the automaton is fuzzed against.
func globRegexp(s string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`) // "**" crosses newlines too
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '*' && i+1 < len(s) && s[i+1] == '*':
			for i+1 < len(s) && s[i+1] == '*' {
				i++
			}
			b.WriteString(`.*`)
		case s[i] == '*':
			b.WriteString(`[^/]*`)
		case s[i] == '?':
			b.WriteString(`[^/]`)
		default:
			b.WriteString(regexp.QuoteMeta(s[i : i+1]))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// FuzzGlob: the automaton agrees with the regular expression of the same
// glob, including multi-byte runes, long globs and runs of stars.
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
		want := pattern == "*" || utf8.ValidString(s) && globRegexp(pattern).MatchString(s)
		if got := g.Match(s); got != want {
			t.Fatalf("glob %q on %q: automaton %v, regexp %v", pattern, s, got, want)
		}
	})
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
