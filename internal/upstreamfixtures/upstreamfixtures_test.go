package upstreamfixtures

import "testing"

func TestLoad(t *testing.T) {
	fixtures, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) != Count {
		t.Fatalf("%d fixtures, want %d", len(fixtures), Count)
	}
	levels := map[string]int{}
	for _, f := range fixtures {
		levels[string(f.Level)]++
		if f.Pod == nil || len(f.Data) == 0 || f.Name == "" {
			t.Errorf("%s: incomplete %+v", f.Rel, f)
		}
	}
	if levels["baseline"] == 0 || levels["restricted"] == 0 {
		t.Errorf("fixtures by level %v, want both", levels)
	}
}
