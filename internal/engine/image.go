package engine

import (
	"github.com/distribution/reference"
)

// imageForms returns the other spellings of an image reference that globs are
// matched against, besides the image as written: the fully qualified reference
// the runtime pulls (nginx:1.25 is docker.io/library/nginx:1.25; an untagged
// image gets the :latest it implies), and the repository name without tag or
// digest, qualified and familiar (docker.io/library/nginx, nginx), so that a
// glob written without a tag covers every tag. A reference that does not parse
// is matched as written only.
func imageForms(image string) []string {
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
