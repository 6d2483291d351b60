package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestRelease(t *testing.T) {
	installed := &debug.BuildInfo{Main: debug.Module{Path: "github.com/podsieve/podsieve", Version: "v1.2.3"}}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"stamped by make", "v1.2.4", installed, true, "v1.2.4"},
		{"go install …@v1.2.3, nothing stamped", "dev", installed, true, "v1.2.3"},
		{"built from a checkout", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev"},
		{"a test binary", "dev", &debug.BuildInfo{}, true, "dev"},
		{"no build information", "dev", nil, false, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := release(tc.stamped, tc.bi, tc.ok); got != tc.want {
				t.Errorf("release(%q) = %q, want %q", tc.stamped, got, tc.want)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	vcs := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"stamped by make", "def456", vcs, true, "def456"},
		{"recorded by the toolchain", "unknown", vcs, true, "abc123"},
		{"recorded nowhere", "unknown", &debug.BuildInfo{}, true, "unknown"},
		{"no build information", "unknown", nil, false, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := revision(tc.stamped, tc.bi, tc.ok); got != tc.want {
				t.Errorf("revision(%q) = %q, want %q", tc.stamped, got, tc.want)
			}
		})
	}
}
