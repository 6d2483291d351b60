package main

import (
	"archive/tar"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// maxBinary bounds the binary extract copies (podsieve's is about 60 MiB).
const maxBinary = 512 << 20

// Entrypoint is the image's entrypoint binary: its path in the image.
func Entrypoint(img v1.Image) (string, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	if len(cfg.Config.Entrypoint) != 1 {
		return "", fmt.Errorf("the image's entrypoint is %q: want one binary", cfg.Config.Entrypoint)
	}
	return cfg.Config.Entrypoint[0], nil
}

// ExtractFile copies the file at path in the image's flattened filesystem
// to w and returns its mode.
func ExtractFile(img v1.Image, path string, w io.Writer) (os.FileMode, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(path, "/")
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("%s is not in the image", path)
		}
		if err != nil {
			return 0, err
		}
		if strings.TrimPrefix(h.Name, "/") != want || h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Size > maxBinary {
			return 0, fmt.Errorf("%s is %d bytes, more than %d", path, h.Size, maxBinary)
		}
		if _, err := io.Copy(w, io.LimitReader(tr, maxBinary)); err != nil {
			return 0, err
		}
		return h.FileInfo().Mode(), nil
	}
}

func runExtract(args []string) error {
	fs := flag.NewFlagSet("release extract", flag.ContinueOnError)
	dir := fs.String("layout", "dist/image", "the OCI image layout `release build` wrote")
	platform := fs.String("platform", "linux/amd64", "the image's platform")
	out := fs.String("o", "", "the file to write the binary to (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-o is required")
	}
	idx, _, err := LayoutIndex(*dir)
	if err != nil {
		return err
	}
	img, err := PlatformImage(idx, *platform)
	if err != nil {
		return err
	}
	entry, err := Entrypoint(img)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(*out), ".podsieve-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := ExtractFile(img, entry, f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(0o755); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), *out)
}
