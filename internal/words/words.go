// Package words spells the small parts of podsieve's messages that every
// package writes the same way: a counted noun ("2 violations"), a noun in
// the plural ("rules"), a list of quoted names. It is the one place they are
// written, below the engine, and imports the standard library only.
//
// CEL string literals (internal/admissionpolicy) are code, not messages,
// and are quoted there.
package words

import "strconv"

// Count counts a noun: "1 object", "2 objects", "0 objects".
func Count(n int, noun string) string {
	return strconv.Itoa(n) + " " + Plural(n, noun)
}

// Plural is the noun alone, in the plural unless n is 1. The nouns podsieve
// counts all take an s.
func Plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// Quote quotes every string, Go-style, for a list in a message.
func Quote[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(string(s))
	}
	return out
}
