package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/ko/pkg/build"
)

// Package is the import path of the binary the image runs.
const Package = "github.com/podsieve/podsieve/cmd/podsieve"

// User is the image's user: the numeric nonroot user of distroless, which
// the chart's and config/manager's securityContext name (runAsUser: 65532).
// The image has no /etc/passwd: the manager needs no user name.
const User = "65532:65532"

// Platforms are the image's, in the index's order.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// Label and annotation keys of the OCI image spec.
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelVersion     = "org.opencontainers.image.version"
	LabelCreated     = "org.opencontainers.image.created"
	LabelTitle       = "org.opencontainers.image.title"
	LabelDescription = "org.opencontainers.image.description"
	// AnnotationRefName names the image in an OCI image layout's index.json.
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// ImageOptions say what to build.
type ImageOptions struct {
	// Root is podsieve's checkout, whose go.mod the binary is built with.
	Root string
	// Version is the release's version (v1.2.3), stamped into the binary
	// (internal/buildinfo.Version) and the labels.
	Version string
	// Revision is the commit, stamped into the binary and the labels.
	Revision string
	// Source is the repository's URL, for the source label.
	Source string
	// Created is every timestamp in the image (SOURCE_DATE_EPOCH): the same
	// commit builds the same digest.
	Created time.Time
}

// labels are the image's labels, also set as annotations on every manifest
// and the index (registries such as ghcr.io read them from the index).
func (o ImageOptions) labels() map[string]string {
	return map[string]string{
		LabelSource:      o.Source,
		LabelRevision:    o.Revision,
		LabelVersion:     o.Version,
		LabelCreated:     o.Created.UTC().Format(time.RFC3339),
		LabelTitle:       "podsieve",
		LabelDescription: "Pod Security Standards admission controller",
	}
}

// scratch is the base ko builds on: an index of one empty image per
// platform, with no layers, only the platform and the user in its config.
// Nothing is pulled, so the release builds without a registry; ko records
// it as the base under Docker's reserved name for the empty image.
func scratch() (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range Platforms {
		img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
			OS:           p.OS,
			Architecture: p.Architecture,
			RootFS:       v1.RootFS{Type: "layers"},
			Config:       v1.Config{User: User},
		})
		if err != nil {
			return nil, err
		}
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p},
		})
	}
	return idx, nil
}

// BuildImage builds the multi-platform image with ko: the static binary
// (CGO_ENABLED=0, -trimpath, stripped, stamped) for each platform, its layer,
// the labels, and an SPDX SBOM per platform and for the index, written to
// sbomDir. It returns the index.
func BuildImage(ctx context.Context, o ImageOptions, sbomDir string) (v1.ImageIndex, error) {
	base, err := scratch()
	if err != nil {
		return nil, fmt.Errorf("the empty base: %w", err)
	}
	baseRef, err := name.ParseReference("scratch")
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created.UTC()}
	opts := []build.Option{
		build.WithBaseImages(func(context.Context, string) (name.Reference, build.Result, error) {
			return baseRef, base, nil
		}),
		build.WithPlatforms(platformStrings()...),
		build.WithCreationTime(created),
		build.WithKoDataCreationTime(created),
		build.WithTrimpath(true),
		build.WithUser(User),
		build.WithSPDX(koVersion()),
		build.WithSBOMDir(sbomDir),
		build.WithDefaultEnv([]string{"CGO_ENABLED=0"}),
		build.WithConfig(map[string]build.Config{Package: {
			ID: "podsieve",
			Ldflags: build.StringArray{
				"-s", "-w",
				"-X github.com/podsieve/podsieve/internal/buildinfo.Version=" + o.Version,
				"-X github.com/podsieve/podsieve/internal/buildinfo.Commit=" + o.Revision,
			},
		}}),
	}
	for k, v := range o.labels() {
		opts = append(opts, build.WithLabel(k, v), build.WithAnnotation(k, v))
	}
	b, err := build.NewGo(ctx, o.Root, opts...)
	if err != nil {
		return nil, err
	}
	ref, err := b.QualifyImport(Package)
	if err != nil {
		return nil, err
	}
	res, err := b.Build(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("ko build %s: %w", ref, err)
	}
	idx, ok := res.(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("ko built a %T, not an index of the platforms", res)
	}
	return idx, nil
}

func platformStrings() []string {
	var out []string
	for _, p := range Platforms {
		out = append(out, p.String())
	}
	return out
}

// koVersion is ko's module version, as the SBOM's creator names it.
func koVersion() string {
	if v := moduleVersion("github.com/google/ko"); v != "" {
		return v
	}
	return "(unknown)"
}

// WriteLayout writes the index as an OCI image layout in dir (which must
// not exist): index.json names the one index, tagged with the version.
func WriteLayout(dir string, idx v1.ImageIndex, version string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationRefName: version}))
}

// LayoutIndex reads the one index of an OCI image layout that WriteLayout
// wrote.
func LayoutIndex(dir string) (v1.ImageIndex, v1.Hash, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, v1.Hash{}, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, v1.Hash{}, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, v1.Hash{}, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, v1.Hash{}, fmt.Errorf("%s: want one image index in index.json, found %d manifests", filepath.Join(dir, "index.json"), len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	return idx, m.Manifests[0].Digest, err
}

// PlatformImage is the index's image for the platform ("linux/amd64").
func PlatformImage(idx v1.ImageIndex, platform string) (v1.Image, error) {
	want, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var found []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		if d.Platform.Equals(*want) {
			return idx.Image(d.Digest)
		}
		found = append(found, d.Platform.String())
	}
	return nil, fmt.Errorf("no image for %s in the index (it has %s)", platform, strings.Join(found, ", "))
}
