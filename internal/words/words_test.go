package words

import (
	"slices"
	"testing"
)

func TestCount(t *testing.T) {
	tests := []struct {
		name string
		n    int
		want string
	}{
		{"none", 0, "0 objects"},
		{"one", 1, "1 object"},
		{"several", 2, "2 objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Count(tt.n, "object"); got != tt.want {
				t.Errorf("Count(%d) = %q, want %q", tt.n, got, tt.want)
			}
			if got, want := Plural(tt.n, "object"), tt.want[len("0 "):]; got != want {
				t.Errorf("Plural(%d) = %q, want %q", tt.n, got, want)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	type name string
	tests := []struct {
		name string
		in   []name
		want []string
	}{
		{"none", nil, []string{}},
		{"plain", []name{"web", "db"}, []string{`"web"`, `"db"`}},
		{"escaped", []name{`say "hi"`, "a\nb"}, []string{`"say \"hi\""`, `"a\nb"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quote(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
