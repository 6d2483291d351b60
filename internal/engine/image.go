package engine

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/distribution/reference"
)

// maxImageReference is the longest image reference a registry can serve, in
// bytes: a repository name of at most reference.RepositoryNameTotalLengthMax
// (255, the registry's NameTotalLengthMax), ":" and a tag of at most 128
// characters ([\w][\w.-]{0,127}), "@" and the longest digest
// distribution/reference accepts: its grammar allows any length, but it
// validates digests with go-digest, which knows sha256, sha384 and sha512,
// and sha512 is "sha512:" and 128 hex digits. 255 + 1 + 128 + 1 + 135 = 520.
//
// A longer image is no reference a runtime could pull. It is never matched
// against image globs, and its forms are not parsed: an entry with images
// never covers a violation in its container (fail closed), and its length
// cannot make a review cost more. (distribution/reference v0.6 applies the
// 255 to the path after the registry host only, so it still parses a
// reference with a long host; other clients count the host in, and so does
// this bound: such an image is refused image-based waivers.)
const maxImageReference = reference.RepositoryNameTotalLengthMax + len(":") + maxTagLength + len("@") + maxDigestLength

const (
	maxTagLength    = 128
	maxDigestLength = len("sha512:") + 128
)

// imageForms returns the other spellings of an image reference that globs are
// matched against, besides the image as written: the fully qualified reference
// the runtime pulls (nginx:1.25 is docker.io/library/nginx:1.25; an untagged
// image gets the :latest it implies), and the repository name without tag or
// digest, qualified and familiar (docker.io/library/nginx, nginx), so that a
// glob written without a tag covers every tag. A reference that does not parse
// is matched as written only.
//
// Parsing a reference is the costliest step of covering a violation, and a
// cluster runs few distinct images, so forms are remembered: up to
// imageFormsCacheSize images of at most imageFormsCacheMaxLen bytes, and the
// whole record is dropped when it is full. Callers must not modify the
// returned slice.
func imageForms(image string) []string {
	if len(image) > imageFormsCacheMaxLen {
		return parseImageForms(image)
	}
	m := imageFormsCache.Load()
	if v, ok := m.Load(image); ok {
		return v.([]string)
	}
	forms := parseImageForms(image)
	if imageFormsCached.Add(1) > imageFormsCacheSize {
		imageFormsCache.Store(new(sync.Map))
		imageFormsCached.Store(0)
	} else {
		m.Store(image, forms)
	}
	return forms
}

const (
	imageFormsCacheSize   = 8192
	imageFormsCacheMaxLen = maxImageReference
)

var (
	imageFormsCache  atomic.Pointer[sync.Map]
	imageFormsCached atomic.Int64
)

func init() { imageFormsCache.Store(new(sync.Map)) }

func parseImageForms(image string) []string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return nil
	}
	forms := []string{reference.TagNameOnly(named).String(), named.Name()}
	// The familiar name only where it reads back as the same repository:
	// docker.io/gcr.io/istio-release/proxyv2 (a Docker Hub path, or a
	// mirror's, whose first segment has a dot) is familiar as
	// gcr.io/istio-release/proxyv2, which names another registry, and would
	// pass a glob that pins gcr.io.
	familiar := reference.FamiliarName(named)
	if back, err := reference.ParseNormalizedNamed(familiar); err == nil && back.Name() == named.Name() {
		forms = append(forms, familiar)
	}
	return forms
}

// imageInfo is what covering needs of one container image, computed once
// per decision: the spellings to match globs against, and the result of each
// entry's image globs already run on it.
type imageInfo struct {
	image string
	// matchable is false for an image longer than maxImageReference, which
	// no image glob matches, and true otherwise.
	matchable bool
	// valid is false for an image that is not valid UTF-8, which only "*"
	// matches (as Glob.Match).
	valid bool
	// subjects are the image and its forms (imageForms), each once; a
	// spelling that is a prefix of another (the repository name of a
	// qualified reference) is matched in the same pass as a cut.
	subjects []imageSubject
	memo     entryMemo
}

type imageSubject struct {
	s   string
	cut int // the length of another spelling that is a prefix of s, or -1
}

// newImageInfo parses an image's forms and plans its subjects.
func newImageInfo(image string) imageInfo {
	info := imageInfo{image: image, matchable: len(image) <= maxImageReference, valid: utf8.ValidString(image)}
	if !info.matchable || !info.valid {
		return info
	}
	var buf [4]string
	spellings := append(buf[:0], image)
	spellings = append(spellings, imageForms(image)...)
	// Longest first, so that each spelling finds the one it is a prefix of.
	for i := 1; i < len(spellings); i++ {
		for j := i; j > 0 && len(spellings[j]) > len(spellings[j-1]); j-- {
			spellings[j], spellings[j-1] = spellings[j-1], spellings[j]
		}
	}
	info.subjects = make([]imageSubject, 0, len(spellings))
next:
	for _, t := range spellings {
		for k := range info.subjects {
			u := &info.subjects[k]
			if u.s == t || u.cut == len(t) && strings.HasPrefix(u.s, t) {
				continue next
			}
			if u.cut < 0 && len(t) < len(u.s) && strings.HasPrefix(u.s, t) {
				u.cut = len(t)
				continue next
			}
		}
		info.subjects = append(info.subjects, imageSubject{s: t, cut: -1})
	}
	return info
}

// matches reports whether any glob matches the image, as written or in one
// of its other forms, with the work done.
func (info *imageInfo) matches(globs Globs, sc *globScratch) (bool, int64) {
	if !info.matchable {
		return false, globCallSteps
	}
	var steps int64
	for i := range globs {
		g := &globs[i]
		if g.kind == globAny {
			return true, steps + globCallSteps
		}
		for _, sub := range info.subjects {
			atCut, atEnd, n := g.match(sub.s, sub.cut, sc)
			steps += n
			if atCut || atEnd {
				return true, steps
			}
		}
	}
	return false, steps
}

// entryMemo remembers, for one image, whether each entry's image globs
// matched it, so that containers sharing an image, and a container's several
// violations, run an entry's globs once per decision.
type entryMemo struct {
	few  [4]memoEntry
	n    int
	many map[*Exclusion]bool
}

type memoEntry struct {
	x  *Exclusion
	ok bool
}

func (m *entryMemo) get(x *Exclusion) (ok, found bool) {
	for i := range min(m.n, len(m.few)) {
		if m.few[i].x == x {
			return m.few[i].ok, true
		}
	}
	if m.many != nil {
		ok, found = m.many[x]
	}
	return ok, found
}

func (m *entryMemo) put(x *Exclusion, ok bool) {
	if m.n < len(m.few) {
		m.few[m.n] = memoEntry{x, ok}
		m.n++
		return
	}
	if m.many == nil {
		m.many = map[*Exclusion]bool{}
	}
	m.many[x] = ok
}
