package engine

import (
	"sync"
	"sync/atomic"

	"github.com/distribution/reference"
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
	imageFormsCacheMaxLen = 512
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
	return []string{reference.TagNameOnly(named).String(), named.Name(), reference.FamiliarName(named)}
}

// imageMatches reports whether an image matches any glob, as written or in
// one of its other forms (computed by the caller once per container).
func imageMatches(globs Globs, image string, forms []string) bool {
	if globs.Match(image) {
		return true
	}
	for _, f := range forms {
		if globs.Match(f) {
			return true
		}
	}
	return false
}
