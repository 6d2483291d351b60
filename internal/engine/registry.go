package engine

import (
	"fmt"
	"regexp"
	"strings"
)

// The guardrails on an exception's image globs read a glob as the container
// runtime reads the images it matches (distribution/reference's
// ParseNormalizedNamed, which imageForms uses too): its first "/"-separated
// segment is the registry host when it holds a "." or a ":", is localhost or
// is not lowercase; otherwise the image is on Docker Hub (docker.io), and a
// Docker Hub name of one segment is under library/. index.docker.io is
// docker.io. A glob matches an image as written and in its other forms
// (imageForms), and every form of an image starts with its registry host,
// or (familiar names) with a first segment that is no host: so a glob whose
// first segment is written without a wildcard, followed by "/", reaches one
// registry only, the one that segment names.

const (
	dockerHub       = "docker.io"
	legacyDockerHub = "index.docker.io"
)

// registryPrefix is one compiled spec.exceptions.controls[].allowedRegistries
// entry: a registry host and an optional repository path prefix.
type registryPrefix struct {
	raw  string
	host string // normalized: index.docker.io is docker.io
	path string // "" for the whole registry; else without leading or trailing "/"
}

// allowedRegistryPattern is the schema's pattern for an allowedRegistries
// entry (api/v1alpha1, ControlGuardrail.AllowedRegistries), held here too for
// policies that reach the engine without the API server (podsieve eval):
// a lowercase host with a "." or a port, or localhost, then path components
// as a repository name spells them.
var allowedRegistryPattern = regexp.MustCompile(`^(localhost(:[0-9]+)?|[a-z0-9]([a-z0-9-]*[a-z0-9])?([.][a-z0-9]([a-z0-9-]*[a-z0-9])?)+(:[0-9]+)?|[a-z0-9]([a-z0-9-]*[a-z0-9])?:[0-9]+)(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*$`)

// parseRegistryPrefix compiles an allowedRegistries entry.
func parseRegistryPrefix(s string) (registryPrefix, error) {
	if !allowedRegistryPattern.MatchString(s) {
		return registryPrefix{}, fmt.Errorf("%q is not a registry: write a lowercase registry host (with a \".\" or a port, or localhost), optionally followed by a path prefix, "+
			"with no scheme, wildcard, tag or trailing \"/\": for example docker.io or gcr.io/istio-release", s)
	}
	host, path, _ := strings.Cut(s, "/")
	if host == legacyDockerHub {
		host = dockerHub
	}
	return registryPrefix{raw: s, host: host, path: path}, nil
}

// normalizedImageGlob is an image glob read as the runtime reads the images
// it matches: the registry host it reaches and the glob of the repository
// path (and tag or digest) on it. ok is false when the glob reaches more
// than one registry: a wildcard in its first segment, or a glob of one
// segment with "**", which can run on past a "/" and make that segment a
// host (nginx:** matches nginx:5000/x).
func normalizedImageGlob(glob string) (host, path string, ok bool) {
	first, rest, multi := strings.Cut(glob, "/")
	if !multi {
		if glob == "*" || strings.Contains(glob, "**") {
			// A lone "*" matches every string, slashes included
			// (CompileGlob), as "**" does.
			return "", "", false
		}
		// One segment, whose wildcards stay within it: only images of one
		// segment, which are Docker Hub's official images.
		return dockerHub, "library/" + glob, true
	}
	if strings.ContainsAny(first, "*?") {
		return "", "", false
	}
	switch {
	case first == "localhost" || strings.ContainsAny(first, ".:") || strings.ToLower(first) != first:
		host, path = first, rest
		if host == legacyDockerHub {
			host = dockerHub
		}
	default:
		host, path = dockerHub, glob
	}
	if host == dockerHub && !strings.Contains(path, "/") && !strings.Contains(path, "**") {
		// docker.io/nginx is docker.io/library/nginx; a "**" could reach
		// another segment, so a path with one is left as written and can
		// fall under no path prefix but library's own spelling.
		path = "library/" + path
	}
	return host, path, true
}

// within reports whether every image the glob (normalized) matches is under
// the prefix: on its host and, for a prefix with a path, in a repository
// whose name is the path or starts with the path and "/". The glob must
// spell the path out before any wildcard and follow it with "/", ":" (a tag)
// or "@" (a digest), or end there: gcr.io/istio-release admits
// gcr.io/istio-release/proxyv2:* and gcr.io/istio-release:1.0, not
// gcr.io/istio-release-evil/proxyv2 or gcr.io/istio-release*.
func (r registryPrefix) within(host, path string) bool {
	if host != r.host {
		return false
	}
	if r.path == "" {
		return true
	}
	literal := path
	if i := strings.IndexAny(path, "*?"); i >= 0 {
		literal = path[:i]
	}
	if literal == r.path {
		return path == r.path // the repository itself, written out
	}
	return len(literal) > len(r.path) && strings.HasPrefix(literal, r.path) && strings.ContainsRune("/:@", rune(literal[len(r.path)]))
}

// ImageGlobWithin reports whether every image an image glob can match is
// in one of the registries, allowedRegistries entries as written; an entry
// that is not valid admits nothing.
func ImageGlobWithin(glob string, registries []string) bool {
	rs := make([]registryPrefix, 0, len(registries))
	for _, s := range registries {
		r, err := parseRegistryPrefix(s)
		if err != nil {
			return false
		}
		rs = append(rs, r)
	}
	return imageGlobWithin(glob, rs)
}

func imageGlobWithin(glob string, rs []registryPrefix) bool {
	host, path, ok := normalizedImageGlob(glob)
	if !ok {
		return false
	}
	for _, r := range rs {
		if r.within(host, path) {
			return true
		}
	}
	return false
}

// imageWithin reports whether an image (a container's, as written) is in
// one of the registries; an image that does not parse is in none.
func imageWithin(image string, rs []registryPrefix) bool {
	forms := imageForms(image)
	if len(forms) < 2 {
		return false
	}
	// forms[1] is the repository name, fully qualified.
	host, path, _ := strings.Cut(forms[1], "/")
	for _, r := range rs {
		if host == r.host && (r.path == "" || path == r.path || strings.HasPrefix(path, r.path+"/")) {
			return true
		}
	}
	return false
}

// ImageGlobHasLiteralPart reports whether an image glob pins at least one
// whole segment of the images it matches, written without a wildcard: the
// registry host (docker.io/**), a repository path segment (**/proxyv2:*),
// or the name of a one-segment glob (nginx:*). A tag or a digest does not
// count. A glob without one ("**", "**:*", "*/**", "*/*:*", "**@*", "?*")
// matches every image, or every image of a shape, whatever its registry and
// repository.
func ImageGlobHasLiteralPart(glob string) bool {
	segments := strings.Split(glob, "/")
	if len(segments) == 1 {
		// A "**" can run on past a "/", so no part of the segment need
		// be a whole segment of the image.
		return !strings.Contains(glob, "**") && literalSegment(repositoryPart(glob))
	}
	for i, s := range segments {
		if i == len(segments)-1 {
			s = repositoryPart(s)
		}
		if literalSegment(s) {
			return true
		}
	}
	return false
}

// repositoryPart is the last segment of an image (or glob) without its tag
// or digest. In any image a runtime pulls, a ":" outside the first segment
// starts the tag, and "@" the digest.
func repositoryPart(segment string) string {
	if i := strings.IndexAny(segment, ":@"); i >= 0 {
		return segment[:i]
	}
	return segment
}

// literalSegment reports whether a segment is written without a wildcard
// and names something: a letter or a digit.
func literalSegment(s string) bool {
	return s != "" && !strings.ContainsAny(s, "*?") && strings.IndexFunc(s, func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}) >= 0
}
