package engine

import (
	"encoding/json"
	"testing"
)

// TestSourceText: a source is written as podsieve has always printed it, and
// read back to the same source; anything else is refused.
func TestSourceText(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  Source
		text string
	}{
		{name: "a policy rule", src: PolicyRuleSource("mesh", "baseline"), text: "policy/mesh/baseline"},
		{name: "an exception", src: ExceptionSource("team-a", "istio-init"), text: "exception/team-a/istio-init"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal([]Source{tt.src})
			if err != nil || string(b) != `["`+tt.text+`"]` {
				t.Fatalf("json %s, %v; want [%q]", b, err, tt.text)
			}
			var back []Source
			if err := json.Unmarshal(b, &back); err != nil || len(back) != 1 || back[0] != tt.src {
				t.Fatalf("read back %+v, %v", back, err)
			}
		})
	}
	for _, bad := range []string{"", "exception/ns", "exception//x", "policy/p/r/extra", "rule/p/r", "exception/ns/"} {
		var s Source
		if err := s.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("%q read as %+v", bad, s)
		}
	}
}
