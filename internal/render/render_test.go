package render

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// TestYAMLScalar: a scalar is plain only when YAML reads it back as the same
// string; whatever it writes reads back as the string given.
func TestYAMLScalar(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "web-base", "web-base"},
		{"a field path", "spec.containers[*].securityContext.capabilities.add", "spec.containers[*].securityContext.capabilities.add"},
		{"a boolean is quoted", "true", `"true"`},
		{"a number is quoted", "9100", `"9100"`},
		{"a colon and space is quoted", "needs raw sockets: NET-1", `"needs raw sockets: NET-1"`},
		{"a quote is quoted", `say "hi"`, `"say \"hi\""`},
		{"a newline is quoted", "a\nb", `"a\nb"`},
		{"empty is quoted", "", `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := yamlScalar(tt.in)
			if got != tt.want {
				t.Errorf("yamlScalar(%q) = %s, want %s", tt.in, got, tt.want)
			}
			var back string
			if err := yaml.Unmarshal([]byte("v: "+got), &struct{ V *string }{&back}); err != nil || back != tt.in {
				t.Errorf("%s reads back as %q (%v)", got, back, err)
			}
		})
	}
}

// TestXMLText: what encoding/xml writes as it is in CDATA holds only
// characters XML 1.0 allows.
func TestXMLText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"text and white space stay", "a\tb\r\nc é 😀", "a\tb\r\nc é 😀"},
		{"C0 controls", "a\x00b\x07", "a\uFFFDb\uFFFD"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"noncharacters", "\uFFFE\uFFFF", "\uFFFD\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := xmlText(tt.in); got != tt.want {
				t.Errorf("xmlText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
