package background

import (
	"testing"

	"github.com/podsieve/podsieve/internal/engine"
)

// TestScannedKindsAreTheEnginesKinds: each scanned kind's Go type is the one
// the engine's table gives its group, version and kind.
func TestScannedKindsAreTheEnginesKinds(t *testing.T) {
	for _, k := range scannedKinds {
		o, err := engine.NewObject(k.object())
		if err != nil {
			t.Fatalf("%s: %v", k.gvk.Kind, err)
		}
		if o.Kind != k.gvk.Kind {
			t.Errorf("%s's object is decided as a %s", k.gvk.Kind, o.Kind)
		}
		if want, ok := engine.KindFor(k.gvk.GroupKind()); !ok || want.GroupVersionKind() != k.gvk {
			t.Errorf("%s: the engine's table says %v", k.gvk, want.GroupVersionKind())
		}
	}
}
