// Package buildinfo holds the version stamped into the podsieve binary at
// build time with -ldflags, and the one the Go toolchain records when it is
// built with `go install github.com/podsieve/podsieve/cmd/podsieve@vX`.
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
	return fmt.Sprintf("podsieve %s (commit %s, %s, %s/%s)", Release(), Revision(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Release is the version of this binary: Version when stamped (make build,
// make release), else the module version the Go toolchain recorded (`go
// install …@v1.2.3` stamps nothing, and records v1.2.3), else "dev".
func Release() string {
	bi, ok := debug.ReadBuildInfo()
	return release(Version, bi, ok)
}

func release(stamped string, bi *debug.BuildInfo, ok bool) string {
	if stamped != "dev" {
		return stamped
	}
	// "(devel)" is a build from a checkout, and "" a test binary.
	if ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return stamped
}

// Revision is the source revision: Commit when stamped, else the one the Go
// toolchain recorded, else "unknown".
func Revision() string {
	bi, ok := debug.ReadBuildInfo()
	return revision(Commit, bi, ok)
}

func revision(stamped string, bi *debug.BuildInfo, ok bool) string {
	if stamped != "unknown" || !ok {
		return stamped
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return stamped
}
