package admissionpolicy

import (
	"fmt"

	"github.com/distribution/reference"
)

// The engine matches an entry's image globs against every spelling of an
// image: as written, fully qualified with its tag (":latest" when it has
// neither tag nor digest), its repository, and its familiar repository
// when that names the same one (engine/image.go, after distribution's
// reference.ParseNormalizedNamed). imageForms is that list in CEL, computed
// with string functions from the same rules: how the first path segment is
// told from a registry, Docker Hub's "library/", the reference grammar
// (distribution's own regular expressions) and its limits.

// maxImageReference is the engine's: an image longer than any reference
// can be matches no image glob.
const maxImageReference = reference.RepositoryNameTotalLengthMax + len(":") + 128 + len("@") + len("sha512:") + 128

// referencePattern is an anchored reference whose digest, if any, is one
// go-digest accepts (sha256, sha384 or sha512, lower-case hex of the
// algorithm's length): what reference.Parse accepts.
var referencePattern = `^(?:` + reference.NameRegexp.String() + `)(?::` + reference.TagRegexp.String() +
	`)?(?:@(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}))?$`

// imageForms is CEL for the list of spellings of the image expression img
// (bound once): [] when it is longer than any reference, else the image
// and, when it parses, its other forms.
func imageForms(img string) string {
	// dr: [domain, remainder] as splitDockerDomain reads s.
	split := `[s.indexOf("/")].map(i, i < 0 ? ["docker.io", "library/" + s] : ` +
		`[s.substring(0, i)].map(f, f == "index.docker.io" ? ["docker.io", s.substring(i + 1)] : ` +
		`(f == "localhost" || f.contains(".") || f.contains(":") || f.lowerAscii() != f) ? [f, s.substring(i + 1)] : ["docker.io", s])[0])[0]`
	canonical := `[` + split + `].map(dr, dr[0] == "docker.io" && !dr[1].contains("/") ? [dr[0], "library/" + dr[1]] : dr)[0]`
	// With d and r: remote (r before its first ":") must be lower-case, the
	// whole must be a reference, and the repository path at most 255 bytes.
	path := `[r.indexOf("@") < 0 ? r : r.substring(0, r.indexOf("@"))].map(q, q.indexOf(":") < 0 ? q : q.substring(0, q.indexOf(":")))[0]`
	remote := `(r.indexOf(":") < 0 ? r : r.substring(0, r.indexOf(":")))`
	familiar := `[p.startsWith("library/") && !p.substring(8).contains("/") ? p.substring(8) : p].map(f, ` +
		`!f.matches("^[a-f0-9]{64}$") && (f.indexOf("/") < 0 || [f.substring(0, f.indexOf("/"))].map(g, !(g == "localhost" || g.contains(".") || g.contains(":")))[0]) ? [f] : [])[0]`
	valid := fmt.Sprintf(`!s.matches("^[a-f0-9]{64}$") && %s.lowerAscii() == %s && (d + "/" + r).matches(%s) && size(%s) <= %d`,
		remote, remote, quote(referencePattern), path, reference.RepositoryNameTotalLengthMax)
	body := fmt.Sprintf(`%s ? [%s].map(p, [(r.contains(":") || r.contains("@")) ? d + "/" + r : d + "/" + r + ":latest", d + "/" + p] + (d == "docker.io" ? %s : []))[0] : []`,
		valid, path, familiar)
	forms := fmt.Sprintf(`[%s].map(dr, [dr[0]].map(d, [dr[1]].map(r, %s)[0])[0])[0]`, canonical, body)
	return fmt.Sprintf(`[string(%s)].map(s, size(bytes(s)) > %d ? [] : [s] + %s)[0]`, img, maxImageReference, forms)
}
