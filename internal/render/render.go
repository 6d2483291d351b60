// Package render prints what the offline commands decided, in each of the
// forms a person or a tool reads: podsieve eval's text, JSON, SARIF 2.1.0
// and JUnit XML, podsieve explain's account of every rule, and the
// PolicyExceptions podsieve exception generate writes. Every message, key
// and field it prints is a documented contract, pinned by the golden files
// of cmd/podsieve.
//
// It prints decisions; it does not make them. The engine records in each
// decision why it was made, internal/offline loads the input and decides,
// and cmd/podsieve maps the outcome to an exit code. It must not import
// cobra, pflag, client-go or controller-runtime.
package render

import (
	"fmt"

	"github.com/podsieve/podsieve/internal/engine"
)

// Plural counts a noun as podsieve's messages do: "1 object", "2 objects".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// pluralWord is the noun alone, in the plural unless n is 1.
func pluralWord(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// QuoteEach quotes every string, Go-style, for a list in a message.
func QuoteEach[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// objectName is "Deployment staging/web".
func objectName(o *engine.Object) string {
	return o.Kind + " " + o.Namespace + "/" + o.Name
}
