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
	"github.com/podsieve/podsieve/internal/engine"
)

// objectName is "Deployment staging/web".
func objectName(o *engine.Object) string {
	return o.Kind + " " + o.Namespace + "/" + o.Name
}
