// Command release builds podsieve's release from a checkout with Go alone,
// no container engine and no registry (docs/release.md):
//
//	release build   -out dist -version v1.2.3 -revision SHA -source-date-epoch N -helm HELM
//	release extract -layout dist/image -platform linux/amd64 -o bin/image/linux-amd64/podsieve
//
// build writes, under -out: image/ (an OCI image layout: one index of
// linux/amd64 and linux/arm64, built with ko from an empty base), sbom/ (ko's
// SPDX documents of each image and of the index), podsieve-<version>.tgz
// (the chart, its image referenced by digest), release.json (what was
// built) and SHA256SUMS. extract copies the binary the image runs out of
// the layout, for the e2e suite to run the shipped binary.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: release build|extract [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "extract":
		err = runExtract(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want build or extract", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// Options are a release build's inputs.
type Options struct {
	ImageOptions
	// Out is the directory the release is written to; it must be empty or
	// absent.
	Out string
	// Repository is where the image is published (ghcr.io/podsieve/podsieve),
	// the chart's image.repository.
	Repository string
	// Helm is the helm binary that packages the chart.
	Helm string
}

// Release is what a build produced, written to release.json.
type Release struct {
	Version      string `json:"version"`
	ChartVersion string `json:"chartVersion"`
	Revision     string `json:"revision"`
	Created      string `json:"created"`
	Repository   string `json:"repository"`
	// Digest is the image index's, which the chart references.
	Digest string `json:"digest"`
	// Chart is the packaged chart's file name.
	Chart string `json:"chart"`
}

// semver is what a release version must be: v and a semantic version, as
// git tags, chart appVersions and `go install …@vX` write it.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// Build builds the release into o.Out.
func Build(ctx context.Context, o Options) (Release, error) {
	if !semver.MatchString(o.Version) {
		return Release{}, fmt.Errorf("version %q: want v<major>.<minor>.<patch>[-<pre-release>], such as v1.2.3 or v0.0.0-dev.g1a2b3c4", o.Version)
	}
	if entries, err := os.ReadDir(o.Out); err == nil && len(entries) > 0 {
		return Release{}, fmt.Errorf("%s is not empty: remove it first (make release does)", o.Out)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return Release{}, err
	}
	idx, err := BuildImage(ctx, o.ImageOptions, filepath.Join(o.Out, "sbom"))
	if err != nil {
		return Release{}, err
	}
	if err := WriteLayout(filepath.Join(o.Out, "image"), idx, o.Version); err != nil {
		return Release{}, fmt.Errorf("write the image layout: %w", err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return Release{}, err
	}
	chartVersion := strings.TrimPrefix(o.Version, "v")
	tgz, err := PackageChart(ctx, o.Helm, filepath.Join(o.Root, "charts", "podsieve"), o.Out, chartVersion, o.Version, digest.String(), o.Created)
	if err != nil {
		return Release{}, err
	}
	r := Release{
		Version:      o.Version,
		ChartVersion: chartVersion,
		Revision:     o.Revision,
		Created:      o.Created.UTC().Format(time.RFC3339),
		Repository:   o.Repository,
		Digest:       digest.String(),
		Chart:        filepath.Base(tgz),
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return Release{}, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, "release.json"), append(b, '\n'), 0o644); err != nil {
		return Release{}, err
	}
	return r, WriteChecksums(o.Out)
}

// SumsFile lists the SHA-256 of the release's files, as `sha256sum -c`
// reads it, from the release's directory.
const SumsFile = "SHA256SUMS"

// WriteChecksums writes SumsFile in dir: every file but itself and the
// image layout's blobs, which are named by their digests already.
func WriteChecksums(dir string) error {
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && rel == "image/blobs":
			return fs.SkipDir
		case d.IsDir() || rel == SumsFile:
			return nil
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return err
		}
		lines = append(lines, sum+"  "+rel)
		return nil
	})
	if err != nil {
		return err
	}
	// WalkDir's lexical order: the file is the same for the same release.
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("release build", flag.ContinueOnError)
	var o Options
	var epoch string
	fs.StringVar(&o.Root, "root", ".", "podsieve's checkout")
	fs.StringVar(&o.Out, "out", "dist", "the directory to write the release to (empty or absent)")
	fs.StringVar(&o.Version, "version", "", "the release's version, v<semver> (required)")
	fs.StringVar(&o.Revision, "revision", "", "the commit (required)")
	fs.StringVar(&o.Source, "source", "https://github.com/podsieve/podsieve", "the repository's URL, for the image's source label")
	fs.StringVar(&o.Repository, "repository", "ghcr.io/podsieve/podsieve", "where the image is published, the chart's image.repository")
	fs.StringVar(&o.Helm, "helm", "", "the helm binary (required)")
	fs.StringVar(&epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp in the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH; required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Version == "" || o.Revision == "" || o.Helm == "" || epoch == "" {
		return errors.New("-version, -revision, -helm and -source-date-epoch are required")
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("-source-date-epoch %q: %w", epoch, err)
	}
	o.Created = time.Unix(secs, 0)
	r, err := Build(context.Background(), o)
	if err != nil {
		return err
	}
	fmt.Printf("release %s: image %s@%s, chart %s, in %s\n", r.Version, r.Repository, r.Digest, r.Chart, o.Out)
	return nil
}

// moduleVersion is the version of a module this program is built with.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return ""
}
