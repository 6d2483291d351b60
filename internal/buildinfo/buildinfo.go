// Package buildinfo holds the version stamped into the podsieve binary at
// build time with -ldflags.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X github.com/podsieve/podsieve/internal/buildinfo.Version=...".
var (
	Version = "dev"
	Commit  = "unknown"
)

// String is the one-line version that `podsieve version` prints.
func String() string {
	return fmt.Sprintf("podsieve %s (commit %s, %s, %s/%s)", Version, Revision(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Revision is the source revision: Commit when stamped, else the one the Go
// toolchain recorded, else "unknown".
func Revision() string {
	if Commit != "unknown" {
		return Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return Commit
}
