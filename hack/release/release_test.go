package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"
)

// The release the test builds: fixed inputs, so that two builds can be
// compared.
var testOptions = Options{
	ImageOptions: ImageOptions{
		Root:     filepath.Join("..", ".."),
		Version:  "v1.2.3-rc.1",
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Source:   "https://github.com/podsieve/podsieve",
		Created:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	},
	Repository: "ghcr.io/podsieve/podsieve",
}

// TestRelease builds the release as `make release` does, into a temporary
// directory, and inspects what a user and the publishing workflow get: the
// image layout (one index, the two platforms, user, labels, entrypoint, the
// stamped static binary), the SBOMs, the chart (versions, the image by the
// index's digest) and the checksums. A second build of the same inputs
// must give the same digest. HELM is the helm binary (make test-release
// sets it).
func TestRelease(t *testing.T) {
	helm := os.Getenv("HELM")
	if helm == "" {
		t.Fatal("HELM: run `make test-release`, or set it to what hack/setup-helm.sh prints")
	}
	ctx := context.Background()
	o := testOptions
	o.Helm = helm
	o.Out = filepath.Join(t.TempDir(), "dist")
	r, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("layout", func(t *testing.T) { checkLayout(t, o, r) })
	t.Run("sbom", func(t *testing.T) { checkSBOMs(t, o) })
	t.Run("chart", func(t *testing.T) { checkChart(t, o, r) })
	t.Run("checksums", func(t *testing.T) { checkSums(t, o.Out) })
	t.Run("pushed as the workflow pushes it", func(t *testing.T) { checkPush(t, o, r) })
	t.Run("reproducible", func(t *testing.T) {
		again := o
		again.Out = filepath.Join(t.TempDir(), "dist")
		r2, err := Build(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Digest != r.Digest {
			t.Errorf("a second build of the same commit made %s, the first %s", r2.Digest, r.Digest)
		}
		// Every file: the SBOMs, the chart, release.json.
		first, err := os.ReadFile(filepath.Join(o.Out, SumsFile))
		if err != nil {
			t.Fatal(err)
		}
		second, err := os.ReadFile(filepath.Join(again.Out, SumsFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Errorf("a second build of the same commit wrote other files:\n%s\nthe first:\n%s", second, first)
		}
	})
}

func checkLayout(t *testing.T, o Options, r Release) {
	var top v1.IndexManifest
	readJSON(t, filepath.Join(o.Out, "image", "index.json"), &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want the one index", len(top.Manifests))
	}
	if got := top.Manifests[0].Annotations[AnnotationRefName]; got != o.Version {
		t.Errorf("index.json names the image %q, want %q", got, o.Version)
	}
	idx, digest, err := LayoutIndex(filepath.Join(o.Out, "image"))
	if err != nil {
		t.Fatal(err)
	}
	if digest.String() != r.Digest {
		t.Errorf("the layout's index is %s, release.json says %s", digest, r.Digest)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("the index's platforms are %v, want %v", platforms, want)
	}
	wantLabels := map[string]string{
		LabelSource:   o.Source,
		LabelRevision: o.Revision,
		LabelVersion:  o.Version,
		LabelCreated:  "2026-01-02T03:04:05Z",
	}
	for k, v := range wantLabels {
		if m.Annotations[k] != v {
			t.Errorf("index annotation %s is %q, want %q", k, m.Annotations[k], v)
		}
	}
	for _, p := range platforms {
		t.Run(p, func(t *testing.T) {
			img, err := PlatformImage(idx, p)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.OS + "/" + cfg.Architecture; got != p {
				t.Errorf("config platform %s, want %s", got, p)
			}
			if cfg.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532 (non-root, as the chart's runAsUser)", cfg.Config.User)
			}
			if !cfg.Created.Time.Equal(o.Created) {
				t.Errorf("created %s, want the source date %s", cfg.Created.Time, o.Created)
			}
			for k, v := range wantLabels {
				if cfg.Config.Labels[k] != v {
					t.Errorf("label %s is %q, want %q", k, cfg.Config.Labels[k], v)
				}
			}
			entry, err := Entrypoint(img)
			if err != nil {
				t.Fatal(err)
			}
			var bin bytes.Buffer
			mode, err := ExtractFile(img, entry, &bin)
			if err != nil {
				t.Fatal(err)
			}
			if mode&0o111 == 0 {
				t.Errorf("%s has mode %s, not executable", entry, mode)
			}
			bi, err := buildinfo.Read(bytes.NewReader(bin.Bytes()))
			if err != nil {
				t.Fatalf("%s: %v", entry, err)
			}
			if bi.Path != Package {
				t.Errorf("%s is %s, want %s", entry, bi.Path, Package)
			}
			settings := map[string]string{}
			for _, s := range bi.Settings {
				settings[s.Key] = s.Value
			}
			for k, v := range map[string]string{"GOOS": cfg.OS, "GOARCH": cfg.Architecture, "CGO_ENABLED": "0", "-trimpath": "true"} {
				if settings[k] != v {
					t.Errorf("%s built with %s=%q, want %q", entry, k, settings[k], v)
				}
			}
			// -trimpath keeps -ldflags out of the build information: the
			// stamped strings are in the binary's data (and printed below).
			for _, s := range []string{o.Version, o.Revision} {
				if !bytes.Contains(bin.Bytes(), []byte(s)) {
					t.Errorf("%s does not carry %q: -ldflags did not stamp it", entry, s)
				}
			}
			if p != runtime.GOOS+"/"+runtime.GOARCH {
				return
			}
			// The shipped binary runs here: it says what it is.
			path := filepath.Join(t.TempDir(), "podsieve")
			if err := os.WriteFile(path, bin.Bytes(), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(path, "version").CombinedOutput()
			if err != nil {
				t.Fatalf("podsieve version: %v: %s", err, out)
			}
			if want := "podsieve " + o.Version + " (commit " + o.Revision; !strings.HasPrefix(string(out), want) {
				t.Errorf("podsieve version printed %q, want it to start with %q", out, want)
			}
		})
	}
}

// spdxDocument is what the test reads of an SPDX 2 JSON document.
type spdxDocument struct {
	SPDXVersion string        `json:"spdxVersion"`
	Packages    []spdxPackage `json:"packages"`
}

type spdxPackage struct {
	Name    string `json:"name"`
	Version string `json:"versionInfo"`
}

func checkSBOMs(t *testing.T, o Options) {
	idx, _, err := LayoutIndex(filepath.Join(o.Out, "image"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Platforms {
		name := "podsieve-" + p.OS + "-" + p.Architecture + ".spdx.json"
		t.Run(name, func(t *testing.T) {
			var doc spdxDocument
			readJSON(t, filepath.Join(o.Out, "sbom", name), &doc)
			if !strings.HasPrefix(doc.SPDXVersion, "SPDX-2.") {
				t.Errorf("spdxVersion %q, want SPDX-2.x", doc.SPDXVersion)
			}
			got := map[string]string{}
			for _, pkg := range doc.Packages {
				got[pkg.Name] = pkg.Version
			}
			img, err := PlatformImage(idx, p.String())
			if err != nil {
				t.Fatal(err)
			}
			d, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := got[d.String()]; !ok {
				t.Errorf("the SBOM does not describe the image %s", d)
			}
			if _, ok := got[Package[:strings.Index(Package, "/cmd/")]]; !ok {
				t.Errorf("the SBOM does not list podsieve's module")
			}
			// Every module linked into the binary, at its version.
			entry, err := Entrypoint(img)
			if err != nil {
				t.Fatal(err)
			}
			var bin bytes.Buffer
			if _, err := ExtractFile(img, entry, &bin); err != nil {
				t.Fatal(err)
			}
			bi, err := buildinfo.Read(bytes.NewReader(bin.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if len(bi.Deps) < 50 {
				t.Fatalf("the binary lists %d modules; podsieve links more than 50", len(bi.Deps))
			}
			for _, dep := range bi.Deps {
				if v, ok := got[dep.Path]; !ok || v != dep.Version {
					t.Errorf("the SBOM lists %s at %q, the binary links %s", dep.Path, v, dep.Version)
				}
			}
		})
	}
	var doc spdxDocument
	readJSON(t, filepath.Join(o.Out, "sbom", "podsieve-index.spdx.json"), &doc)
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(doc.Packages, func(p spdxPackage) bool { return p.Name == d.String() }) {
		t.Errorf("the index's SBOM does not describe the index %s", d)
	}
}

func checkChart(t *testing.T, o Options, r Release) {
	files := untar(t, filepath.Join(o.Out, "podsieve-1.2.3-rc.1.tgz"))
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(files["podsieve/Chart.yaml"], &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != "1.2.3-rc.1" || chart.AppVersion != o.Version {
		t.Errorf("Chart.yaml: version %q, appVersion %q; want 1.2.3-rc.1 and %s", chart.Version, chart.AppVersion, o.Version)
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Digest     string `json:"digest"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(files["podsieve/values.yaml"], &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Digest != r.Digest {
		t.Errorf("the chart's image.digest is %q, want the index's %s", values.Image.Digest, r.Digest)
	}
	// What the chart renders.
	cmd := exec.Command(o.Helm, "template", "podsieve", filepath.Join(o.Out, "podsieve-1.2.3-rc.1.tgz"), "--namespace", "podsieve-system", "--show-only", "templates/deployment.yaml")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v: %s", err, out)
	}
	var deployment struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &deployment); err != nil {
		t.Fatal(err)
	}
	want := o.Repository + "@" + r.Digest
	if c := deployment.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != want {
		t.Errorf("the chart's Deployment runs %+v, want the one image %s", c, want)
	}
}

// checkSums verifies SHA256SUMS as `sha256sum -c` does, and that it
// covers every file but the layout's blobs (named by their digests).
func checkSums(t *testing.T, dir string) {
	f, err := os.Open(filepath.Join(dir, SumsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	listed := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		sum, name, ok := strings.Cut(s.Text(), "  ")
		if !ok {
			t.Fatalf("%s: line %q is not `<sha256>  <file>`", SumsFile, s.Text())
		}
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got != sum {
			t.Errorf("%s: %s is %s, listed %s", SumsFile, name, got, sum)
		}
		listed[name] = true
	}
	for _, want := range []string{"podsieve-1.2.3-rc.1.tgz", "release.json", "image/index.json", "sbom/podsieve-index.spdx.json", "sbom/podsieve-linux-amd64.spdx.json", "sbom/podsieve-linux-arm64.spdx.json"} {
		if !listed[want] {
			t.Errorf("%s does not list %s", SumsFile, want)
		}
	}
}

// checkPush pushes the layout with the command of
// .github/workflows/release.yml (crane push, this module's tool) to a
// registry on loopback, and checks that the registry serves the index
// make release built, by the same digest.
func checkPush(t *testing.T, o Options, r Release) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/podsieve/podsieve:" + o.Version
	crane := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", append([]string{"tool", "crane"}, args...)...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+t.TempDir())
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("crane %s: %v: %s", strings.Join(args, " "), err, stderr)
		}
		return strings.TrimSpace(string(out))
	}
	crane("push", filepath.Join(o.Out, "image"), ref)
	if got := crane("digest", ref); got != r.Digest {
		t.Errorf("the registry serves %s, make release built %s", got, r.Digest)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal([]byte(crane("manifest", ref)), &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 2 || !idx.MediaType.IsIndex() {
		t.Errorf("the registry serves a %s of %d manifests, want the index of the two images", idx.MediaType, len(idx.Manifests))
	}
}

func TestBuildRefusesVersions(t *testing.T) {
	for _, tc := range []struct {
		name, version string
	}{
		{"no v", "1.2.3"},
		{"two parts", "v1.2"},
		{"build metadata, which no image tag or label may carry", "v1.2.3+abc"},
		{"leading zero", "v01.2.3"},
		{"a character outside semver", "v1.2.3-dirty!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions
			o.Version = tc.version
			o.Out = t.TempDir()
			_, err := Build(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), "want v<major>.<minor>.<patch>") {
				t.Errorf("Build(%q) = %v, want the version refused", tc.version, err)
			}
		})
	}
}

func TestVersionsAccepted(t *testing.T) {
	for _, tc := range []struct{ name, version string }{
		{"a release", "v1.2.3"},
		{"a release candidate", "v1.0.0-rc.1"},
		{"make release's untagged commit", "v0.0.0-dev.g1a2b3c4"},
		{"make release's untagged commit, changed", "v0.0.0-dev.g1a2b3c4.dirty"},
	} {
		if !semver.MatchString(tc.version) {
			t.Errorf("%s: %q refused", tc.name, tc.version)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}
